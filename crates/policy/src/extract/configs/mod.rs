//! Files a command changes through the program's own subcommand rather than by naming them:
//! `git config` of a key that makes git run a program, `npm config set`, `pip config set`,
//! `go env -w` of a key that decides what the toolchain runs or fetches, `gh alias set
//! --shell`, `conda config --add channels`, `gem sources --add`, `bundle config mirror.*`;
//! and programs that edit a file in place whose table entry only names it (`patchelf`,
//! `strip`, `upx`, `chattr`, `setfattr`, `setcap`). The paths returned are what the rules on
//! files then see written: `~/.gitconfig`, `.git/config`, `~/.npmrc`, the wrapper's own
//! executables.
//!
//! Owns: which reader each program goes to (`config_writes`) and the argument helpers they
//! share. The readers live by topic: `git` (`git config` of a key that runs code), `tools`
//! (other tools' config setters: npm, yarn, pip, go, gh, conda, gem, bundle) and `outputs`
//! (what compilers, linkers and in-place editors of binaries write). Must not touch: the
//! files a program's table entry already names (`semantics`), or judging the files (the
//! rules on files do).

mod git;
mod outputs;
mod tools;

use std::path::{Path, PathBuf};

use super::super::semantics::positionals;
use crate::command::Command;
use git::git_config;
use outputs::{compiler_output, in_place};
use tools::{
    bundle_config, conda_config, gem_sources, gh_config, go_env, npm_config, pip_config,
    yarn_config,
};

/// The files `cmd` changes that the program table does not know it writes: absolute, or
/// relative to the command's directory.
pub(super) fn config_writes(cmd: &Command, home: &Path) -> Vec<PathBuf> {
    if cmd.wrapper {
        return Vec::new();
    }
    let args = &cmd.args;
    match cmd.program.as_str() {
        "git" => git_config(args, home),
        "npm" | "pnpm" => npm_config(&cmd.program, args, home),
        "yarn" => yarn_config(args, home),
        "pip" | "pip3" => pip_config(args, home),
        p if is_python(p) => match args.iter().position(|a| a == "-m") {
            Some(i) if args.get(i + 1).is_some_and(|m| m == "pip" || m == "pip3") => {
                pip_config(&args[i + 2..], home)
            }
            _ => Vec::new(),
        },
        "go" => {
            let mut out = go_env(args, home);
            if args.first().is_some_and(|a| a == "build" || a == "test") {
                out.extend(compiler_output(args));
            }
            out
        }
        "gcc" | "cc" | "clang" | "g++" | "c++" | "clang++" | "tcc" | "rustc" | "zig"
        | "gfortran" | "ld" => compiler_output(args),
        "gh" => gh_config(args, home),
        "conda" | "mamba" | "micromamba" => conda_config(args, home),
        "gem" => gem_sources(args, home),
        "bundle" | "bundler" => bundle_config(args, home),
        "patchelf" | "strip" | "upx" | "chattr" | "setfattr" | "setcap" | "objcopy" => {
            in_place(&cmd.program, args)
        }
        _ => Vec::new(),
    }
}

fn is_python(program: &str) -> bool {
    program == "python"
        || program
            .strip_prefix("python3")
            .is_some_and(|v| v.is_empty() || v.starts_with('.'))
}

fn has(args: &[String], flags: &[&str]) -> bool {
    args.iter().any(|a| flags.contains(&a.as_str()))
}

/// The value of `--opt VALUE` or `--opt=VALUE`, for any of `names`.
fn option_value<'a>(args: &'a [String], names: &[&str]) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, a)| {
        names.iter().find_map(|n| {
            if a == n {
                args.get(i + 1).map(String::as_str)
            } else {
                a.strip_prefix(n).and_then(|rest| rest.strip_prefix('='))
            }
        })
    })
}

#[cfg(test)]
mod tests {
    pub(super) fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }
}
