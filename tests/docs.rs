//! Docs that cannot drift: each shim's README lists every file of its code in its table of
//! files (`| `src/<file>` | what it does |`), so a file added to a shim is explained where a
//! shim author looks first; the crate's module map (`src/lib.rs`) names every top-level
//! module.

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
    let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).unwrap();
    let map: String = lib
        .lines()
        .filter(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .collect();
    assert!(modules.len() > 20, "only {} modules found", modules.len());
    let missing: Vec<&&str> = modules
        .iter()
        .filter(|m| !map.contains(&format!("[`{m}`]")))
        .collect();
    assert!(
        missing.is_empty(),
        "src/lib.rs's module map does not name {missing:?}"
    );
}
