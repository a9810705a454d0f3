//! Entry point: parse, run, and turn the outcome into an exit code, in one place.

use std::process::ExitCode;

use ahp_wrap::cli::{Cli, Command};
use ahp_wrap::commands;
use ahp_wrap::config::Config;
use ahp_wrap::exit::Exit;
use ahp_wrap::fleet;
use ahp_wrap::intercept::hooks::relay;
use ahp_wrap::intercept::pathshim;
use ahp_wrap::run;
use ahp_wrap::termlog;
use clap::Parser;

fn main() -> ExitCode {
    // Started as a command in a run's PATH shim directory (when there is no small hook
    // executable next to us): ask the wrapper, then run it or not.
    if let Some(name) = pathshim::exec::invoked_as(true) {
        return hook_exit(pathshim::exec::run(
            &name,
            std::env::args_os().skip(1).collect(),
        ));
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
    // A usage error exits 125, as every failure of the wrapper itself does: an agent's own
    // exit code 2 must not be mistaken for a mistyped option.
    let cli = match Cli::try_parse() {
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
    let exit = match cli.command {
        Some(Command::Hook { framework, hook }) => {
            return hook_exit(relay::run_hook(&framework, &hook))
        }
        Some(Command::Audit { command }) => commands::audit(command),
        Some(Command::Completions { shell }) => commands::completions(shell),
        Some(Command::Man) => commands::man(),
        Some(Command::Doctor { json }) => commands::doctor(json),
        Some(Command::Policy { command }) => commands::policy(command),
        Some(Command::Worker(args)) => match termlog::init(&args.amqp.log, None, false) {
            Ok(_) => fleet::command::worker(*args),
            Err(e) => fail(&e, Exit::Error),
        },
        Some(Command::Task { command }) => fleet::command::task(command),
        Some(Command::Serve(args)) => match termlog::init(&args.log, None, false) {
            Ok(_) => commands::serve(args),
            Err(e) => fail(&e, Exit::Error),
        },
        Some(Command::Mcp(args)) => {
            // Our stdout is the client's JSON-RPC stream: the log never goes there.
            match termlog::init(&args.run.log, args.run.log_file.as_deref(), false) {
                Err(e) => fail(&e, Exit::Wrapper),
                Ok(_) => match Config::for_mcp(*args) {
                    Ok(cfg) => run::run(cfg),
                    Err(e) => fail(&e, Exit::Wrapper),
                },
            }
        }
        None => match termlog::init(&cli.run.log, cli.run.log_file.as_deref(), true) {
            Err(e) => fail(&e, Exit::Wrapper),
            Ok(_) => match Config::from_args(cli.run) {
                Ok(cfg) => run::run(cfg),
                Err(e) => fail(&e, Exit::Wrapper),
            },
        },
    };
    exit.into()
}

/// Says why on stderr, and exits with `exit`.
fn fail(e: &dyn std::error::Error, exit: Exit) -> Exit {
    eprintln!("ahp-wrap: {}", ahp_wrap::error_chain(e));
    exit
}

/// A hook process exits with what its framework's contract renders.
fn hook_exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
