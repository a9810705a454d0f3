//! Entry point: parse, run, map to an exit code.

use std::process::ExitCode;

use ahp_wrap::cli::{Cli, Command};
use ahp_wrap::commands;
use ahp_wrap::config::Config;
use ahp_wrap::control::relay;
use ahp_wrap::run::{self, EXIT_WRAPPER};
use ahp_wrap::termlog;
use clap::Parser;

fn main() -> ExitCode {
    // The hook path runs on every tool call: skip clap and logging set-up for it.
    let mut raw = std::env::args_os();
    if raw.len() == 4 && raw.nth(1).is_some_and(|a| a == "hook") {
        if let (Some(fw), Some(hook)) = (raw.next(), raw.next()) {
            if let (Some(fw), Some(hook)) = (fw.to_str(), hook.to_str()) {
                return hook_exit(relay::run_hook(fw, hook));
            }
        }
    }
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Hook { framework, hook }) => hook_exit(relay::run_hook(&framework, &hook)),
        Some(Command::Audit { command }) => ExitCode::from(commands::audit(command)),
        Some(Command::Policy { command }) => ExitCode::from(commands::policy(command)),
        Some(Command::Serve(args)) => {
            if let Err(e) = termlog::init(&args.log, None, false) {
                eprintln!("ahp-wrap: {}", ahp_wrap::error_chain(&e));
                return ExitCode::from(commands::EXIT_ERROR);
            }
            ExitCode::from(commands::serve(args))
        }
        None => {
            if let Err(e) = termlog::init(&cli.run.log, cli.run.log_file.as_deref(), true) {
                eprintln!("ahp-wrap: {}", ahp_wrap::error_chain(&e));
                return ExitCode::from(EXIT_WRAPPER);
            }
            match Config::from_args(cli.run) {
                Ok(cfg) => ExitCode::from(run::run(cfg)),
                Err(e) => {
                    eprintln!("ahp-wrap: {}", ahp_wrap::error_chain(&e));
                    ExitCode::from(EXIT_WRAPPER)
                }
            }
        }
    }
}

fn hook_exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
