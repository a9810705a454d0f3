//! A run, or `policy floor`, whose workspace is the home directory or `/` says so first,
//! once, in one line: what it means (every file writable by the agent, no checkpoints) and
//! how to start in a project instead.

use ahp_wrap_testkit::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{run, wrap_bin};

/// `ahp-wrap <args>` in `cwd` with `home` as its HOME: its exit code, stdout and stderr.
fn wrap_in(cwd: &Path, home: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = run(
        Command::new(wrap_bin())
            .args(args)
            .current_dir(cwd)
            .env("HOME", home)
            .env_remove("XDG_STATE_HOME"),
        Duration::from_secs(60),
    );
    let said = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), said(&out.stdout), said(&out.stderr))
}

/// The lines of `text` that say the workspace is no project.
fn warnings(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.contains("the workspace is"))
        .collect()
}

#[test]
fn a_run_in_the_home_directory_says_what_that_means_once() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let (code, _, stderr) = wrap_in(&home, &home, &["--summary", "always", "--", "true"]);
    assert_eq!(code, Some(0), "{stderr}");
    let said = warnings(&stderr);
    assert_eq!(said.len(), 1, "said once:\n{stderr}");
    let line = said[0];
    for part in [
        "your home directory",
        "every file in it",
        "no checkpoints",
        "`cd`",
        "--workspace DIR",
    ] {
        assert!(line.contains(part), "{part:?} in {line:?}");
    }
    assert!(
        !stderr.contains("is not a project"),
        "the checkpoints do not say it again:\n{stderr}"
    );
    // Quiet or not, the same line: it is a warning.
    let (_, _, quiet) = wrap_in(&home, &home, &["-q", "--", "true"]);
    assert_eq!(warnings(&quiet), said, "{quiet}");

    // A project in the home: nothing said.
    let project = home.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let (_, _, stderr) = wrap_in(&project, &home, &["-q", "--", "true"]);
    assert!(warnings(&stderr).is_empty(), "{stderr}");
    let (_, _, stderr) = wrap_in(
        &home,
        &home,
        &["-q", "--workspace", "project", "--", "true"],
    );
    assert!(warnings(&stderr).is_empty(), "{stderr}");

    // policy floor says it first.
    let (_, stdout, _) = wrap_in(&home, &home, &["policy", "floor"]);
    assert!(
        stdout
            .lines()
            .next()
            .is_some_and(|l| l.starts_with("warning: the workspace is your home directory")),
        "{stdout}"
    );
    let (_, stdout, _) = wrap_in(&project, &home, &["policy", "floor"]);
    assert!(warnings(&stdout).is_empty(), "{stdout}");
}

#[test]
fn a_run_at_the_root_says_so_too() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = wrap_in(Path::new("/"), dir.path(), &["-q", "--", "true"]);
    assert_eq!(code, Some(0), "{stderr}");
    let said = warnings(&stderr);
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("/, the whole file system") && said[0].contains("every file you can"),
        "{stderr}"
    );
    let (_, stdout, _) = wrap_in(Path::new("/"), dir.path(), &["policy", "floor"]);
    assert_eq!(warnings(&stdout).len(), 1, "{stdout}");
}
