//! Entry point: parse, run, map to an exit code.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::SUCCESS
}
