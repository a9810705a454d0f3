//! Files that make a tool run a program, or change what it trusts, wherever they lie in the
//! workspace: the ecosystems' kinds here, as data, each with what reads it and where its
//! tool documents it; the agents' own (their settings, MCP lists, hooks, commands, skills and
//! memory files, at any depth) come from their shims. On the floor, such a file the agent's
//! tree creates or changes is kept aside at the end of the run, not left where the tool reads
//! it (`ahp-wrap restore` applies it); reading and ordinary use are untouched.
//!
//! A pattern is a path relative to any directory of the workspace (`.npmrc` at any depth),
//! or, starting with `/`, to the workspace itself; `*` stands for any run of characters in
//! one component, a last `**` for anything beneath.

/// What must hold of a file of a kind for it to be kept aside (most kinds: nothing more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Any file of the kind.
    Always,
    /// A `.pth` file with a line that starts with `import` (run at every start of Python;
    /// the other lines only add directories to its path).
    PthImports,
    /// A compiled Python file marked "unchecked": run without comparing it with its source
    /// (PEP 552: flags 0b01 in its header).
    UncheckedPyc,
}

/// One kind of file.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// Its name, as `[floor] run_files` names it to let it be.
    pub name: &'static str,
    /// Where it lies (see the module's doc).
    pub patterns: &'static [&'static str],
    /// What it makes run, for a person.
    pub what: &'static str,
    /// What must hold of it.
    pub check: Check,
}

/// The ecosystems' kinds.
pub const ECOSYSTEM: &[Kind] = &[
    // npm (https://docs.npmjs.com/cli/configuring-npm/npmrc): a project's `.npmrc` sets
    // `script-shell` (the program every `npm run` starts), `node-options` and `git`.
    Kind {
        name: "npmrc",
        patterns: &[".npmrc"],
        what: "npm's configuration (script-shell, node-options: what every npm script runs with)",
        check: Check::Always,
    },
    // Yarn (https://yarnpkg.com/configuration/yarnrc): `yarnPath` is the Yarn that runs;
    // Yarn 1's `.yarnrc` names `yarn-path` the same way. pnpm's `.pnpmfile.cjs` is code run
    // at every install (https://pnpm.io/pnpmfile).
    Kind {
        name: "yarnrc",
        patterns: &[".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs"],
        what: "Yarn's or pnpm's configuration (yarnPath, a pnpmfile: code every install runs)",
        check: Check::Always,
    },
    // Cargo (https://doc.rust-lang.org/cargo/reference/config.html): `build.rustc-wrapper`,
    // `target.<triple>.runner`, aliases: programs every cargo command runs.
    Kind {
        name: "cargo-config",
        patterns: &[".cargo/config.toml", ".cargo/config"],
        what: "cargo's configuration (rustc-wrapper, runner, aliases: what cargo runs)",
        check: Check::Always,
    },
    // direnv (https://direnv.net/man/direnv-stdlib.1.html): `.envrc` is a shell script run on
    // entering the directory (once allowed).
    Kind {
        name: "envrc",
        patterns: &[".envrc"],
        what: "direnv's script (run by the shell on entering the directory)",
        check: Check::Always,
    },
    // pre-commit (https://pre-commit.com/#plugins): the hooks each `git commit` runs.
    Kind {
        name: "pre-commit",
        patterns: &[".pre-commit-config.yaml", ".pre-commit-hooks.yaml"],
        what: "pre-commit's configuration (the programs every commit runs)",
        check: Check::Always,
    },
    // Python (https://docs.python.org/3/library/site.html): a `.pth` line starting with
    // `import` runs at every start; `sitecustomize` and `usercustomize` are imported at every
    // start; `pyvenv.cfg` names the interpreter a virtual environment runs.
    Kind {
        name: "python-startup",
        patterns: &["sitecustomize.py", "usercustomize.py", "pyvenv.cfg"],
        what: "Python's start-up (run by every python of that environment)",
        check: Check::Always,
    },
    Kind {
        name: "python-pth",
        patterns: &["site-packages/*.pth"],
        what: "a .pth file with an import line (run by every python of that environment)",
        check: Check::PthImports,
    },
    // PEP 552 (https://peps.python.org/pep-0552/): an "unchecked" hash-based .pyc is run
    // without its source being looked at.
    Kind {
        name: "python-bytecode",
        patterns: &["__pycache__/*.pyc"],
        what: "unchecked Python bytecode (run without comparing it with its source)",
        check: Check::UncheckedPyc,
    },
    // pip (https://pip.pypa.io/en/stable/topics/configuration/): a virtual environment's
    // `pip.conf` names the indexes pip installs from.
    Kind {
        name: "pip-config",
        patterns: &["pip.conf"],
        what: "pip's configuration (the index every install trusts)",
        check: Check::Always,
    },
    // Gradle (https://docs.gradle.org/current/userguide/gradle_wrapper.html): the wrapper's
    // properties name the Gradle distribution `./gradlew` downloads and runs; init scripts
    // run before every build.
    Kind {
        name: "gradle",
        patterns: &[
            "gradle/wrapper/gradle-wrapper.properties",
            "init.gradle",
            "init.gradle.kts",
        ],
        what: "Gradle's wrapper properties or an init script (the Gradle every build runs)",
        check: Check::Always,
    },
    // Maven (https://maven.apache.org/configure.html): `.mvn/extensions.xml` loads code into
    // every build, `jvm.config` and `maven.config` its JVM's and Maven's options.
    Kind {
        name: "maven",
        patterns: &[
            ".mvn/extensions.xml",
            ".mvn/jvm.config",
            ".mvn/maven.config",
        ],
        what: "Maven's extensions or options (code and flags every build loads)",
        check: Check::Always,
    },
    // Editors: VS Code runs a task with `runOn: folderOpen`, its settings name interpreters
    // and terminal environments (https://code.visualstudio.com/docs/editor/tasks); a dev
    // container's `postCreateCommand` runs at its build (https://containers.dev/implementors/json_reference/).
    Kind {
        name: "editor",
        patterns: &[
            ".vscode/tasks.json",
            ".vscode/settings.json",
            ".vscode/launch.json",
            ".devcontainer/devcontainer.json",
            ".devcontainer.json",
            ".idea/workspace.xml",
            ".zed/tasks.json",
        ],
        what: "an editor's tasks or settings (what it runs when the folder opens)",
        check: Check::Always,
    },
];

