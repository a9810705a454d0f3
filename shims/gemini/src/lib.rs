//! The `gemini` shim: Gemini CLI's hooks, injected for one run as system settings.
//!
//! Everything Gemini-specific lives in this folder (`shims/gemini/`): the injection through
//! `GEMINI_CLI_SYSTEM_SETTINGS_PATH` (`settings.rs`), the payload mapping (`map.rs`), the
//! rendering of decisions (`render.rs`), real hook payloads (`samples/`) and the README with
//! the tables. The hook contract was checked on the real CLI (`tests/gemini_e2e.rs`).
//!
//! Must not touch: anything outside `ahp_wrap_adapter` (enforced by a test
//! there), the user's own settings files (a run's injection lives in the run directory and on
//! the command line only), and any decision: this shim speaks Gemini CLI's hook contract,
//! the wrapper decides.

#![forbid(unsafe_code)]

mod installed;
mod map;
mod render;
mod settings;

use ahp_wrap_adapter::{
    hook_events, AgentCommand, AgentFiles, CallerReply, Final, Framework, FrameworkError,
    HookContext, KeyRule, Mapped, Proven, RunContext, Shim, StateFile, StateFormat, Treatment,
};

/// The framework's name on the command line and in `ahp-wrap hook gemini <Event>`.
pub const NAME: &str = "gemini";

/// Names the framework in errors and hook commands, and the agent in reasons.
pub const SHIM: Shim = Shim {
    framework: NAME,
    agent: "Gemini CLI",
};

hook_events! {
    /// The Gemini CLI hook events we register (in the order Gemini fires them in a simple
    /// run). Tool events take a `matcher` (a regex on the tool name) in Gemini's settings.
    pub enum GeminiEvent {
        /// A session starts or resumes; sent as `session_start`.
        SessionStart = "SessionStart",
        /// The user's prompt, before the agent works on it; sent as `pre_prompt` with
        /// `stage: "user_prompt"` (blocking).
        BeforeAgent = "BeforeAgent",
        /// A request is about to go to the model; sent as `pre_prompt` with
        /// `stage: "model_request"` (blocking).
        BeforeModel = "BeforeModel",
        /// A tool call is about to run; sent as `pre_action` (blocking).
        BeforeTool = "BeforeTool" [tool],
        /// A tool call ended, successfully or not; sent as `post_action`.
        AfterTool = "AfterTool" [tool],
        /// The agent finished its response; sent as `post_response`.
        AfterAgent = "AfterAgent",
        /// Gemini notifies the user (e.g. it awaits permission for a tool); sent as
        /// `run_lifecycle`.
        Notification = "Notification",
        /// The session ends; sent as `session_end`.
        SessionEnd = "SessionEnd",
    }
}

/// The Gemini CLI shim: hooks injected for one run as system settings.
pub struct Gemini;

impl Framework for Gemini {
    fn packages(&self) -> &'static [&'static str] {
        &["@google/gemini-cli"]
    }

    fn proven(&self) -> Option<Proven> {
        Some(Proven::pinned(include_str!(
            "../../../tests/gemini/VERSION"
        )))
    }

    fn injection_refused(&self, hook_exe: &std::path::Path) -> Option<String> {
        // Root writes a settings file for each run; anyone else needs the installed one.
        (!nix::unistd::geteuid().is_root())
            .then(|| installed::refusal(hook_exe))
            .flatten()
    }

    fn system_file(
        &self,
        hook_exe: &std::path::Path,
    ) -> Option<Result<ahp_wrap_adapter::SystemFile, FrameworkError>> {
        Some(installed::system_file(hook_exe))
    }

    fn own_env(&self, _args: &[std::ffi::OsString]) -> Vec<String> {
        // Its API keys, and Vertex AI's credentials.
        [
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    fn model_hosts(&self) -> &'static [&'static str] {
        &[
            "generativelanguage.googleapis.com",
            "cloudcode-pa.googleapis.com",
            "oauth2.googleapis.com",
            "*.googleapis.com",
        ]
    }

    // Gemini CLI loads `GEMINI.md` from the directories above and below its working directory,
    // and a project's `.gemini` (geminicli.com/docs/cli/gemini-md).
    fn instruction_files(&self) -> &'static [&'static str] {
        &[".gemini/**", "GEMINI.md"]
    }

    fn model_url_env(&self) -> &'static [&'static str] {
        &["GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL"]
    }

    fn agent_files(&self, home: &std::path::Path) -> AgentFiles {
        // Chats, history and its temp files; never its settings or extensions.
        let dir = home.join(".gemini");
        // Its trust answers: this project's is its own, trust granted to any other folder
        // is undone at the end (a grant to every later session there). Its settings.json
        // holds the auth method and theme a first run asks for, beside hooks and MCP
        // servers: those two are its own, the rest undone.
        let own = |keys: &[&str]| {
            keys.iter()
                .map(|k| KeyRule::new(k, Treatment::Own))
                .collect()
        };
        AgentFiles {
            mixed: vec![
                StateFile {
                    path: dir.join("trustedFolders.json"),
                    format: StateFormat::Json,
                    rules: own(&["{workspace}"]),
                    other: Treatment::Guarded,
                    through: None,
                    lock: None,
                },
                StateFile {
                    path: dir.join("settings.json"),
                    format: StateFormat::Json,
                    rules: own(&["security.auth.selectedType", "ui.theme"]),
                    other: Treatment::Guarded,
                    through: None,
                    lock: None,
                },
            ],
            // What a later session obeys: its memory (where save_memory writes), commands,
            // extensions and policies, here and in the project's `.gemini`.
            protected: vec![dir.join("GEMINI.md")],
            protected_dirs: ["extensions", "commands", "policies"]
                .iter()
                .map(|d| dir.join(d))
                .collect(),
            project: [
                "GEMINI.md",
                "commands",
                "extensions",
                "policies",
                "settings.json",
            ]
            .iter()
            .map(|f| std::path::Path::new(".gemini").join(f))
            .collect(),
            state: vec![dir],
        }
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn executables(&self) -> &'static [&'static str] {
        &["gemini"]
    }

    fn prepare(&self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
        settings::prepare(run, cmd)
    }

    fn map(&self, cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
        map::map(cx, payload)
    }

    fn render(&self, cx: &HookContext<'_>, event: Option<&Mapped>, verdict: &Final) -> CallerReply {
        render::render(cx, event, verdict)
    }

    // `native_ask` stays false: Gemini's `decision: "ask"` makes a headless run exit 0 with
    // no output at all, so an escalation goes to the wrapper's own path (a terminal prompt,
    // else the fail mode).
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn event_names_round_trip_and_are_words() {
        for event in GeminiEvent::ALL {
            assert!(ahp_wrap_adapter::is_word(event.name()));
            assert_eq!(GeminiEvent::parse(event.name()), Some(event));
        }
        assert_eq!(GeminiEvent::parse("AfterModel"), None);
    }

    #[test]
    fn named_by_its_executable_and_never_asks_natively() {
        let fw = Gemini;
        assert!(fw.executables().contains(&"gemini"));
        let cx = HookContext {
            hook: "BeforeTool",
            cwd: Path::new("/"),
            interactive: true,
        };
        assert!(!fw.native_ask(&cx));
    }
}
