//! Entry point: parse, run, map to an exit code.

use std::process::ExitCode;

use ahp_wrap::cli::{Cli, Command};
use ahp_wrap::commands;
use ahp_wrap::config::Config;
use ahp_wrap::control::relay;
use ahp_wrap::run::{self, EXIT_WRAPPER};
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
            if let Err(e) = init_logging(&args.log, None) {
                eprintln!("ahp-wrap: {e}");
                return ExitCode::from(commands::EXIT_ERROR);
            }
            ExitCode::from(commands::serve(args))
        }
        None => {
            if let Err(e) = init_logging(&cli.run.log, cli.run.log_file.as_deref()) {
                eprintln!("ahp-wrap: {e}");
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

fn init_logging(filter: &str, file: Option<&std::path::Path>) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| format!("invalid --log filter {filter:?}: {e}"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    match file {
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open the log file {}: {e}", path.display()))?;
            builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(f))
                .init();
        }
        None => builder.with_writer(std::io::stderr).init(),
    }
    Ok(())
}
