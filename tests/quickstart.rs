//! The README's Quick start, run as written: its first command (install, then a first run the
//! policy refuses) verbatim by bash in the repository, with a fresh HOME; the output it shows
//! is checked against what the run printed; then `./install.sh --uninstall` removes what the
//! install put there. Its second command is the one CI runs.
//!
//! The install is a release build (a few minutes the first time; `CARGO_TARGET_DIR` is this
//! repository's `target/`, so later runs rebuild only what changed).

use ahp_wrap_testkit::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{run, show};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Quick start section: its command lines and the lines of output it shows (each an
/// indented line; the first is the first command, the last the test command).
fn quick_start() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("\n## Quick start\n")
        .expect("a Quick start section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end]
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .map(str::to_owned)
        .collect()
}

/// The real HOME's cargo and rustup, for a command run with another HOME.
fn toolchain_env(cmd: &mut Command) {
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    let cargo = std::env::var_os("CARGO_HOME").map_or(home.join(".cargo"), PathBuf::from);
    let rustup = std::env::var_os("RUSTUP_HOME").map_or(home.join(".rustup"), PathBuf::from);
    cmd.env("CARGO_HOME", cargo)
        .env("RUSTUP_HOME", rustup)
        .env("CARGO_TARGET_DIR", root().join("target"));
}

fn bash(line: &str, home: &Path) -> std::process::Output {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(line)
        .current_dir(root())
        .env("HOME", home)
        // A fresh machine's user: its state directory is in the fresh HOME.
        .env_remove("XDG_STATE_HOME");
    toolchain_env(&mut cmd);
    run(&mut cmd, Duration::from_secs(1800))
}

#[test]
fn the_quick_start_runs_as_written() {
    let lines = quick_start();
    let first = lines.first().expect("a first command");
    assert!(
        first.starts_with("./install.sh && ~/.local/bin/ahp-wrap -- "),
        "the first command installs, then runs: {first}"
    );
    let home = tempfile::tempdir().unwrap();
    let out = bash(first, home.path());
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // What the README shows of the run is what it printed: the refusal, curl's code, the
    // summary's count (lines shortened with … are checked up to the …).
    for shown in lines.iter().skip(1).filter(|l| {
        l.starts_with("ahp-wrap: ")
            || l.starts_with("curl exited")
            || l.starts_with("  blocked")
            || l.starts_with("  audit log: ")
    }) {
        let known = shown.split('…').next().unwrap().trim_end();
        let known = match known.find("blocked ") {
            // The time of day differs: compare what follows it.
            Some(i) if shown.trim_start().starts_with("blocked") => &known[i + 17..],
            _ => known,
        };
        assert!(
            stdout.contains(known) || stderr.contains(known),
            "the README shows {shown:?}, the run did not print it:\n{}",
            show(&out)
        );
    }
    assert!(
        stderr.contains("curl: blocked: the cloud metadata endpoint"),
        "{}",
        show(&out)
    );
    // The run's record is in the default trail, with no option given: `audit show` shows
    // the block, its rule and its reason.
    // Wide enough that the record's command and reason are each on one line (a pipe is
    // shown at 80 columns).
    let out = bash("COLUMNS=200 ~/.local/bin/ahp-wrap audit show", home.path());
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        shown.lines().any(|l| l.contains("block")
            && l.contains("cloud-metadata")
            && l.contains("exec: curl -s http://169.254.169.254/latest/meta-data/"))
            && shown.contains("↳ the cloud metadata endpoint hands out the machine's credentials"),
        "{}",
        show(&out)
    );
    // A real agent next, as the README suggests, with no option either.
    if !cfg!(skip_e2e = "claude-code") {
        claude_then_audit_show(&home.path().join(".local/bin/ahp-wrap"));
    }
    // What install.sh says it installed is there, and goes with --uninstall.
    let local = home.path().join(".local");
    let installed = [
        "bin/ahp-wrap",
        "bin/ahp-wrap-hook",
        "share/ahp-wrap/shims/claude-code/README.md",
        "share/man/man1/ahp-wrap.1",
        "share/bash-completion/completions/ahp-wrap",
        "share/zsh/site-functions/_ahp-wrap",
        "share/fish/vendor_completions.d/ahp-wrap.fish",
    ];
    for f in installed {
        assert!(local.join(f).exists(), "{f} was not installed");
        let named = match f.strip_prefix("share/ahp-wrap/shims/") {
            Some(_) => local.join("share/ahp-wrap/shims"),
            None => local.join(f),
        };
        assert!(
            stderr.contains(&format!("installed {}", named.display())),
            "install.sh did not name {f}:\n{stderr}"
        );
    }
    // The hook, started on every tool call, and the wrapper need no dynamic loader where
    // glibc is (they are linked statically: no PT_INTERP program header), and the wrapper
    // stays position-independent (ASLR).
    let glibc = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .is_ok_and(|o| o.status.success());
    if glibc {
        let dynamic = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(
            has_interpreter(&dynamic),
            "the check reads a dynamic one (this test) as such"
        );
        for (name, how) in [
            ("ahp-wrap-hook", "ahp-wrap-hook (statically linked)"),
            ("ahp-wrap", "statically linked)"),
        ] {
            let elf = std::fs::read(local.join("bin").join(name)).unwrap();
            assert!(
                !has_interpreter(&elf),
                "the installed {name} is dynamically linked:\n{stderr}"
            );
            assert!(stderr.contains(how), "{stderr}");
        }
        let wrapper = std::fs::read(local.join("bin/ahp-wrap")).unwrap();
        assert_eq!(
            u16::from_le_bytes([wrapper[0x10], wrapper[0x11]]),
            3,
            "the installed wrapper is not position-independent (ET_DYN)"
        );
    }
    // The wrapper's code starts with the functions a run executes (bench/hot-functions.txt,
    // given to lld, the linker rustc uses on x86-64 Linux): most of its first 200 functions
    // are in the list (linked as cargo links it, 57 of them are: `_start` and a few more).
    if glibc && cfg!(target_arch = "x86_64") {
        assert!(stderr.contains("ahp-wrap (its hot code first"), "{stderr}");
        let nm = Command::new("nm")
            .args(["-n", "--defined-only"])
            .arg(local.join("bin/ahp-wrap"))
            .output()
            .expect("nm (binutils) runs");
        let symbols = String::from_utf8_lossy(&nm.stdout);
        let hot = std::fs::read_to_string(root().join("bench/hot-functions.txt")).unwrap();
        let hot: std::collections::HashSet<&str> = hot.lines().collect();
        let first: Vec<&str> = symbols
            .lines()
            .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
                [_, "t" | "T", name] => Some(name),
                _ => None,
            })
            .take(200)
            .collect();
        let listed = first.iter().filter(|f| hot.contains(*f)).count();
        assert!(
            listed >= 150,
            "{listed} of the wrapper's first {} functions are in the list",
            first.len()
        );
        // And the list is this code's: a list taken before a change that renamed or moved
        // much (27 % of its names gone after one such change) lays out little of what runs,
        // and the parent's memory grows with it (9.9 MiB to 13.5 after 100 hook calls).
        let names: std::collections::HashSet<&str> = symbols
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2))
            .collect();
        let known = hot.iter().filter(|f| names.contains(*f)).count();
        assert!(
            known * 10 >= hot.len() * 9,
            "only {known} of the {} functions in bench/hot-functions.txt are in this build: \
             regenerate it (bench/hot_functions.py, as root, with valgrind)",
            hot.len()
        );
    }
    let man = std::fs::read_to_string(local.join("share/man/man1/ahp-wrap.1")).unwrap();
    assert!(man.contains(".TH ahp-wrap"), "a manual page: {man:.200}");
    // The run kept its PATH shim directory (links to this install's hook) for the next run;
    // --uninstall removes it with the rest.
    let hook = local.join("bin/ahp-wrap-hook").canonicalize().unwrap();
    let kept = kept_shim_dirs(&hook);
    assert!(!kept.is_empty(), "the run kept no PATH shim directory");
    let out = bash("./install.sh --uninstall", home.path());
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        kept.iter().all(|d| !d.exists()),
        "{kept:?} left after --uninstall: {}",
        show(&out)
    );
    for f in installed {
        assert!(
            !local.join(f).exists(),
            "{f} is still there after --uninstall"
        );
    }
    // The second command is the test suite, as CI runs it.
    let last = lines.last().unwrap();
    assert_eq!(last, "tests/run-all.sh");
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == last),
        ".ci/run does not run {last}"
    );
}

