//! Programs whose operands are not plain files: static file servers (`python3 -m
//! http.server`, `php -S`, `ruby -run -e httpd`, `caddy file-server`, …), which hand a whole
//! tree to whoever connects, and socat, whose file addresses (`FILE:`, `OPEN:`, `CREATE:`, a
//! bare path) it reads or writes by direction (`-u`, `-U`).
//!
//! Owns: the trees served and socat's file addresses. Must not touch: the hosts they listen
//! on or contact (the host rules), or socat's `EXEC:` and `SYSTEM:` commands (the shell's
//! option readers).

use crate::command::Command;

/// The directories a static file server hands to whoever connects (each read whole): its
/// working directory unless told another. `python3 -m http.server [-d DIR]` (and
/// `SimpleHTTPServer`, `uploadserver`), `php -S ADDR [-t DIR]`, `ruby -run -e httpd [DIR]`,
/// busybox's `httpd -h DIR`, `http-server [DIR]`, `live-server [DIR]`, `darkhttpd DIR`,
/// `caddy file-server [--root DIR]`, `openssl s_server -WWW`/`-HTTP`.
pub(super) fn served_trees(cmd: &Command) -> Option<Vec<&str>> {
    let args = &cmd.args;
    let value = |names: &[&str]| -> Option<&str> {
        args.iter().enumerate().find_map(|(i, a)| {
            if names.contains(&a.as_str()) {
                args.get(i + 1).map(String::as_str)
            } else {
                names
                    .iter()
                    .filter(|n| n.starts_with("--"))
                    .find_map(|n| a.strip_prefix(n).and_then(|v| v.strip_prefix('=')))
            }
        })
    };
    let has = |name: &str| args.iter().any(|a| a == name);
    // The first plain argument that is not a port or an option's value.
    let first_dir = |from: usize, with_value: &[&str]| -> Option<&str> {
        let mut skip = false;
        for a in args.iter().skip(from) {
            if skip {
                skip = false;
            } else if with_value.contains(&a.as_str()) {
                skip = true;
            } else if !a.starts_with('-') && !a.chars().all(|c| c.is_ascii_digit()) {
                return Some(a);
            }
        }
        None
    };
    let program = cmd.program.as_str();
    let dirs = match program {
        p if p.starts_with("python") || p.starts_with("pypy") => {
            let module = args.iter().enumerate().find_map(|(i, a)| {
                if a == "-m" {
                    args.get(i + 1).map(String::as_str)
                } else {
                    a.strip_prefix("-m").filter(|m| !m.is_empty())
                }
            })?;
            match module {
                "http.server" | "uploadserver" => {
                    vec![value(&["-d", "--directory"]).unwrap_or(".")]
                }
                "SimpleHTTPServer" => vec!["."],
                _ => return None,
            }
        }
        "php" if has("-S") => vec![value(&["-t"]).unwrap_or(".")],
        "ruby" if has("-run") => {
            let at = args.iter().position(|a| a == "httpd" || a == "-ehttpd")?;
            vec![first_dir(at + 1, &["-p", "--port", "-b", "--bind-address"]).unwrap_or(".")]
        }
        "httpd" => vec![value(&["-h"])?],
        "http-server" | "live-server" | "darkhttpd" => vec![first_dir(
            0,
            &[
                "-p", "--port", "-a", "--host", "--addr", "-c", "-e", "--ext", "-P", "--proxy",
                "-C", "--cert", "-K", "--key", "--mount",
            ],
        )
        .unwrap_or(".")],
        "caddy" if args.first().is_some_and(|a| a == "file-server") => {
            vec![value(&["--root", "-r"]).unwrap_or(".")]
        }
        "openssl"
            if args.first().is_some_and(|a| a == "s_server") && (has("-WWW") || has("-HTTP")) =>
        {
            vec!["."]
        }
        _ => return None,
    };
    Some(dirs)
}

/// socat's file addresses (`FILE:`, `OPEN:`, `GOPEN:`, `CREATE:`, a bare path): what it reads
/// from them and writes to them (`-u`: the first is only read, the second only written;
/// `-U` the other way).
pub(super) fn socat_files(cmd: &Command) -> (Vec<&str>, Vec<&str>) {
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    let one_way = cmd.args.iter().any(|a| a == "-u");
    let other_way = cmd.args.iter().any(|a| a == "-U");
    let mut addresses = Vec::new();
    let mut skip = false;
    for a in &cmd.args {
        if skip {
            skip = false;
        } else if matches!(a.as_str(), "-b" | "-T" | "-t" | "-lf" | "-lp" | "-L" | "-W") {
            skip = true;
        } else if !a.starts_with('-') || a == "-" {
            addresses.push(a.as_str());
        }
    }
    for (i, address) in addresses.iter().take(2).enumerate() {
        let (kind, path) = match address.split_once(':') {
            Some((kind, rest)) => (kind.to_ascii_uppercase(), rest),
            None if address.contains('/') => ("GOPEN".to_owned(), *address),
            None => continue,
        };
        let path = path.split(',').next().unwrap_or_default();
        let read = !(one_way && i == 1 || other_way && i == 0);
        let write = !(one_way && i == 0 || other_way && i == 1);
        match kind.as_str() {
            "FILE" | "OPEN" | "GOPEN" => {
                if read {
                    reads.push(path);
                }
                if write {
                    writes.push(path);
                }
            }
            "CREATE" | "CREAT" if write => writes.push(path),
            _ => {}
        }
    }
    (reads, writes)
}
