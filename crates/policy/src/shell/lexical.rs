//! Expansions that need no state: brace expansion, `$'…'` decoding, `~user`, and `~` after
//! an assignment-like `NAME=`.

use brush_parser::word::{self, BraceExpressionMember, BraceExpressionOrText};

use super::options;

/// Most words one brace expression may produce.
const MAX_BRACE_FIELDS: usize = 256;

/// Bash expands `~` after the `=` of a word that looks like an assignment, even as an
/// argument (`dd of=~/x`), and after each `:` of it.
pub(super) fn tilde_after_assignment(raw: &str, home: &str) -> String {
    let Some((name, value)) = raw.split_once('=') else {
        return raw.to_owned();
    };
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid || !value.contains('~') {
        return raw.to_owned();
    }
    let parts: Vec<String> = value
        .split(':')
        .map(|p| match p.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("'{home}'{rest}"),
            _ => p.to_owned(),
        })
        .collect();
    format!("{name}={}", parts.join(":"))
}

/// `~user`: from the password database, else the usual place.
pub(super) fn user_home(user: &str) -> String {
    if let Ok(passwd) = std::fs::read_to_string("/etc/passwd") {
        for line in passwd.lines() {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() > 5 && f[0] == user {
                return f[5].to_owned();
            }
        }
    }
    if user == "root" {
        "/root".to_owned()
    } else {
        format!("/home/{user}")
    }
}

/// Brace expansion of a raw word: `a{b,c}` → `ab`, `ac`. A word without a brace
/// expression, or one that expands past the limit, is returned as it is.
pub(super) fn braces(raw: &str) -> Vec<String> {
    if !raw.contains('{') || !(raw.contains(',') || raw.contains("..")) {
        return vec![raw.to_owned()];
    }
    match word::parse_brace_expansions(raw, &options()) {
        Ok(Some(parts)) => {
            let mut out = vec![String::new()];
            if !expand_parts(&parts, &mut out) {
                return vec![raw.to_owned()];
            }
            out
        }
        _ => vec![raw.to_owned()],
    }
}

fn expand_parts(parts: &[BraceExpressionOrText], acc: &mut Vec<String>) -> bool {
    for part in parts {
        let options: Vec<String> = match part {
            BraceExpressionOrText::Text(t) => vec![t.clone()],
            BraceExpressionOrText::Expr(members) => {
                let mut opts = Vec::new();
                for m in members {
                    match m {
                        BraceExpressionMember::Child(children) => {
                            let mut sub = vec![String::new()];
                            if !expand_parts(children, &mut sub) {
                                return false;
                            }
                            opts.extend(sub);
                        }
                        BraceExpressionMember::NumberSequence {
                            start,
                            end,
                            increment,
                        } => {
                            let step = increment.unsigned_abs().max(1) as usize;
                            let (lo, hi) = (*start.min(end), *start.max(end));
                            if (hi - lo) as usize / step > MAX_BRACE_FIELDS {
                                return false;
                            }
                            let mut seq: Vec<String> =
                                (lo..=hi).step_by(step).map(|n| n.to_string()).collect();
                            if start > end {
                                seq.reverse();
                            }
                            opts.extend(seq);
                        }
                        BraceExpressionMember::CharSequence {
                            start,
                            end,
                            increment,
                        } => {
                            let step = increment.unsigned_abs().max(1) as usize;
                            let (lo, hi) = (*start.min(end), *start.max(end));
                            opts.extend((lo..=hi).step_by(step).map(String::from));
                        }
                    }
                }
                opts
            }
        };
        if acc.len() * options.len().max(1) > MAX_BRACE_FIELDS {
            return false;
        }
        *acc = acc
            .iter()
            .flat_map(|a| options.iter().map(move |o| format!("{a}{o}")))
            .collect();
    }
    true
}

/// Decodes `$'…'` as bash does.
pub(super) fn ansi_c(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    let take_radix = |chars: &mut std::iter::Peekable<std::str::Chars>, radix: u32, max: usize| {
        let mut v = 0u32;
        let mut n = 0;
        while n < max {
            match chars.peek().and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    v = v * radix + d;
                    chars.next();
                    n += 1;
                }
                None => break,
            }
        }
        (n > 0).then_some(v)
    };
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('e' | 'E') => out.push('\x1b'),
            Some('f') => out.push('\x0c'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('v') => out.push('\x0b'),
            Some('x') => match take_radix(&mut chars, 16, 2) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\x"),
            },
            Some('u') => match take_radix(&mut chars, 16, 4) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\u"),
            },
            Some('U') => match take_radix(&mut chars, 16, 8) {
                Some(v) => out.extend(char::from_u32(v)),
                None => out.push_str("\\U"),
            },
            Some('c') => {
                if let Some(x) = chars.next() {
                    out.push(char::from((x as u8) & 0x1f));
                }
            }
            Some(d @ '0'..='7') => {
                let mut v = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(x) => {
                            v = v * 8 + x;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.extend(char::from_u32(v & 0xff));
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c_decodes_what_bash_decodes() {
        assert_eq!(ansi_c(r"\x72\x6d"), "rm");
        assert_eq!(ansi_c(r"\162m"), "rm");
        assert_eq!(ansi_c(r"\u0072m"), "rm");
        assert_eq!(ansi_c(r"a\tb\\"), "a\tb\\");
    }

    #[test]
    fn braces_expand() {
        assert_eq!(braces("a{b,c}d"), ["abd", "acd"]);
        assert_eq!(braces("~/{a,.ssh}"), ["~/a", "~/.ssh"]);
        assert_eq!(braces("x{1..3}"), ["x1", "x2", "x3"]);
        assert_eq!(braces("{}"), ["{}"]);
        assert_eq!(braces("plain"), ["plain"]);
    }
}
