//! One expanded argv: wrappers unwrapped, shell builtins that change the shell's state
//! (`cd`, assignments, `read`, `trap`, `eval`), `find -exec`, `git -c`, and code handed to
//! shells and interpreters.

use std::path::PathBuf;
use std::sync::Arc;

use super::super::semantics::{self, unwrap};
use super::{is_unknown, program_name, Command, Ctx, Origin, ShellError, Walker, UNKNOWN};

/// Git configuration keys whose value is a command git runs.
const GIT_COMMAND_KEYS: &[&str] = &[
    "core.sshcommand",
    "core.pager",
    "core.editor",
    "core.fsmonitor",
    "core.askpass",
    "diff.external",
    "sequence.editor",
    "gpg.program",
    "credential.helper",
    "core.gitproxy",
    "uploadpack.packobjectshook",
    "sendemail.smtpserver",
];

/// Keys with a name in the middle whose value is a command (`filter.lfs.smudge`).
fn git_command_pattern(key: &str) -> bool {
    let Some((section, rest)) = key.split_once('.') else {
        return false;
    };
    let last = rest.rsplit('.').next().unwrap_or_default();
    matches!(
        (section, last),
        ("filter", "clean" | "smudge" | "process")
            | ("diff", "command" | "textconv")
            | ("merge", "driver")
            | ("remote", "uploadpack" | "receivepack")
            | ("gpg", "program")
            | ("credential", "helper")
            | ("difftool" | "mergetool", "cmd")
    ) || key.ends_with(".textconv")
}

/// Follow-up work found while recording a command, done once it is recorded.
pub(super) enum Nested {
    Script(String),
    /// `bash -c SCRIPT ARG0 ARG1…`: the script, with `$0`, `$1`… set.
    ScriptArgs(String, Vec<String>),
    Argv(Vec<String>),
    /// Code read from a file: walked with that file as its origin, in `dir` when given (a
    /// build file's recipes run in its own directory).
    FromFile {
        origin: Arc<Origin>,
        dir: Option<PathBuf>,
        then: Box<Nested>,
    },
}

