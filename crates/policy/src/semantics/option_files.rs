//! Files named by options' values rather than by operands: inputs (`--file=PATH`, curl's
//! `@FILE`, `<FILE`, `-T FILE` and their glued forms `-d@FILE`, `-sST FILE`, httpie's and
//! xh's `field@FILE`, `openssl -in`, the files `ssh -F`, `file -f`, `date -f` and `wget -i`
//! echo back) and outputs (`curl -o`, `wget -O`, `dd of=`, `tar -C`, `unzip -d`, `less -o`,
//! `find -fprint`, `--output=`).
//!
//! Owns: reading those options. Must not touch: operands (`semantics` reads those with the
//! program table), or wrappers' own outputs (`wrappers`).

use crate::command::Command;

/// Values of options that name an input file: `--file=PATH`, curl's `@PATH`, `<PATH`, `-T`.
pub(super) fn option_inputs(cmd: &Command) -> Vec<&str> {
    let mut out = Vec::new();
    let mut prev: &str = "";
    let net = matches!(
        cmd.program.as_str(),
        "curl" | "wget" | "http" | "https" | "xh"
    );
    for a in &cmd.args {
        if let Some((_, v)) = a.split_once('=').filter(|_| a.starts_with("--")) {
            out.push(v.strip_prefix('@').unwrap_or(v));
        }
        if net {
            if prev.starts_with('-') {
                if let Some(i) = a.find(['@', '<']) {
                    out.push(&a[i + 1..]);
                }
            }
            if let Some(i) = a.find("=@").or_else(|| a.find(":=@")) {
                out.push(&a[i + 2..]);
            } else if let Some(f) = a.strip_prefix('@') {
                out.push(f);
            }
            if matches!(prev, "-T" | "--upload-file" | "--post-file" | "--body-file") {
                out.push(a);
            }
        }
        if cmd.program == "openssl" && matches!(prev, "-in" | "-inkey" | "-key" | "-infiles") {
            out.push(a);
        }
        // Files whose lines a program reads and echoes back (in its output or its errors):
        // `ssh -F FILE` (each bad line of the "configuration"), `file -f FILE` and `date -f
        // FILE` (each line as a name or a date), `wget -i FILE` (each line as a URL).
        let echoes = match cmd.program.as_str() {
            "ssh" | "scp" | "sftp" => prev == "-F",
            "file" | "date" => prev == "-f",
            "wget" => prev == "-i" || prev == "--input-file",
            _ => false,
        };
        if echoes {
            out.push(a);
        }
        prev = a;
    }
    if net {
        for f in net_glued_inputs(cmd) {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out
}

/// Input files of curl's short options written together (`-d@FILE`, `-sST FILE`, `-TFILE`,
/// `-F'k=@FILE'`), and httpie's and xh's `field@FILE` (a form field's file).
fn net_glued_inputs(cmd: &Command) -> Vec<&str> {
    let mut out = Vec::new();
    if cmd.program == "curl" {
        for (letter, value) in curl_short_values(&cmd.args) {
            match letter {
                'T' => out.push(value),
                'd' | 'H' => out.extend(value.strip_prefix('@')),
                'F' => out.extend(value.find(['@', '<']).map(|i| &value[i + 1..])),
                _ => {}
            }
        }
        return out;
    }
    for a in &cmd.args {
        if cmd.program != "wget" && !a.starts_with('-') && !a.contains("://") {
            // `field@FILE`: a name of word characters, then the file.
            if let Some((name, file)) = a.split_once('@') {
                let field = !name.is_empty()
                    && name.chars().all(|c| {
                        c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '[' | ']')
                    });
                if field && !file.is_empty() {
                    out.push(file);
                }
            }
        }
    }
    out
}

/// curl's one-letter options that take a value.
const CURL_VALUE: &str = "AbcCdDeEFHKmoPQrTuUwxXyYzt";

/// Whether `arg`, an argument of the network program `program` (curl, wget, aria2c), is an
/// option whose value is the next argument: `-o FILE`, `-sSfo FILE` (the first letter of a
/// cluster that takes a value, with nothing glued after it), `--header X`. What such a value
/// names (a file, a header) is no host the command contacts.
pub(crate) fn value_follows(program: &str, arg: &str) -> bool {
    let (short, long): (&str, &[&str]) = match program {
        "curl" => (
            CURL_VALUE,
            &[
                "output",
                "data",
                "data-raw",
                "data-binary",
                "data-urlencode",
                "data-ascii",
                "header",
                "user",
                "upload-file",
                "form",
                "form-string",
                "referer",
                "user-agent",
                "cookie",
                "cookie-jar",
                "config",
                "write-out",
                "request",
                "range",
                "max-time",
                "continue-at",
                "cert",
                "key",
                "cacert",
                "capath",
                "dump-header",
                "retry",
                "retry-delay",
                "retry-max-time",
                "connect-timeout",
                "limit-rate",
                "output-dir",
                "json",
                "variable",
                "trace",
                "trace-ascii",
                "stderr",
                "interface",
                "max-filesize",
                "netrc-file",
                "proto",
                "proto-redir",
                "unix-socket",
                "oauth2-bearer",
                "etag-save",
                "etag-compare",
                "max-redirs",
                "time-cond",
                "hsts",
                "alt-svc",
            ],
        ),
        "wget" => (
            "OoaPeiUtTwQBlARDIX",
            &[
                "output-document",
                "output-file",
                "append-output",
                "directory-prefix",
                "execute",
                "input-file",
                "user-agent",
                "header",
                "post-data",
                "post-file",
                "body-data",
                "body-file",
                "method",
                "tries",
                "timeout",
                "wait",
                "quota",
                "base",
                "level",
                "accept",
                "reject",
                "load-cookies",
                "save-cookies",
                "user",
                "password",
                "referer",
                "ca-certificate",
                "certificate",
                "private-key",
            ],
        ),
        "aria2c" => (
            "odiUx",
            &["out", "dir", "input-file", "user-agent", "header"],
        ),
        _ => return false,
    };
    match arg.strip_prefix("--") {
        Some(name) => !name.contains('=') && long.contains(&name),
        None => arg.strip_prefix('-').is_some_and(|cluster| {
            cluster
                .char_indices()
                .find(|(_, c)| short.contains(*c))
                .is_some_and(|(i, c)| i + c.len_utf8() == cluster.len())
        }),
    }
}

/// curl's one-letter options and their values, however they are written: `-o FILE`,
/// `-oFILE`, `-sSo FILE`, `-d@FILE` (the first letter of a cluster that takes a value takes
/// the rest of it, or the next argument).
fn curl_short_values(args: &[String]) -> Vec<(char, &str)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let Some(cluster) = a.strip_prefix('-').filter(|c| !c.starts_with('-')) else {
            continue;
        };
        let Some((pos, letter)) = cluster
            .char_indices()
            .find(|(_, c)| CURL_VALUE.contains(*c))
        else {
            continue;
        };
        let glued = &cluster[pos + 1..];
        let value = if glued.is_empty() {
            let Some(v) = args.get(i) else { continue };
            i += 1;
            v.as_str()
        } else {
            glued
        };
        out.push((letter, value));
    }
    out
}

