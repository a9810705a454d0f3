//! Session taint: where untrusted content from the network entered a session (a fetch, a
//! browser or MCP tool's URL, a command reading one, a web search), and the build and
//! dependency files a write to which is then asked about (`session-taint`). The session's
//! state itself lives in [`crate::memory`].
//!
//! Must not: decide (the engine proposes the escalation), nor count content from a host
//! the host rules allow.

use std::path::Path;

use super::extract::Facts;

/// Where untrusted content from the network enters the session in this event, for
/// reasons: the first URL a tool (a fetch, a browser, an MCP tool) or a command (`curl`,
/// `wget`, an interpreter's code) will read on a host that is not `trusted` (the host
/// rules' `allow`: registries, forges, model APIs), or a web search tool.
pub(crate) fn taint_of(facts: &Facts, trusted: impl Fn(&url::Url) -> bool) -> Option<String> {
    let tool = facts.tool.as_deref().unwrap_or("a");
    if let Some(url) = facts.contacts.iter().find(|u| !trusted(u)) {
        return Some(format!("{} (the {tool} tool)", shown(url)));
    }
    if let Some(url) = facts.command_contacts.iter().find(|u| !trusted(u)) {
        let program = facts
            .commands
            .iter()
            .map(|c| c.cmd.program.as_str())
            .find(|p| !p.is_empty())
            .unwrap_or("a command");
        return Some(format!("{} (read by `{program}`)", shown(url)));
    }
    let lower = tool.to_lowercase();
    (lower.contains("web") && lower.contains("search"))
        .then(|| format!("web search results (the {tool} tool)"))
}

/// A URL as a reason shows it: scheme, host and path, no query (it may carry data).
fn shown(url: &url::Url) -> String {
    format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.path()
    )
}

/// Files that decide what a later build, install or test run executes: after content from
/// the network entered the session, a write to one is asked about (an injected instruction
/// in that content may have asked for it). Matched by name, anywhere.
const BUILD_FILES: &[&str] = &[
    "package.json",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    "pnpm-workspace.yaml",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "CMakeLists.txt",
    "justfile",
    "Justfile",
    "Taskfile.yml",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "Pipfile",
    "tox.ini",
    "noxfile.py",
    "conftest.py",
    "pip.conf",
    "Cargo.toml",
    "build.rs",
    ".cargo/config.toml",
    "go.mod",
    "Gemfile",
    "Rakefile",
    "build.gradle",
    "build.gradle.kts",
    "settings.gradle",
    "pom.xml",
    "Dockerfile",
    "docker-compose.yml",
    "docker-compose.yaml",
    "compose.yml",
    "compose.yaml",
];

/// The build and dependency files among `facts`' writes (`requirements*.txt` too).
pub(crate) fn build_files_written(facts: &Facts) -> Option<String> {
    facts.writes.iter().find_map(|w| {
        let name = w.abs.file_name()?.to_str()?;
        let parent = w
            .abs
            .parent()
            .and_then(Path::file_name)
            .and_then(|p| p.to_str());
        let in_cargo = parent == Some(".cargo") && name == "config.toml";
        let requirements = name.starts_with("requirements") && name.ends_with(".txt");
        (BUILD_FILES.contains(&name) || in_cargo || requirements).then(|| name.to_owned())
    })
}
