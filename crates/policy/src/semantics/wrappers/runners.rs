//! Package, project and environment runners: `npx`'s options, `npm exec`, `pnpm dlx`, `uv tool
//! run`, `pipx run`, `poetry run`, `conda run`, `direnv exec`, `aws-vault exec`, `nix develop
//! -c`, and `ahp-wrap -- AGENT`: the program each runs.
//!
//! Owns: the runners' table and parsers. Must not touch: project scripts (`npm run`, read by
//! the shell's runners), or what is installed (`installs`).

use super::args::command_start;
use super::Unwrapped;

/// Long options of package runners that take a value.
pub(super) const PACKAGE_OPTIONS: &[&str] = &["--package", "-p", "--from", "--with"];

/// `npm exec CMD`, `pnpm dlx CMD`, `uv tool run CMD`, `pipx run CMD`: the package's program
/// (`npm run`, `uv run` and the like run project scripts, not a named program).
pub(super) fn unwrap_package_manager(program: &str, args: &[String]) -> Option<Unwrapped> {
    let runs = match args.first().map(String::as_str) {
        Some("exec" | "dlx" | "x" | "tool") => true,
        // `uv run CMD` runs a program; `npm run`/`pnpm run` a project script (read as one).
        Some("run") => matches!(program, "pipx" | "uv"),
        _ => false,
    };
    if !runs {
        return None;
    }
    let rest = &args[1..];
    let rest = if program == "uv" && rest.first().is_some_and(|a| a == "run") {
        &rest[1..]
    } else {
        rest
    };
    let start = command_start(rest, "p", PACKAGE_OPTIONS, 0)?;
    Some(Unwrapped {
        argv: rest[start..].to_vec(),
        ..Unwrapped::default()
    })
}

/// Project and environment runners: the program, the subcommand that runs a command
/// (empty: the command follows the options), and the options taking a value. With `--`,
/// the command is what follows it.
pub(super) const RUNNERS: &[(&str, &str, &[&str])] = &[
    ("poetry", "run", &["-C", "--directory", "-P", "--project"]),
    ("pipenv", "run", &[]),
    ("pdm", "run", &["-p", "--project"]),
    ("rye", "run", &[]),
    ("hatch", "run", &["-e", "--env"]),
    ("conda", "run", &["-n", "--name", "-p", "--prefix", "--cwd"]),
    ("mamba", "run", &["-n", "--name", "-p", "--prefix", "--cwd"]),
    (
        "micromamba",
        "run",
        &["-n", "--name", "-p", "--prefix", "--cwd"],
    ),
    ("bundle", "exec", &[]),
    ("devbox", "run", &["-c", "--config"]),
    ("mise", "exec", &["-C", "--cd", "-j", "--jobs"]),
    ("rtx", "exec", &["-C", "--cd"]),
    ("asdf", "exec", &[]),
    ("rbenv", "exec", &[]),
    ("pyenv", "exec", &[]),
    ("nodenv", "exec", &[]),
    ("direnv", "exec", &[]),
    ("dotenv", "", &["-e", "-f", "-v", "-c"]),
    ("dotenvx", "run", &["-f", "--env-file", "-e", "--env"]),
    ("op", "run", &["--env-file"]),
    ("doppler", "run", &["-p", "--project", "-c", "--config"]),
    ("infisical", "run", &["--env", "--path", "--projectId"]),
    (
        "aws-vault",
        "exec",
        &["-d", "--duration", "-t", "--mfa-token"],
    ),
    (
        "xvfb-run",
        "",
        &[
            "-n",
            "--server-num",
            "-s",
            "--server-args",
            "-f",
            "--auth-file",
        ],
    ),
    ("dbus-run-session", "", &["--config-file", "--dbus-daemon"]),
    ("chronic", "", &[]),
    ("ssh-agent", "", &["-a", "-E", "-P", "-t"]),
    ("nix", "develop", &["-c", "--command"]),
];

/// `poetry run CMD`, `conda run -n env CMD`, `direnv exec DIR CMD`, `aws-vault exec P -- CMD`,
/// `nix develop -c CMD`: the command such a runner runs.
pub(super) fn unwrap_runner(program: &str, args: &[String]) -> Option<Unwrapped> {
    let (_, sub, with_value) = RUNNERS.iter().find(|(p, _, _)| *p == program)?;
    let rest: &[String] = if sub.is_empty() {
        args
    } else {
        let at = args.iter().position(|a| a == sub)?;
        // Only the runner's own options may come before the subcommand.
        if !args[..at].iter().all(|a| a.starts_with('-')) {
            return None;
        }
        &args[at + 1..]
    };
    if let Some(dash) = rest.iter().position(|a| a == "--") {
        let argv = rest[dash + 1..].to_vec();
        return (!argv.is_empty()).then(|| Unwrapped {
            argv,
            ..Unwrapped::default()
        });
    }
    if program == "nix" {
        // `nix develop -c CMD…`: the command follows `-c`.
        let at = rest.iter().position(|a| a == "-c" || a == "--command")?;
        return Some(Unwrapped {
            argv: rest.get(at + 1..)?.to_vec(),
            ..Unwrapped::default()
        });
    }
    let positionals = match program {
        // `direnv exec DIR CMD`, `aws-vault exec PROFILE CMD`.
        "direnv" | "aws-vault" => 1,
        _ => 0,
    };
    let short: String = with_value
        .iter()
        .filter_map(|o| o.strip_prefix('-').filter(|c| c.len() == 1))
        .collect();
    let start = command_start(rest, &short, with_value, positionals)?;
    Some(Unwrapped {
        argv: rest[start..].to_vec(),
        ..Unwrapped::default()
    })
}

/// `ahp-wrap [OPTIONS] -- AGENT…`: the agent, run under the wrapper.
pub(super) fn unwrap_self(args: &[String]) -> Option<Unwrapped> {
    let pos = args.iter().position(|a| a == "--")?;
    let argv = args[pos + 1..].to_vec();
    (!argv.is_empty()).then(|| Unwrapped {
        argv,
        ..Unwrapped::default()
    })
}
