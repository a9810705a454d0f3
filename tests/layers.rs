//! The layers inside each crate, kept by a test: each top-level module (a folder or file under
//! the crate's `src/`) lists what it may import from the others (`crate::x`), from the bottom
//! up.
//! An import that is not listed fails the test, and so does a listed exception that is no
//! longer needed (so the list only shrinks).
//!
//! The layers between crates are Cargo's to keep: `crates/wire` (jsonrpc, protocol, control),
//! `crates/confine` (vfork, rundir, statefile, exit, floor, child), `crates/policy` and
//! `crates/adapter` cannot import the application, nor wire or confine the policy, and a
//! shim (`shims/<name>/`) sees the adapter alone. The application sees the layers beneath
//! under their old names (`crate::floor`, re-exported), so its list still names them. The
//! adapter's two modules (`shared`, and `testing` for the shims' tests) need no list.
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

/// The same for the confinement crate (`crates/confine/src`): the floor and the agent's
/// process share only the leaves beneath them; `test_dir` is the crate root's helper for tests.
const CONFINE_LAYERS: &[(&str, &[&str])] = &[
    ("beneath", &["test_dir"]),
    ("exit", &["error_chain"]),
    ("rundir", &["random_hex"]),
    ("vfork", &[]),
    ("tty", &[]),
    ("statefile", &["beneath", "random_hex", "test_dir"]),
    (
        "floor",
        &[
            "beneath",
            "random_hex",
            "rundir",
            "statefile",
            "test_dir",
            "vfork",
        ],
    ),
    // The agent's process tells the floor's PID namespace when its `exec` fails
    // (`floor::pidns::exec_failed`): the one call from the process into the floor.
    (
        "child",
        &[
            "exit",
            "floor",
            "random_hex",
            "rundir",
            "statefile",
            "vfork",
        ],
    ),
];

/// The same for the wire crate (`crates/wire/src`).
/// `is_plain_name` is its root's helper.
const WIRE_LAYERS: &[(&str, &[&str])] = &[
    ("jsonrpc", &[]),
    ("protocol", &["jsonrpc"]),
    ("control", &["is_plain_name", "jsonrpc"]),
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
    check(imports(&root.join("crates/wire/src")), WIRE_LAYERS, &[]);
}

/// Fails with every import of `actual` that `layers` (and `exceptions`) do not allow.
fn check(
    actual: BTreeMap<String, BTreeSet<String>>,
    layers: &[(&str, &[&str])],
    exceptions: &[(&str, &str, &str)],
) {
    assert!(!actual.is_empty(), "no module found: the crate moved?");
    let layers: BTreeMap<&str, BTreeSet<&str>> = layers
        .iter()
        .map(|(m, deps)| (*m, deps.iter().copied().collect()))
        .collect();
    let mut wrong = Vec::new();
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

/// Each top-level module's imports of the others under `src`: `crate::x` paths and
/// `use crate::{x, ..}`.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let path = regex::Regex::new(r"crate::(\w+)").unwrap();
    let group = regex::Regex::new(r"use crate::\{([^}]*)\}").unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    collect(src, &mut files);
    let tagged = files.into_iter().filter_map(|f| {
        let rel = f.strip_prefix(src).ok()?;
        let first = rel
            .components()
            .next()?
            .as_os_str()
            .to_string_lossy()
            .into_owned();
        let module = first.trim_end_matches(".rs").to_owned();
        (!matches!(module.as_str(), "lib" | "main" | "bin")).then_some((module, f))
    });
    for (module, file) in tagged {
        let text = std::fs::read_to_string(&file).unwrap();
        let code: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let deps = out.entry(module.clone()).or_default();
        for c in path.captures_iter(&code) {
            deps.insert(c[1].to_owned());
        }
        for c in group.captures_iter(&code) {
            for name in c[1].split(',') {
                let name = name.trim().split("::").next().unwrap_or("").trim();
                if !name.is_empty() {
                    deps.insert(name.to_owned());
                }
            }
        }
        deps.remove(&module);
    }
    out
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
