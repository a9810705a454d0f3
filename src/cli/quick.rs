//! A run's command line parsed without the subcommands' parsers: half of the parser's work
//! at a start went into building those, which a run does not use.

use clap::{Args, Parser, Subcommand};

use super::{Cli, Command, RunArgs};

impl Cli {
    /// [`Parser::try_parse`], quicker for a run's command line: the run's options alone
    /// parse it when nothing before the agent's name (nor that name) is a subcommand's or
    /// asks for help or the version, and they accept it; anything else, errors included,
    /// goes to the whole parser, which says what is wrong.
    pub fn try_parse_quick() -> Result<Cli, clap::Error> {
        Cli::try_parse_quick_from(std::env::args_os().collect())
    }

    fn try_parse_quick_from(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
        match Cli::run_only(&args) {
            Some(run) => Ok(Cli { command: None, run }),
            None => Cli::try_parse_from(summary_help(args)),
        }
    }

    /// The run's options parsed alone, when they mean what the whole parser would.
    fn run_only(args: &[std::ffi::OsString]) -> Option<RunArgs> {
        use clap::FromArgMatches;
        let command = <RunArgs as Args>::augment_args(clap::Command::new("ahp-wrap"));
        let run = RunArgs::from_arg_matches(&command.try_get_matches_from(args).ok()?).ok()?;
        // The arguments up to the agent's name, which the whole parser reads as options or
        // a subcommand.
        let agent_at = args.len().checked_sub(run.agent.len())?;
        let before = args.get(1..=agent_at)?;
        let plain = before.iter().all(|a| {
            let a = a.to_str().unwrap_or_default();
            !(Command::has_subcommand(a)
                || matches!(a, "help" | "-h" | "--help" | "-V" | "--version"))
        });
        (plain && !run.agent.is_empty()).then_some(run)
    }
}

/// `args` with the top level's `--help` (before any command or the agent), or `help` alone,
/// as `-h`: the
/// wrapper's help is its summary, one line an option and a command; each option in full is
/// in the manual page (`man ahp-wrap`), each command's in its own `--help`.
fn summary_help(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    if args.len() == 2 && args[1] == "help" {
        args[1] = "-h".into();
    }
    for a in args.iter_mut().skip(1) {
        let s = a.to_str().unwrap_or_default();
        if s == "--" || Command::has_subcommand(s) || !s.starts_with('-') {
            break;
        }
        if s == "--help" {
            *a = "-h".into();
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<std::ffi::OsString> {
        line.split(' ').map(Into::into).collect()
    }

    #[test]
    fn the_quick_parse_of_a_run_is_the_whole_parsers_and_anything_else_goes_to_it() {
        for line in [
            "ahp-wrap -- claude -p hi",
            "ahp-wrap claude -p hi",
            "ahp-wrap --floor off -q -- true",
            "ahp-wrap --no-intercept -- true",
            "ahp-wrap --no-intercept rm,git -- sh -c x",
            "ahp-wrap --mode observe --audit-log run.jsonl -- claude --help",
            "ahp-wrap --harness ws://h:1/ahp --fail-mode open -- codex exec serve",
        ] {
            let quick = Cli::run_only(&args(line)).unwrap_or_else(|| panic!("{line}"));
            let whole = Cli::try_parse_from(args(line)).unwrap();
            assert!(whole.command.is_none(), "{line}");
            assert_eq!(format!("{quick:?}"), format!("{:?}", whole.run), "{line}");
        }
        for line in [
            "ahp-wrap serve --listen stdio",
            "ahp-wrap policy default",
            "ahp-wrap --help",
            "ahp-wrap -V",
            "ahp-wrap help",
            "ahp-wrap",
            "ahp-wrap --bogus -- x",
            "ahp-wrap -- serve",
            "ahp-wrap --framework serve -- x",
        ] {
            assert!(Cli::run_only(&args(line)).is_none(), "{line}");
        }
        // Those the whole parser takes as it always did.
        let serve = Cli::try_parse_quick_from(args("ahp-wrap serve --listen stdio")).unwrap();
        assert!(matches!(serve.command, Some(Command::Serve(_))));
        let agent = Cli::try_parse_quick_from(args("ahp-wrap -- serve")).unwrap();
        assert_eq!(agent.run.agent, ["serve"]);
        let e = Cli::try_parse_quick_from(args("ahp-wrap --bogus -- x")).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument);
    }

    #[test]
    fn the_top_levels_help_is_the_summary_and_no_one_elses_is_changed() {
        assert_eq!(
            summary_help(args("ahp-wrap -q --help")),
            args("ahp-wrap -q -h")
        );
        assert_eq!(summary_help(args("ahp-wrap help")), args("ahp-wrap -h"));
        for line in [
            "ahp-wrap audit --help",
            "ahp-wrap help audit",
            "ahp-wrap claude --help",
            "ahp-wrap -- claude --help",
        ] {
            assert_eq!(summary_help(args(line)), args(line), "{line}");
        }
    }
}
