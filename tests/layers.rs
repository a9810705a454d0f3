//! The layers of the workspace, kept by tests: the crates' (`CRATES`, each crate's
//! `Cargo.toml` naming only crates beneath it), and inside each crate its top-level modules
//! (a folder or file under the crate's `src/`), each listing what it may import from the
//! others (`crate::x`), from the bottom up.
//! An import that is not listed fails the test, and so does a listed exception that is no
//! longer needed (so the list only shrinks).
//!
//! The crates, from the bottom up: `crates/wire` (jsonrpc, protocol, control) and
//! `crates/floor` (the floor's data model and the agent's command, state files, run
//! directory and exit codes) see nothing of ours; `crates/process` (the process tree, seen
//! with safe calls) sees the floor's data; `crates/confine`, the one crate with `unsafe`
//! code (vfork, the agent's process and its guardian, the kernel's part of the floor), sees
//! both; `crates/policy` and `crates/adapter` see the wire and the floor's data, not
//! confine; a shim (`shims/<name>/`) sees the adapter alone; the application sees them
//! all, under their old names (`crate::floor`, re-exported), so its list still names them.
//! The adapter's two modules (`shared`, and `testing` for the shims' tests) need no list.
//! `only_confine_has_unsafe_code` keeps `unsafe` in `crates/confine` (and the hook's C
//! `main`), and that crate under [`CONFINE_MAX_LINES`] lines.
//!
//! An exception (an import against the layers, to be taken out) must be named with its
//! reason; there is none today.
//!
//! Beside the layers, the dependencies: each crate's `Cargo.toml` declares only crates its
//! code names (`every_declared_dependency_is_used`), so that what Cargo builds is what the
//! code uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What each module of the application (`src/`) may import, from the bottom layer up.
/// `is_plain_name` is the crate root's helper, `error_chain` and `random_hex` the confinement
/// crate's; `termlog` is a leaf.
const LAYERS: &[(&str, &[&str])] = &[
    ("termlog", &[]),
    // Paths the wrapper acts on for the agent, resolved without following links: a leaf of
    // the confinement crate, re-exported.
    ("beneath", &[]),
    ("control", &["child", "jsonrpc", "random_hex"]),
    ("transport", &["child", "jsonrpc", "error_chain"]),
    ("audit", &["protocol", "jsonrpc", "termlog", "error_chain"]),
    (
        "telemetry",
        &["audit", "control", "error_chain", "protocol"],
    ),
    ("client", &["jsonrpc", "protocol", "transport"]),
    // The workspace's checkpoints: its store lies in the state directory (termlog's); the
    // refs undo puts back are written atomically as state files are.
    (
        "checkpoint",
        &[
            "beneath",
            "policy",
            "protocol",
            "random_hex",
            "statefile",
            "termlog",
        ],
    ),
    // The registry and its two built-in shims import the adapter crate alone; these three
    // are named only in strings, by the test of that rule (`frameworks/rule.rs`).
    ("frameworks", &["control", "protocol", "random_hex"]),
    (
        "gate",
        &[
            "audit",
            "checkpoint",
            "client",
            "control",
            "error_chain",
            "floor",
            "policy",
            "protocol",
            "telemetry",
        ],
    ),
    // A question at the terminal holds the agent's tree still (`child::tree`) and asks the
    // terminal what `nix` has no safe call for (`tty`).
    ("ask", &["child", "gate", "protocol", "tty"]),
    (
        "intercept",
        &[
            "audit",
            "beneath",
            "child",
            "control",
            "error_chain",
            "exit",
            "floor",
            "frameworks",
            "gate",
            "jsonrpc",
            "policy",
            "protocol",
            "random_hex",
            "statefile",
            "telemetry",
            "termlog",
        ],
    ),
    ("host", &["ask", "control", "gate", "jsonrpc", "protocol"]),
    (
        "serve",
        &[
            "audit",
            "control",
            "gate",
            "host",
            "jsonrpc",
            "protocol",
            "telemetry",
        ],
    ),
    ("cli", &["audit", "gate", "host", "telemetry", "transport"]),
    (
        "config",
        &[
            "audit",
            "cli",
            "control",
            "floor",
            "frameworks",
            "gate",
            "host",
            "intercept",
            "telemetry",
            "transport",
        ],
    ),
    ("report", &["audit", "config", "termlog"]),
    (
        "run",
        &[
            "ask",
            "audit",
            "beneath",
            "checkpoint",
            "child",
            "client",
            "config",
            "control",
            "error_chain",
            "exit",
            "floor",
            "frameworks",
            "gate",
            "host",
            "intercept",
            "policy",
            "protocol",
            "random_hex",
            "report",
            "rundir",
            "statefile",
            "telemetry",
            "termlog",
        ],
    ),
    (
        "commands",
        &[
            "audit",
            "beneath",
            "checkpoint",
            "cli",
            "error_chain",
            "exit",
            "floor",
            "frameworks",
            "gate",
            "host",
            "policy",
            "protocol",
            "random_hex",
            "run",
            "serve",
            "statefile",
            "telemetry",
            "termlog",
        ],
    ),
    (
        "fleet",
        &[
            "child",
            "cli",
            "commands",
            "error_chain",
            "exit",
            "gate",
            "is_plain_name",
            "policy",
            "protocol",
            "random_hex",
            "telemetry",
        ],
    ),
];

