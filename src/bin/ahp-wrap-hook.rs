//! `ahp-wrap-hook hook <framework> <hook>`: the hook entry point alone, in a small
//! executable, so that the per-tool-call process starts fast (few relocations to apply)
//! while staying a position-independent executable. Same arguments and behaviour as
//! `ahp-wrap hook <framework> <hook>`.

use std::process::ExitCode;

fn main() -> ExitCode {
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
