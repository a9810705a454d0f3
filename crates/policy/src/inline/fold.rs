//! Constant folding of inline code before the scan: names, paths and hosts built from pieces
//! (`'GITHUB_' + 'TOKEN'`, `chr(71)`, `''.join([...])`, `'{}.{}'.format(...)`, f-strings,
//! `String.fromCharCode(...)`, template literals) become the one literal they spell, so that
//! the scan and the rules that read the code see it whole. Only pieces that are all literals
//! are folded; anything built from a variable stays as it is.

use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::{call_args, Lang};

/// A single- or double-quoted literal, its body in group 1 or 2.
const QUOTED: &str = r#"'((?:[^'\\\n]|\\.)*)'|"((?:[^"\\\n]|\\.)*)""#;

/// How many rounds of folding at most: each round folds one level of nesting
/// (`''.join([chr(71), 'H'])` takes two).
const ROUNDS: usize = 8;

/// `code` with string constants joined: `'GITHUB_' + "TOKEN"` (`.` in Perl and PHP, also
/// Python's and awk's `'a' 'b'`) becomes `'GITHUB_TOKEN'`, and so do the builders of each
/// language whose parts are all literals, so that names split to slip past a pattern are
/// whole again for the scan and for the rules that read the code.
pub(crate) fn fold_constants(code: &str, lang: Lang) -> String {
    let mut text = code.to_owned();
    for _ in 0..ROUNDS {
        let folded = join_literals(&builders(&text, lang), lang);
        if folded == text {
            break;
        }
        text = folded;
    }
    text
}

/// One string literal of the code: where it lies, its value, and whether it may be folded
/// (not a prefixed literal such as Python's `f'…'`, `b'…'`, nor one never closed).
struct Literal {
    start: usize,
    end: usize,
    value: String,
    plain: bool,
    /// Its quote character.
    quote: u8,
}

/// The quoted literals of `code`, in order, each found from its opening quote to the
/// matching one (so a quote of the other kind inside it is part of it).
fn tokens(code: &str) -> Vec<Literal> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let q = bytes[i];
        if q != b'\'' && q != b'"' {
            i += 1;
            continue;
        }
        let prefixed = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let mut j = i + 1;
        while j < bytes.len() && bytes[j] != q && bytes[j] != b'\n' {
            j += if bytes[j] == b'\\' { 2 } else { 1 };
        }
        let closed = j < bytes.len() && bytes[j] == q;
        let end = (j + 1).min(bytes.len());
        let body = code.get(i + 1..j.min(bytes.len())).unwrap_or("");
        out.push(Literal {
            start: i,
            end,
            value: unescape(body),
            plain: closed && !prefixed,
            quote: q,
        });
        i = end;
    }
    out
}

/// Adjacent plain literals joined by the language's operator (`+`; `.` in Perl and PHP;
/// juxtaposition in Python and awk), whatever their quotes, as one single-quoted literal.
fn join_literals(code: &str, lang: Lang) -> String {
    let joins = |between: &str| -> bool {
        let t = between.trim();
        match lang {
            Lang::Python => t == "+" || (t.is_empty() && !between.contains('\n')),
            Lang::Js | Lang::Ruby => t == "+",
            Lang::Perl | Lang::Php => t == ".",
            Lang::Awk => t.is_empty() && !between.contains('\n') && !between.is_empty(),
        }
    };
    let lits = tokens(code);
    let mut out = String::with_capacity(code.len());
    let mut last = 0;
    let mut i = 0;
    while i < lits.len() {
        let mut j = i;
        while j + 1 < lits.len()
            && lits[j].plain
            && lits[j + 1].plain
            && joins(&code[lits[j].end..lits[j + 1].start])
        {
            j += 1;
        }
        if j > i {
            out.push_str(&code[last..lits[i].start]);
            let value: String = lits[i..=j].iter().map(|l| l.value.as_str()).collect();
            // Literals of one kind stay of that kind (Perl interpolates in `"…"` only).
            let same = lits[i..=j].iter().all(|l| l.quote == lits[i].quote);
            let q = if same { lits[i].quote } else { b'\'' };
            out.push_str(&quote_with(&value, char::from(q)));
            last = lits[j].end;
        }
        i = j + 1;
    }
    out.push_str(&code[last..]);
    out
}

