//! Database shells (sqlite3, psql, mysql, mariadb): the client commands in their `-cmd`, `-c`,
//! `-e` texts, operands and stdin that run commands (`.shell`, `\!`, `system`, output piped
//! to a command), write files (`.output FILE`, `\o FILE`, `tee`) or read them (`.read`,
//! `\i`, `source`), and SQL functions that read or write files (`readfile`, `load_file`,
//! `into outfile`, `from program`).
//!
//! Owns: reading the clients' own commands and those SQL forms. Must not touch: SQL's meaning
//! otherwise, or the databases they connect to.

use std::sync::LazyLock;

use regex::Regex;

use super::super::{Command, Stdin};
use super::option_values;

/// Database shells' commands (`sqlite3 DB SQL…`, `-cmd`, `psql -c`, `mysql -e`, and stdin):
/// `.shell CMD`, `.system CMD`, `\! CMD`, `system CMD`, and output piped to a command
/// (`.output |CMD`, `\o |CMD`, `pager CMD`) run commands; `.output FILE`, `\o FILE`, `\w FILE`,
/// `tee FILE`, `writefile('F', …)` write; `.read FILE`, `.import FILE`, `\i FILE`, `source
/// FILE`, `readfile('F')`, `load_file('F')` read.
pub(super) fn client_commands(cmd: &mut Command, args: &[String]) -> Vec<String> {
    static SQL_FILES: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(
            r#"(?i)\b(readfile|writefile|load_file|pg_read_file|pg_read_binary_file)\s*\(\s*'([^']+)'|(?i)\binto\s+(?:out|dump)file\s+'([^']+)'|(?i)\bfrom\s+program\s+'([^']+)'|(?i)\bto\s+program\s+'([^']+)'"#,
        )
    });
    let program = cmd.program.clone();
    let mut texts: Vec<String> = match program.as_str() {
        "sqlite3" => {
            let mut t = option_values(args, &["-cmd"]);
            // `sqlite3 [OPTIONS] DB SQL…`: what follows the database.
            let plain: Vec<&String> = {
                let mut skip = false;
                args.iter()
                    .filter(|a| {
                        if skip {
                            skip = false;
                            return false;
                        }
                        if matches!(
                            a.as_str(),
                            "-cmd" | "-init" | "-separator" | "-newline" | "-nullvalue" | "-vfs"
                        ) {
                            skip = true;
                            return false;
                        }
                        !a.starts_with('-')
                    })
                    .collect()
            };
            t.extend(plain.iter().skip(1).map(|s| (*s).clone()));
            t
        }
        "psql" => option_values(args, &["-c", "--command"]),
        _ => option_values(args, &["-e", "--execute"]),
    };
    if let Stdin::Literal(text) = &cmd.stdin {
        texts.push(text.clone());
    }
    let mut scripts = Vec::new();
    for text in &texts {
        for c in SQL_FILES.captures_iter(text) {
            if let Some(m) = c.get(2) {
                let f = m.as_str().to_owned();
                if c[1].eq_ignore_ascii_case("writefile") {
                    cmd.code_paths.writes.push(f);
                } else {
                    cmd.code_paths.reads.push(f);
                }
            } else if let Some(m) = c.get(3) {
                cmd.code_paths.writes.push(m.as_str().to_owned());
            } else if let Some(m) = c.get(4).or_else(|| c.get(5)) {
                scripts.push(m.as_str().to_owned());
            }
        }
        // A client command takes the rest of its line; one may also follow a statement's `;`
        // on the same line (`select 1; system id`).
        let lines = text.lines().flat_map(|l| {
            let l = l.trim();
            let whole = l.starts_with(['\\', '.']) || l.starts_with("system ");
            let mut v = vec![l];
            if !whole {
                v.extend(l.split(';').skip(1));
            }
            v
        });
        for line in lines {
            let line = line.trim();
            let (word, value) = line
                .split_once(char::is_whitespace)
                .map_or((line, ""), |(w, v)| (w, v.trim()));
            let to_command = |v: &str| v.strip_prefix('|').map(str::to_owned);
            match (program.as_str(), word) {
                ("sqlite3", ".shell" | ".system")
                | ("psql" | "mysql" | "mariadb", "\\!")
                | ("mysql" | "mariadb", "system" | "pager" | "\\P")
                    if !value.is_empty() =>
                {
                    scripts.push(value.to_owned());
                }
                ("sqlite3", ".output" | ".once" | ".log")
                | ("psql", "\\o" | "\\out" | "\\g" | "\\w" | "\\write")
                | ("mysql" | "mariadb", "tee" | "\\T") => match to_command(value) {
                    Some(c) => scripts.push(c),
                    None if !value.is_empty() && !value.starts_with('-') => {
                        let file = value.trim_matches(['\'', '"']);
                        cmd.code_paths.writes.push(file.to_owned());
                    }
                    None => {}
                },
                ("sqlite3", ".read" | ".import")
                | ("psql", "\\i" | "\\include" | "\\ir" | "\\include_relative")
                | ("mysql" | "mariadb", "source" | "\\.") => {
                    let file = value.split_whitespace().next().unwrap_or_default();
                    match to_command(file) {
                        Some(_) => scripts.push(value.trim_start_matches('|').to_owned()),
                        None if !file.is_empty() => cmd
                            .code_paths
                            .reads
                            .push(file.trim_matches(['\'', '"']).to_owned()),
                        None => {}
                    }
                }
                _ => {}
            }
        }
    }
    scripts
}

#[cfg(test)]
mod tests {
    use super::super::tests::{strings, with_stdin};
    use super::*;

    #[test]
    fn database_shells_run_and_write() {
        let mut cmd = with_stdin("sqlite3", None);
        let scripts = client_commands(
            &mut cmd,
            &strings(&[
                "x.db",
                ".system id",
                ".output |sh -c 'a; b'",
                "select readfile('/k')",
            ]),
        );
        assert_eq!(scripts, ["id", "sh -c 'a; b'"]);
        assert_eq!(cmd.code_paths.reads, ["/k"]);
        let mut cmd = with_stdin("mysql", None);
        let scripts = client_commands(&mut cmd, &strings(&["-e", "select 1; system id"]));
        assert_eq!(scripts, ["id"]);
        let mut cmd = with_stdin("psql", Some("\\o /tmp/out\n\\i /tmp/in.sql"));
        assert!(client_commands(&mut cmd, &strings(&[])).is_empty());
        assert_eq!(cmd.code_paths.writes, ["/tmp/out"]);
        assert_eq!(cmd.code_paths.reads, ["/tmp/in.sql"]);
    }
}
