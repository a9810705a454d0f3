//! What a command a `reversible = true` rule escalates reaches: the files and the git history
//! it may discard, as data for the run to judge against its checkpoints (which the policy
//! cannot see). Anything this reading does not know exactly gives no reach, and the rule's
//! own decision stands.
//!
//! Known: `git clean` (its options and pathspecs), `git checkout [--] PATHS` and `git restore
//! PATHS` without a tree or `--staged` (the index is not kept), `git stash drop`/`clear`,
//! `git branch -D`/`-d -f`/`-f` (refs and reflogs, kept with the history), and what a command
//! removes as whole trees (`rm -r`, `find -delete`, `shutil.rmtree`: the walker's deletions).
//! Not known, so never reversible: `git reset --hard`, a checkout of another tree, git's
//! global options (`-C`, `-c`, `--git-dir`, `--work-tree`), `GIT_*` variables the command
//! sets, a command under a wrapper (`sudo`, `timeout`), from a file, after a `cd` to an
//! unknown place, with a value known only at run time, or writing through a redirection.

use std::path::{Path, PathBuf};

use crate::command::is_unknown;
use crate::extract::{CommandFacts, Facts};
use crate::paths::normalise;

/// Everything a command reaches that it may discard, each part judged on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// What each matched simple command discards.
    pub effects: Vec<Effect>,
}

/// One thing a command may discard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// A path removed as a whole tree, itself and everything below it (`rm -rf build`).
    Tree(PathBuf),
    /// Git, run in `cwd`, rewrites or deletes files of its work tree below `root` (never the
    /// repository's own `.git`): only those it tracks (`tracked_only`: `git checkout -- .`,
    /// `git restore .`, from the index), or any (`git clean`, `git restore --source`).
    WorkTree {
        /// The directory git runs in: its repository is the one whose work tree holds it.
        cwd: PathBuf,
        /// The top of what it may change.
        root: PathBuf,
        /// Only files git tracks are changed.
        tracked_only: bool,
    },
    /// Git, run in `cwd`, moves or deletes refs and reflog entries (`git stash drop`, `git
    /// branch -D`): the objects stay until a `gc`, which the history's keeping covers.
    Refs {
        /// The directory git runs in.
        cwd: PathBuf,
    },
}

/// What the simple commands `matched` discard; `None` when any of them does something this
/// reading does not know exactly.
pub(crate) fn reach(facts: &Facts, matched: &[&CommandFacts]) -> Option<Reach> {
    if matched.is_empty() {
        return None;
    }
    let mut effects = Vec::new();
    for cf in matched {
        effects.extend(command(cf, &facts.workspace)?);
    }
    Some(Reach { effects })
}

/// What one simple command discards, if this reading knows it exactly.
fn command(cf: &CommandFacts, workspace: &Path) -> Option<Vec<Effect>> {
    let cmd = &cf.cmd;
    let plain = cmd.cwd_known
        && cf.unknown.is_none()
        && cmd.via.is_empty()
        && !cmd.wrapper
        && cmd.from.is_none()
        && cmd.dynamic_code.is_none()
        && cmd.code.is_none()
        && !cmd.code_unknown
        && cmd.runs.is_none()
        && cmd.unread.is_none()
        && cmd.procsubs.is_empty()
        && !cmd.args.iter().any(|a| is_unknown(a))
        && cmd
            .redirects
            .iter()
            .all(|r| !r.writes || r.target == "/dev/null")
        && !cmd
            .env
            .iter()
            .any(|v| v.starts_with("GIT_") || v == "(all)")
        && !cmd.assigns.iter().any(|(v, _)| v.starts_with("GIT_"));
    if !plain {
        return None;
    }
    match cmd.program.as_str() {
        "git" => git(&cmd.args, &cmd.cwd, workspace),
        // What it writes is what it removes (a deletion is a write too).
        "rm" | "rmdir" | "find" | "unlink" => (!cf.deletes.is_empty()
            && cf.writes.iter().all(|w| cf.deletes.contains(w))
            && cmd.code_paths == Default::default())
        .then(|| {
            cf.deletes
                .iter()
                .map(|d| Effect::Tree(d.abs.clone()))
                .collect()
        }),
        _ => None,
    }
}

/// `git SUBCOMMAND ARGS` in `cwd`: what it discards.
fn git(args: &[String], cwd: &Path, workspace: &Path) -> Option<Vec<Effect>> {
    let (sub, rest) = args.split_first()?;
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    match sub.as_str() {
        "clean" => clean(&rest, cwd, workspace),
        "checkout" => checkout(&rest, cwd, workspace),
        "restore" => restore(&rest, cwd, workspace),
        "stash" => match rest.as_slice() {
            ["clear"] => Some(vec![refs(cwd)]),
            ["drop", more @ ..] => {
                let mut names = 0;
                for a in more {
                    match *a {
                        "-q" | "--quiet" => {}
                        a if !a.starts_with('-') => names += 1,
                        _ => return None,
                    }
                }
                (names <= 1).then(|| vec![refs(cwd)])
            }
            _ => None,
        },
        "branch" => {
            let mut names = 0;
            for a in &rest {
                match *a {
                    "-D" | "-d" | "-f" | "--delete" | "--force" | "-q" | "--quiet" | "-df"
                    | "-fd" | "-Df" | "-fD" => {}
                    a if !a.starts_with('-') => names += 1,
                    _ => return None,
                }
            }
            (names > 0).then(|| vec![refs(cwd)])
        }
        _ => None,
    }
}