/// The installed `wrapper` in front of the real Claude Code CLI (its model a scripted server
/// on loopback), with no option: the model asks for the user's SSH key, the default policy
/// refuses it, and `audit show` then lists the refusal with its rule and reason.
fn claude_then_audit_show(wrapper: &Path) {
    use ahp_wrap_testkit::agents;
    use ahp_wrap_testkit::claude_code::{self as claude, bash, FakeApi, World};
    let world = World::new();
    let home = world.dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "SECRET-KEY-MATERIAL\n").unwrap();
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        serde_json::json!([bash("cat ~/.ssh/id_rsa"), {"text": "Done."}]),
    );
    let mut cmd = Command::new(wrapper);
    cmd.arg("--").arg(claude::claude_bin()).args([
        "-p",
        "show me my key",
        "--allowedTools",
        "Bash",
    ]);
    agents::offline(&mut cmd, &world);
    claude::offline_env(&mut cmd, world.config_dir(), api.port);
    let out = run(&mut cmd, Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let sent: String = api.requests().iter().map(|r| r.to_string()).collect();
    assert!(
        !sent.contains("SECRET-KEY-MATERIAL"),
        "the key reached the model"
    );
    let out = run(
        Command::new(wrapper)
            .args(["audit", "show"])
            .env_clear()
            .env("HOME", &home)
            .env("COLUMNS", "200"),
        Duration::from_secs(30),
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let lines: Vec<&str> = shown.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(" block ") && l.contains("Bash: cat ~/.ssh/id_rsa"))
        .unwrap_or_else(|| panic!("audit show does not list the refused read:\n{shown}"));
    assert!(
        lines
            .get(at + 1)
            .is_some_and(|l| l.trim_start().starts_with("↳ ") && l.len() > 10),
        "its reason follows it:\n{shown}"
    );
}

/// The kept PATH shim directories (`ahp-wrap-shims-*` where runs make their directories)
/// whose links lead to `hook`.
fn kept_shim_dirs(hook: &Path) -> Vec<PathBuf> {
    let bases = [
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
        Some(PathBuf::from("/run")),
        Some(std::env::temp_dir()),
    ];
    let mut kept = Vec::new();
    for base in bases.into_iter().flatten() {
        let Ok(entries) = std::fs::read_dir(&base) else {
            continue;
        };
        for dir in entries.flatten().map(|e| e.path()) {
            let ours = dir
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("ahp-wrap-shims-"));
            let leads_to_hook = ours
                && std::fs::read_dir(&dir).is_ok_and(|links| {
                    links
                        .flatten()
                        .any(|l| l.path().canonicalize().is_ok_and(|t| t == hook))
                });
            if leads_to_hook && !kept.contains(&dir) {
                kept.push(dir);
            }
        }
    }
    kept
}

/// Whether an ELF64 executable names a program interpreter (a PT_INTERP program header): a
/// dynamically linked one does.
fn has_interpreter(elf: &[u8]) -> bool {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| {
        let at = phoff + i * size;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == 3
    })
}
