//! The table of programs: what each does with its operands, as data.

use std::collections::HashMap;
use std::sync::LazyLock;

/// What a program does with its operands (non-option arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operands {
    /// Reads them and may reveal their content (`cat`, `base64`, `scp`).
    Read,
    /// The first operand is a pattern or a program, the rest are read (`grep`, `sed`, `awk`).
    PatternThenRead,
    /// Names them without revealing their content (`ls`, `stat`, `echo`, `ssh -i`).
    Name,
    /// Modifies or removes them (`rm`, `touch`, `chmod`, `tee`).
    Modify,
    /// Reads the sources and writes the last operand or `-t DIR` (`cp`, `mv`, `ln`).
    Copy,
}

/// One program's entry in the table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    pub operands: Operands,
    /// An unknown operand matters (the program reads, writes, deletes or signals it).
    pub sensitive: bool,
    /// Reads whole directory trees: always (`tar`), or with one of these options.
    pub recursive: Recursive,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Recursive {
    Never,
    Always,
    With(&'static [&'static str]),
}

const fn spec(operands: Operands, sensitive: bool, recursive: Recursive) -> Spec {
    Spec {
        operands,
        sensitive,
        recursive,
    }
}

use Operands::*;
use Recursive::{Always, Never, With};

const GREP_R: Recursive = With(&["-r", "-R", "--recursive", "--dereference-recursive"]);
const CP_R: Recursive = With(&["-r", "-R", "-a", "--recursive", "--archive"]);
const RG_HIDDEN: Recursive = With(&["--hidden", "-uu", "-uuu", "-.", "--unrestricted"]);

/// The table. Names are basenames; the same entry serves every name in its list.
#[rustfmt::skip]
const TABLE: &[(&[&str], Spec)] = &[
    (
        &[
            "cat",
            "tac",
            "less",
            "more",
            "most",
            "head",
            "tail",
            "nl",
            "od",
            "xxd",
            "hexdump",
            "hd",
            "strings",
            "base64",
            "base32",
            "basenc",
            "cut",
            "sort",
            "uniq",
            "paste",
            "diff",
            "cmp",
            "comm",
            "fold",
            "fmt",
            "pr",
            "expand",
            "iconv",
            "bat",
            "batcat",
            "column",
            "vim",
            "vi",
            "view",
            "nano",
            "emacs",
            "ed",
            "ex",
            "pico",
            "code",
            "jq",
            "yq",
            "split",
            "gpg",
            "openssl",
            "xclip",
            "xsel",
            "pbcopy",
            "wl-copy",
            "nc",
            "ncat",
            "socat",
            "mail",
            "sendmail",
            "uuencode",
            "look",
            "join",
            "csplit",
            "sqlite3",
            "python3-base64",
            "gzip",
            "bzip2",
            "xz",
            "zstd",
            "lz4",
            "7z",
            "rar",
            "wc",
            "md5sum",
            "sha1sum",
            "sha256sum",
            "sha512sum",
            "b2sum",
            "cksum",
            "source",
            ".",
        ],
        spec(Read, true, Never),
    ),
    (
        &["grep", "egrep", "fgrep", "zgrep"],
        spec(PatternThenRead, true, GREP_R),
    ),
    (&["rg"], spec(PatternThenRead, true, RG_HIDDEN)),
    (
        &["ag", "ack"],
        spec(
            PatternThenRead,
            true,
            With(&["--hidden", "-u", "--unrestricted"]),
        ),
    ),
    (
        &["sed", "gsed", "awk", "gawk", "mawk", "nawk", "busybox-awk"],
        spec(PatternThenRead, true, Never),
    ),
    (
        &["tar", "bsdtar", "zip", "cpio", "pax"],
        spec(Read, true, Always),
    ),
    (&["scp", "rsync", "rclone"], spec(Copy, true, Always)),
    (
        &["cp", "mv", "install", "ln", "link", "gcp"],
        spec(Copy, true, CP_R),
    ),
    (
        &[
            "rm", "unlink", "rmdir", "shred", "truncate", "touch", "chmod", "chown", "chgrp",
            "chattr", "tee", "setfacl", "wipe", "srm",
        ],
        spec(Modify, true, Never),
    ),
    (&["dd"], spec(Name, true, Never)),
    (&["kill", "pkill", "killall"], spec(Name, true, Never)),
    (
        &["curl", "wget", "http", "https", "xh", "aria2c"],
        spec(Name, true, Never),
    ),
    (
        &[
            "echo",
            "printf",
            "ls",
            "stat",
            "test",
            "[",
            "[[",
            "mkdir",
            "cd",
            "pushd",
            "popd",
            "which",
            "type",
            "realpath",
            "readlink",
            "basename",
            "dirname",
            "export",
            "unset",
            "declare",
            "typeset",
            "local",
            "readonly",
            "true",
            "false",
            "sleep",
            "ssh",
            "ssh-add",
            "ssh-keygen",
            "find",
            "file",
            "du",
            "df",
            "tree",
            "exa",
            "eza",
            "lsattr",
            "getfacl",
            "namei",
            "id",
            "whoami",
            "date",
            "pwd",
            "git",
            "mktemp",
        ],
        spec(Name, false, Never),
    ),
];

