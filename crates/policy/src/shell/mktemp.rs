//! `X=$(mktemp …)`: a variable whose value is a path `mktemp` makes in the same command.
//!
//! Its value is known only at run time, so without this every later use of `$X` is an
//! unknown operand (`f=$(mktemp) && … && rm "$f"` escalated). What is known is enough: a
//! fresh name in a known directory, made by this command. The variable gets a stand-in path
//! there (`/tmp/tmp.XXXXXXXXXX`, or the `-p DIR`/`--tmpdir=DIR`/template's directory), which
//! the rules then see like any other path (a script written there and run is still code
//! written in the same command), and deleting that path, or anything beneath it, is no
//! deletion outside the workspace ([`super::Command::made`]).
//!
//! Only the plain forms are read: one `mktemp` with literal options and template, alone in
//! its substitution. Anything else stays a value known only at run time.

use std::path::Path;

use super::Ctx;

/// The stand-in path for a scalar assignment's raw text when it is `$(mktemp …)` (or in
/// backquotes, or double-quoted); `n` makes each one of the same command distinct.
/// `home` is what the shell puts for a leading `~` in mktemp's own arguments.
pub(super) fn stand_in(
    raw: &str,
    ctx: &Ctx,
    assigns: &[(String, Option<String>)],
    home: &Path,
    n: usize,
) -> Option<String> {
    let raw = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .unwrap_or(raw);
    let inner = raw
        .strip_prefix("$(")
        .and_then(|r| r.strip_suffix(')'))
        .or_else(|| raw.strip_prefix('`').and_then(|r| r.strip_suffix('`')))?;
    let mut words = inner.split_whitespace();
    if words.next()? != "mktemp" {
        return None;
    }
    // Nothing the shell would expand or split further, no second command.
    if inner
        .chars()
        .any(|c| "$`\"'\\;&|<>(){}[]*?#!\n".contains(c))
    {
        return None;
    }
    let (mut dir, mut template, mut in_tmpdir) = (None::<String>, None::<&str>, false);
    let mut words = words.peekable();
    while let Some(w) = words.next() {
        match w {
            "-d" | "--directory" | "-q" | "--quiet" | "-u" | "--dry-run" => {}
            "-t" | "--tmpdir" => in_tmpdir = true,
            "-p" => dir = Some(words.next()?.to_owned()),
            _ if w.starts_with("--tmpdir=") => dir = Some(w["--tmpdir=".len()..].to_owned()),
            _ if w.starts_with("--suffix=") => {}
            _ if w.starts_with("-p") && w.len() > 2 => dir = Some(w[2..].to_owned()),
            _ if !w.starts_with('-') && template.is_none() && w.ends_with("XXX") => {
                template = Some(w)
            }
            _ => return None,
        }
    }
    // Where mktemp puts it: the directory given, else $TMPDIR, else /tmp. A TMPDIR this
    // command set is followed; one it set to a value known only at run time is not.
    let tmpdir = match ctx.variable(assigns, "TMPDIR") {
        Some(Some(v)) if !v.is_empty() => v,
        Some(None) => return None,
        _ => "/tmp".to_owned(),
    };
    // mktemp itself refuses a template with a directory beside `-p`; `..` is never read.
    if dir.is_some() && template.is_some_and(|t| t.contains('/')) {
        return None;
    }
    let path = match (dir, template) {
        (Some(d), t) => format!("{d}/{}", t.unwrap_or("tmp.XXXXXXXXXX")),
        // A template of its own without -t names a path from the working directory.
        (None, Some(t)) if t.contains('/') || !in_tmpdir => match t.starts_with('/') {
            true => t.to_owned(),
            false if ctx.cwd_known => format!("{}/{t}", ctx.cwd.display()),
            false => return None,
        },
        (None, t) => format!("{tmpdir}/{}", t.unwrap_or("tmp.XXXXXXXXXX")),
    };
    // The shell expands `~` in mktemp's arguments; in the variable's value it would not be.
    let path = match path.strip_prefix("~/") {
        Some(rest) => format!("{}/{rest}", home.display()),
        None => path,
    };
    // A path that lies nowhere known (relative to a directory the analysis may not know)
    // is left unknown.
    if !path.starts_with('/') || path.split('/').any(|c| c == "..") {
        return None;
    }
    Some(if n == 0 { path } else { format!("{path}-{n}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(raw: &str) -> Option<String> {
        stand_in(
            raw,
            &Ctx::new(Path::new("/ws")),
            &[],
            Path::new("/home/u"),
            0,
        )
    }

    #[test]
    fn the_plain_forms_give_a_path_in_their_directory() {
        assert_eq!(made("$(mktemp)").as_deref(), Some("/tmp/tmp.XXXXXXXXXX"));
        assert_eq!(
            made("\"$(mktemp -d)\"").as_deref(),
            Some("/tmp/tmp.XXXXXXXXXX")
        );
        assert_eq!(made("`mktemp -q`").as_deref(), Some("/tmp/tmp.XXXXXXXXXX"));
        assert_eq!(
            made("$(mktemp -t build.XXXXXX)").as_deref(),
            Some("/tmp/build.XXXXXX")
        );
        assert_eq!(
            made("$(mktemp -d -p /var/tmp)").as_deref(),
            Some("/var/tmp/tmp.XXXXXXXXXX")
        );
        assert_eq!(
            made("$(mktemp --tmpdir=/srv x.XXX)").as_deref(),
            Some("/srv/x.XXX")
        );
        assert_eq!(
            made("$(mktemp /opt/y.XXXX)").as_deref(),
            Some("/opt/y.XXXX")
        );
        assert_eq!(made("$(mktemp rel.XXX)").as_deref(), Some("/ws/rel.XXX"));
        assert_eq!(
            made("$(mktemp out/rel.XXX)").as_deref(),
            Some("/ws/out/rel.XXX")
        );
        assert_eq!(
            made("$(mktemp -p ~/.ssh)").as_deref(),
            Some("/home/u/.ssh/tmp.XXXXXXXXXX")
        );
        assert_eq!(
            stand_in(
                "$(mktemp)",
                &Ctx::new(Path::new("/ws")),
                &[],
                Path::new("/h"),
                2
            )
            .as_deref(),
            Some("/tmp/tmp.XXXXXXXXXX-2")
        );
    }

    #[test]
    fn anything_else_stays_unknown() {
        for raw in [
            "$(mktemp -p $D)",
            "$(mktemp; rm -rf ~)",
            "$(mktemp | tee x)",
            "$(echo mktemp)",
            "$(mktemp -p build)",
            "$(mktemp --bogus)",
            "$(mktemp -p /tmp ../x.XXX)",
            "$(mktemp /tmp/../etc/x.XXX)",
            "$(mktemp $(cat t))",
            "$(cat f)",
            "mktemp",
        ] {
            assert_eq!(made(raw), None, "{raw}");
        }
        // A TMPDIR this command set to a value known only at run time.
        let assigns = [("TMPDIR".to_owned(), None)];
        assert_eq!(
            stand_in(
                "$(mktemp)",
                &Ctx::new(Path::new("/ws")),
                &assigns,
                Path::new("/h"),
                0
            ),
            None
        );
    }
}