/// One round of the language's builders whose parts are all literals.
fn builders(code: &str, lang: Lang) -> String {
    match lang {
        Lang::Python => {
            let text = chars(code, &CHR);
            let text = joins_by_separator(&text);
            let text = formats(&text);
            let text = percent_formats(&text);
            f_strings(&text)
        }
        Lang::Perl | Lang::Php => chars(code, &CHR),
        Lang::Ruby => {
            let text = chars(code, &RUBY_CHR);
            lists_joined(&text, "")
        }
        Lang::Js => {
            let text = from_char_codes(code);
            let text = lists_joined(&text, ",");
            template_literals(&text)
        }
        Lang::Awk => code.to_owned(),
    }
}

/// `chr(71)` (Python, Perl, PHP).
static CHR: LazyLock<Regex> =
    LazyLock::new(|| crate::pattern(r"\bchr\s*\(\s*(0[xX][0-9a-fA-F]+|\d+)\s*\)"));

/// `71.chr` (Ruby).
static RUBY_CHR: LazyLock<Regex> =
    LazyLock::new(|| crate::pattern(r"\b(0[xX][0-9a-fA-F]+|\d+)\.chr\b"));

/// Each character code `re` finds (its group 1) as a literal.
fn chars(code: &str, re: &Regex) -> String {
    re.replace_all(code, |c: &Captures| {
        code_point(&c[1]).map_or_else(|| c[0].to_owned(), |ch| quote(&ch.to_string()))
    })
    .into_owned()
}

/// `String.fromCharCode(71, 72)`.
fn from_char_codes(code: &str) -> String {
    static CALL: LazyLock<Regex> =
        LazyLock::new(|| crate::pattern(r"\bString\s*\.\s*fromCharCode\s*\(([0-9xXa-fA-F,\s]*)\)"));
    CALL.replace_all(code, |c: &Captures| {
        let folded: Option<String> = c[1].split(',').map(|n| code_point(n.trim())).collect();
        folded.map_or_else(|| c[0].to_owned(), |s| quote(&s))
    })
    .into_owned()
}

/// A character code written in decimal or `0x` hexadecimal.
fn code_point(n: &str) -> Option<char> {
    let value = match n.strip_prefix("0x").or_else(|| n.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None => n.parse().ok()?,
    };
    char::from_u32(value).filter(|c| *c != '\0')
}

/// Python's `SEP.join([...])` (or a tuple), the separator and every item literals.
fn joins_by_separator(code: &str) -> String {
    static JOIN: LazyLock<Regex> =
        LazyLock::new(|| crate::pattern(&format!(r"(?:{QUOTED})\s*\.\s*join\s*\(")));
    replace_calls(code, &JOIN, |c, args| {
        let sep = body(c)?;
        let inner = args
            .trim()
            .strip_prefix(['[', '('])?
            .strip_suffix([']', ')'])?;
        Some(quote(&literal_list(inner)?.join(&sep)))
    })
}

/// Python's `'…{}…'.format(...)`: positional fields (`{}`, `{0}`) only, every argument a
/// literal.
fn formats(code: &str) -> String {
    static FORMAT: LazyLock<Regex> =
        LazyLock::new(|| crate::pattern(&format!(r"(?:{QUOTED})\s*\.\s*format\s*\(")));
    static FIELD: LazyLock<Regex> = LazyLock::new(|| crate::pattern(r"\{(\d*)\}"));
    replace_calls(code, &FORMAT, |c, args| {
        let template = body(c)?;
        let values = literal_list(args)?;
        let mut next = 0;
        let mut ok = true;
        let out = FIELD.replace_all(&template, |f: &Captures| {
            let i = if f[1].is_empty() {
                next += 1;
                next - 1
            } else {
                f[1].parse().unwrap_or(usize::MAX)
            };
            values.get(i).cloned().unwrap_or_else(|| {
                ok = false;
                String::new()
            })
        });
        (ok && !out.contains(['{', '}'])).then(|| quote(&out))
    })
}

