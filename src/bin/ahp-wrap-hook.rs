//! `ahp-wrap-hook hook <framework> <hook>`: the hook entry point alone, in a small
//! executable, so that the per-tool-call process starts fast (few relocations to apply)
//! while staying a position-independent executable. Same arguments and behaviour as
//! `ahp-wrap hook <framework> <hook>`.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Started as a command in a run's PATH shim directory: ask the wrapper, then run it
    // or not (see `intercept::pathshim`).
    if let Some(name) = ahp_wrap::intercept::pathshim::exec::invoked_as(false) {
        let code =
            ahp_wrap::intercept::pathshim::exec::run(&name, std::env::args_os().skip(1).collect());
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.as_slice() {
        [cmd, framework, hook] if cmd == "hook" => {
            ahp_wrap::intercept::hooks::relay::run_hook(framework, hook)
        }
        _ => {
            eprintln!("usage: ahp-wrap-hook hook <FRAMEWORK> <HOOK>");
            2
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
