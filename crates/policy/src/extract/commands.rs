//! One simple command's facts: its operands, reads, writes and deletions resolved, and
//! whether a value known only at run time stands where it matters.

use std::path::{Path, PathBuf};

use super::super::paths::{ResolvedPath, Resolver};
use super::super::semantics::{self, spec_of};
use super::CommandFacts;
use crate::command::{is_unknown, Command};

/// Secrets that live at fixed places under the home directory: a command that reads a whole
/// tree containing one of them (`grep -r x ~`, `tar c ~`) reads it.
const HOME_SECRETS: &[&str] = &[
    ".ssh/id_rsa",
    ".ssh/id_ed25519",
    ".ssh/id_ecdsa",
    ".ssh/id_dsa",
    ".aws/credentials",
    ".config/gcloud/credentials.db",
    ".config/gcloud/application_default_credentials.json",
    ".azure/accessTokens.json",
    ".kube/config",
    ".docker/config.json",
    ".gnupg/private-keys-v1.d",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".config/gh/hosts.yml",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".qwen/oauth_creds.json",
    ".copilot/config.json",
];

/// Files under the home directory that start code later or control the agents: what an
/// archive unpacked into home may overwrite.
const HOME_PERSISTENCE: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".ssh/authorized_keys",
    ".config/autostart/x.desktop",
    ".config/systemd/user/x.service",
    ".claude/settings.json",
    ".codex/config.toml",
    ".gemini/settings.json",
    ".qwen/settings.json",
    ".copilot/hooks/x.json",
    ".gitconfig",
];

pub(super) fn resolve_command(cmd: Command, resolver: &Resolver) -> CommandFacts {
    let word = |w: &str| resolver.resolve_word(w, &cmd.cwd);
    let code = |w: &String| resolver.resolve(w, &cmd.cwd);
    let operands: Vec<ResolvedPath> = semantics::operands(&cmd).into_iter().map(word).collect();
    let mut reads: Vec<ResolvedPath> = semantics::reads(&cmd).into_iter().map(word).collect();
    reads.extend(cmd.code_paths.reads.iter().map(code));
    let mut writes: Vec<ResolvedPath> = semantics::writes(&cmd).iter().map(|w| word(w)).collect();
    writes.extend(cmd.code_paths.writes.iter().map(code));
    // Settings changed through the program's own subcommand (`git config core.pager …`,
    // `npm config set …`), and files edited in place by programs the table only names.
    writes.extend(
        super::configs::config_writes(&cmd, &resolver.home)
            .iter()
            .map(|p| word(&p.to_string_lossy())),
    );
    let nofollow = |w: &str| resolver.resolve_word_nofollow(w, &cmd.cwd);
    let mut deletes: Vec<ResolvedPath> =
        semantics::deletes(&cmd).into_iter().map(nofollow).collect();
    let tree_writer = matches!(cmd.program.as_str(), "tar" | "bsdtar" | "unzip")
        || (matches!(cmd.program.as_str(), "cp" | "rsync" | "scp" | "gcp")
            && semantics::recursive(&cmd));
    if tree_writer {
        // Unpacking or copying a tree into home (or above it) may write any file there:
        // the persistence ones.
        let dirs: Vec<PathBuf> = writes.iter().map(|w| w.abs.clone()).collect();
        for d in dirs {
            if resolver.home.starts_with(&d) {
                writes.extend(HOME_PERSISTENCE.iter().map(|p| {
                    resolver.resolve(&resolver.home.join(p).to_string_lossy(), Path::new("/"))
                }));
            }
        }
    }
    deletes.extend(cmd.code_paths.deletes.iter().map(code));
    // What `mktemp` made in this same command is removed with no harm beyond it.
    if !cmd.made.is_empty() {
        let made: Vec<PathBuf> = cmd
            .made
            .iter()
            .map(|m| resolver.resolve(m, Path::new("/")).abs)
            .collect();
        deletes.retain(|d| !made.iter().any(|m| d.abs.starts_with(m)));
    }
    if semantics::recursive(&cmd) {
        let roots: Vec<PathBuf> = reads.iter().map(|r| r.abs.clone()).collect();
        reads.extend(secrets_below(&roots, resolver));
    }
    // The project's own code (unchanged since the run started) is trusted with values known
    // only at run time; the agent's is not.
    let trusted = cmd.from.as_ref().is_some_and(|o| o.trusted);
    let unknown = if trusted {
        None
    } else {
        unknown_where_it_matters(&cmd)
    };
    // And with code it builds at run time (`eval "$(tool init)"` in its own set-up), unless
    // that code is decoded or downloaded.
    let mut cmd = cmd;
    if trusted
        && !cmd.fed_by.iter().any(|p| {
            matches!(
                p.as_str(),
                "base64"
                    | "xxd"
                    | "openssl"
                    | "gpg"
                    | "curl"
                    | "wget"
                    | "nc"
                    | "ncat"
                    | "rev"
                    | "tr"
            )
        })
    {
        cmd.dynamic_code = None;
    }
    let typosquat = semantics::typosquat(&cmd);
    CommandFacts {
        cmd,
        operands,
        reads,
        writes,
        deletes,
        unknown,
        typosquat,
    }
}

/// The fixed-place secrets inside any of `roots` (a tree read whole reads them).
pub(super) fn secrets_below(roots: &[PathBuf], resolver: &Resolver) -> Vec<ResolvedPath> {
    let mut out = Vec::new();
    for s in HOME_SECRETS {
        let p = resolver.home.join(s);
        if roots.iter().any(|r| p.starts_with(r)) {
            out.push(resolver.resolve(&p.to_string_lossy(), Path::new("/")));
        }
    }
    out
}

/// Why a value known only at run time stands where it matters in `cmd`, if one does.
fn unknown_where_it_matters(cmd: &Command) -> Option<String> {
    let relative_unknown = |w: &str| !cmd.cwd_known && !w.starts_with('/');
    if is_unknown(&cmd.path) {
        return Some("the program to run is known only at run time".to_owned());
    }
    if let Some(run) = &cmd.runs {
        if is_unknown(run) || relative_unknown(run) {
            return Some("the file it runs is known only at run time".to_owned());
        }
    }
    for r in &cmd.redirects {
        if is_unknown(&r.target) || relative_unknown(&r.target) {
            return Some("a redirection target is known only at run time".to_owned());
        }
    }
    if !cmd.wrapper && spec_of(&cmd.program).sensitive {
        let ops = semantics::operands(cmd);
        if ops.iter().any(|o| is_unknown(o) || relative_unknown(o))
            || (cmd.program == "dd" && cmd.args.iter().any(|a| is_unknown(a)))
        {
            return Some(format!(
                "an operand of `{}` is known only at run time",
                cmd.program
            ));
        }
    }
    if !cmd.wrapper
        && (semantics::deletes(cmd)
            .iter()
            .any(|d| is_unknown(d) || relative_unknown(d))
            || semantics::writes(cmd).iter().any(|w| is_unknown(w)))
    {
        return Some(format!(
            "what `{}` changes is known only at run time",
            cmd.program
        ));
    }
    if cmd.code_unknown {
        return Some("the code it runs is known only at run time".to_owned());
    }
    if cmd
        .code_paths
        .writes
        .iter()
        .chain(&cmd.code_paths.deletes)
        .any(|w| is_unknown(w))
    {
        return Some("inline code changes a path known only at run time".to_owned());
    }
    None
}
