//! Wrappers (`sudo`, `env`, `xargs`, `timeout`, …): what they run, past their own options.
//!
//! Owns: what a wrapper runs ([`Unwrapped`]) and which parser reads each wrapper's arguments
//! (`unwrap`). The parsers live by family: `table` (the wrappers that run the command after
//! their own options, and those options), `args` (reading options, and quoting words, for
//! all of them), `shells` (wrappers that hand a shell a command line: `sudo -s`, `su -c`,
//! `script -c`, `watch`, `tmux`, `flock`, `sg`, `nix-shell`, `capsh`), `runners` (package and
//! project runners, `ahp-wrap` itself), `xargs` (`xargs` and `parallel`), `env` (`env`,
//! `exec -c`, the dynamic loader), `daemons` (`start-stop-daemon`, `systemd-run`) and
//! `outputs` (the files wrappers write, strace's pipe). Must not touch: what the wrapped
//! command itself does (the program table and the walker), or deciding.

mod args;
mod daemons;
mod env;
mod outputs;
mod runners;
mod shells;
mod table;
mod xargs;

use crate::command::Command;
use args::command_start;
use daemons::{unwrap_start_stop_daemon, unwrap_systemd_run};
use env::{exec_clears_env, is_dynamic_loader, unwrap_env, unwrap_exec_clean, unwrap_loader};
use outputs::unwrap_tracer;
pub(super) use outputs::wrapper_outputs;
use runners::{unwrap_package_manager, unwrap_runner, unwrap_self, RUNNERS};
use shells::{
    sudo_shell, unwrap_capsh, unwrap_flock, unwrap_nix_shell, unwrap_script, unwrap_sg, unwrap_su,
    unwrap_tmux, unwrap_watch,
};
use table::wrapper_options;
pub(super) use xargs::xargs_arg_files;
use xargs::{unwrap_parallel, unwrap_xargs};

/// What a wrapper runs.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Unwrapped {
    /// The wrapped command, program first (empty when it is a script instead).
    pub argv: Vec<String>,
    /// Variables the wrapper sets or unsets for it; `(all)` when it clears them all.
    pub env: Vec<String>,
    /// A directory the wrapper changes to first (`env -C`).
    pub chdir: Option<String>,
    /// A command line the wrapper has a shell run (`env -S`, `script -c`, `watch`, `su -c`).
    pub script: Option<String>,
}

/// If `cmd` runs another command (`sudo rm …`), that command; `None` otherwise.
pub(crate) fn unwrap(cmd: &Command) -> Option<Unwrapped> {
    let args = &cmd.args;
    match cmd.program.as_str() {
        "sudo" => sudo_shell(args).or_else(|| after_options(cmd)),
        "env" => unwrap_env(args),
        "xargs" => unwrap_xargs(args),
        "parallel" => Some(unwrap_parallel(args)),
        "flock" => unwrap_flock(args),
        "script" => unwrap_script(args),
        "watch" => unwrap_watch(args),
        "su" | "runuser" => unwrap_su(args),
        "exec" if exec_clears_env(args) => unwrap_exec_clean(args),
        "ahp-wrap" => unwrap_self(args),
        "tmux" => unwrap_tmux(args),
        "npm" | "pnpm" | "yarn" | "bun" | "pipx" | "uv" => {
            unwrap_package_manager(&cmd.program, args)
        }
        "nix-shell" => unwrap_nix_shell(args),
        "capsh" => unwrap_capsh(args),
        "sg" => unwrap_sg(args),
        "start-stop-daemon" => unwrap_start_stop_daemon(args),
        "strace" | "ltrace" => unwrap_tracer(cmd),
        "systemd-run" => unwrap_systemd_run(cmd),
        p if is_dynamic_loader(p) => unwrap_loader(args),
        p if RUNNERS.iter().any(|(name, _, _)| *name == p) => unwrap_runner(p, args),
        _ => after_options(cmd),
    }
}

/// A wrapper that runs the command after its own options (`nice -n 5 CMD`).
fn after_options(cmd: &Command) -> Option<Unwrapped> {
    let (short, long, positionals) = wrapper_options(&cmd.program, &cmd.args)?;
    let start = command_start(&cmd.args, short, long, positionals)?;
    Some(Unwrapped {
        argv: cmd.args[start..].to_vec(),
        ..Unwrapped::default()
    })
}
