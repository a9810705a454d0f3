//! The wrapper table: each wrapper that runs the command after its own options (`nice -n 5
//! CMD`, `timeout 10 CMD`, `sudo -u root CMD`), with the options that take a value and the
//! plain arguments that come first, or none when it runs no command with these arguments.
//!
//! Owns: the table. Must not touch: wrappers whose command is found otherwise (the parsers
//! of the sibling files), or what the command found does.

use super::runners::PACKAGE_OPTIONS;

/// Short options taking a value, long options taking a value, and how many plain arguments
/// come before the command.
pub(super) type Options = (&'static str, &'static [&'static str], usize);

/// The options of each wrapper that runs the command after them; `None` for a program that
/// runs no command (or not with these arguments).
pub(super) fn wrapper_options(program: &str, args: &[String]) -> Option<Options> {
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
        | "proxychains4" | "torsocks" | "torify" | "tsocks" | "firejail" | "fakeroot"
        | "faketime" | "eatmydata" | "ifne" | "linux32" | "linux64" | "i386" | "x86_64"
        | "i686" | "uname26" => ("", &[], 0),
        "setsid" => ("", &[], 0),
        // `setarch ARCH [-R…] CMD`; `logsave [-asv] LOGFILE CMD` (which writes LOGFILE).
        "setarch" => ("", &[], 1),
        "logsave" => ("", &[], 1),
        "rlwrap" => (
            "bCDefFgHlLOPqsStwz",
            &[
                "--break-chars",
                "--command-name",
                "--histsize",
                "--extra-char-after-completion",
                "--file",
                "--history-filename",
                "--forget-matching",
                "--logfile",
                "--multi-line-ext",
                "--set-term-name",
                "--prompt-colour",
                "--pre-given",
                "--wait-before-prompt",
                "--filter",
            ],
            0,
        ),
        "cpulimit" if has(&["-p", "--pid", "-e", "--exe"]) => return None,
        "cpulimit" => ("l", &["--limit", "--cpu"], 0),
        "prlimit" if has(&["-p", "--pid"]) => return None,
        "prlimit" => ("o", &["--output"], 0),
        "choom" if has(&["-p", "--pid"]) => return None,
        "choom" => ("n", &["--adjust"], 0),
        "valgrind" => ("", &[], 0),
        // `perf stat|record|trace [OPTIONS] CMD`.
        "perf"
            if args
                .first()
                .is_some_and(|s| matches!(s.as_str(), "stat" | "record" | "trace")) =>
        {
            (
                "eoptCGrxIFcmu",
                &["--event", "--output", "--pid", "--tid", "--cpu"],
                1,
            )
        }
        "cgexec" => ("g", &[], 0),
        "pkexec" => ("", &["--user"], 0),
        "setpriv" => (
            "",
            &[
                "--reuid",
                "--regid",
                "--ruid",
                "--euid",
                "--rgid",
                "--egid",
                "--groups",
                "--inh-caps",
                "--ambient-caps",
                "--bounding-set",
                "--securebits",
                "--pdeathsig",
                "--selinux-label",
                "--apparmor-profile",
                "--landlock-access",
                "--landlock-rule",
            ],
            0,
        ),
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