/// The entries of a repository's git directory that ordinary git writes (gitrepository-layout(5)):
/// any other entry created or changed is kept aside (a `commondir` or a `config.worktree`
/// points git at a configuration that runs programs; `objects/info/alternates` at objects
/// from anywhere). `config` and `hooks` are bound read-only by the floor itself.
pub const GIT_ORDINARY: &[&str] = &[
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "MERGE_MSG",
    "MERGE_MODE",
    "MERGE_RR",
    "MERGE_AUTOSTASH",
    "AUTO_MERGE",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "BISECT_LOG",
    "BISECT_START",
    "BISECT_EXPECTED_REV",
    "BISECT_ANCESTORS_OK",
    "BISECT_NAMES",
    "BISECT_TERMS",
    "BISECT_RUN",
    "COMMIT_EDITMSG",
    "TAG_EDITMSG",
    "SQUASH_MSG",
    "NOTES_EDITMSG",
    "EDIT_DESCRIPTION",
    "description",
    "index",
    "packed-refs",
    "shallow",
    "gc.log",
    "gc.pid",
    "sharedindex.*",
    "*.lock",
    "info/exclude",
    "info/refs",
    "info/attributes",
    "info/sparse-checkout",
    "objects/**",
    "refs/**",
    "logs/**",
    "rebase-merge/**",
    "rebase-apply/**",
    "sequencer/**",
    "rr-cache/**",
    "lfs/**",
    "branches/**",
    "worktrees/*/HEAD",
    "worktrees/*/ORIG_HEAD",
    "worktrees/*/index",
    "worktrees/*/logs/**",
    "worktrees/*/refs/**",
    "worktrees/*/locked",
    "worktrees/*/gitdir",
    "worktrees/*/*.lock",
];

/// Entries beneath the git directory that are never ordinary, whatever matches above.
pub const GIT_NEVER: &[&str] = &["objects/info/alternates", "objects/info/http-alternates"];

