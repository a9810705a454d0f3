//! The manifests compiled into the binary (every `shims/<name>/shim.toml`), as frameworks,
//! each parsed the first time a run asks it more than the build read.

use std::path::Path;
use std::sync::OnceLock;

use super::{parse, ManifestShim};
use crate::frameworks::adapter::{
    AgentCommand, AgentFiles, CallerReply, Final, Framework, FrameworkError, HookContext, Mapped,
    Proven, RunContext, Shim, SystemFile,
};

/// A manifest compiled into the binary (`shims/<name>/shim.toml`): its text, and the two
/// fields the build read from it, by which every run looks frameworks up.
pub(super) struct BuiltIn {
    pub path: &'static str,
    pub text: &'static str,
    pub name: &'static str,
    pub executables: &'static [&'static str],
}

/// Every `shims/<name>/shim.toml`, by its path.
pub(super) const BUILT_IN: &[BuiltIn] = include!(concat!(env!("OUT_DIR"), "/built_in_shims.rs"));

/// The built-in manifests, as frameworks. Each is parsed the first time a run asks it more
/// than its name and executables: a run parses the one it uses, and a run of another
/// agent none (parsing the two of today was a quarter of a start-up's instructions).
pub(crate) fn built_in() -> impl Iterator<Item = &'static dyn Framework> {
    BUILT_IN.iter().map(|source| {
        let shim: &'static BuiltInShim = Box::leak(Box::new(BuiltInShim {
            source,
            parsed: OnceLock::new(),
        }));
        shim as &'static dyn Framework
    })
}

/// A built-in manifest, parsed when first used. One that does not load is a bug its unit
/// test catches; should it reach a build, its runs fail with the parser's words.
struct BuiltInShim {
    source: &'static BuiltIn,
    parsed: OnceLock<Result<ManifestShim, String>>,
}

impl BuiltInShim {
    fn shim(&self) -> Result<&ManifestShim, &str> {
        self.parsed
            .get_or_init(|| {
                parse(self.source.text, self.source.path)
                    .map(ManifestShim::new)
                    .map_err(|e| {
                        tracing::error!("the built-in shim {e}");
                        format!("the built-in shim does not load: {e}")
                    })
            })
            .as_ref()
            .map_err(String::as_str)
    }

    fn broken(&self, why: &str) -> FrameworkError {
        Shim {
            framework: self.source.name,
            agent: self.source.name,
        }
        .prepare_error(why)
    }
}

