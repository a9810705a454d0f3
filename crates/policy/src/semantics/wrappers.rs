//! Wrappers (`sudo`, `env`, `xargs`, `timeout`, …): what they run, past their own options.

use super::super::shell::{Command, UNKNOWN};

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
        p if RUNNERS.iter().any(|(name, _, _)| *name == p) => unwrap_runner(p, args),
        _ => after_options(cmd),
    }
}

/// Short options taking a value, long options taking a value, and how many plain arguments
/// come before the command.
type Options = (&'static str, &'static [&'static str], usize);

/// A wrapper that runs the command after its own options (`nice -n 5 CMD`).
fn after_options(cmd: &Command) -> Option<Unwrapped> {
    let (short, long, positionals) = wrapper_options(&cmd.program, &cmd.args)?;
    let start = command_start(&cmd.args, short, long, positionals)?;
    Some(Unwrapped {
        argv: cmd.args[start..].to_vec(),
        ..Unwrapped::default()
    })
}

/// The options of each wrapper that runs the command after them; `None` for a program that
/// runs no command (or not with these arguments).
fn wrapper_options(program: &str, args: &[String]) -> Option<Options> {
    let has = |flags: &[&str]| args.iter().any(|a| flags.contains(&a.as_str()));
    Some(match program {
        "sudo" => (
            "ughpCDrtUT",
            &[
                "--user",
                "--group",
                "--host",
                "--prompt",
                "--chdir",
                "--close-from",
            ],
            0,
        ),
        "doas" => ("uC", &[], 0),
        "nohup" | "builtin" | "busybox" | "unbuffer" | "catchsegv" | "proxychains"
        | "proxychains4" | "torsocks" | "firejail" | "fakeroot" | "faketime" => ("", &[], 0),
        "setsid" => ("", &[], 0),
        "timeout" => ("sk", &["--signal", "--kill-after"], 1),
        "nice" => ("n", &["--adjustment"], 0),
        "ionice" => ("cnpPu", &["--class", "--classdata"], 0),
        "chrt" => ("", &[], 1),
        "taskset" if has(&["-p", "--pid"]) => return None,
        "taskset" if has(&["-c", "--cpu-list"]) => ("c", &["--cpu-list"], 0),
        "taskset" => ("", &[], 1),
        "strace" | "ltrace" => (
            "oesSpuIEPXabO",
            &["--output", "--trace", "--signal", "--user"],
            0,
        ),
        "chroot" => ("", &["--userspec", "--groups"], 1),
        "unshare" | "nsenter" => ("tSGw", &["--target", "--setuid", "--setgid", "--wd"], 0),
        "command" if has(&["-v", "-V"]) => return None,
        "command" => ("", &[], 0),
        "exec" => ("a", &[], 0),
        "time" => ("fo", &["--format", "--output"], 0),
        "stdbuf" => ("ioe", &["--input", "--output", "--error"], 0),
        // Detached runners: what they run is analysed like any command (a rule also
        // escalates detaching itself).
        "systemd-run" => (
            "pMEuGpHr",
            &[
                "--unit",
                "--property",
                "--description",
                "--slice",
                "--uid",
                "--gid",
                "--working-directory",
                "--setenv",
                "--on-calendar",
                "--on-active",
                "--machine",
                "--host",
                "-p",
                "-E",
            ],
            0,
        ),
        "screen" => ("SsTcepLlhX", &[], 0),
        "daemonize" => ("aceEiloprptuv", &[], 0),
        // Package runners run the named program.
        "npx" | "bunx" | "uvx" | "pnpx" => ("p", PACKAGE_OPTIONS, 0),
        _ => return None,
    })
}

/// Long options of package runners that take a value.
const PACKAGE_OPTIONS: &[&str] = &["--package", "-p", "--from", "--with"];

/// `parallel CMD ::: A B`: the command with its inputs (unknown when read from a file).
fn unwrap_parallel(args: &[String]) -> Unwrapped {
    let mut argv: Vec<String> = args
        .iter()
        .take_while(|a| *a != ":::" && *a != "::::")
        .skip_while(|a| a.starts_with('-'))
        .cloned()
        .collect();
    // `::: A B` gives the inputs; `::::` reads them from a file nobody knows now.
    match args.iter().position(|a| a == ":::") {
        Some(i) => argv.extend(
            args[i + 1..]
                .iter()
                .filter(|a| !a.starts_with(":::"))
                .cloned(),
        ),
        None => argv.push(UNKNOWN.to_string()),
    }
    Unwrapped {
        argv,
        ..Unwrapped::default()
    }
}

/// Whether `exec`'s options include `-c` (run with an empty environment).
fn exec_clears_env(args: &[String]) -> bool {
    args.iter()
        .take_while(|a| a.starts_with('-'))
        .any(|a| a.contains('c'))
}

/// `exec -c CMD`: CMD, with an empty environment.
fn unwrap_exec_clean(args: &[String]) -> Option<Unwrapped> {
    let start = command_start(args, "a", &[], 0)?;
    Some(Unwrapped {
        argv: args[start..].to_vec(),
        env: vec!["(all)".to_owned()],
        ..Unwrapped::default()
    })
}

/// `npm exec CMD`, `pnpm dlx CMD`, `uv tool run CMD`, `pipx run CMD`: the package's program
/// (`npm run`, `uv run` and the like run project scripts, not a named program).
fn unwrap_package_manager(program: &str, args: &[String]) -> Option<Unwrapped> {
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
const RUNNERS: &[(&str, &str, &[&str])] = &[
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
fn unwrap_runner(program: &str, args: &[String]) -> Option<Unwrapped> {
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

/// `nix-shell --run CMD` / `--command CMD`: CMD, through a shell.
fn unwrap_nix_shell(args: &[String]) -> Option<Unwrapped> {
    let at = args.iter().position(|a| a == "--run" || a == "--command")?;
    Some(Unwrapped {
        script: Some(args.get(at + 1)?.clone()),
        ..Unwrapped::default()
    })
}

/// `sudo -s CMD` / `sudo -i CMD` run CMD through a shell.
fn sudo_shell(args: &[String]) -> Option<Unwrapped> {
    let options = args.iter().take_while(|a| a.starts_with('-'));
    let pos = options
        .enumerate()
        .find(|(_, a)| !a.starts_with("--") && (a.contains('s') || a.contains('i')))?
        .0;
    let rest = &args[pos + 1..];
    (!rest.is_empty()).then(|| Unwrapped {
        script: Some(rest.join(" ")),
        ..Unwrapped::default()
    })
}

/// `ahp-wrap [OPTIONS] -- AGENT…`: the agent, run under the wrapper.
fn unwrap_self(args: &[String]) -> Option<Unwrapped> {
    let pos = args.iter().position(|a| a == "--")?;
    let argv = args[pos + 1..].to_vec();
    (!argv.is_empty()).then(|| Unwrapped {
        argv,
        ..Unwrapped::default()
    })
}

/// `tmux new-session -d "CMD"`, `tmux send-keys -t x "CMD" Enter`: a shell command line.
fn unwrap_tmux(args: &[String]) -> Option<Unwrapped> {
    let sub = args.iter().position(|a| !a.starts_with('-'))?;
    let runs = matches!(
        args[sub].as_str(),
        "new"
            | "new-session"
            | "new-window"
            | "neww"
            | "split-window"
            | "splitw"
            | "respawn-pane"
            | "respawn-window"
            | "send-keys"
            | "send"
            | "run-shell"
            | "run"
            | "display-popup"
    );
    if !runs {
        return None;
    }
    let rest = &args[sub + 1..];
    let mut words = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        if a.starts_with('-') && a.len() == 2 && "tscnFeExySlpBTwh".contains(&a[1..]) {
            i += 2;
            continue;
        }
        if !a.starts_with('-') && !matches!(a.as_str(), "Enter" | "C-m" | "KPEnter") {
            words.push(a.clone());
        }
        i += 1;
    }
    (!words.is_empty()).then(|| Unwrapped {
        script: Some(words.join(" ")),
        ..Unwrapped::default()
    })
}

fn unwrap_xargs(args: &[String]) -> Option<Unwrapped> {
    let start = command_start(
        args,
        "adEeILlnPs",
        &[
            "--arg-file",
            "--delimiter",
            "--eof",
            "--max-lines",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
            "--replace",
        ],
        0,
    )
    .unwrap_or(args.len());
    let replace = args[..start]
        .iter()
        .enumerate()
        .find_map(|(i, a)| match a.as_str() {
            "-I" => args.get(i + 1).cloned(),
            "-i" | "--replace" => Some("{}".to_owned()),
            _ => a
                .strip_prefix("-I")
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        });
    // With no command xargs runs `echo`. Its input becomes arguments nobody knows now.
    let mut argv: Vec<String> = if start < args.len() {
        args[start..].to_vec()
    } else {
        vec!["echo".to_owned()]
    };
    match replace {
        Some(r) => {
            for a in argv.iter_mut().skip(1) {
                *a = a.replace(&r, &UNKNOWN.to_string());
            }
        }
        None => argv.push(UNKNOWN.to_string()),
    }
    Some(Unwrapped {
        argv,
        ..Unwrapped::default()
    })
}

fn unwrap_flock(args: &[String]) -> Option<Unwrapped> {
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        if matches!(
            args[i].as_str(),
            "-w" | "--timeout" | "-E" | "--conflict-exit-code"
        ) {
            i += 1;
        }
        if matches!(args[i].as_str(), "-c" | "--command") {
            return args.get(i + 1).map(|s| Unwrapped {
                script: Some(s.clone()),
                ..Unwrapped::default()
            });
        }
        i += 1;
    }
    // The lock file, then a command or `-c CMD`.
    let rest = args.get(i + 1..)?;
    if let Some(pos) = rest.iter().position(|a| a == "-c" || a == "--command") {
        return rest.get(pos + 1).map(|s| Unwrapped {
            script: Some(s.clone()),
            ..Unwrapped::default()
        });
    }
    (!rest.is_empty()).then(|| Unwrapped {
        argv: rest.to_vec(),
        ..Unwrapped::default()
    })
}

fn unwrap_script(args: &[String]) -> Option<Unwrapped> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-c" || a == "--command" {
            return it.next().map(|s| Unwrapped {
                script: Some(s.clone()),
                ..Unwrapped::default()
            });
        }
        if let Some(s) = a.strip_prefix("--command=") {
            return Some(Unwrapped {
                script: Some(s.to_owned()),
                ..Unwrapped::default()
            });
        }
    }
    None
}

