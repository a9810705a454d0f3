//! The framework registry: the list of frameworks this build knows ([`all`], [`find`],
//! [`detect`], [`floor_owner`]), with the two shims that are no agent's own: the generic one
//! ([`mod@generic`]) and the shims declared by a manifest ([`manifest`]).
//!
//! The contract between the core and the shims is the adapter crate (`ahp-wrap-adapter`,
//! [`adapter`] here); each agent's shim is a crate of its own under `shims/<name>/` that
//! depends on that crate alone, so Cargo keeps it from the core. `generic.rs` and
//! `manifest/` live here, and hold themselves to the same rule (a test below checks that
//! they name no `crate::` path outside [`adapter`]).
//!
//! Must not touch: the harness client, the control socket, the session or the policy
//! engine: deciding is the core's job, speaking the agent's contract is the shims'.

pub(crate) use ahp_wrap_adapter as adapter;
pub(crate) mod generic;
pub(crate) mod manifest;
#[cfg(test)]
mod rule;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use adapter::{
    installed_version, AgentCommand, AgentFiles, CallerReply, Framework, FrameworkError,
    HookContext, Installed, Mapped, Proven, RunContext, SystemFile,
};
use ahp_wrap_shim_claude_code as claude_code;
use ahp_wrap_shim_codex as codex;
use ahp_wrap_shim_copilot as copilot;
use ahp_wrap_shim_gemini as gemini;
use ahp_wrap_shim_opencode as opencode;

static GENERIC: generic::Generic = generic::Generic::GENERIC;
static PATH: generic::Generic = generic::Generic::PATH;
static CLAUDE_CODE: claude_code::ClaudeCode = claude_code::ClaudeCode;
static CODEX: codex::Codex = codex::Codex;
static GEMINI: gemini::Gemini = gemini::Gemini;
static COPILOT: copilot::Copilot = copilot::Copilot;
static OPENCODE: opencode::OpenCode = opencode::OpenCode(&opencode::OPENCODE);
static KILO: opencode::OpenCode = opencode::OpenCode(&opencode::KILO);

/// Every framework this process knows, once loaded.
static REGISTRY: OnceLock<Vec<&'static dyn Framework>> = OnceLock::new();

/// Loads the manifest shims named on the command line (`--shim FILE`) into the registry,
/// beside the built-in ones, the ones `AHP_WRAP_SHIM` names and the user's own. Called
/// before the registry is first used; a manifest that does not load is an error here.
pub(crate) fn load_shims(files: &[PathBuf]) -> Result<(), manifest::ManifestError> {
    if files.is_empty() {
        return Ok(());
    }
    let mut named = Vec::new();
    for file in files {
        let path = std::fs::canonicalize(file).unwrap_or_else(|_| file.clone());
        named.push((manifest::load(&path)?, path));
    }
    let names: Vec<&'static str> = named.iter().map(|(m, _)| m.name).collect();
    if REGISTRY.set(registry(named)).is_err() {
        // Loaded already: by an earlier task of this process with the same options, fine;
        // else the frameworks were looked up before the options were read.
        for name in names.into_iter().filter(|n| find(n).is_none()) {
            tracing::warn!("the shim manifest {name} came too late to be loaded; it is left out");
        }
    }
    Ok(())
}

/// The code shims, then the manifests: built in, named by `AHP_WRAP_SHIM`, in the user's
/// directory, and `named`. A later manifest of a name replaces an earlier framework of that
/// name (a user's copy of a shim, for a newer agent). A manifest from a file that does not
/// load is left out with a warning: `ahp-wrap doctor` lists it.
fn registry(named: Vec<(manifest::Manifest, PathBuf)>) -> Vec<&'static dyn Framework> {
    let mut list: Vec<&'static dyn Framework> = vec![
        &GENERIC,
        &PATH,
        &CLAUDE_CODE,
        &CODEX,
        &GEMINI,
        &COPILOT,
        &OPENCODE,
        &KILO,
    ];
    let mut shims: Vec<&'static dyn Framework> = manifest::built_in().collect();
    let from_file = |(m, path)| -> &'static dyn Framework {
        Box::leak(Box::new(manifest::ManifestShim::from_file(m, path)))
    };
    for path in manifest::files() {
        match manifest::load(&path) {
            Ok(m) => shims.push(from_file((m, path))),
            Err(e) => tracing::warn!("the shim manifest {e}; it is left out"),
        }
    }
    shims.extend(named.into_iter().map(from_file));
    for shim in shims {
        list.retain(|f| f.name() != shim.name());
        list.push(shim);
    }
    list
}