/// The same for the confinement crate (`crates/confine/src`): the kernel's part of the floor
/// above the process that shares our memory, the agent's process above both (it tells the
/// floor's PID namespace when its `exec` fails: `floor::pidns::exec_failed`); `test_dir` is
/// the crate root's helper for tests.
const CONFINE_LAYERS: &[(&str, &[&str])] = &[
    ("vfork", &[]),
    ("tty", &[]),
    ("floor", &["test_dir", "vfork"]),
    ("child", &["floor", "vfork"]),
];

/// The same for the kernel's part of the floor (`crates/confine/src/floor`), whose modules
/// import each other as `super::x` (or `crate::floor::x`): the system calls every step
/// shares (`sys`: a failure said between `fork` and `exec`, descriptors passed over a
/// socket) at the bottom, then the audit socket, the PID namespace, the porter, the connect
/// filter's bridge, the network namespace, the user and mount namespaces, the namespaces
/// made at start-up, and on top the kernel's probe and the confinement applied (`kernel`).
/// `FloorError`, `Mode`, `NamespaceReceiver` and the floor's data (`plan`, `spec`,
/// `caches`…, re-exported from `crates/floor`) are the module root's.
const CONFINE_FLOOR_LAYERS: &[(&str, &[&str])] = &[
    ("sys", &[]),
    ("denials", &["Unavailable"]),
    ("pidns", &["FloorError", "decimal", "sys"]),
    ("porter", &["sys"]),
    ("bridge", &["Unavailable", "hosts", "names", "porter"]),
    ("netns", &["FloorError", "bridge", "sys"]),
    (
        "namespaces",
        &["FloorError", "Plan", "hosts", "netns", "plan", "sys"],
    ),
    (
        "premade",
        &[
            "Mode",
            "Unavailable",
            "apparmor",
            "caches",
            "namespaces",
            "netns",
            "plan",
            "sys",
        ],
    ),
    (
        "kernel",
        &[
            "ENV_FLOOR",
            "FloorError",
            "Mode",
            "NamespaceReceiver",
            "Plan",
            "Report",
            "Unavailable",
            "apparmor",
            "caches",
            "denials",
            "namespaces",
            "netns",
            "pidns",
            "plan",
            "premade",
            "spec",
            "sys",
        ],
    ),
];