static INDEX: LazyLock<HashMap<&'static str, Spec>> = LazyLock::new(|| {
    TABLE
        .iter()
        .flat_map(|(names, spec)| names.iter().map(move |n| (*n, *spec)))
        .collect()
});

/// The entry of `program`, or the default for programs we do not know.
pub(crate) fn spec_of(program: &str) -> Spec {
    INDEX
        .get(program)
        .copied()
        .unwrap_or(spec(Read, false, Never))
}

/// Options whose value is something other than a file to read, by program.
const VALUE_OPTIONS: &[(&[&str], &[&str])] = &[
    (
        &["curl"],
        &[
            "-o",
            "--output",
            "-H",
            "--header",
            "-X",
            "--request",
            "-u",
            "--user",
            "-A",
            "-e",
            "-x",
            "-w",
            "-m",
            "--max-time",
            "--connect-timeout",
            "-K",
            "--config",
            "--data-urlencode",
            "-d",
            "--data",
            "--data-binary",
            "--data-raw",
            "-F",
            "--form",
            "-T",
            "--upload-file",
        ],
    ),
    (
        &["wget"],
        &[
            "-O",
            "--output-document",
            "-P",
            "--directory-prefix",
            "-o",
            "--output-file",
            "--header",
            "-U",
            "--user-agent",
            "--post-data",
            "--post-file",
            "--body-file",
        ],
    ),
    (
        &["openssl"],
        &[
            "-out",
            "-keyout",
            "-in",
            "-inkey",
            "-key",
            "-subj",
            "-days",
            "-newkey",
            "-passin",
            "-passout",
            "-config",
            "-extensions",
            "-addext",
            "-infiles",
            "-name",
            "-certfile",
            "-CA",
            "-CAkey",
            "-set_serial",
        ],
    ),
    (
        &["ssh", "scp", "ssh-keygen"],
        &[
            "-i", "-F", "-o", "-p", "-P", "-l", "-J", "-c", "-f", "-C", "-t", "-b", "-N", "-S",
        ],
    ),
    (
        &["grep", "egrep", "fgrep", "rg"],
        &[
            "-e",
            "-f",
            "--regexp",
            "--file",
            "-m",
            "-A",
            "-B",
            "-C",
            "--max-count",
            "-g",
            "--glob",
            "-t",
            "--type",
            "--include",
            "--exclude",
        ],
    ),
    (
        &["tar"],
        &[
            "-f",
            "--file",
            "-C",
            "--directory",
            "-T",
            "--files-from",
            "-X",
            "--exclude-from",
        ],
    ),
    (&["git"], &["-C", "-c", "--git-dir", "--work-tree"]),
    // The code of interpreters the policy does not scan (kept as `code` for the rules, see
    // `unscanned_code` in the shell's options), not a file they read.
    (
        &["lua", "lua5.1", "lua5.2", "lua5.3", "lua5.4", "luajit"],
        &["-e", "-l"],
    ),
    (&["Rscript", "R"], &["-e"]),
    (&["julia"], &["-e", "--eval", "-E", "--print"]),
    (&["guile", "guile3.0", "guile2.2"], &["-c"]),
    (&["jrunscript", "csi"], &["-e"]),
];

/// Options of `program` whose value is something other than a file to read.
pub(super) fn value_options(program: &str) -> &'static [&'static str] {
    VALUE_OPTIONS
        .iter()
        .find(|(names, _)| names.contains(&program))
        .map_or(&[], |(_, options)| options)
}

/// Shells whose `-c` argument (or stdin, or script operand) is a script.
pub(crate) const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "ash",
    "fish",
    "rbash",
    "busybox-sh",
    "yash",
    "tcsh",
    "csh",
];