/// Whether `path` (relative, `/`-separated) matches `pattern` (see the module's doc).
pub fn matches(pattern: &str, path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if let Some(anchored) = pattern.strip_prefix('/') {
        let want: Vec<&str> = anchored.split('/').collect();
        return here(&want, &parts);
    }
    let want: Vec<&str> = pattern.split('/').collect();
    (0..parts.len()).any(|i| here(&want, &parts[i..]))
}

/// Whether the components `want` match `parts` from their start, to `parts`' end (or
/// beneath a last `**`).
fn here(want: &[&str], parts: &[&str]) -> bool {
    match (want.first(), parts.first()) {
        (Some(&"**"), _) if want.len() == 1 => !parts.is_empty(),
        (Some(w), Some(p)) => glob(w, p) && here(&want[1..], &parts[1..]),
        (None, None) => true,
        _ => false,
    }
}

/// One component against a pattern with `*`.
fn glob(pattern: &str, name: &str) -> bool {
    super::secrets::matches(pattern, name)
}

/// Whether the git directory's entry `rel` is one ordinary git writes.
pub fn git_ordinary(rel: &str) -> bool {
    !GIT_NEVER
        .iter()
        .any(|p| here(&p.split('/').collect::<Vec<_>>(), &split(rel)))
        && GIT_ORDINARY
            .iter()
            .any(|p| here(&p.split('/').collect::<Vec<_>>(), &split(rel)))
}

fn split(rel: &str) -> Vec<&str> {
    rel.split('/').filter(|p| !p.is_empty()).collect()
}

/// Whether `bytes` (a file of a kind whose check is `check`) is to be kept aside.
pub fn checked(check: Check, bytes: &[u8]) -> bool {
    match check {
        Check::Always => true,
        Check::PthImports => String::from_utf8_lossy(bytes)
            .lines()
            .any(|l| l.starts_with("import ") || l.starts_with("import\t")),
        // The header: a magic number, then the flags (little-endian).
        Check::UncheckedPyc => bytes
            .get(4..8)
            .and_then(|f| f.try_into().ok())
            .map(u32::from_le_bytes)
            .is_some_and(|flags| flags & 0b11 == 0b01),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_at_any_depth_or_from_the_top() {
        assert!(matches(".npmrc", ".npmrc"));
        assert!(matches(".npmrc", "packages/app/.npmrc"));
        assert!(!matches(".npmrc", "packages/app/.npmrc.bak"));
        assert!(matches(
            ".claude/settings.json",
            "a/b/.claude/settings.json"
        ));
        assert!(matches(
            ".claude/commands/**",
            "pkg/.claude/commands/deep/x.md"
        ));
        assert!(!matches(".claude/commands/**", "pkg/.claude/commands"));
        assert!(matches(
            "site-packages/*.pth",
            ".venv/lib/python3.11/site-packages/x.pth"
        ));
        assert!(matches("/CLAUDE.md", "CLAUDE.md") && !matches("/CLAUDE.md", "a/CLAUDE.md"));
    }

    #[test]
    fn what_ordinary_git_writes_is_told_from_a_redirect() {
        for ok in [
            "HEAD",
            "index",
            "refs/heads/main",
            "objects/ab/cdef",
            "logs/HEAD",
            "index.lock",
        ] {
            assert!(git_ordinary(ok), "{ok}");
        }
        for not in [
            "commondir",
            "config.worktree",
            "objects/info/alternates",
            "modules/x/config",
            "worktrees/w/commondir",
        ] {
            assert!(!git_ordinary(not), "{not}");
        }
    }

    #[test]
    fn a_pth_with_an_import_and_unchecked_bytecode_are_told_from_the_ordinary() {
        assert!(checked(
            Check::PthImports,
            b"/opt/lib\nimport os; os.system('x')\n"
        ));
        assert!(!checked(Check::PthImports, b"/opt/lib\n../src\n"));
        let pyc = |flags: u32| [&[0xa7, 0x0d, 0x0d, 0x0a][..], &flags.to_le_bytes()].concat();
        assert!(checked(Check::UncheckedPyc, &pyc(0b01)));
        assert!(!checked(Check::UncheckedPyc, &pyc(0)), "timestamp-based");
        assert!(
            !checked(Check::UncheckedPyc, &pyc(0b11)),
            "checked hash-based"
        );
    }
}
