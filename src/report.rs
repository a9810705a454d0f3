//! What the person reads at the end of a run (summary, notes, the warnings held back while
//! the agent had the terminal), and what is said when nothing was supervised.

use serde_json::{json, Map};

use crate::config::{Config, SummaryWhen};
use crate::protocol::EventType;
use crate::run::EXIT_NO_HOOKS;
use crate::session::{Auditor, Session};

/// What a generic agent gets supervised, said before it starts.
pub fn generic_notice(shown: &str) -> String {
    format!(
        "note: {shown} has no hook system ahp-wrap knows (framework generic). Only the events \
         it sends itself with `ahp-wrap hook generic <event>` are supervised; its commands, file \
         and network access are NOT intercepted. To supervise it: wrap a supported agent \
         (claude, codex, gemini, qwen, copilot), have it call `ahp-wrap hook generic pre_action` \
         before each action (shims/generic/README.md), or name its framework with --framework"
    )
}

/// After an interactive Claude Code session: Claude's own exit hint (`claude --resume <id>`)
/// resumes it unsupervised; this says how to resume it under the wrapper.
pub fn resume_note(session: &Session, cfg: &Config) -> Option<String> {
    if cfg.framework.name() != "claude-code" || !session.interactive {
        return None;
    }
    let id = session.framework_session.lock().ok()?.clone()?;
    let id_is_plain = id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    id_is_plain.then(|| {
        format!(
            "to resume this session supervised: ahp-wrap -- claude --resume {id} \
             (`claude --resume {id}` alone runs it without ahp-wrap)"
        )
    })
}

/// When the agent never called a hook: tells the harness and the audit log, and returns
/// the note for the exit summary. Said for a generic agent (nothing else could have
/// supervised it) and, with `--require-hooks`, for any.
pub async fn no_hooks(session: &Session, cfg: &Config, shown: &str, code: u8) -> Option<String> {
    let none = session
        .hooks_called
        .lock()
        .map_or(true, |called| called.is_empty());
    if !none || (cfg.framework.name() != "generic" && !cfg.require_hooks) {
        return None;
    }
    let mut message = format!(
        "{shown} never called `ahp-wrap hook` (framework {}): NOTHING it did was supervised or audited",
        cfg.framework.name()
    );
    if cfg.require_hooks {
        message.push_str(&format!(
            "; exiting {EXIT_NO_HOOKS} (--require-hooks) instead of the agent's {code}"
        ));
    } else {
        message.push_str(" (--require-hooks makes such a run fail)");
    }
    let error = session.event(
        EventType::Error,
        json!({"source": "wrapper", "message": message, "hooks_called": 0}),
        Map::new(),
    );
    session.notify(error, None).await;
    Some(format!("WARNING: {message}"))
}

/// Prints the run's summary on stderr and writes the Markdown one, as configured; then the
/// notes and the warnings held back while the agent had the terminal (its screen is gone
/// by now).
pub async fn report(cfg: &Config, audit: &Auditor, notes: &[String]) {
    let summary = audit.summary();
    let decided = summary
        .by_decision
        .iter()
        .any(|(d, n)| d != "notified" && *n > 0);
    let print = match cfg.summary {
        SummaryWhen::Always => true,
        SummaryWhen::Never => false,
        SummaryWhen::Auto => decided,
    };
    if print {
        eprint!("{}", summary.to_text());
    }
    if let Some(path) = &cfg.summary_md {
        let mut md = summary.to_markdown();
        for note in notes {
            md.push_str(&format!("\n**ahp-wrap {note}**\n"));
        }
        if let Err(e) = std::fs::write(path, md) {
            eprintln!(
                "ahp-wrap: cannot write the summary to {}: {e}",
                path.display()
            );
        }
    }
    for note in notes {
        eprintln!("ahp-wrap: {note}");
    }
    let log = crate::termlog::sink();
    let (held, more) = log.held();
    if let (false, Some(path)) = (held.is_empty(), &log.path) {
        eprintln!(
            "ahp-wrap: {} warning(s) during the run (the whole log: {}):",
            held.len() + more,
            path.display()
        );
        for line in &held {
            eprintln!("  {line}");
        }
        if more > 0 {
            eprintln!("  … and {more} more");
        }
    }
    log.remove_if_empty();
}
