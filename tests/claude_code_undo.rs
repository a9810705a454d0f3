//! Undoing what the real Claude Code CLI did, under the default wrapper: in a git workspace
//! holding uncommitted edits, an untracked new file and an ignored `.env`, the model deletes
//! `src/` through Python, empties the other files through a script it writes, and deletes
//! `.env` with `rm` (none of which the policy refuses: the workspace is where the agent must
//! write).
//! After the run, `ahp-wrap undo` restores every file byte for byte, modes included, and
//! `ahp-wrap changes` lists each deletion after the tool call that made it.

use ahp_wrap_testkit::claude_code::{bash, run, write, FakeApi, World};
use ahp_wrap_testkit::common::{git, snapshot};

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn what_claude_code_deleted_and_emptied_is_undone_byte_for_byte() {
    let world = World::new();
    let ws = world.ws();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(ws.join("build.sh"), "#!/bin/sh\ncargo build\n").unwrap();
    std::fs::set_permissions(ws.join("build.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(ws.join("notes.md"), "# notes\n").unwrap();
    std::fs::write(ws.join(".gitignore"), ".env\n").unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "one"]);
    std::fs::write(
        ws.join("src/main.rs"),
        "fn main() {\n    println!(\"two hours of work\");\n}\n",
    )
    .unwrap();
    std::fs::write(ws.join("src/util.rs"), "pub fn helper() {}\n").unwrap();
    std::fs::write(ws.join(".env"), "DATABASE_URL=postgres://only-copy\n").unwrap();
    std::fs::set_permissions(ws.join(".env"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = snapshot(&ws);

    let script = ws.join("tidy.py");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            bash("python3 -c \"import shutil; shutil.rmtree('src')\""),
            write(
                &script,
                "import os\nfor name in os.listdir('.'):\n    if os.path.isfile(name) and not name.startswith('.') and name != 'tidy.py':\n        open(name, 'w').close()\n",
            ),
            bash("python3 tidy.py"),
            bash("rm .env"),
            {"text": "Tidied."}
        ]),
    );
    // Claude Code's own permissions at their default, but for Bash and Write, allowed as a
    // person running it headless allows them (`-p` cannot ask; without it every call is
    // refused and nothing is there to undo). Its sandbox is left as it ships (off).
    let r = run(world.command(
        &api,
        Some(&["--summary", "never"]),
        &["-p", "tidy the project", "--allowedTools", "Bash,Write"],
    ));
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    r.check(!ws.join("src").exists(), "the agent deleted src/");
    r.check(!ws.join(".env").exists(), "the agent deleted .env");
    r.check(
        std::fs::read(ws.join("notes.md")).unwrap().is_empty(),
        "the agent emptied notes.md",
    );
    let stderr = String::from_utf8_lossy(&r.output.stderr);
    r.check(
        stderr.contains("`ahp-wrap undo` puts them back"),
        "the run's summary names the command that undoes it",
    );

    let wrap = |args: &[&str]| world.wrap(args);
    let changes = wrap(&["changes"]);
    let shown = String::from_utf8_lossy(&changes.stdout).into_owned();
    let after = |call: &str| {
        shown
            .split("\nafter tool call ")
            .find(|s| s.contains(call))
            .unwrap_or("")
            .to_owned()
    };
    let rmtree = after("shutil.rmtree('src')");
    assert!(
        rmtree.contains("deleted src/main.rs") && rmtree.contains("deleted src/util.rs"),
        "the deletions follow the call that made them:\n{shown}"
    );
    assert!(
        after("python3 tidy.py").contains("changed notes.md"),
        "{shown}"
    );
    assert!(after("rm .env").contains("deleted .env"), "{shown}");

    let undo = wrap(&["undo"]);
    assert!(
        undo.status.success(),
        "{}{}",
        String::from_utf8_lossy(&undo.stdout),
        String::from_utf8_lossy(&undo.stderr)
    );
    assert_eq!(
        snapshot(&ws),
        before,
        "{}",
        String::from_utf8_lossy(&undo.stdout)
    );
}
