//! Text fitted to a width, for `audit show`: cut at the end, cut in the middle, wrapped at
//! spaces, and the home directory written `~`. Widths count characters, not bytes.

use std::path::Path;

/// The narrowest width laid out: below it, lines are laid out as at this width (and may be
/// wider than the terminal).
pub(crate) const MIN_WIDTH: usize = 40;

/// The width used when neither `COLUMNS` nor a terminal says one.
pub(crate) const DEFAULT_WIDTH: usize = 80;

/// The width to lay out for: `COLUMNS` when it is a positive number, else the terminal's
/// (`tty`: its columns, when stdout is one), else 80.
pub(crate) fn width(columns: Option<&str>, tty: Option<usize>) -> usize {
    columns
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
        .or(tty.filter(|&c| c > 0))
        .unwrap_or(DEFAULT_WIDTH)
}

/// Control characters (newlines, tabs) as spaces.
pub(crate) fn flat(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `s` in at most `n` characters: whole when it fits, else its start and `…`.
pub(crate) fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `s` in at most `n` characters: whole when it fits, else its start and its end with `…`
/// between (a path keeps its root and its file name).
pub(crate) fn middle(s: &str, n: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= n {
        return s.to_owned();
    }
    let kept = n.saturating_sub(1);
    let head = kept / 2;
    let tail = kept - head;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// `s` in lines of at most `n` characters, broken at spaces; a word longer than a line is
/// broken where the line ends. Nothing is left out but the spaces lines break at.
pub(crate) fn wrap(s: &str, n: usize) -> Vec<String> {
    let n = n.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut len = 0;
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let mut word: Vec<char> = word.chars().collect();
        if len > 0 && len + 1 + word.len() <= n {
            line.push(' ');
            line.extend(&word);
            len += 1 + word.len();
            continue;
        }
        if len > 0 {
            lines.push(std::mem::take(&mut line));
        }
        while word.len() > n {
            lines.push(word.drain(..n).collect());
        }
        len = word.len();
        line = word.into_iter().collect();
    }
    if len > 0 || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `s` with each path in the home directory `home` written from `~`: the home's own path,
/// where it is not part of a longer name (`/home/me` in `/home/me/src` and `cd /home/me`,
/// not in `/home/meg`).
pub(crate) fn home(s: &str, home: Option<&Path>) -> String {
    let Some(home) = home.and_then(Path::to_str) else {
        return s.to_owned();
    };
    let home = home.trim_end_matches('/');
    if home.is_empty() {
        return s.to_owned();
    }
    let in_name = |c: char| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '~');
    let mut out = String::with_capacity(s.len());
    let mut from = 0;
    for (at, _) in s.match_indices(home) {
        if at < from {
            continue;
        }
        let before = s[..at].chars().next_back();
        let after = s[at + home.len()..].chars().next();
        let starts = before.is_none_or(|c| !in_name(c));
        let ends = after.is_none_or(|c| c == '/' || !in_name(c));
        if starts && ends {
            out.push_str(&s[from..at]);
            out.push('~');
            from = at + home.len();
        }
    }
    out.push_str(&s[from..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_and_middle_keep_within_the_width() {
        assert_eq!(cut("abcdef", 6), "abcdef");
        assert_eq!(cut("abcdefg", 6), "abcde…");
        assert_eq!(middle("/a/b/c/d/e/file.rs", 18), "/a/b/c/d/e/file.rs");
        assert_eq!(middle("/a/b/c/d/e/file.rs", 11), "/a/b/…le.rs");
        assert_eq!(middle("/a/b/c/d/e/file.rs", 11).chars().count(), 11);
    }

    #[test]
    fn wrap_breaks_at_spaces_and_loses_no_word() {
        assert_eq!(
            wrap("the cloud metadata endpoint hands out", 16),
            ["the cloud", "metadata", "endpoint hands", "out"]
        );
        assert_eq!(wrap("abcdefghij kl", 4), ["abcd", "efgh", "ij", "kl"]);
        assert_eq!(wrap("", 10), [""]);
    }

    #[test]
    fn the_home_directory_is_written_from_a_tilde_only_where_it_is_whole() {
        let h = Some(Path::new("/home/me"));
        assert_eq!(
            home("cat /home/me/.ssh/id_rsa /home/meg/x", h),
            "cat ~/.ssh/id_rsa /home/meg/x"
        );
        assert_eq!(home("cd /home/me && ls", h), "cd ~ && ls");
        assert_eq!(home("/x/home/me/y", h), "/x/home/me/y");
        assert_eq!(home("/home/me", Some(Path::new("/"))), "/home/me");
    }

    #[test]
    fn the_width_is_columns_then_the_terminal_then_80() {
        assert_eq!(width(Some("120"), Some(100)), 120);
        assert_eq!(width(Some("x"), Some(100)), 100);
        assert_eq!(width(None, None), 80);
        assert_eq!(width(Some("0"), None), 80);
    }
}
