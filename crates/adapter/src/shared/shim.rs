//! Who a shim speaks for, and the errors, reasons and hook commands every shim spelled out
//! the same way: one `Shim` constant per framework carries the names, these carry the words.

use std::borrow::Cow;
use std::path::Path;

use crate::{Final, FrameworkError};

/// A framework's shim, by name: what its errors, reasons and hook commands say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shim {
    /// The framework's name on the command line (`ahp-wrap hook <framework> <hook>`).
    pub framework: &'static str,
    /// How the agent is named in the reasons the model (and the person) reads.
    pub agent: &'static str,
}

impl Shim {
    /// The shim cannot prepare the agent's command line: `why`.
    pub fn prepare_error(self, why: impl std::fmt::Display) -> FrameworkError {
        FrameworkError::Prepare {
            framework: self.framework,
            why: why.to_string(),
        }
    }

    /// A payload that is not what the agent sends for `hook`.
    pub(crate) fn shape_error(self, hook: &str, why: impl Into<String>) -> FrameworkError {
        FrameworkError::Shape {
            framework: self.framework,
            hook: hook.to_owned(),
            why: why.into(),
        }
    }

    /// A hook name this shim never registers.
    pub fn unknown_hook(self, hook: &str) -> FrameworkError {
        self.shape_error(
            hook,
            format!("ahp-wrap registers no such {} hook", self.agent),
        )
    }

    /// The reason printed for a hook name this shim does not know: the verdict's own, if
    /// it has one.
    pub fn unknown_hook_reason(self, verdict: &Final) -> Cow<'_, str> {
        match verdict.reason() {
            Some(reason) => Cow::Borrowed(reason),
            None => format!("ahp-wrap does not know this {} hook", self.agent).into(),
        }
    }

    /// The reason given when a decision has no meaning on one of this agent's hooks.
    pub fn unexpected(self, verdict: &Final) -> String {
        super::output::unexpected(verdict, self.agent)
    }

    /// The command the agent runs for our `hook`: `ahp-wrap hook <framework> <hook>`, made
    /// unique by the run's `nonce` (see `settings::hook_command`).
    pub fn hook_command(self, self_exe: &Path, nonce: &str, hook: &str) -> String {
        super::settings::hook_command(self_exe, nonce, self.framework, hook)
    }

    /// Refuses an `ahp-wrap` path that the agent could expand (see
    /// `settings::check_plain_exe`).
    pub fn check_plain_exe(self, self_exe: &Path) -> Result<(), FrameworkError> {
        super::settings::check_plain_exe(self_exe, self.framework)
    }

    /// [`Shim::hook_command`] for agents that expand `$VAR` in settings values or hand the
    /// command to a shell: an `ahp-wrap` path they could expand is refused.
    pub fn plain_hook_command(
        self,
        self_exe: &Path,
        nonce: &str,
        hook: &str,
    ) -> Result<String, FrameworkError> {
        self.check_plain_exe(self_exe)?;
        Ok(self.hook_command(self_exe, nonce, hook))
    }

    /// The command of our `hook` in a file installed once for every run (see
    /// `settings::installed_hook_command`); an `ahp-wrap` path the agent could
    /// expand is refused.
    pub fn installed_hook_command(
        self,
        self_exe: &Path,
        hook: &str,
    ) -> Result<String, FrameworkError> {
        self.check_plain_exe(self_exe)?;
        Ok(super::settings::installed_hook_command(
            self_exe,
            self.framework,
            hook,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOO: Shim = Shim {
        framework: "foo",
        agent: "Foo CLI",
    };

    #[test]
    fn errors_and_reasons_name_the_framework_and_the_agent() {
        let e = FOO.prepare_error("why").to_string();
        assert_eq!(e, "cannot prepare the foo command line: why");
        let e = FOO.unknown_hook("Nope").to_string();
        assert!(
            e.contains("foo") && e.contains("Nope") && e.contains("no such Foo CLI hook"),
            "{e}"
        );
        let block = Final::Block {
            reason: "no".into(),
        };
        assert_eq!(FOO.unknown_hook_reason(&block), "no");
        assert_eq!(
            FOO.unknown_hook_reason(&Final::no_opinion()),
            "ahp-wrap does not know this Foo CLI hook"
        );
        assert!(FOO.unexpected(&block).contains("this Foo CLI hook"));
        assert!(FOO
            .plain_hook_command(Path::new("/$x/ahp-wrap"), "n", "H")
            .is_err());
        assert_eq!(
            FOO.plain_hook_command(Path::new("/bin/ahp-wrap"), "n", "H")
                .unwrap(),
            "AHP_WRAP_RUN=n exec '/bin/ahp-wrap' hook foo H"
        );
    }
}
