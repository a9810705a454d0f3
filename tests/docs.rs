//! Docs that cannot drift: each shim's README lists every file of its code in its table of
//! files (`| `src/<file>` | what it does |`), so a file added to a shim is explained where a
//! shim author looks first; each crate's module map (its `src/lib.rs`) names every top-level
//! module; every relative link of the Markdown resolves, to a file and a heading; every
//! setup a test is ignored without (`skip_e2e = "<setup>"`) is a setup under `tests/`, and
//! that cfg is set exactly for the setups `AHP_WRAP_SKIP_AGENT_E2E` names.

use std::path::Path;

#[test]
fn every_shim_file_is_in_its_readme_table() {
    let shims = Path::new(env!("CARGO_MANIFEST_DIR")).join("shims");
    let mut missing = Vec::new();
    let mut seen = 0;
    for shim in std::fs::read_dir(&shims).unwrap().flatten() {
        let src = shim.path().join("src");
        if !src.is_dir() {
            continue;
        }
        let readme = std::fs::read_to_string(shim.path().join("README.md")).unwrap_or_default();
        for file in std::fs::read_dir(&src).unwrap().flatten() {
            seen += 1;
            let name = file.file_name().to_string_lossy().into_owned();
            if !readme.contains(&format!("| `src/{name}` |")) {
                missing.push(format!(
                    "shims/{}/README.md has no row for src/{name}",
                    shim.file_name().to_string_lossy()
                ));
            }
        }
    }
    assert!(
        seen > 20,
        "only {seen} shim files found under {}",
        shims.display()
    );
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn the_crate_map_names_every_top_level_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut libs = vec![root.join("src/lib.rs")];
    for krate in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        libs.push(krate.path().join("src/lib.rs"));
    }
    let mut count = 0;
    for lib in libs {
        let text = std::fs::read_to_string(&lib).unwrap();
        let map: String = text
            .lines()
            .filter(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        let modules: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
            .collect();
        count += modules.len();
        let missing: Vec<&&str> = modules
            .iter()
            .filter(|m| !map.contains(&format!("[`{m}`]")))
            .collect();
        assert!(
            missing.is_empty(),
            "{}'s module map does not name {missing:?}",
            lib.display()
        );
    }
    assert!(count > 20, "only {count} modules found");
}

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped (but `-` and `_`),
/// spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// Every relative link of the project's Markdown (README, CONTRIBUTING, docs/, shims/,
/// examples/) names a file that exists and, with `#…`, a heading it has: moving a section
/// cannot leave a link behind.
#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    for dir in ["docs", "shims", "examples"] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "md") {
                    files.push(p);
                }
            }
        }
    }
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for cap in link.captures_iter(&text) {
            let target = &cap[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let shown = format!("{}: {target}", file.strip_prefix(root).unwrap().display());
            if !resolved.exists() {
                broken.push(format!("{shown} (no such file)"));
                continue;
            }
            if !fragment.is_empty() && resolved.extension().is_some_and(|x| x == "md") {
                let headings = anchors(&std::fs::read_to_string(&resolved).unwrap());
                if !headings.iter().any(|h| h == fragment) {
                    broken.push(format!("{shown} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// A test carrying `#[cfg_attr(skip_e2e = "<setup>", ignore = …)]` is ignored when
/// `AHP_WRAP_SKIP_AGENT_E2E` names that setup: a name that is not a `tests/<setup>/setup.sh`
/// would never match what a person skips, and the test would fail instead of being ignored.
#[test]
fn every_skipped_setup_a_test_names_is_a_setup() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut wrong = Vec::new();
    let mut seen = 0;
    for file in std::fs::read_dir(&tests).unwrap().flatten() {
        let path = file.path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.lines().filter(|l| !l.trim_start().starts_with("//"));
        for (at, found) in code.flat_map(|line| {
            line.match_indices("skip_e2e = \"")
                .map(move |(at, _)| (at, line))
        }) {
            let rest = &found[at + "skip_e2e = \"".len()..];
            let setup = &rest[..rest.find('"').unwrap()];
            seen += 1;
            if !tests.join(setup).join("setup.sh").is_file() {
                wrong.push(format!(
                    "{}: skip_e2e = \"{setup}\" but there is no tests/{setup}/setup.sh",
                    path.display()
                ));
            }
        }
    }
    assert!(
        seen >= 80,
        "only {seen} skip_e2e names found: is the pattern still used?"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `build.rs` turns `AHP_WRAP_SKIP_AGENT_E2E` (as it was when this was built) into the
/// `skip_e2e` cfg the end-to-end tests are ignored by: a setup is skipped exactly when the
/// variable names it (or says `all`). Where the variable is not set (CI), nothing is.
#[test]
fn the_skip_variable_is_the_skip_cfg() {
    let list = option_env!("AHP_WRAP_SKIP_AGENT_E2E").unwrap_or("");
    let named = |setup: &str| {
        list.split(',')
            .map(str::trim)
            .any(|s| s == setup || s == "all")
    };
    let cfgs = [
        ("claude-code", cfg!(skip_e2e = "claude-code")),
        ("codex", cfg!(skip_e2e = "codex")),
        ("qwen", cfg!(skip_e2e = "qwen")),
        ("mcp", cfg!(skip_e2e = "mcp")),
        ("rabbitmq", cfg!(skip_e2e = "rabbitmq")),
        ("approvals", cfg!(skip_e2e = "approvals")),
    ];
    for (setup, skipped) in cfgs {
        assert_eq!(
            skipped,
            named(setup),
            "AHP_WRAP_SKIP_AGENT_E2E={list:?} at build time, but skip_e2e = {setup:?} is {skipped}"
        );
    }
}