/// Values of options that name a file or directory to write: `curl -o`, `dd of=`,
/// `tar -C`, `--output=`.
pub(super) fn option_outputs(cmd: &Command) -> Vec<String> {
    let program = cmd.program.as_str();
    let mut out: Vec<String> = Vec::new();
    if program == "curl" {
        // `-o FILE`, and within a cluster: `-so FILE`, `-oFILE`.
        for (letter, v) in curl_short_values(&cmd.args) {
            if letter == 'o' && !out.iter().any(|o| o == v) {
                out.push(v.to_owned());
            }
        }
    }
    let mut prev = "";
    for a in &cmd.args {
        match (program, prev) {
            ("dd", _) => out.extend(a.strip_prefix("of=").map(str::to_owned)),
            ("curl", "--output")
            | ("wget", "-O" | "--output-document")
            | ("openssl", "-out" | "-keyout")
            | ("tar" | "bsdtar", "-C" | "--directory")
            | ("unzip", "-d")
            // less copies what it shows (its piped input) into a log file.
            | ("less", "-o" | "-O" | "--log-file" | "--LOG-FILE")
            // find's -fprint FILE, -fprintf FILE FORMAT, -fls FILE write FILE.
            | ("find", "-fprint" | "-fprint0" | "-fprintf" | "-fls") => out.push(a.clone()),
            _ => {}
        }
        if program == "less" {
            if let Some(v) = a
                .strip_prefix("--log-file=")
                .or_else(|| a.strip_prefix("--LOG-FILE="))
                .or_else(|| {
                    a.strip_prefix("-o")
                        .or_else(|| a.strip_prefix("-O"))
                        .filter(|v| !v.is_empty() && !v.starts_with('-'))
                })
            {
                out.push(v.to_owned());
            }
        }
        if let Some(v) = a
            .strip_prefix("--output=")
            .or_else(|| a.strip_prefix("--output-document="))
            .or_else(|| a.strip_prefix("--directory=").filter(|_| program == "tar"))
        {
            out.push(v.to_owned());
        }
        prev = a;
    }
    out
}