/// The same for the floor's data (`crates/floor/src`): the leaves (secrets, paths, exit
/// codes), the agent's state files and command above the paths, the spec above the
/// ecosystems' files, the network's rules and credentials above the spec, the plan above
/// them, the caches and the explanations above the plan. `random_hex`, `error_chain`,
/// `test_dir`, `Unavailable` and `ENV_FLOOR` are the crate root's.
const FLOOR_LAYERS: &[(&str, &[&str])] = &[
    ("secrets", &[]),
    ("resolve", &[]),
    ("denials", &[]),
    ("exit", &["error_chain"]),
    ("beneath", &["test_dir"]),
    ("rundir", &["random_hex"]),
    ("statefile", &["beneath", "random_hex", "test_dir"]),
    ("agent", &["statefile"]),
    ("runfiles", &["secrets"]),
    ("spec", &[]),
    ("hosts", &["spec"]),
    ("names", &["hosts"]),
    ("credentials", &["hosts", "random_hex", "secrets", "spec"]),
    ("apparmor", &["ENV_FLOOR", "Unavailable"]),
    (
        "plan",
        &["beneath", "resolve", "spec", "statefile", "test_dir"],
    ),
    (
        "caches",
        &[
            "Unavailable",
            "beneath",
            "plan",
            "rundir",
            "statefile",
            "test_dir",
        ],
    ),
    ("explain", &["plan"]),
];

/// The same for the process tree (`crates/process/src`).
const PROCESS_LAYERS: &[(&str, &[&str])] = &[
    ("procfs", &[]),
    ("sockets", &["procfs"]),
    ("cgroup", &[]),
    ("tree", &["cgroup", "procfs"]),
];

/// The same for the wire crate (`crates/wire/src`).
/// `is_plain_name` is its root's helper.
const WIRE_LAYERS: &[(&str, &[&str])] = &[
    ("jsonrpc", &[]),
    ("protocol", &["jsonrpc"]),
    ("control", &["is_plain_name", "jsonrpc"]),
];

/// The same for the policy crate (`crates/policy/src`), the diagram of its `lib.rs` from the
/// bottom up: the simple command as data, under the readers of commands and code, under the
/// walker of shell commands, under an event's facts, under the rules and what checks them.
/// A session's memory of written files sits beneath the paths, whose resolver carries it.
/// What a run's decisions change and read (`session`: that memory, egress, placeholders) sits
/// on the memory, beside the paths.
/// `pattern` is the crate root's helper (a regular expression of this crate's own); the
/// engine itself (`Policy`, in the root) uses them all and none of them uses it.
const POLICY_LAYERS: &[(&str, &[&str])] = &[
    ("command", &[]),
    ("error", &[]),
    ("sections", &["error"]),
    ("checkpoints", &["error", "sections"]),
    ("memory", &["command"]),
    ("session", &["memory"]),
    ("paths", &["memory"]),
    ("protected", &["paths"]),
    ("inline", &["command", "pattern"]),
    ("semantics", &["command"]),
    (
        "shell",
        &["command", "inline", "paths", "pattern", "semantics"],
    ),
    (
        "extract",
        &[
            "command",
            "memory",
            "paths",
            "pattern",
            "protected",
            "semantics",
            "shell",
        ],
    ),
    ("taint", &["extract"]),
    ("reversible", &["command", "extract", "paths"]),
    ("rules", &["checkpoints", "error", "extract", "paths"]),
    ("hosts", &["error", "extract", "rules", "sections"]),
    (
        "examples",
        &["error", "extract", "paths", "protected", "rules"],
    ),
    ("checked", &["error", "examples", "hosts", "rules"]),
    // The crate's tests of the whole engine, above the root (`use super::*`) and what it
    // keeps private there.
    (
        "tests",
        &[
            "DEFAULT_TOML",
            "TAINT_RULE",
            "checkpoints",
            "floor_spec",
            "memory",
        ],
    ),
];

/// Imports against the layers, to be taken out (issue: "put types where they belong").
/// None left: the five the review named (child -> frameworks, audit -> gate, frameworks -> run,
/// cli <-> config, host -> cli) were taken out by moving each type below its users.
const EXCEPTIONS: &[(&str, &str, &str)] = &[];