impl Walker<'_> {
    /// Records `argv` as a command, unwrapping wrappers and following nested commands.
    pub(super) fn argv(
        &mut self,
        mut cmd: Command,
        mut argv: Vec<String>,
        ctx: &mut Ctx,
    ) -> Result<(), ShellError> {
        if argv.is_empty() {
            return self.push(cmd);
        }
        cmd.path = argv.remove(0);
        cmd.program = program_name(&cmd.path);
        cmd.args = argv;
        if let Some(unwrapped) = unwrap(&cmd) {
            let cwd = match &unwrapped.chdir {
                Some(dir) => self.resolver.resolve_word(dir, &cmd.cwd).abs,
                None => cmd.cwd.clone(),
            };
            let mut via = cmd.via.clone();
            via.push(cmd.program.clone());
            let inner = Command {
                cwd_known: cmd.cwd_known
                    && unwrapped.chdir.as_deref().is_none_or(|d| !is_unknown(d)),
                cwd: cwd.clone(),
                fed_by: cmd.fed_by.clone(),
                stdin: cmd.stdin.clone(),
                via,
                // The wrapper's redirections are the wrapped command's.
                redirects: std::mem::take(&mut cmd.redirects),
                // The variables the wrapper sets are the wrapped command's too.
                env: unwrapped.env.clone(),
                assigns: cmd
                    .assigns
                    .iter()
                    .cloned()
                    .chain(env_assigns(&cmd))
                    .collect(),
                ..Command::default()
            };
            cmd.env.extend(unwrapped.env);
            cmd.wrapper = true;
            let (cmd_program, cmd_args) = (cmd.program.clone(), cmd.args.clone());
            // Code the wrapper itself loads first (`direnv exec DIR`'s `.envrc`).
            let loaded = self.runners(&mut cmd);
            let loaded_ctx = ctx.clone();
            self.push(cmd)?;
            for f in loaded {
                self.follow(f, loaded_ctx.clone())?;
            }
            if let Some(script) = unwrapped.script {
                let mut inner_ctx = ctx.clone();
                inner_ctx.cwd = cwd;
                return self
                    .nested(|w| w.script(&script, &mut inner_ctx))
                    .map(|_| ());
            }
            let mut argv = unwrapped.argv;
            if let Some(items) = xargs_items(&cmd_program, &cmd_args, ctx) {
                // `find ROOT … | xargs CMD`: CMD gets what is below ROOT (`rm` as a tree, as
                // for `find -exec`).
                argv = argv
                    .into_iter()
                    .flat_map(|a| {
                        if a == UNKNOWN.to_string() {
                            items.clone()
                        } else if is_unknown(&a) {
                            vec![a.replace(UNKNOWN, &items[0])]
                        } else {
                            vec![a]
                        }
                    })
                    .collect();
                if argv
                    .first()
                    .is_some_and(|p| matches!(program_name(p).as_str(), "rm" | "unlink" | "shred"))
                {
                    argv.insert(1, "-r".to_owned());
                }
            }
            return self.argv(inner, argv, ctx);
        }
        let mut follow = self.builtin(&mut cmd, ctx)?;
        follow.extend(self.code(&mut cmd, ctx)?);
        follow.extend(self.option_commands(&mut cmd, ctx));
        for exec in semantics::find_execs(&cmd) {
            follow.push(Nested::Argv(exec));
        }
        follow.extend(git(&mut cmd));
        // A variable whose name is known only at run time may be any of them.
        if cmd.env.iter().any(|n| is_unknown(n)) {
            cmd.env.push("(unknown)".to_owned());
        }
        let mut inner_ctx = ctx.clone();
        inner_ctx.cwd = cmd.cwd.clone();
        inner_ctx.cwd_known = cmd.cwd_known;
        inner_ctx.fed_by = cmd.fed_by.clone();
        inner_ctx.stdin = super::Stdin::Inherited;
        self.push(cmd)?;
        for f in follow {
            self.follow(f, inner_ctx.clone())?;
        }
        Ok(())
    }

    /// Walks follow-up work in `c`.
    fn follow(&mut self, f: Nested, mut c: Ctx) -> Result<(), ShellError> {
        match f {
            Nested::Script(s) => self.nested(|w| w.script(&s, &mut c))?,
            Nested::ScriptArgs(s, args) => {
                for (i, a) in args.into_iter().enumerate() {
                    c.vars
                        .insert(i.to_string(), Some(a).filter(|a| !is_unknown(a)));
                }
                self.nested(|w| w.script(&s, &mut c))?
            }
            Nested::Argv(a) => {
                let cmd = self.new_command(&c);
                self.nested(|w| w.argv(cmd, a, &mut c))?
            }
            Nested::FromFile { origin, dir, then } => {
                if let Some(dir) = dir {
                    c.cwd = dir;
                    c.cwd_known = true;
                    // A file's code does not see the caller's shell variables.
                    c.vars.clear();
                }
                let saved = self.origin.replace(origin.clone());
                self.reading
                    .push((origin.path.clone(), origin.label.clone()));
                let result = self.follow(*then, c);
                self.reading.pop();
                self.origin = saved;
                result?;
                return Ok(());
            }
        };
        Ok(())
    }

    /// Builtins that change the shell's state, or run text as commands.
    fn builtin(&mut self, cmd: &mut Command, ctx: &mut Ctx) -> Result<Vec<Nested>, ShellError> {
        let mut follow = Vec::new();
        match cmd.program.as_str() {
            "cd" | "pushd" | "popd" => self.change_dir(cmd, ctx),
            "export" | "declare" | "typeset" | "local" | "readonly" | "unset" | "read"
            | "mapfile" | "readarray" | "getopts" | "printf" => assignments(cmd, ctx),
            "trap" => {
                let action = cmd.args.iter().find(|a| *a != "--").cloned();
                if let Some(action) = action.filter(|a| !a.starts_with('-')) {
                    follow.push(self.text_as_code(cmd, &action));
                }
            }
            "eval" => {
                let text = cmd.args.join(" ");
                follow.push(self.text_as_code(cmd, &text));
            }
            "alias" => {
                for a in cmd.args.clone() {
                    if let Some((_, v)) = a.split_once('=') {
                        follow.push(self.text_as_code(cmd, v));
                    }
                }
            }
            "let" => {
                for a in cmd.args.clone() {
                    self.arithmetic(&a, ctx)?;
                }
            }
            _ => {}
        }
        Ok(follow)
    }

    /// `cd`, `pushd`, `popd`: the cwd of what follows (unknown after an unknown target).
    fn change_dir(&self, cmd: &Command, ctx: &mut Ctx) {
        let old = ctx.cwd.clone();
        let next = if cmd.program == "popd" {
            ctx.dirs.pop()
        } else {
            let target = cmd.args.iter().find(|a| !a.starts_with('-') || *a == "-");
            let next = match target.map(String::as_str) {
                None => Some(self.resolver.home.clone()),
                Some("-") => ctx.oldpwd.clone(),
                Some(dir) if is_unknown(dir) => None,
                Some(dir) => Some(self.cd_target(dir, ctx)),
            };
            if cmd.program == "pushd" {
                ctx.dirs.push(old.clone());
            }
            next
        };
        match next {
            Some(dir) => ctx.cwd = dir,
            None => ctx.cwd_known = false,
        }
        ctx.oldpwd = Some(old);
    }

    /// Text the shell will run as commands (`eval`, `trap`): parsed when it is known,
    /// dynamic code when it is not.
    pub(super) fn text_as_code(&self, cmd: &mut Command, text: &str) -> Nested {
        // `eval "$(pyenv init -)"`: only a known generator's set-up code.
        if text.contains(super::SETUP) && text.replace(super::SETUP, "").trim().is_empty() {
            return Nested::Script(String::new());
        }
        if is_unknown(text) {
            if cmd.fed_by.is_empty() {
                cmd.code_unknown = true;
            } else {
                cmd.dynamic_code = Some(format!(
                    "`{}` runs commands built at run time from other programs' output",
                    cmd.program
                ));
            }
            Nested::Script(text.replace(UNKNOWN, " "))
        } else {
            Nested::Script(text.to_owned())
        }
    }

    /// Where `cd DIR` goes: `CDPATH` (when the command set it) for a relative name.
    fn cd_target(&self, dir: &str, ctx: &Ctx) -> PathBuf {
        let relative = !dir.starts_with('/') && !dir.starts_with('.');
        if relative {
            if let Some(Some(cdpath)) = ctx.vars.get("CDPATH") {
                for base in cdpath.split(':').filter(|b| !b.is_empty()) {
                    let cand = self.resolver.resolve_word(dir, &ctx.cwd.join(base));
                    if !self.resolver.follow_symlinks || cand.abs.is_dir() {
                        return cand.abs;
                    }
                }
            }
        }
        self.resolver.resolve_word(dir, &ctx.cwd).abs
    }
}

