//! Reads the default policy's `[checkpoints]` and `[floor]` sections once, when the crate is
//! built, into JSON (`$OUT_DIR/default-checkpoints.json`, `$OUT_DIR/default-floor.json`):
//! every run reads both at start-up, and JSON is read in a fraction of the time their
//! commented TOML takes. A section that does not parse fails the build.

use std::path::Path;

fn main() {
    let source = Path::new("src/default.toml");
    println!("cargo::rerun-if-changed={}", source.display());
    let text =
        std::fs::read_to_string(source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
    // The two sections end the policy, `[checkpoints]` first.
    let (rest, floor) = text
        .rsplit_once("\n[floor]\n")
        .unwrap_or_else(|| panic!("{} has no [floor] section at its end", source.display()));
    let (_, checkpoints) = rest
        .rsplit_once("\n[checkpoints]\n")
        .unwrap_or_else(|| panic!("{} has no [checkpoints] before [floor]", source.display()));
    write_json("checkpoints", checkpoints);
    write_json("floor", floor);
}

/// The section `name` (its body `body`) as JSON in `$OUT_DIR/default-<name>.json`.
fn write_json(name: &str, body: &str) {
    let section = format!("[{name}]\n{body}");
    let value: toml::Value = toml::from_str(&section)
        .unwrap_or_else(|e| panic!("src/default.toml: its [{name}] section: {e}"));
    let json = serde_json::to_string(&value).unwrap_or_else(|e| panic!("[{name}] as JSON: {e}"));
    let out = std::env::var_os("OUT_DIR").unwrap_or_else(|| panic!("no OUT_DIR"));
    let out = Path::new(&out).join(format!("default-{name}.json"));
    std::fs::write(&out, json).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}