fn unwrap_watch(args: &[String]) -> Option<Unwrapped> {
    let start = command_start(args, "ndqc", &["--interval", "--differences"], 0)?;
    Some(Unwrapped {
        script: Some(args[start..].join(" ")),
        ..Unwrapped::default()
    })
}

fn unwrap_su(args: &[String]) -> Option<Unwrapped> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-c" || a == "--command" || a == "--session-command" {
            return it.next().map(|s| Unwrapped {
                script: Some(s.clone()),
                ..Unwrapped::default()
            });
        }
    }
    None
}

/// Index of the first argument after the options (and `positionals` plain arguments).
fn command_start(
    args: &[String],
    short: &str,
    long: &[&str],
    mut positionals: usize,
) -> Option<usize> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            i += 1;
            break;
        }
        if let Some(name) = a.strip_prefix("--") {
            if !name.contains('=') && long.contains(&a) {
                i += 1;
            }
        } else if let Some(cluster) = a.strip_prefix('-').filter(|c| !c.is_empty()) {
            // `-uroot` carries its value; `-u root` takes the next word.
            if let Some(pos) = cluster.find(|c| short.contains(c)) {
                if pos + 1 == cluster.len() {
                    i += 1;
                }
            }
        } else if positionals > 0 {
            positionals -= 1;
        } else {
            return Some(i);
        }
        i += 1;
    }
    (i < args.len()).then_some(i)
}