/// `git [-C dir] [-c key=value]… SUBCOMMAND`: the commands its configuration runs
/// (`alias.x=!…`, `core.sshCommand`, …), and the files its reading subcommands show.
fn git(cmd: &mut Command) -> Vec<Nested> {
    if cmd.program != "git" {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut config: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    let args = cmd.args.clone();
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "-c" => {
                if let Some((k, v)) = args.get(i + 1).and_then(|kv| kv.split_once('=')) {
                    config.push((k.to_lowercase(), v.to_owned()));
                }
                i += 2;
            }
            "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path" => i += 2,
            _ if a.starts_with('-') => i += 1,
            _ => break,
        }
    }
    let sub = args.get(i).cloned().unwrap_or_default();
    let rest: Vec<String> = args.get(i + 1..).unwrap_or_default().to_vec();
    if sub == "config" {
        let ops: Vec<&String> = rest.iter().filter(|a| !a.starts_with('-')).collect();
        if let [k, v, ..] = ops.as_slice() {
            config.push((k.to_lowercase(), (*v).clone()));
        }
    }
    for (k, v) in config {
        if k.starts_with("alias.") {
            if let Some(script) = v.strip_prefix('!') {
                out.push(Nested::Script(script.to_owned()));
            }
        } else if GIT_COMMAND_KEYS.contains(&k.as_str()) || git_command_pattern(&k) {
            out.push(Nested::Script(v.trim_start_matches('!').to_owned()));
        }
    }
    if matches!(
        sub.as_str(),
        "show" | "diff" | "blame" | "cat-file" | "grep" | "archive"
    ) {
        let skip_first = sub == "grep";
        let mut ops = rest.iter().filter(|a| !a.starts_with('-'));
        if skip_first {
            ops.next();
        }
        for o in ops {
            // `git show REV:path` names a path inside the repository's history.
            let path = o.split_once(':').map_or(o.as_str(), |(_, p)| p);
            if !path.is_empty() {
                cmd.code_paths.reads.push(path.to_owned());
            }
        }
    }
    out
}