fn refs(cwd: &Path) -> Effect {
    Effect::Refs {
        cwd: cwd.to_owned(),
    }
}

/// A pathspec in `cwd` as the top of what it names: a glob names files below the directory
/// it is given in (the cwd for `'*.o'`); `:/` the top of the work tree, which the run only
/// takes for reversible where it is the workspace; any other magic is not read.
fn pathspec(spec: &str, cwd: &Path, workspace: &Path) -> Option<PathBuf> {
    if spec == ":/" {
        return Some(workspace.to_owned());
    }
    if spec.starts_with(':') || spec.is_empty() {
        return None;
    }
    let glob = spec.find(['*', '?', '[', '\\']);
    let literal = match glob {
        Some(at) => spec[..at].rsplit_once('/').map_or("", |(dir, _)| dir),
        None => spec,
    };
    Some(normalise(&cwd.join(literal)))
}

/// `git clean ARGS`: the files it does not track below the cwd or the pathspecs, ignored ones
/// too with `-x`/`-X`; `None` for a dry run, an interactive one, or an option not read.
fn clean(args: &[&str], cwd: &Path, workspace: &Path) -> Option<Vec<Effect>> {
    let mut specs = Vec::new();
    let mut force = false;
    let mut options = true;
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        i += 1;
        if !options || !a.starts_with('-') || a == "-" {
            specs.push(a);
            continue;
        }
        match a {
            "--" => options = false,
            "--force" => force = true,
            "--quiet" => {}
            "--exclude" => i += 1,
            a if a.starts_with("--exclude=") => {}
            a if a.starts_with("--") => return None,
            short => {
                let flags = &short[1..];
                for (at, c) in flags.char_indices() {
                    match c {
                        'f' => force = true,
                        'd' | 'x' | 'X' | 'q' => {}
                        // The rest of the word is the pattern, else the next word.
                        'e' => {
                            if at + 1 == flags.len() {
                                i += 1;
                            }
                            break;
                        }
                        _ => return None,
                    }
                }
            }
        }
    }
    if !force || i > args.len() {
        return None;
    }
    work_tree(&specs, cwd, workspace, false, true)
}

/// `git checkout [-q] [-f] [--] PATHS` (from the index): the files it tracks there. Without
/// `--` only paths no branch can be named as (`.`, `./x`, `:/`); a tree before `--` (which
/// writes the index too) is not read.
fn checkout(args: &[&str], cwd: &Path, workspace: &Path) -> Option<Vec<Effect>> {
    let (before, after) = match args.iter().position(|a| *a == "--") {
        Some(at) => (&args[..at], Some(&args[at + 1..])),
        None => (args, None),
    };
    let mut specs = Vec::new();
    for a in before {
        match *a {
            "-q" | "--quiet" | "-f" | "--force" => {}
            a if after.is_none() && (a == "." || a.starts_with("./") || a == ":/") => specs.push(a),
            _ => return None,
        }
    }
    specs.extend(after.unwrap_or_default().iter().copied());
    work_tree(&specs, cwd, workspace, true, false)
}

/// `git restore PATHS` of the work tree alone: from the index, the files it tracks; from a
/// `--source`, any (a file of that tree is written over an untracked one). `--staged` writes
/// the index, which is not kept.
fn restore(args: &[&str], cwd: &Path, workspace: &Path) -> Option<Vec<Effect>> {
    let mut specs = Vec::new();
    let mut source = false;
    let mut options = true;
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        i += 1;
        if !options || !a.starts_with('-') {
            specs.push(a);
            continue;
        }
        match a {
            "--" => options = false,
            "-W" | "--worktree" | "-q" | "--quiet" | "--overlay" | "--no-overlay"
            | "--ignore-unmerged" | "--progress" | "--no-progress" => {}
            "-s" | "--source" => {
                source = true;
                i += 1;
            }
            a if a.starts_with("--source=") || (a.starts_with("-s") && a.len() > 2) => {
                source = true
            }
            _ => return None,
        }
    }
    if i > args.len() {
        return None;
    }
    work_tree(&specs, cwd, workspace, !source, false)
}

/// The work-tree effects of git's pathspecs `specs` in `cwd` (none: `default_cwd` says
/// whether that is the cwd, else nothing is named and nothing read).
fn work_tree(
    specs: &[&str],
    cwd: &Path,
    workspace: &Path,
    tracked_only: bool,
    default_cwd: bool,
) -> Option<Vec<Effect>> {
    let roots: Vec<PathBuf> = match specs {
        [] if default_cwd => vec![cwd.to_owned()],
        [] => return None,
        specs => specs
            .iter()
            .map(|s| pathspec(s, cwd, workspace))
            .collect::<Option<_>>()?,
    };
    Some(
        roots
            .into_iter()
            .map(|root| Effect::WorkTree {
                cwd: cwd.to_owned(),
                root,
                tracked_only,
            })
            .collect(),
    )
}
