//! Interpreters whose code the policy does not scan (Lua, Tcl, R, Julia, Guile, …): their
//! literal code, from `-e`/`--eval` or a literal stdin, is kept for the rules' `code_matches`,
//! and code read from other programs' output is dynamic code.
//!
//! Owns: which interpreters these are and where their code is. Must not touch: the languages
//! the policy scans (`inline` reads Python, JavaScript, Perl, Ruby, PHP and awk).

use super::super::{Command, Stdin};
use super::option_values;

/// Interpreters whose code the policy does not scan (it scans Python, JavaScript, Perl, Ruby,
/// PHP and awk): their literal code is kept for the rules' `code_matches`, and code they read
/// from other programs' output is code nobody can read now.
pub(super) const UNSCANNED_LANGUAGES: &[&str] = &[
    "lua",
    "lua5.*",
    "luajit",
    "tclsh",
    "tclsh8.*",
    "wish",
    "wish8.*",
    "jrunscript",
    "jjs",
    "Rscript",
    "R",
    "julia",
    "guile",
    "guile*",
    "csi",
];

/// Whether `program` is `name`, or matches it when it ends in `*`.
pub(super) fn program_matches(name: &str, program: &str) -> bool {
    match name.strip_suffix('*') {
        Some(prefix) => program.starts_with(prefix),
        None => program == name,
    }
}

/// The code an unscanned interpreter runs: `-e`/`-c`/`--eval` text, else (with no script
/// file) its stdin: a literal is its code, other programs' output is dynamic code.
pub(super) fn unscanned_code(cmd: &mut Command, args: &[String]) {
    let flags: &[&str] = match cmd.program.as_str() {
        "guile" => &["-c"],
        "julia" => &["-e", "--eval", "-E", "--print"],
        "csi" => &["-e", "-eval", "-p", "-print"],
        _ => &["-e", "--eval"],
    };
    let code = option_values(args, flags);
    if !code.is_empty() {
        cmd.code.get_or_insert_with(|| code.join("\n"));
        return;
    }
    // A script file (not an option's value) runs the file's code, which is not ours to read.
    let script = args
        .iter()
        .any(|a| !a.starts_with('-') && !a.contains('=') && !a.is_empty());
    if script && !args.iter().any(|a| a == "-") {
        return;
    }
    match &cmd.stdin {
        Stdin::Literal(text) => {
            cmd.code.get_or_insert_with(|| text.clone());
        }
        Stdin::Data => {
            cmd.dynamic_code.get_or_insert_with(|| {
                format!(
                    "`{}` runs code it reads from other programs' output",
                    cmd.program
                )
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{strings, with_stdin};
    use super::*;

    #[test]
    fn unscanned_languages_keep_their_code() {
        let mut cmd = with_stdin("lua", None);
        unscanned_code(&mut cmd, &strings(&["-e", "os.execute('id')"]));
        assert_eq!(cmd.code.as_deref(), Some("os.execute('id')"));
        let mut cmd = with_stdin("tclsh", Some("exec id"));
        unscanned_code(&mut cmd, &strings(&[]));
        assert_eq!(cmd.code.as_deref(), Some("exec id"));
        let mut cmd = with_stdin("tclsh", Some("exec id"));
        unscanned_code(&mut cmd, &strings(&["build.tcl"]));
        assert_eq!(cmd.code, None);
        let mut cmd = Command {
            program: "lua".into(),
            stdin: Stdin::Data,
            ..Command::default()
        };
        unscanned_code(&mut cmd, &strings(&[]));
        assert!(cmd.dynamic_code.is_some());
    }
}
