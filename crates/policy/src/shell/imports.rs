//! The project's own modules a script imports: their code runs with it.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use super::super::inline::Lang;

/// Python modules built into the interpreter or frozen in it (3.11 on): a file of that name
/// beside a script does not shadow them.
const PYTHON_BUILTIN_MODULES: &[&str] = &[
    "sys",
    "builtins",
    "marshal",
    "posix",
    "pwd",
    "time",
    "itertools",
    "errno",
    "gc",
    "atexit",
    "faulthandler",
    "_abc",
    "_ast",
    "_codecs",
    "_collections",
    "_functools",
    "_imp",
    "_io",
    "_locale",
    "_operator",
    "_signal",
    "_sre",
    "_stat",
    "_string",
    "_thread",
    "_warnings",
    "_weakref",
    "os",
    "io",
    "abc",
    "codecs",
    "stat",
    "posixpath",
    "genericpath",
    "ntpath",
    "site",
    "_collections_abc",
    "_sitebuiltins",
    "zipimport",
    "runpy",
    "importlib",
];

/// The project's own modules a Python or JavaScript file imports (`import helpers`, `from
/// .db import x`, `require('./lib')`, `import x from "../y.js"`): their code runs too.
/// Modules found nowhere beside the file are libraries.
pub(super) fn local_imports(file: &Path, text: &str, lang: Lang) -> Vec<PathBuf> {
    static PY: LazyLock<regex::Regex> = LazyLock::new(|| {
        crate::pattern(
            r"(?m)^\s*(?:from\s+(\.*[\w.]*)\s+import\b|import\s+([\w.]+(?:\s*,\s*[\w.]+)*))",
        )
    });
    static JS: LazyLock<regex::Regex> = LazyLock::new(|| {
        crate::pattern(
            r#"(?:require\s*\(\s*|\bimport\s*\(\s*|\bfrom\s+|\bimport\s+)['"](\.{1,2}/[^'"]+)['"]"#,
        )
    });
    let Some(dir) = file.parent() else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = Vec::new();
    match lang {
        Lang::Python => {
            for c in PY.captures_iter(text) {
                let names: Vec<String> = match (c.get(1), c.get(2)) {
                    (Some(m), _) => vec![m.as_str().to_owned()],
                    (_, Some(m)) => m.as_str().split(',').map(|n| n.trim().to_owned()).collect(),
                    _ => continue,
                };
                for name in names {
                    // Built-in and frozen modules are never read from a file.
                    let top = name.split('.').next().unwrap_or_default();
                    if PYTHON_BUILTIN_MODULES.contains(&top) {
                        continue;
                    }
                    let dots = name.chars().take_while(|c| *c == '.').count();
                    let base = (1..dots).fold(dir.to_path_buf(), |d, _| {
                        d.parent().map_or(d.clone(), Path::to_path_buf)
                    });
                    let rel = name[dots..].replace('.', "/");
                    if rel.is_empty() {
                        continue;
                    }
                    found.extend(
                        [
                            base.join(format!("{rel}.py")),
                            base.join(&rel).join("__init__.py"),
                        ]
                        .into_iter()
                        .find(|p| p.is_file()),
                    );
                }
            }
        }
        Lang::Js => {
            for c in JS.captures_iter(text) {
                let rel = &c[1];
                let base = dir.join(rel);
                found.extend(
                    [
                        base.clone(),
                        base.with_extension("js"),
                        dir.join(format!("{rel}.js")),
                        dir.join(format!("{rel}.mjs")),
                        dir.join(format!("{rel}.cjs")),
                        dir.join(format!("{rel}.ts")),
                        base.join("index.js"),
                    ]
                    .into_iter()
                    .find(|p| p.is_file()),
                );
            }
        }
        _ => {}
    }
    found.sort();
    found.dedup();
    found.retain(|p| p != file);
    found
}
