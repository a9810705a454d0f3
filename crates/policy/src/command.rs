//! One simple command as the shell walker hands it on: its program, its words after expansion
//! (a part known only at run time marked [`UNKNOWN`]), its redirections, its stdin and what
//! it runs. The data every reader of commands shares (`shell` makes it; `semantics`,
//! `inline`, `extract` and the rules read it), and nothing that makes it.

use std::path::PathBuf;
use std::sync::Arc;

/// Largest file read as code (an interpreter's file is scanned in some 17 ms at this size):
/// the walker reads no larger file from disk, and a session's memory keeps no larger text.
pub(crate) const MAX_CODE_FILE: u64 = 512 * 1024;

/// Stands for the part of a word whose value is known only when the command runs (`$VAR`
/// from the environment, `$(…)`, `$((…))`). A NUL cannot occur in a real argument, so a
/// word containing it is unknown, and no rule can mistake it for a real path.
pub(crate) const UNKNOWN: char = '\0';

/// Whether a word has a part known only at run time.
pub(crate) fn is_unknown(word: &str) -> bool {
    word.contains(UNKNOWN)
}

/// Where a command's standard input comes from.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Stdin {
    /// Whatever the caller's stdin is (a terminal, or nothing).
    #[default]
    Inherited,
    /// Text known now: a here-document, a here-string, `echo '…' |`.
    Literal(String),
    /// The output of other programs, or anything else not known now.
    Data,
    /// A file (`< file`).
    File(String),
}

/// One simple command that a shell script would run.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Command {
    /// Basename of the program (`/bin/rm` → `rm`); empty for a bare assignment or redirection.
    pub program: String,
    /// The program word as written (after expansion): a path when it contains a `/`.
    pub path: String,
    /// The arguments after expansion; unknown parts are [`UNKNOWN`].
    pub args: Vec<String>,
    pub redirects: Vec<Redirect>,
    /// The directory the command runs in.
    pub cwd: PathBuf,
    /// False when an earlier `cd` went somewhere known only at run time.
    pub cwd_known: bool,
    /// Names of environment variables this command sets, exports or unsets; `(all)` when it
    /// clears the whole environment (`env -i`).
    pub env: Vec<String>,
    /// Programs whose output can reach this command (stdin, substitutions).
    pub fed_by: Vec<String>,
    pub stdin: Stdin,
    /// Arguments that are process substitutions (`<(…)`), by index, and what they hold.
    pub procsubs: Vec<(usize, Stdin)>,
    /// A wrapper such as `sudo`: recorded so rules can see it, but its arguments are another
    /// command (which is recorded too), not files it reads.
    pub wrapper: bool,
    /// The wrappers this command runs under (`sudo`, `timeout`, `ahp-wrap`, …).
    pub via: Vec<String>,
    /// Names of the variables the arguments refer to.
    pub vars: Vec<String>,
    /// Why this command runs code nobody can read now (downloaded, decoded, piped, built at
    /// run time, or written earlier in the same command), if it does.
    pub dynamic_code: Option<String>,
    /// The literal program text this command's interpreter runs (`python -c`, `awk '…'`).
    pub code: Option<String>,
    /// The code this command runs is a value known only at run time (`bash -c "$CMD"`).
    pub code_unknown: bool,
    /// A file this command runs as a program or script (`./x`, `sh x`, `source x`).
    pub runs: Option<String>,
    /// Paths the literal code names (read), writes and deletes, from the interpreter's code.
    pub code_paths: CodePaths,
    /// The file this command (or the code its interpreter runs) was read from, when it was
    /// not written in the event itself: a script, a build file's recipe, a package script.
    pub from: Option<Arc<Origin>>,
    /// Why code this command runs from a file could not be checked, if it could not.
    pub unread: Option<String>,
    /// The values of the variables assigned for this command alone (`X=1 cmd`), `None`
    /// where known only at run time.
    pub assigns: Vec<(String, Option<String>)>,
    /// The paths `mktemp` makes in this event (`X=$(mktemp)`), as the stand-ins their
    /// variables hold: deleting one, or what lies beneath it, deletes only what the same
    /// command made.
    pub made: Vec<String>,
}

/// A file whose code the walker read, and what of it runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Origin {
    pub path: PathBuf,
    /// What runs from it, for people: `` `clean` in Makefile ``, `run.sh`.
    pub label: String,
    /// Unchanged since the run started (the project's own code, not the agent's).
    pub trusted: bool,
}

/// What inline interpreter code does with files, as far as its literals show.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CodePaths {
    pub reads: Vec<String>,
    pub writes: Vec<String>,
    pub deletes: Vec<String>,
}

/// A redirection to or from a file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Redirect {
    /// The file, as the word expanded.
    pub target: String,
    /// It is read (`<`, `<>`).
    pub reads: bool,
    /// It is written (`>`, `>>`, `>|`, `&>`, `<>`, `>&FILE`).
    pub writes: bool,
    /// What is written goes after what the file held (`>>`).
    pub appends: bool,
}

/// The basename of a program word: `/usr/bin/rm` → `rm`.
pub(crate) fn program_name(word: &str) -> String {
    word.rsplit('/').next().unwrap_or(word).to_owned()
}