impl Framework for BuiltInShim {
    fn name(&self) -> &'static str {
        self.source.name
    }

    fn executables(&self) -> &'static [&'static str] {
        self.source.executables
    }

    fn prepare(&self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
        let shim = self.shim().map_err(|why| self.broken(why))?;
        shim.prepare(run, cmd)
    }

    fn map(&self, cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
        let shim = self.shim().map_err(|why| self.broken(why))?;
        shim.map(cx, payload)
    }

    fn render(&self, cx: &HookContext<'_>, event: Option<&Mapped>, verdict: &Final) -> CallerReply {
        match self.shim() {
            Ok(shim) => shim.render(cx, event, verdict),
            // Command hooks block on exit code 2 with the reason on stderr.
            Err(why) => CallerReply {
                stdout: Vec::new(),
                stderr: format!("ahp-wrap: {why}\n").into_bytes(),
                exit_code: 2,
            },
        }
    }

    fn native_ask(&self, cx: &HookContext<'_>) -> bool {
        self.shim().is_ok_and(|s| s.native_ask(cx))
    }

    fn injects_hooks(&self) -> bool {
        self.shim().map_or(true, |s| s.injects_hooks())
    }

    fn path_shims(&self) -> bool {
        self.shim().is_ok_and(|s| s.path_shims())
    }

    fn start_notice(&self, shown: &str, path_shims: bool) -> Option<String> {
        self.shim().ok()?.start_notice(shown, path_shims)
    }

    fn resume_hint(&self, framework_session: &str) -> Option<String> {
        self.shim().ok()?.resume_hint(framework_session)
    }

    /// A manifest names no adapters (the unit test of the built-in manifests checks it):
    /// answered without parsing, as every run asks every framework.
    fn adapters(&self) -> &'static [&'static str] {
        &[]
    }

    fn agent_files(&self, home: &Path) -> AgentFiles {
        self.shim().map(|s| s.agent_files(home)).unwrap_or_default()
    }

    fn model_hosts(&self) -> &'static [&'static str] {
        self.shim().map_or(&[], |s| s.model_hosts())
    }

    fn model_url_env(&self) -> &'static [&'static str] {
        self.shim().map_or(&[], |s| s.model_url_env())
    }

    fn instruction_files(&self) -> &'static [&'static str] {
        self.shim().map_or(&[], |s| s.instruction_files())
    }

    fn model_url_files(&self, home: &Path) -> Vec<std::path::PathBuf> {
        self.shim()
            .map(|s| s.model_url_files(home))
            .unwrap_or_default()
    }

    fn own_env(&self, args: &[std::ffi::OsString]) -> Vec<String> {
        self.shim().map(|s| s.own_env(args)).unwrap_or_default()
    }

    fn own_sandbox(&self, args: &[std::ffi::OsString], home: &Path, workspace: &Path) -> bool {
        self.shim()
            .is_ok_and(|s| s.own_sandbox(args, home, workspace))
    }

    fn proven(&self) -> Option<Proven> {
        self.shim().ok()?.proven()
    }

    fn packages(&self) -> &'static [&'static str] {
        self.shim().map_or(&[], |s| s.packages())
    }

    fn injection_refused(&self, hook_exe: &Path) -> Option<String> {
        self.shim().ok()?.injection_refused(hook_exe)
    }

    fn system_file(&self, hook_exe: &Path) -> Option<Result<SystemFile, FrameworkError>> {
        self.shim().ok()?.system_file(hook_exe)
    }

    fn wrap_mcp(
        &self,
        run: &RunContext,
        cmd: &mut AgentCommand,
        wrapper: &Path,
    ) -> Result<(), FrameworkError> {
        let shim = self.shim().map_err(|why| self.broken(why))?;
        shim.wrap_mcp(run, cmd, wrapper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What every run asks of every framework (to find the agent's, and the floor's owner)
    /// parses no manifest; the first question only the manifest answers parses it.
    #[test]
    fn a_built_in_manifest_is_parsed_only_when_more_than_its_name_is_asked() {
        for source in BUILT_IN {
            let shim = BuiltInShim {
                source,
                parsed: OnceLock::new(),
            };
            assert_eq!(shim.name(), source.name);
            assert!(!shim.executables().is_empty());
            assert!(shim.adapters().is_empty());
            assert!(shim.parsed.get().is_none(), "{}", source.path);
            assert!(!shim.packages().is_empty(), "{}", source.path);
            assert!(matches!(shim.parsed.get(), Some(Ok(_))), "{}", source.path);
        }
    }

    /// A built-in manifest that does not load (a bug the test above catches) fails its runs
    /// and blocks its hooks, saying why, rather than being an agent nobody supervises.
    #[test]
    fn a_built_in_manifest_that_does_not_load_fails_closed() {
        static BROKEN: BuiltIn = BuiltIn {
            path: "shims/broken/shim.toml",
            text: "name = \"broken\"\nexecutables = [\"broken\"]\n",
            name: "broken",
            executables: &["broken"],
        };
        let shim = BuiltInShim {
            source: &BROKEN,
            parsed: OnceLock::new(),
        };
        let dir = tempfile::tempdir().unwrap();
        let run = crate::frameworks::adapter::testing::run_in(dir.path());
        let e = shim
            .prepare(&run, &mut AgentCommand::default())
            .unwrap_err();
        assert!(e.to_string().contains("shims/broken/shim.toml"), "{e}");
        let cx = HookContext {
            hook: "PreToolUse",
            cwd: dir.path(),
            interactive: false,
        };
        assert!(shim.map(&cx, b"{}").is_err());
        // Even an allow: without the manifest there is no allow in the agent's terms.
        let allow = Final::Allow {
            explicit: true,
            modified_payload: None,
            extra: Default::default(),
        };
        let rendered = shim.render(&cx, None, &allow);
        assert_eq!(rendered.exit_code, 2);
        assert!(String::from_utf8_lossy(&rendered.stderr).contains("does not load"));
    }
}