/// Builtins that assign or unset shell variables: each name is an edit of the environment
/// (for rules), and its value, when known, is remembered for what follows.
fn assignments(cmd: &mut Command, ctx: &mut Ctx) {
    match cmd.program.as_str() {
        "export" | "declare" | "typeset" | "local" | "readonly" => {
            // `declare -n REF=NAME`: assigning REF later assigns NAME.
            let nameref = cmd.program != "export"
                && cmd
                    .args
                    .iter()
                    .any(|a| a.starts_with('-') && a.contains('n'));
            if nameref {
                let targets: Vec<String> = cmd
                    .args
                    .iter()
                    .filter_map(|a| a.split_once('=').map(|(_, t)| t.to_owned()))
                    .collect();
                cmd.env.extend(targets);
            }
            for a in cmd.args.iter().filter(|a| !a.starts_with(['-', '+'])) {
                let (name, value) = match a.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_owned()).filter(|v| !is_unknown(v))),
                    None => (a.as_str(), ctx.vars.get(a.as_str()).cloned().flatten()),
                };
                cmd.env.push(name.to_owned());
                ctx.vars.insert(name.to_owned(), value);
            }
        }
        "unset" => {
            let names: Vec<String> = cmd
                .args
                .iter()
                .filter(|a| !a.starts_with(['-', '+']))
                .map(|a| a.split_once('=').map_or(a.as_str(), |(n, _)| n).to_owned())
                .collect();
            for n in names {
                ctx.vars.insert(n.clone(), Some(String::new()));
                cmd.env.push(n);
            }
        }
        "printf" => {
            if let Some(pos) = cmd.args.iter().position(|a| a == "-v") {
                if let Some(n) = cmd.args.get(pos + 1) {
                    ctx.vars.insert(n.clone(), None);
                    cmd.env.push(n.clone());
                }
            }
        }
        _ => {
            // read, mapfile, readarray, getopts: the names after their options.
            let mut skip = false;
            let mut ops = Vec::new();
            for a in &cmd.args {
                if skip {
                    skip = false;
                } else if matches!(
                    a.as_str(),
                    "-p" | "-d" | "-n" | "-N" | "-t" | "-u" | "-i" | "-C" | "-c" | "-O" | "-s"
                ) {
                    skip = cmd.program != "mapfile" || a != "-t";
                } else if !a.starts_with('-') {
                    ops.push(a.clone());
                }
            }
            if cmd.program == "getopts" && !ops.is_empty() {
                ops.remove(0);
            }
            if ops.is_empty() {
                let default = if cmd.program == "read" {
                    "REPLY"
                } else {
                    "MAPFILE"
                };
                ops.push(default.to_owned());
            }
            for n in ops {
                ctx.vars.insert(n.clone(), None);
                cmd.env.push(n);
            }
        }
    }
}

/// The variables `env NAME=value … cmd` sets for the command it runs.
fn env_assigns(cmd: &Command) -> Vec<(String, Option<String>)> {
    if cmd.program != "env" {
        return Vec::new();
    }
    cmd.args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map_while(|a| a.split_once('='))
        .filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(|(n, v)| (n.to_owned(), Some(v.to_owned()).filter(|v| !is_unknown(v))))
        .collect()
}

/// What `xargs` hands its command when the previous stage of its pipeline is a lister with
/// known roots (and xargs reads no file of its own).
fn xargs_items(program: &str, args: &[String], ctx: &Ctx) -> Option<Vec<String>> {
    if program != "xargs"
        || args
            .iter()
            .any(|a| a == "-a" || a.starts_with("--arg-file") || a.starts_with("-a"))
    {
        return None;
    }
    ctx.listed.clone().filter(|items| !items.is_empty())
}