#[test]
fn every_import_follows_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    check(imports(&root.join("src")), LAYERS, EXCEPTIONS);
    check(
        imports(&root.join("crates/confine/src")),
        CONFINE_LAYERS,
        &[],
    );
    check(
        imports_below(&root.join("crates/confine/src/floor"), 1),
        CONFINE_FLOOR_LAYERS,
        &[],
    );
    check(imports(&root.join("crates/floor/src")), FLOOR_LAYERS, &[]);
    check(
        imports(&root.join("crates/process/src")),
        PROCESS_LAYERS,
        &[],
    );
    check(imports(&root.join("crates/wire/src")), WIRE_LAYERS, &[]);
    check(imports(&root.join("crates/policy/src")), POLICY_LAYERS, &[]);
}

/// Fails with every import of `actual` that `layers` (and `exceptions`) do not allow.
fn check(
    actual: BTreeMap<String, BTreeSet<String>>,
    layers: &[(&str, &[&str])],
    exceptions: &[(&str, &str, &str)],
) {
    assert!(!actual.is_empty(), "no module found: the crate moved?");
    let mut wrong = Vec::new();
    // Bottom up: a module may name only modules listed before it, so that no two modules
    // can import each other, however the lists grow.
    for (i, (module, deps)) in layers.iter().enumerate() {
        for dep in deps.iter() {
            let position = layers.iter().position(|(m, _)| m == dep);
            if position.is_some_and(|p| p >= i) {
                wrong.push(format!(
                    "{module} may import {dep}, which its table lists above it: the table goes bottom up"
                ));
            }
        }
    }
    let layers: BTreeMap<&str, BTreeSet<&str>> = layers
        .iter()
        .map(|(m, deps)| (*m, deps.iter().copied().collect()))
        .collect();
    let mut used = BTreeSet::new();
    for (module, deps) in &actual {
        let Some(allowed) = layers.get(module.as_str()) else {
            wrong.push(format!(
                "{module}: a top-level module the layers do not list"
            ));
            continue;
        };
        for dep in deps {
            if allowed.contains(dep.as_str()) {
                continue;
            }
            match exceptions.iter().find(|(m, d, _)| m == module && d == dep) {
                Some(e) => {
                    used.insert((e.0, e.1));
                }
                None => wrong.push(format!(
                    "{module} imports crate::{dep}, which its layer does not allow"
                )),
            }
        }
    }
    for (m, d, why) in exceptions {
        if !used.contains(&(*m, *d)) {
            wrong.push(format!(
                "the exception {m} -> {d} ({why}) is gone: take it off the list"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Each top-level module's imports of the others under `src`: `crate::x` paths, `super::`
/// paths that climb to the crate root (`super::super::x` two files down), and the names of
/// their `{..}` groups. A file's depth is its path's (`a/b.rs` and `a/b/mod.rs` are two
/// down), plus the inline modules (`mod tests {`) it is inside, which rustfmt's indentation
/// shows: such a module ends at the `}` of its own indentation.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    imports_below(src, 0)
}

/// [`imports`] for the modules of a folder `offset` modules beneath the crate root (`src`
/// is then that folder, `crates/confine/src/floor` for `offset` 1): their imports of each
/// other, as `super::x` or as `crate::<folder>::x`; what they import from outside the folder
/// is the crate's table's to check.
fn imports_below(src: &Path, offset: usize) -> BTreeMap<String, BTreeSet<String>> {
    let path =
        regex::Regex::new(r"\b(crate|super)((?:::super)*)::(\{|\w+)(?:::(\{|\w+))?").unwrap();
    let folder = src.file_name().unwrap().to_string_lossy().into_owned();
    let inline = regex::Regex::new(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{").unwrap();
    let char_literal = regex::Regex::new(r"'(?:\\.|[^\\'])'").unwrap();
    let string_literal = regex::Regex::new(r#""(?:\\.|[^"\\])*""#).unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    collect(src, &mut files);
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        let mut parts: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        // The root of the crate (or of the folder) is the one every module sits beneath.
        if parts.is_empty() || matches!(parts[0].as_str(), "lib" | "main" | "bin") {
            continue;
        }
        let module = parts[0].clone();
        let text = std::fs::read_to_string(&file).unwrap();
        // Comments out, then the text of literals (`'"'` first, so that its quote opens none).
        let code: Vec<String> = text
            .lines()
            .map(|l| {
                let l = l.split("//").next().unwrap_or("");
                let l = char_literal.replace_all(l, "' '");
                string_literal.replace_all(&l, "\"\"").into_owned()
            })
            .collect();
        let deps = out.entry(module.clone()).or_default();
        // The indentation of each inline module the line is inside.
        let mut open: Vec<String> = Vec::new();
        for (i, line) in code.iter().enumerate() {
            while open
                .last()
                .is_some_and(|indent| line.strip_prefix(indent.as_str()) == Some("}"))
            {
                open.pop();
            }
            let depth = offset + parts.len() + open.len();
            for c in path.captures_iter(line) {
                let climbs = c[2].matches("super").count();
                // The length of the module path the first named segment is beneath: 0 is
                // the crate root.
                let level = match &c[1] {
                    "crate" => 0,
                    _ => depth.checked_sub(1 + climbs).unwrap_or_else(|| {
                        panic!("{}:{}: climbs above the crate root", file.display(), i + 1)
                    }),
                };
                // The segment that names a module of the folder: the first one of a path
                // from the folder itself, the second of `crate::<folder>::x`.
                let group = match level {
                    l if l == offset => 3,
                    0 if offset == 1 && &c[3] == folder.as_str() => 4,
                    _ => continue,
                };
                let Some(segment) = c.get(group) else {
                    continue;
                };
                if segment.as_str() == "{" {
                    let rest = code[i..].join("\n");
                    deps.extend(group_heads(&rest[segment.end()..]));
                } else {
                    deps.insert(segment.as_str().to_owned());
                }
            }
            if let Some(c) = inline.captures(line) {
                open.push(c[1].to_owned());
            }
        }
        deps.remove(&module);
        deps.remove("self");
    }
    out
}

/// The first segment of each path of a `{..}` group, `text` starting after its `{`:
/// `a::{b, c}, d}` gives `a` and `d`.
fn group_heads(text: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let (mut depth, mut item) = (0, String::new());
    for ch in text.chars() {
        match ch {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => heads.push(std::mem::take(&mut item)),
            _ if depth == 0 => item.push(ch),
            _ => {}
        }
    }
    heads.push(item);
    heads
        .iter()
        .filter_map(|i| i.trim().split("::").next())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The workspace's crates from the bottom up, each with its folder and the crates of ours
/// it may depend on (`[dependencies]` and `[dev-dependencies]`), each listed before it.
const CRATES: &[(&str, &str, &[&str])] = &[
    ("ahp-wrap-wire", "crates/wire", &[]),
    ("ahp-wrap-floor", "crates/floor", &[]),
    ("ahp-wrap-process", "crates/process", &["ahp-wrap-floor"]),
    (
        "ahp-wrap-confine",
        "crates/confine",
        &["ahp-wrap-floor", "ahp-wrap-process"],
    ),
    (
        "ahp-wrap-policy",
        "crates/policy",
        &["ahp-wrap-floor", "ahp-wrap-wire"],
    ),
    (
        "ahp-wrap-adapter",
        "crates/adapter",
        &["ahp-wrap-floor", "ahp-wrap-wire"],
    ),
    (
        "ahp-wrap-shim-claude-code",
        "shims/claude-code",
        &["ahp-wrap-adapter"],
    ),
    ("ahp-wrap-shim-codex", "shims/codex", &["ahp-wrap-adapter"]),
    (
        "ahp-wrap-shim-copilot",
        "shims/copilot",
        &["ahp-wrap-adapter"],
    ),
    (
        "ahp-wrap-shim-gemini",
        "shims/gemini",
        &["ahp-wrap-adapter"],
    ),
    (
        "ahp-wrap-shim-opencode",
        "shims/opencode",
        &["ahp-wrap-adapter"],
    ),
    (
        "ahp-wrap",
        ".",
        &[
            "ahp-wrap-adapter",
            "ahp-wrap-confine",
            "ahp-wrap-floor",
            "ahp-wrap-policy",
            "ahp-wrap-shim-claude-code",
            "ahp-wrap-shim-codex",
            "ahp-wrap-shim-copilot",
            "ahp-wrap-shim-gemini",
            "ahp-wrap-shim-opencode",
            "ahp-wrap-testkit",
            "ahp-wrap-wire",
        ],
    ),
    ("ahp-wrap-testkit", "tests/support", &["ahp-wrap"]),
];

/// Each crate depends only on the crates of ours beneath it in [`CRATES`], and every member
/// of the workspace is in the table: a crate that reached up (the policy to the kernel's
/// part of the floor, a shim past the adapter) fails here before it fails a review.
#[test]
fn every_crate_depends_only_on_crates_beneath_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest(&root.join("Cargo.toml"));
    let members: BTreeSet<&str> = workspace["workspace"]["members"]
        .as_array()
        .expect("the workspace lists its members")
        .iter()
        .filter_map(toml::Value::as_str)
        .chain(["."])
        .collect();
    let listed: BTreeSet<&str> = CRATES.iter().map(|(_, dir, _)| *dir).collect();
    let mut wrong = Vec::new();
    for dir in members.difference(&listed) {
        wrong.push(format!("{dir}: a member the crates' table does not list"));
    }
    for (i, (name, dir, allowed)) in CRATES.iter().enumerate() {
        for dep in allowed.iter() {
            let position = CRATES.iter().position(|(n, _, _)| n == dep);
            // The testkit runs the application it tests, from above it: a dev-dependency
            // of the application's suites, not a layer.
            if position.is_none_or(|p| p >= i) && *dep != "ahp-wrap-testkit" {
                wrong.push(format!(
                    "{name} may depend on {dep}, which the table does not list beneath it"
                ));
            }
        }
        let manifest = manifest(&root.join(dir).join("Cargo.toml"));
        let ours = ["dependencies", "dev-dependencies"]
            .iter()
            .flat_map(|section| dependencies(&manifest, section))
            .filter(|d| d.starts_with("ahp-wrap"));
        for dep in ours {
            if !allowed.contains(&dep.as_str()) {
                wrong.push(format!(
                    "{dir}/Cargo.toml: {name} depends on {dep}, which its layer does not allow"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The most lines `crates/confine`, the one crate with `unsafe` code, may have: what a
/// reviewer of its `unsafe` blocks reads whole.
const CONFINE_MAX_LINES: usize = 6000;

/// `unsafe` code (a block, a function, an `impl`, an `extern` block, an attribute such as
/// `#[unsafe(no_mangle)]`, or `allow(unsafe_code)`) is in `crates/confine` alone, and in the
/// hook's C `main` (`src/bin/ahp-wrap-hook.rs`); the integration tests and benches allow
/// it at their roots for their own system calls. `crates/confine` stays under
/// [`CONFINE_MAX_LINES`] lines.
#[test]
fn only_confine_has_unsafe_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let code = regex::Regex::new(
        r"\bunsafe\s*(\{|fn\b|impl\b|extern\b|trait\b|\()|allow\(unsafe_code\)|no_mangle",
    )
    .unwrap();
    let mut files = Vec::new();
    for dir in ["crates", "shims", "src"] {
        collect(&root.join(dir), &mut files);
    }
    let confine = root.join("crates/confine");
    let hook = root.join("src/bin/ahp-wrap-hook.rs");
    let mut wrong = Vec::new();
    let mut confine_lines = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        if file.starts_with(&confine) {
            confine_lines += text.lines().count();
            continue;
        }
        if *file == hook {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            let line = line.split("//").next().unwrap_or("");
            if code.is_match(line) {
                wrong.push(format!(
                    "{}:{}: unsafe code outside crates/confine",
                    file.strip_prefix(root).unwrap().display(),
                    i + 1
                ));
            }
        }
    }
    assert!(
        confine_lines > 1000,
        "crates/confine has {confine_lines} lines: moved?"
    );
    if confine_lines >= CONFINE_MAX_LINES {
        wrong.push(format!(
            "crates/confine has {confine_lines} lines, {CONFINE_MAX_LINES} at most: what needs \
             no unsafe code belongs in crates/floor or crates/process"
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Dependencies a crate declares without naming them in its code, each with why it stays
/// (a dependency held only to turn on a feature of another's, say); none today.
const UNNAMED_DEPENDENCIES: &[(&str, &str, &str)] = &[];

/// Every dependency a crate of the workspace declares is named by its code: `name::`,
/// `use name` or `extern crate name` (with `-` read as `_`), in `src/` for `[dependencies]`,
/// in `build.rs` for `[build-dependencies]`, and in `src/`, `tests/`, `benches/` and
/// `examples/` for `[dev-dependencies]` (their `target.…` forms alike). A dependency nothing
/// names costs every clean build its compile time and hides what a crate really uses.
#[test]
fn every_declared_dependency_is_used() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest(&root.join("Cargo.toml"));
    let members = workspace["workspace"]["members"]
        .as_array()
        .expect("the workspace lists its members");
    let crates = std::iter::once(".").chain(members.iter().filter_map(toml::Value::as_str));
    let mut wrong = Vec::new();
    let mut used = BTreeSet::new();
    for dir in crates {
        let manifest = manifest(&root.join(dir).join("Cargo.toml"));
        let sections = [
            ("dependencies", &["src"][..]),
            ("build-dependencies", &["build.rs"][..]),
            (
                "dev-dependencies",
                &["src", "tests", "benches", "examples"][..],
            ),
        ];
        for (section, places) in sections {
            let named = named_crates(&code_in(&root.join(dir), places));
            for name in dependencies(&manifest, section) {
                if named.contains(&name.replace('-', "_")) {
                    continue;
                }
                match UNNAMED_DEPENDENCIES
                    .iter()
                    .find(|(c, d, _)| *c == dir && *d == name)
                {
                    Some(e) => {
                        used.insert((e.0, e.1));
                    }
                    None => wrong.push(format!(
                        "{dir}/Cargo.toml: [{section}] {name} is named nowhere in {}",
                        places.join(", ")
                    )),
                }
            }
        }
    }
    for (c, d, why) in UNNAMED_DEPENDENCIES {
        if !used.contains(&(*c, *d)) {
            wrong.push(format!(
                "the exception {c}: {d} ({why}) is gone: take it off the list"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn manifest(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap();
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names a manifest's `section` declares, its `[target.….section]` tables included.
fn dependencies(manifest: &toml::Table, section: &str) -> BTreeSet<String> {
    let targets = manifest
        .get("target")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flat_map(|t| t.values());
    std::iter::once(manifest.get(section))
        .chain(targets.map(|t| t.get(section)))
        .flatten()
        .filter_map(toml::Value::as_table)
        .flat_map(|t| t.keys().cloned())
        .collect()
}

/// The code of the Rust files in `places` (files or directories under `dir`), comments out;
/// the testkit's directory is a crate of its own, not the root crate's tests.
fn code_in(dir: &Path, places: &[&str]) -> String {
    let mut files = Vec::new();
    for place in places {
        let path = dir.join(place);
        if path.is_file() {
            files.push(path);
        } else {
            collect(&path, &mut files);
        }
    }
    let own_crates = [dir.join("tests/support"), dir.join("tests/.cache")];
    files
        .iter()
        .filter(|f| !own_crates.iter().any(|c| f.starts_with(c)))
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            text.lines()
                .map(|l| l.split("//").next().unwrap_or("").to_owned())
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names `code` uses as a path's first segment (`name::`, not `x::name::`), after `use`
/// and after `extern crate`: where a crate's name can stand.
fn named_crates(code: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"(?:^|[^\w:])(\w+)::|\buse (\w+)|\bextern crate (\w+)").unwrap();
    re.captures_iter(code)
        .filter_map(|c| c.iter().skip(1).flatten().next())
        .map(|m| m.as_str().to_owned())
        .collect()
}