fn unwrap_env(args: &[String]) -> Option<Unwrapped> {
    let mut out = Unwrapped::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let next = args.get(i + 1).cloned();
        match a {
            "--" => {
                i += 1;
                break;
            }
            "-" | "-i" | "--ignore-environment" => out.env.push("(all)".to_owned()),
            "-u" | "--unset" => {
                out.env.extend(next);
                i += 1;
            }
            "-C" | "--chdir" => {
                out.chdir = next;
                i += 1;
            }
            "-S" | "--split-string" => {
                out.script = Some(args[i + 1..].join(" "));
                return Some(out);
            }
            _ if a.starts_with("--unset=") => out.env.push(a["--unset=".len()..].to_owned()),
            _ if a.starts_with("--chdir=") => out.chdir = Some(a["--chdir=".len()..].to_owned()),
            _ if a.starts_with("-u") && a.len() > 2 => out.env.push(a[2..].to_owned()),
            _ if a.starts_with("-C") && a.len() > 2 => out.chdir = Some(a[2..].to_owned()),
            _ if a.starts_with("-S") && a.len() > 2 => {
                let mut script = vec![a[2..].to_owned()];
                script.extend(args[i + 1..].iter().cloned());
                out.script = Some(script.join(" "));
                return Some(out);
            }
            _ if a.starts_with('-') && a.len() > 1 && !a.starts_with("--") => {
                if a[1..].contains('i') {
                    out.env.push("(all)".to_owned());
                }
            }
            _ if a.starts_with("--") => {}
            _ => match a.split_once('=') {
                Some((name, _)) if !name.is_empty() => out.env.push(name.to_owned()),
                _ => break,
            },
        }
        i += 1;
    }
    out.argv = args.get(i..).unwrap_or_default().to_vec();
    // `env` alone prints the environment; `env -u X` alone still changes nothing that runs.
    (!out.argv.is_empty() || !out.env.is_empty()).then_some(out)
}
