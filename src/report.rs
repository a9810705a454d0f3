//! What the person reads at the end of a run: the summary, the notes, and the warnings held
//! back while the agent had the terminal.
//!
//! Owns: the end-of-run text. Must not touch: deciding anything, or the audit log's contents
//! (it reads the summary the auditor kept).

use crate::audit::Auditor;
use crate::config::{Config, SummaryWhen};

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
        SummaryWhen::Auto => decided && !cfg.quiet,
    };
    if print {
        eprint!("{}", summary.to_text());
    }
    let markdown = || {
        let mut md = summary.to_markdown();
        for note in notes {
            md.push_str(&format!("\n**ahp-wrap {note}**\n"));
        }
        md
    };
    if let Some(path) = &cfg.summary_md {
        if let Err(e) = std::fs::write(path, markdown()) {
            eprintln!(
                "ahp-wrap: cannot write the summary to {}: {e}",
                path.display()
            );
        }
    } else if let Some(path) = actions_step_summary(cfg.depth, |k| std::env::var_os(k)) {
        // GitHub Actions: the job's page shows what this file holds; other steps write to it
        // too, so it is appended to.
        let appended = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, markdown().as_bytes()));
        if let Err(e) = appended {
            eprintln!(
                "ahp-wrap: cannot add the summary to the job summary {}: {e}",
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

/// The job summary file of a GitHub Actions step, for the outermost run only (a nested run's
/// summary is part of its parent's) and when `--summary-md` does not name another file.
fn actions_step_summary(
    depth: u32,
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Option<std::path::PathBuf> {
    if depth > 0 || env("GITHUB_ACTIONS").is_none_or(|v| v != "true") {
        return None;
    }
    env("GITHUB_STEP_SUMMARY")
        .filter(|p| !p.is_empty())
        .map(Into::into)
}

#[cfg(test)]
mod tests {
    use super::actions_step_summary;
    use std::ffi::OsString;

    #[test]
    fn only_the_outermost_run_of_an_actions_step_writes_its_job_summary() {
        let actions = |k: &str| match k {
            "GITHUB_ACTIONS" => Some(OsString::from("true")),
            "GITHUB_STEP_SUMMARY" => Some(OsString::from("/runner/_temp/step_summary")),
            _ => None,
        };
        assert_eq!(
            actions_step_summary(0, actions),
            Some("/runner/_temp/step_summary".into())
        );
        assert_eq!(actions_step_summary(1, actions), None);
        let elsewhere = |k: &str| (k == "GITHUB_STEP_SUMMARY").then(|| OsString::from("/x"));
        assert_eq!(actions_step_summary(0, elsewhere), None);
    }
}
