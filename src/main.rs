//! Entry point: parse, run, and turn the outcome into an exit code, in one place.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use ahp_wrap::cli::{Cli, Command};
use ahp_wrap::commands;
use ahp_wrap::config::Config;
use ahp_wrap::exit::{self, CommandResult, Exit, Failure};
use ahp_wrap::fleet;
use ahp_wrap::intercept::hooks::relay;
use ahp_wrap::intercept::pathshim;
use ahp_wrap::run;
use ahp_wrap::termlog;

fn main() -> ExitCode {
    // Started as a command in a run's PATH shim directory (when there is no small hook
    // executable next to us): ask the wrapper, then run it or not.
    if let Some(name) = pathshim::exec::invoked_as(true) {
        return hook_exit(pathshim::exec::run(
            &name,
            std::env::args_os().skip(1).collect(),
        ));
    }
    // A run's porter (see `floor::porter`), when there is no small executable next to us.
    #[cfg(target_os = "linux")]
    if std::env::args_os().len() == 2
        && std::env::args_os()
            .nth(1)
            .is_some_and(|a| a == ahp_wrap::floor::porter::PORTER_ARG)
    {
        return ExitCode::from(u8::try_from(ahp_wrap::floor::porter::serve()).unwrap_or(1));
    }
    // The hook path runs on every tool call: skip clap and logging set-up for it.
    let mut raw = std::env::args_os();
    if raw.len() == 4 && raw.nth(1).is_some_and(|a| a == "hook") {
        if let (Some(fw), Some(hook)) = (raw.next(), raw.next()) {
            if let (Some(fw), Some(hook)) = (fw.to_str(), hook.to_str()) {
                return hook_exit(relay::run_hook(fw, hook));
            }
        }
    }
    // Any other hook command line is malformed: refused, never a usage error (off the hot
    // path: a well-formed call returned above).
    if let Some(refused) = malformed_hook() {
        return refused;
    }
    // A usage error exits 125, as every failure of the wrapper itself does: an agent's own
    // exit code 2 must not be mistaken for a mistyped option.
    let cli = match Cli::try_parse_quick() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.exit_code() == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(Exit::Wrapper.code())
            };
        }
    };
    exit::report(command(cli)).into()
}

/// A hook call whose command line is malformed (`ahp-wrap hook` with other than a framework
/// and a hook name in UTF-8): refused in the form every agent's hook contract reads as "deny"
/// (exit 2, the reason on stderr), never a usage error an agent would take for "go ahead".
/// `None` when the command line is not a hook call; `-h` and `--help` print the usage.
fn malformed_hook() -> Option<ExitCode> {
    if std::env::args_os().nth(1).is_none_or(|a| a != "hook") {
        return None;
    }
    let rest: Vec<std::ffi::OsString> = std::env::args_os().skip(2).collect();
    let why = match rest.as_slice() {
        [help] if help == "-h" || help == "--help" => {
            println!("usage: ahp-wrap hook <FRAMEWORK> <HOOK>   (what an agent's hook system calls; not for people)");
            return Some(ExitCode::SUCCESS);
        }
        [_, _] => "its framework and hook names are not UTF-8".to_owned(),
        _ => format!(
            "it needs exactly a framework and a hook name, and got {} argument(s)",
            rest.len()
        ),
    };
    eprintln!("ahp-wrap hook: refused: the hook command line is malformed: {why} (usage: ahp-wrap hook <FRAMEWORK> <HOOK>)");
    Some(ExitCode::from(2))
}

/// Every command but a hook call: its exit code, or the failure `main` prints once.
fn command(cli: Cli) -> CommandResult {
    // The wrapper's own failures before the agent starts exit 125, as `env` says them.
    let wrapper = |e: &dyn std::error::Error| Failure::new(Exit::Wrapper, ahp_wrap::error_chain(e));
    match cli.command {
        Some(Command::Hook { framework, hook }) => {
            let code = relay::run_hook(&framework, &hook);
            Ok(Exit::Status(u8::try_from(code).unwrap_or(1)))
        }
        Some(Command::Audit { command }) => commands::audit(command),
        Some(Command::Completions { shell }) => Ok(commands::completions(shell)),
        Some(Command::Man) => commands::man(),
        Some(Command::Doctor { json }) => Ok(commands::doctor(json)),
        Some(Command::Restore { file, dry_run }) => commands::restore(&file, dry_run),
        Some(Command::Undo(args)) => commands::undo(&args),
        Some(Command::Changes(args)) => commands::changes(&args),
        Some(Command::Setup {
            framework,
            remove,
            from,
            output,
        }) => match framework.as_deref() {
            Some(commands::CONTAINER_PROFILE) if remove => Err(Failure::new(
                Exit::Error,
                "container-profile installs nothing to remove: it writes the profile to --output \
                 (or standard output)",
            )),
            Some(commands::CONTAINER_PROFILE) => {
                commands::container_profile(from.as_deref(), output.as_deref())
            }
            _ if from.is_some() || output.is_some() => Err(Failure::new(
                Exit::Error,
                "--from and --output are container-profile's",
            )),
            name => commands::setup(name, remove),
        },
        Some(Command::Shim { command }) => Ok(commands::shim(command)),
        Some(Command::Policy { command }) => commands::policy(command),
        Some(Command::Worker(args)) => {
            termlog::init(&args.amqp.log, None, false)?;
            fleet::command::worker(*args)
        }
        Some(Command::Task { command }) => fleet::command::task(command),
        Some(Command::Serve(args)) => {
            termlog::init(&args.log, None, false)?;
            commands::serve(args)
        }
        Some(Command::Mcp(args)) => {
            // Our stdout is the client's JSON-RPC stream: the log never goes there.
            termlog::init(&args.run.log, args.run.log_file.as_deref(), false)
                .map_err(|e| wrapper(&e))?;
            let cfg = Config::for_mcp(*args).map_err(|e| wrapper(&e))?;
            let helpers =
                run::Helpers::start(cfg.floor, cfg.policy.as_deref(), Some(&cfg.workspace));
            run::run(cfg, helpers)
        }
        None => {
            // The guardian first: it makes the agent's namespaces while we read the rest.
            let helpers = run::Helpers::start(
                cli.run.floor.into(),
                cli.run.supervision.policy.as_deref(),
                cli.run.workspace.as_deref(),
            );
            termlog::init(&cli.run.log, cli.run.log_file.as_deref(), true)
                .map_err(|e| wrapper(&e))?;
            let cfg = Config::from_args(cli.run).map_err(|e| wrapper(&e))?;
            run::run(cfg, helpers)
        }
    }
}

/// A hook process exits with what its framework's contract renders.
fn hook_exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