/// Python's `'…%s…' % ('a', 'b')` (or one literal), `%s` fields only.
fn percent_formats(code: &str) -> String {
    static PERCENT: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(&format!(
            r"(?:{QUOTED})\s*%\s*(?:\(((?:\s*(?:{QUOTED})\s*,?)+)\)|(?:{QUOTED}))"
        ))
    });
    PERCENT
        .replace_all(code, |c: &Captures| {
            let template = c.get(1).or_else(|| c.get(2)).map(|m| unescape(m.as_str()));
            let values = match c.get(3) {
                Some(list) => literal_list(list.as_str()),
                None => c
                    .get(6)
                    .or_else(|| c.get(7))
                    .map(|m| vec![unescape(m.as_str())]),
            };
            let (Some(template), Some(values)) = (template, values) else {
                return c[0].to_owned();
            };
            let pieces: Vec<&str> = template.split("%s").collect();
            if pieces.len() != values.len() + 1 || pieces.iter().any(|p| p.contains('%')) {
                return c[0].to_owned();
            }
            let mut out = String::new();
            for (i, piece) in pieces.iter().enumerate() {
                out.push_str(piece);
                if let Some(v) = values.get(i) {
                    out.push_str(v);
                }
            }
            quote(&out)
        })
        .into_owned()
}

/// Python's f-strings whose every field is a literal: `f"GITHUB_{'TOKEN'}"`.
fn f_strings(code: &str) -> String {
    static F: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(
            r#"\b[fF](?:'((?:[^'\\\n{]|\\.|\{[^}'\n]*(?:"[^"\n]*"[^}'\n]*)*\})*)'|"((?:[^"\\\n{]|\\.|\{[^}"\n]*(?:'[^'\n]*'[^}"\n]*)*\})*)")"#,
        )
    });
    F.replace_all(code, |c: &Captures| {
        let Some(inner) = c.get(1).or_else(|| c.get(2)) else {
            return c[0].to_owned();
        };
        fields(inner.as_str(), '{', '}').map_or_else(|| c[0].to_owned(), |s| quote(&s))
    })
    .into_owned()
}

/// JavaScript's template literals whose every `${…}` is a literal.
fn template_literals(code: &str) -> String {
    static T: LazyLock<Regex> = LazyLock::new(|| crate::pattern(r"`((?:[^`\\]|\\.)*)`"));
    T.replace_all(code, |c: &Captures| {
        let inner = c[1].replace("${", "\u{1}");
        fields(&inner, '\u{1}', '}').map_or_else(|| c[0].to_owned(), |s| quote(&s))
    })
    .into_owned()
}

/// `text` with each field (`open` … `close`, holding one literal) replaced by its value;
/// `None` when a field holds anything else.
fn fields(text: &str, open: char, close: char) -> Option<String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(open) {
        out.push_str(&unescape(&rest[..at]));
        let after = &rest[at + open.len_utf8()..];
        let end = after.find(close)?;
        let value = literal_list(&after[..end])?;
        match value.as_slice() {
            [one] => out.push_str(one),
            _ => return None,
        }
        rest = &after[end + close.len_utf8()..];
    }
    out.push_str(&unescape(rest));
    Some(out)
}

/// JavaScript's and Ruby's `['a', 'b'].join(SEP)` (`default` when no separator is given).
fn lists_joined(code: &str, default: &str) -> String {
    static LIST: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(&format!(
            r"\[([^\[\]]*)\]\s*\.\s*join\b(?:\s*\(\s*(?:(?:{QUOTED})\s*)?\))?"
        ))
    });
    LIST.replace_all(code, |c: &Captures| {
        let sep = c
            .get(2)
            .or_else(|| c.get(3))
            .map_or_else(|| default.to_owned(), |m| unescape(m.as_str()));
        literal_list(&c[1]).map_or_else(|| c[0].to_owned(), |items| quote(&items.join(&sep)))
    })
    .into_owned()
}

