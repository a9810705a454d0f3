//! ssh, scp and sftp: the local commands ssh's options run (`-o ProxyCommand=CMD`,
//! `LocalCommand`, `KnownHostsCommand`), and sftp's batch commands read from stdin (`put
//! LOCAL`, `get REMOTE LOCAL`, `lcd DIR`, `!CMD`).
//!
//! Owns: reading ssh's `-o` options and sftp's batches. Must not touch: the hosts they contact
//! (the host rules judge those) or `ssh -F FILE` (a file read, told by `semantics`).

use super::super::{Command, Stdin};
use super::option_values;

/// ssh options (`-o Name=value`) whose value is a local command.
const SSH_COMMAND_OPTIONS: &[&str] = &["proxycommand", "localcommand", "knownhostscommand"];

/// ssh's `-o ProxyCommand=CMD` (or `-o "ProxyCommand CMD"`, `-oProxyCommand=CMD`).
pub(super) fn ssh_commands(args: &[String]) -> Vec<String> {
    option_values(args, &["-o"])
        .into_iter()
        .filter_map(|o| {
            let (name, value) = o
                .split_once('=')
                .or_else(|| o.split_once(char::is_whitespace))?;
            let name = name.trim().to_lowercase();
            SSH_COMMAND_OPTIONS
                .contains(&name.as_str())
                .then(|| value.trim().to_owned())
                .filter(|v| !v.eq_ignore_ascii_case("none"))
                // ssh runs a ProxyCommand as `exec CMD` (so `ProxyCommand=;sh` runs `sh`).
                .map(|v| {
                    if name == "proxycommand" {
                        format!("exec {v}")
                    } else {
                        v
                    }
                })
        })
        .collect()
}

/// sftp's batch commands (`-b -` or stdin, as a here-document or here-string): `put LOCAL`
/// reads LOCAL, `get REMOTE LOCAL` writes LOCAL, `!CMD` runs CMD; `lcd DIR` moves the local
/// side.
pub(super) fn sftp_batch(cmd: &mut Command, args: &[String]) -> Vec<String> {
    let batch = option_values(args, &["-b"]);
    if !(batch.is_empty() || batch.iter().any(|b| b == "-")) {
        return Vec::new();
    }
    let Stdin::Literal(text) = &cmd.stdin else {
        return Vec::new();
    };
    let text = text.clone();
    let mut scripts = Vec::new();
    let mut lcd = String::new();
    let local = |lcd: &str, p: &str| {
        if lcd.is_empty() || p.starts_with('/') || p.starts_with('~') {
            p.to_owned()
        } else {
            format!("{}/{p}", lcd.trim_end_matches('/'))
        }
    };
    for line in text.lines() {
        // A leading `-` (ignore errors) or `@` (quiet) changes nothing here.
        let line = line.trim().trim_start_matches(['-', '@']);
        if let Some(c) = line.strip_prefix('!') {
            if !c.trim().is_empty() {
                scripts.push(c.to_owned());
            }
            continue;
        }
        let words: Vec<&str> = line
            .split_whitespace()
            .filter(|w| !w.starts_with('-'))
            .collect();
        match words.as_slice() {
            ["lcd" | "lchdir", dir, ..] => lcd = local(&lcd, dir),
            ["put" | "mput" | "reput", src, ..] => cmd.code_paths.reads.push(local(&lcd, src)),
            ["get" | "mget" | "reget", _, dst, ..] => {
                cmd.code_paths.writes.push(local(&lcd, dst));
            }
            _ => {}
        }
    }
    scripts
}

#[cfg(test)]
mod tests {
    use super::super::tests::{strings, with_stdin};
    use super::*;

    #[test]
    fn sftp_batches_put_get_and_run() {
        let mut cmd = with_stdin("sftp", Some("lcd /h/.ssh\nput id_rsa\nget r /tmp/x\n!id"));
        let scripts = sftp_batch(&mut cmd, &strings(&["-b", "-", "h"]));
        assert_eq!(scripts, ["id"]);
        assert_eq!(cmd.code_paths.reads, ["/h/.ssh/id_rsa"]);
        assert_eq!(cmd.code_paths.writes, ["/tmp/x"]);
        let mut cmd = with_stdin("sftp", Some("put k"));
        assert!(sftp_batch(&mut cmd, &strings(&["-b", "batch.txt", "h"])).is_empty());
        assert!(cmd.code_paths.reads.is_empty());
    }
}
