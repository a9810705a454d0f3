//! Compiles the manifest shims in, and marks the end-to-end suites skipped on purpose, so
//! that they show as *ignored*.
//!
//! Every `shims/<name>/shim.toml` becomes one entry of `$OUT_DIR/built_in_shims.rs`, which
//! `src/frameworks/manifest` includes: a shim written as a manifest needs no Rust, not even a
//! line in a list.
//!
//! `AHP_WRAP_SKIP_AGENT_E2E` names test setups (`tests/<setup>/setup.sh`, comma-separated, or
//! `all`) whose real CLIs or servers were not installed on purpose. Each named setup becomes
//! `--cfg skip_e2e="<setup>"`, and every test that needs that setup carries
//! `#[cfg_attr(skip_e2e = "<setup>", ignore = "…")]`: the test harness then reports it as
//! ignored, with the reason, instead of running it or counting a test that checked nothing as
//! passed. CI never sets the variable.

use std::path::Path;

const SKIP_ENV: &str = "AHP_WRAP_SKIP_AGENT_E2E";

fn main() {
    built_in_shims();
    println!("cargo::rerun-if-env-changed={SKIP_ENV}");
    println!("cargo::rustc-check-cfg=cfg(skip_e2e, values(any()))");
    let list = std::env::var(SKIP_ENV).unwrap_or_default();
    let named: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let skipped: Vec<String> = if named.contains(&"all") {
        setups()
    } else {
        named.iter().map(|s| (*s).to_owned()).collect()
    };
    for setup in skipped {
        println!("cargo::rustc-cfg=skip_e2e=\"{setup}\"");
    }
}

/// Every setup under `tests/`: the directories with a `setup.sh`.
fn setups() -> Vec<String> {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let Ok(entries) = std::fs::read_dir(&tests) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.path().join("setup.sh").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect()
}

/// Writes the list of manifest shims for `include!`: each one's path and text, and the two
/// fields a run looks every framework up by (its name and executables), read here so that a
/// run parses only the manifest it uses, not every one at start-up.
#[allow(
    clippy::expect_used,
    reason = "a build script's failure is a panic, which cargo shows"
)]
fn built_in_shims() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    println!("cargo::rerun-if-changed=shims");
    let mut found: Vec<String> = std::fs::read_dir(root.join("shims"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().join("shim.toml").is_file())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    let mut list = String::from("&[\n");
    for name in found {
        let relative = format!("shims/{name}/shim.toml");
        let absolute = root.join(&relative);
        let text = std::fs::read_to_string(&absolute)
            .unwrap_or_else(|e| panic!("{relative}: cannot read it: {e}"));
        let (name, executables) = identity(&text).unwrap_or_else(|why| panic!("{relative}: {why}"));
        list.push_str(&format!(
            "    BuiltIn {{ path: {relative:?}, text: include_str!({:?}), name: {name:?}, \
             executables: &{executables:?} }},\n",
            absolute.display().to_string()
        ));
    }
    list.push(']');
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(Path::new(&out).join("built_in_shims.rs"), list).expect("OUT_DIR is writable");
}

/// A manifest's `name` and `executables` (the rest is checked where it is parsed, and by the
/// unit test that loads every built-in manifest).
fn identity(text: &str) -> Result<(String, Vec<String>), String> {
    let table: toml::Table = text.parse().map_err(|e| format!("not TOML: {e}"))?;
    let name = table
        .get("name")
        .and_then(toml::Value::as_str)
        .ok_or("no `name` string")?
        .to_owned();
    let executables = table
        .get("executables")
        .and_then(toml::Value::as_array)
        .and_then(|list| {
            list.iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or("no `executables` list of strings")?;
    Ok((name, executables))
}