/// Every framework this process knows.
pub(crate) fn all() -> &'static [&'static dyn Framework] {
    REGISTRY.get_or_init(|| registry(Vec::new()))
}

/// The framework called `name`.
pub fn find(name: &str) -> Option<&'static dyn Framework> {
    // A framework's name, or the name of its agent's executable (`claude` for claude-code).
    let all = all();
    all.iter()
        .find(|f| f.name() == name)
        .or_else(|| all.iter().find(|f| f.executables().contains(&name)))
        .copied()
}

/// The generic framework (a manifest of the user's may take its name, as for any other).
pub(crate) fn generic() -> &'static dyn Framework {
    find("generic").unwrap_or(&GENERIC)
}

/// The framework whose agent executable is `program`, else `generic`.
pub(crate) fn detect(program: &Path) -> &'static dyn Framework {
    let file = program.file_name().and_then(|f| f.to_str()).unwrap_or("");
    all()
        .iter()
        .copied()
        .find(|f| f.executables().contains(&file))
        .unwrap_or(&GENERIC)
}

/// The framework whose [`Framework::agent_files`] a run of `program` keeps on the floor:
/// `framework` itself when it has hooks, else the one that names `program` as one of its
/// executables or adapters (an ACP adapter, an agent run with `--framework generic`).
pub(crate) fn floor_owner(
    framework: &'static dyn Framework,
    program: &Path,
) -> &'static dyn Framework {
    if framework.injects_hooks() {
        return framework;
    }
    let file = program.file_name().and_then(|f| f.to_str()).unwrap_or("");
    all()
        .iter()
        .copied()
        .find(|f| f.executables().contains(&file) || f.adapters().contains(&file))
        .unwrap_or(framework)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each shim of an agent with hooks declares the versions it is proven on, and they
    /// hold the one its end-to-end suite installs.
    #[test]
    fn each_shim_is_proven_on_the_version_its_suite_pins() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut seen = Vec::new();
        for f in all().iter().filter(|f| f.injects_hooks()) {
            let proven = f
                .proven()
                .unwrap_or_else(|| panic!("{} declares no proven versions", f.name()));
            // Each setup under tests/ is named as its framework.
            let setup = f.name();
            let pinned = std::fs::read_to_string(root.join("tests").join(setup).join("VERSION"))
                .unwrap_or_else(|e| panic!("{}: tests/{setup}/VERSION: {e}", f.name()));
            assert!(
                proven.contains(&pinned),
                "{}: {proven} vs {pinned}",
                f.name()
            );
            seen.push(f.name());
        }
        for shim in ["claude-code", "qwen", "droid"] {
            assert!(seen.contains(&shim), "{shim} in {seen:?}");
        }
    }

    /// Each agent's shim is found by its executable's name.
    #[test]
    fn each_agent_is_detected_by_its_executable() {
        for (program, name) in [
            ("/opt/bin/claude", "claude-code"),
            ("/usr/local/bin/codex", "codex"),
            ("/usr/local/bin/gemini", "gemini"),
            ("/x/copilot", "copilot"),
            ("/x/opencode", "opencode"),
            ("/x/kilo", "kilo"),
            ("/x/qwen", "qwen"),
            ("/x/droid", "droid"),
        ] {
            assert_eq!(detect(Path::new(program)).name(), name, "{program}");
        }
    }

    #[test]
    fn unknown_agents_are_generic() {
        assert_eq!(detect(Path::new("/usr/bin/some-agent")).name(), "generic");
        assert_eq!(find("generic").map(|f| f.name()), Some("generic"));
        assert!(find("nope").is_none());
        // The executable's name is accepted too, as the notes and the README say `claude`.
        assert_eq!(find("claude").map(|f| f.name()), Some("claude-code"));
        assert_eq!(find("claude-code").map(|f| f.name()), Some("claude-code"));
    }
}