/// Each match of `call` (a regex ending at a call's opening bracket) replaced by what
/// `fold` makes of it and the call's arguments, when it makes something.
fn replace_calls(
    code: &str,
    call: &Regex,
    fold: impl Fn(&Captures, &str) -> Option<String>,
) -> String {
    let mut out = String::with_capacity(code.len());
    let mut last = 0;
    for c in call.captures_iter(code) {
        let Some(whole) = c.get(0) else { continue };
        if whole.start() < last {
            continue;
        }
        let args = call_args(code, whole.end());
        let end = whole.end() + args.len();
        // The call must close where its arguments end.
        if code.as_bytes().get(end) != Some(&b')') {
            continue;
        }
        if let Some(folded) = fold(&c, args) {
            out.push_str(&code[last..whole.start()]);
            out.push_str(&folded);
            last = end + 1;
        }
    }
    out.push_str(&code[last..]);
    out
}

/// The unescaped body of the literal a capture holds (group 1 or 2).
fn body(c: &Captures) -> Option<String> {
    c.get(1).or_else(|| c.get(2)).map(|m| unescape(m.as_str()))
}

/// The values of a comma-separated list of literals (a trailing comma allowed); `None` when
/// anything else is in it.
fn literal_list(text: &str) -> Option<Vec<String>> {
    static ITEM: LazyLock<Regex> =
        LazyLock::new(|| crate::pattern(&format!(r"^\s*(?:{QUOTED})\s*(?:,|$)")));
    let mut rest = text.trim_end();
    let mut out = Vec::new();
    while !rest.trim().is_empty() {
        let c = ITEM.captures(rest)?;
        out.push(body(&c)?);
        rest = &rest[c.get(0)?.end()..];
    }
    Some(out)
}

/// `value` as a single-quoted literal the scan reads back as `value`.
fn quote(value: &str) -> String {
    quote_with(value, '\'')
}

/// `value` as a literal in quotes `q` that the scan reads back as `value`.
fn quote_with(value: &str, q: char) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push(q);
    for ch in value.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

fn unescape(s: &str) -> String {
    super::unescape(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_of_literals_are_folded() {
        let py = |code| fold_constants(code, Lang::Python);
        assert_eq!(py("x = chr(71) + 'ITHUB'"), "x = 'GITHUB'");
        assert_eq!(py("''.join(['GITHUB_', 'TOKEN'])"), "'GITHUB_TOKEN'");
        assert_eq!(
            py("'.'.join(('169', '254', '169', '254'))"),
            "'169.254.169.254'"
        );
        assert_eq!(py("''.join([chr(0x2e), 'ssh'])"), "'.ssh'");
        assert_eq!(
            py("'http://{}.{}/latest'.format('169.254', '169.254')"),
            "'http://169.254.169.254/latest'"
        );
        assert_eq!(py("'{1}/{0}'.format('id_rsa', '.ssh')"), "'.ssh/id_rsa'");
        assert_eq!(py("'%s_%s' % ('GITHUB', 'TOKEN')"), "'GITHUB_TOKEN'");
        assert_eq!(py("'%s/.ssh' % '~'"), "'~/.ssh'");
        assert_eq!(py("f\"GITHUB_{'TOKEN'}\""), "'GITHUB_TOKEN'");
        let js = |code| fold_constants(code, Lang::Js);
        assert_eq!(js("String.fromCharCode(71, 72)"), "'GH'");
        assert_eq!(js("['GITHUB', 'TOKEN'].join('_')"), "'GITHUB_TOKEN'");
        assert_eq!(js("['a', 'b'].join()"), "'a,b'");
        assert_eq!(js("`http://${'evil'}.example/`"), "'http://evil.example/'");
        assert_eq!(fold_constants("[71.chr, 'H'].join", Lang::Ruby), "'GH'");
        assert_eq!(fold_constants("chr(46) . 'ssh'", Lang::Perl), "'.ssh'");
    }

    #[test]
    fn anything_built_from_a_variable_stays() {
        let py = |code| fold_constants(code, Lang::Python);
        for code in [
            "''.join([h, '.ssh'])",
            "'{}/x'.format(home)",
            "'{name}'.format(name='x')",
            "'%s/%d' % ('a', 1)",
            "f'{home}/.ssh'",
            "chr(n)",
            "sep.join(['a', 'b'])",
        ] {
            assert_eq!(py(code), code);
        }
        assert_eq!(fold_constants("`${home}/.ssh`", Lang::Js), "`${home}/.ssh`");
        // A quote inside a folded value stays inside it.
        assert_eq!(py("''.join([\"it's\", '/x'])"), "'it\\'s/x'");
    }
}
