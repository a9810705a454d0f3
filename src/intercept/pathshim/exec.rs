//! The shim side: what a command in the shim directory does when the agent runs it. It
//! runs inside the small hook executable (no async runtime, no JSON): it sends the argv and
//! the watched environment to the wrapper, then executes what the answer allows, or says
//! why not and exits 126. Whatever goes wrong before an answer, the command does not run.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use super::{ENV_DIR, SCOPE, WATCHED_ENV};
use crate::control::client::Caller;
use crate::control::Kind;

/// Exit code of a refused command, as a shell says "cannot execute".
pub(crate) const EXIT_REFUSED: i32 = 126;
/// Names under which the executable is itself, never a shim.
const OUR_NAMES: &[&str] = &["ahp-wrap", "ahp-wrap-hook"];

/// The command this process was started as, if it was started through a PATH shim: the
/// file name the kernel executed (`AT_EXECFN`, whatever `argv[0]` says) when that is not
/// one of our own names. `strict` (for the main `ahp-wrap` binary, which users may rename)
/// also asks that the file lie in this run's shim directory.
pub fn invoked_as(strict: bool) -> Option<String> {
    let execfn = crate::child::executed_file()?;
    let path = Path::new(OsStr::from_bytes(execfn.to_bytes()));
    let name = path.file_name()?.to_str()?;
    if OUR_NAMES.contains(&name) {
        return None;
    }
    if strict {
        let dir = std::env::var_os(ENV_DIR)?;
        if !same_dir(path.parent()?, Path::new(&dir)) {
            return None;
        }
    }
    Some(name.to_owned())
}

/// Whether `a` and `b` name the same directory: the same spelling, or the same inode (two
/// `stat` calls, where resolving each path would cost one `readlink` per component).
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b
        || matches!((std::fs::metadata(a), std::fs::metadata(b)),
            (Ok(x), Ok(y)) if x.is_dir() && x.dev() == y.dev() && x.ino() == y.ino())
}

/// Runs the shimmed command `name` with `args` (without `argv[0]`); returns only on refusal
/// or failure, with the exit code.
pub fn run(name: &str, args: Vec<OsString>) -> i32 {
    let refuse = |why: &str| {
        eprintln!("ahp-wrap: {name}: {why}");
        EXIT_REFUSED
    };
    let mut argv: Vec<OsString> = Vec::with_capacity(args.len() + 1);
    argv.push(OsString::from(name));
    argv.extend(args);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let caller = match Caller::from_env() {
        Ok(c) => c,
        Err(why) => return refuse(&format!("not run, because {why} (PATH shims fail closed)")),
    };
    let answer = match caller.call(Kind::Exec, SCOPE, name, &cwd, &encode(&argv)) {
        Ok(a) => a,
        Err(why) => return refuse(&format!("not run, because {why} (PATH shims fail closed)")),
    };
    if answer.exit_code != 0 {
        use std::io::Write;
        let _ = std::io::stderr().write_all(&answer.stderr);
        return answer.exit_code;
    }
    let argv = if answer.stdout.is_empty() {
        argv
    } else {
        match decode_items(&answer.stdout) {
            Some(items) if !items.is_empty() => items,
            _ => return refuse("not run: the wrapper's changed command is garbled"),
        }
    };
    exec(&argv).unwrap_or_else(|why| refuse(&why))
}

/// Executes `argv` (a name is looked up on `PATH`, skipping the shim directory and any
/// file that is this executable), keeping the environment. Returns only on failure.
fn exec(argv: &[OsString]) -> Result<i32, String> {
    let program = &argv[0];
    let path = if program.as_bytes().contains(&b'/') {
        PathBuf::from(program)
    } else {
        real_program(program)
            .ok_or_else(|| format!("{}: command not found", program.to_string_lossy()))?
    };
    let err = std::process::Command::new(&path)
        .arg0(program)
        .args(&argv[1..])
        .exec();
    Err(format!("cannot execute {}: {err}", path.display()))
}

/// The real program `name` on `PATH`: the first executable file of that name that is not
/// in the shim directory and is not this executable (so a shim never runs itself, even
/// through another run's shim directory).
fn real_program(name: &OsStr) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let shim_dir = std::env::var_os(ENV_DIR).map(PathBuf::from);
    let me = std::fs::metadata("/proc/self/exe").ok();
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .find_map(|dir| {
            let candidate = dir.join(name);
            let m = std::fs::metadata(&candidate).ok()?;
            let usable = is_program(&m, me.as_ref())
                // Every entry of the shim directory is this executable; the directory is
                // compared only for a real file found there (rare: one stat more each).
                && !shim_dir.as_deref().is_some_and(|s| same_dir(&dir, s));
            usable.then_some(candidate)
        })
}

/// Whether a file found on `PATH` is a program to run: an executable file that is not
/// this executable (`me`).
fn is_program(m: &std::fs::Metadata, me: Option<&std::fs::Metadata>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let is_me = me.is_some_and(|me| me.dev() == m.dev() && me.ino() == m.ino());
    m.is_file() && m.permissions().mode() & 0o111 != 0 && !is_me
}

/// The request payload: the argv, then the watched environment variables (`NAME=value`,
/// or `NAME` alone when unset), each item NUL-terminated, after a first item that counts
/// the argv.
pub(crate) fn encode(argv: &[OsString]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut item = |bytes: &[u8]| {
        out.extend_from_slice(bytes);
        out.push(0);
    };
    item(argv.len().to_string().as_bytes());
    for arg in argv {
        item(arg.as_bytes());
    }
    for name in WATCHED_ENV {
        match std::env::var_os(name) {
            Some(v) => {
                let mut kv = OsString::from(name);
                kv.push("=");
                kv.push(v);
                item(kv.as_bytes());
            }
            None => item(name.as_bytes()),
        }
    }
    out
}

/// NUL-terminated items; `None` when the last one is not terminated.
pub(crate) fn decode_items(bytes: &[u8]) -> Option<Vec<OsString>> {
    let body = bytes.strip_suffix(&[0])?;
    Some(
        body.split(|&b| b == 0)
            .map(|item| OsString::from_vec(item.to_vec()))
            .collect(),
    )
}

/// An answer that runs `argv` instead of what was asked.
pub(crate) fn encode_argv(argv: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for arg in argv {
        out.extend_from_slice(arg.as_bytes());
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_directory_is_recognized_however_it_is_spelled() {
        let base = tempfile::tempdir().unwrap();
        let (a, b) = (base.path().join("a"), base.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::os::unix::fs::symlink(&a, base.path().join("link")).unwrap();
        assert!(same_dir(&a, &a));
        assert!(same_dir(&a, &base.path().join("link")));
        assert!(same_dir(&a, &b.join("../a")));
        assert!(!same_dir(&a, &b));
        assert!(!same_dir(&a, &base.path().join("missing")));
    }

    #[test]
    fn a_program_is_an_executable_file_that_is_not_this_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (prog, data) = (dir.path().join("prog"), dir.path().join("data"));
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(&data, "").unwrap();
        let meta = |p: &Path| std::fs::metadata(p).unwrap();
        assert!(is_program(&meta(&prog), None));
        assert!(is_program(&meta(&prog), Some(&meta(&data))));
        assert!(!is_program(&meta(&prog), Some(&meta(&prog))), "itself");
        assert!(!is_program(&meta(&data), None), "not executable");
        assert!(!is_program(&meta(dir.path()), None), "a directory");
    }
}
