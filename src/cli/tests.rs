use clap::CommandFactory;

/// The words of `text`, lower-cased.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether `more` (the long help's next paragraph) says `summary` again: the same first
/// three words, or most of its words.
fn restates(summary: &str, more: &str) -> bool {
    let (a, b) = (words(summary), words(more));
    if a.len() < 3 {
        return false;
    }
    let distinct: std::collections::BTreeSet<&String> = a.iter().collect();
    let shared = distinct.iter().filter(|w| b.contains(w)).count();
    a[..3] == b[..b.len().min(3)] || shared * 10 >= distinct.len() * 7
}

fn check(cmd: &clap::Command, path: &str, found: &mut Vec<String>) {
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long_help().map(ToString::to_string) else {
            continue;
        };
        let mut paragraphs = long.split("\n\n");
        let (Some(summary), Some(more)) = (paragraphs.next(), paragraphs.next()) else {
            continue;
        };
        if restates(summary, more) {
            found.push(format!("{path} --{}: {summary:?} / {more:?}", arg.get_id()));
        }
    }
    for sub in cmd.get_subcommands() {
        let path = format!("{path} {}", sub.get_name());
        if let (Some(summary), Some(long)) = (sub.get_about(), sub.get_long_about()) {
            let long = long.to_string();
            let more = long.split("\n\n").nth(1).unwrap_or_default();
            if restates(&summary.to_string(), more) {
                found.push(format!("{path}: {summary:?} / {more:?}"));
            }
        }
        check(sub, &path, found);
    }
}

#[test]
fn no_long_help_repeats_its_summary() {
    let mut found = Vec::new();
    check(&super::Cli::command(), "ahp-wrap", &mut found);
    assert!(
        found.is_empty(),
        "long help that says its summary again:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_restatement_is_told_from_an_addition() {
    assert!(restates(
        "Deadline for one blocking event, in milliseconds.",
        "Deadline for one blocking event, in milliseconds (the harness's timeout wins)."
    ));
    assert!(restates(
        "enforce, or observe: block nothing, record what would have been blocked.",
        "Embedded policy mode: enforce, or observe (block nothing, record what would have been blocked)."
    ));
    assert!(!restates(
        "Deadline for one blocking event, in milliseconds.",
        "The harness's own timeout_ms wins when it is smaller."
    ));
}
