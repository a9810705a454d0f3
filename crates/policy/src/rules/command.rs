//! `[rule.command]`: the conditions on one simple command, compiled, and each checked by
//! name (so that `policy explain` can say which held).

use super::patterns::{PathCond, Patterns};
use super::{path_cond, patterns, ArgsAny, RawCommand};
use crate::error::PolicyError;
use crate::extract::{CommandFacts, Facts};
use crate::paths::ResolvedPath;

#[derive(Debug)]
pub(super) struct CommandCond {
    program: Option<Patterns>,
    program_not: Option<Patterns>,
    args_any: Vec<Patterns>,
    args_all: Option<Patterns>,
    operands: Option<PathCond>,
    reads: Option<PathCond>,
    writes: Option<PathCond>,
    env: Option<Patterns>,
    fed_by: Option<Patterns>,
    deletes: Option<PathCond>,
    unknown: Option<bool>,
    dynamic_code: Option<bool>,
    pub(super) unread_code: Option<bool>,
    pub(super) typosquat: Option<bool>,
    code_matches: Option<Patterns>,
    vars: Option<Patterns>,
    via_not: Option<Patterns>,
    wrapper_pid: Option<bool>,
}

impl CommandCond {
    /// Compiles a `[rule.command]` table.
    pub(super) fn compile(id: &str, c: &RawCommand) -> Result<CommandCond, PolicyError> {
        Ok(CommandCond {
            program: patterns(id, &c.program)?,
            program_not: patterns(id, &c.program_not)?,
            args_any: match &c.args_any {
                None => Vec::new(),
                Some(ArgsAny::One(l)) => vec![Patterns::compile(id, l, false)?],
                Some(ArgsAny::All(groups)) => groups
                    .iter()
                    .map(|l| Patterns::compile(id, l, false))
                    .collect::<Result<_, _>>()?,
            },
            args_all: patterns(id, &c.args_all)?,
            operands: path_cond(id, &c.operands)?,
            reads: path_cond(id, &c.reads)?,
            writes: path_cond(id, &c.writes)?,
            env: patterns(id, &c.env)?,
            fed_by: patterns(id, &c.fed_by)?,
            deletes: path_cond(id, &c.deletes)?,
            unknown: c.unknown,
            dynamic_code: c.dynamic_code,
            unread_code: c.unread_code,
            typosquat: c.typosquat,
            code_matches: patterns(id, &c.code_matches)?,
            vars: patterns(id, &c.vars)?,
            via_not: patterns(id, &c.via_not)?,
            wrapper_pid: c.wrapper_pid,
        })
    }

    pub(super) fn is_match(&self, c: &CommandFacts, f: &Facts) -> bool {
        self.check(c, f, |_, held| held)
    }

    /// Each key this table has, in order, told to `each` with whether it holds for `c`,
    /// until `each` returns false (then false); true when every key held. `is_match` stops
    /// at the first key that fails; `policy explain` hears them all.
    pub(super) fn check(
        &self,
        c: &CommandFacts,
        f: &Facts,
        mut each: impl FnMut(&'static str, bool) -> bool,
    ) -> bool {
        let cmd = &c.cmd;
        let mut all = true;
        macro_rules! key {
            ($name:literal, $given:expr, $holds:expr) => {
                if $given {
                    let held = $holds;
                    all &= held;
                    if !each($name, held) {
                        return false;
                    }
                }
            };
        }
        let some = |p: &Option<Patterns>, items: &[String]| {
            p.as_ref()
                .is_none_or(|p| items.iter().any(|i| p.is_match(i)))
        };
        let paths = |p: &Option<PathCond>, items: &[ResolvedPath]| {
            p.as_ref().is_none_or(|p| p.any(items, f))
        };
        key!(
            "command.program",
            self.program.is_some(),
            self.program
                .as_ref()
                .is_none_or(|p| p.is_match(&cmd.program))
        );
        key!(
            "command.program_not",
            self.program_not.is_some(),
            self.program_not
                .as_ref()
                .is_none_or(|p| !p.is_match(&cmd.program))
        );
        key!(
            "command.args_any",
            !self.args_any.is_empty(),
            self.args_any
                .iter()
                .all(|p| cmd.args.iter().any(|a| p.is_match(a)))
        );
        key!(
            "command.args_all",
            self.args_all.is_some(),
            self.args_all
                .as_ref()
                .is_none_or(|p| cmd.args.iter().all(|a| p.is_match(a)))
        );
        key!("command.env", self.env.is_some(), some(&self.env, &cmd.env));
        key!(
            "command.fed_by",
            self.fed_by.is_some(),
            some(&self.fed_by, &cmd.fed_by)
        );
        key!(
            "command.operands",
            self.operands.is_some(),
            paths(&self.operands, &c.operands)
        );
        key!(
            "command.reads",
            self.reads.is_some(),
            paths(&self.reads, &c.reads)
        );
        key!(
            "command.writes",
            self.writes.is_some(),
            paths(&self.writes, &c.writes)
        );
        key!(
            "command.deletes",
            self.deletes.is_some(),
            paths(&self.deletes, &c.deletes)
        );
        key!(
            "command.unknown",
            self.unknown.is_some(),
            self.unknown.is_none_or(|u| u == c.unknown.is_some())
        );
        key!(
            "command.dynamic_code",
            self.dynamic_code.is_some(),
            self.dynamic_code
                .is_none_or(|d| d == cmd.dynamic_code.is_some())
        );
        key!(
            "command.unread_code",
            self.unread_code.is_some(),
            self.unread_code.is_none_or(|u| u == cmd.unread.is_some())
        );
        key!(
            "command.typosquat",
            self.typosquat.is_some(),
            self.typosquat.is_none_or(|t| t == c.typosquat.is_some())
        );
        key!(
            "command.code_matches",
            self.code_matches.is_some(),
            self.code_matches
                .as_ref()
                .is_none_or(|p| cmd.code.as_deref().is_some_and(|t| p.is_match(t)))
        );
        key!(
            "command.vars",
            self.vars.is_some(),
            some(&self.vars, &cmd.vars)
        );
        key!(
            "command.via_not",
            self.via_not.is_some(),
            self.via_not
                .as_ref()
                .is_none_or(|p| !cmd.via.iter().any(|v| p.is_match(v)))
        );
        key!(
            "command.wrapper_pid",
            self.wrapper_pid.is_some(),
            self.wrapper_pid
                .is_none_or(|w| w == signals_wrapper(&cmd.args, &f.protected.pids))
        );
        all
    }
}

/// Whether an argument names one of `pids` (`4242`, `-4242` for its group) or every
/// process (`-1` as a target, not a signal: after another argument).
fn signals_wrapper(args: &[String], pids: &[u32]) -> bool {
    args.iter().enumerate().any(|(i, a)| {
        let n = a.trim_start_matches('-');
        let hit = n.parse::<u32>().is_ok_and(|p| pids.contains(&p));
        hit || (a == "-1" && i > 0) || a == "--" && args.get(i + 1).is_some_and(|x| x == "-1")
    })
}
