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
pub(crate) async fn report(cfg: &Config, audit: &Auditor, notes: &[String]) {
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
        if let Some(path) = audit.path() {
            eprintln!("{}", where_logged(cfg, &path));
        }
    }
    if let Some(why) = audit.lost() {
        eprintln!("ahp-wrap: warning: this run's audit trail could not be written: {why}");
    }
    let markdown = || {
        let mut md = summary.to_markdown();
        for note in notes {
            md.push_str(&format!("\n**ahp-wrap {note}**\n"));
        }
        md
    };
    if let Some(md) = &cfg.summary_md {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(md.append)
            .truncate(!md.append)
            .open(&md.path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, markdown().as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "ahp-wrap: cannot write the summary to {}: {e}",
                md.path.display()
            );
        }
    }
    for note in notes {
        eprintln!("ahp-wrap: {note}");
    }
    let log = crate::termlog::sink();
    let (held, more) = log.held();
    // The file is named where it is: a default one is made at its first line.
    if !held.is_empty() {
        let whole = match log.path.as_ref().filter(|p| p.exists()) {
            Some(path) => format!(" (the whole log: {})", path.display()),
            None => String::new(),
        };
        eprintln!(
            "ahp-wrap: {} warning(s) during the run{whole}:",
            held.len() + more
        );
        for line in &held {
            eprintln!("  {line}");
        }
        if more > 0 {
            eprintln!("  … and {more} more");
        }
    }
}

/// The summary's line saying where the run's records are, and how to read them.
fn where_logged(cfg: &Config, path: &std::path::Path) -> String {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let shown = match home.as_deref().and_then(|h| path.strip_prefix(h).ok()) {
        Some(rest) => format!("~/{}", rest.display()),
        None => path.display().to_string(),
    };
    match cfg.audit_trail {
        Some(_) => format!("  audit log: {shown} (`ahp-wrap audit show` reads it)"),
        None => format!("  audit log: {shown}"),
    }
}
