//! Reading wrappers' options: where the command starts after them, the values of some of
//! them; and words spelled back as a shell command line, for wrappers that hand one on.
//!
//! Owns: these readers, shared by every wrapper's parser. Must not touch: any one wrapper's
//! options (the table and the parsers say which take a value).

use crate::command::UNKNOWN;

/// Words as a shell command line would spell them (a word known only at run time stays so).
pub(super) fn quoted(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if w.contains(UNKNOWN) {
                "\"$AHP_WRAP_UNKNOWN_WORD\"".to_owned()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The values of the options named by `want_short` (letters) and `want_long`, among options
/// of which `short` (letters) and `long` take a value; and the plain arguments.
pub(crate) fn option_values<'a>(
    args: &'a [String],
    short: &str,
    long: &[&str],
    want_short: &str,
    want_long: &[&str],
) -> (Vec<&'a str>, Vec<&'a str>) {
    let (mut values, mut plain) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            plain.extend(args[i + 1..].iter().map(String::as_str));
            break;
        }
        if let Some(name) = a.strip_prefix("--") {
            match name.split_once('=') {
                Some((n, v)) if want_long.iter().any(|l| l.get(2..) == Some(n)) => {
                    values.push(v);
                }
                Some(_) => {}
                None if long.contains(&a) => {
                    if want_long.contains(&a) {
                        values.extend(args.get(i + 1).map(String::as_str));
                    }
                    i += 1;
                }
                None => {}
            }
        } else if let Some(cluster) = a.strip_prefix('-').filter(|c| !c.is_empty()) {
            if let Some((pos, letter)) = cluster.char_indices().find(|(_, c)| short.contains(*c)) {
                let glued = &cluster[pos + letter.len_utf8()..];
                let value = if glued.is_empty() {
                    i += 1;
                    args.get(i).map(String::as_str)
                } else {
                    Some(glued)
                };
                if want_short.contains(letter) {
                    values.extend(value);
                }
            }
        } else {
            plain.push(a);
        }
        i += 1;
    }
    (values, plain)
}

/// Index of the first argument after the options (and `positionals` plain arguments).
pub(super) fn command_start(
    args: &[String],
    short: &str,
    long: &[&str],
    mut positionals: usize,
) -> Option<usize> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            i += 1;
            break;
        }
        if let Some(name) = a.strip_prefix("--") {
            if !name.contains('=') && long.contains(&a) {
                i += 1;
            }
        } else if let Some(cluster) = a.strip_prefix('-').filter(|c| !c.is_empty()) {
            // `-uroot` carries its value; `-u root` takes the next word.
            if let Some(pos) = cluster.find(|c| short.contains(c)) {
                if pos + 1 == cluster.len() {
                    i += 1;
                }
            }
        } else if positionals > 0 {
            positionals -= 1;
        } else {
            return Some(i);
        }
        i += 1;
    }
    (i < args.len()).then_some(i)
}
