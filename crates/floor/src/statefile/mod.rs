//! An agent's mixed state files: one file where the agent keeps its own bookkeeping (a
//! theme, counters, an API key approval, its trust answer for this workspace) beside
//! instructions and grants a later session obeys (MCP servers, allowed tools, hooks).
//! Claude Code's `~/.claude.json` is one; Codex's `config.toml` another.
//!
//! On the floor the agent reads and writes a private copy of such a file (the floor binds it
//! over the real one). When the run ends, its changes are sorted key by key
//! ([`merge::sort`]): those to the agent's own keys are merged into the real file as it is
//! then, atomically ([`merge::write_atomic`]); those to instruction keys are kept aside
//! (quarantined) with a command that restores them.
//!
//! Protected paths the agent's tree created are moved aside into the same quarantine
//! ([`aside`]).
//!
//! Owns: the declaration a shim or manifest makes ([`StateFile`]), the key rules, the
//! key-by-key diff, the merge and the atomic write, and moving paths aside and back. Must not touch: mounts (the floor binds
//! the copy), events or the audit log (the run says what became of each change).

pub mod aside;
pub mod merge;

use std::path::PathBuf;

use serde::Deserialize;

/// One mixed state file, as its agent's shim declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFile {
    /// The file (absolute).
    pub path: PathBuf,
    /// The file's syntax, which the key-by-key diff and the merge read and write.
    pub format: Format,
    /// How each key is treated: the first rule whose key matches the changed key, or a key
    /// above it, decides.
    pub rules: Vec<KeyRule>,
    /// How a key no rule names is treated.
    pub other: Treatment,
    /// Where the agent writes this file in this run, when not at `path`: an overlay's entry
    /// that stands for it (Copilot's run-private home). What the agent leaves there is sorted
    /// against what `path` held at the start and merged into `path`.
    pub through: Option<PathBuf>,
    /// A lock the agent itself takes around its writes (a directory it makes and removes):
    /// the merge takes it too, so that a session running outside the wrapper at the same
    /// time does not write over it.
    pub lock: Option<PathBuf>,
}

/// How a state file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// JSON (`json` in a manifest), as Claude Code's `~/.claude.json`.
    Json,
    /// TOML (`toml` in a manifest), as Codex's `config.toml`.
    Toml,
}

/// What becomes of a change to a key at the run's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Treatment {
    /// The agent's own bookkeeping: merged into the real file.
    Own,
    /// An instruction or a grant (a command to run, a server to start, a permission):
    /// never merged; kept aside with a restore command.
    Guarded,
}

/// A key pattern and its treatment. A key is a path of names separated by `.`: `*` is any
/// one name, `{workspace}` the run's project as the agent names it: the workspace's absolute
/// path, or the top of the git repository it lies in (Claude Code keys a project there).
/// `projects.*.mcpServers` names the MCP servers of every project.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRule {
    /// The key pattern: names separated by `.`, `*` for any one name, `{workspace}` for the
    /// run's project.
    pub key: String,
    /// What becomes of a change at or beneath a key it matches.
    pub treatment: Treatment,
}

impl KeyRule {
    /// A rule treating `key` (a pattern as above) and what lies beneath it as `treatment`.
    pub fn new(key: &str, treatment: Treatment) -> KeyRule {
        KeyRule {
            key: key.to_owned(),
            treatment,
        }
    }

    /// Whether this rule's key is `key` or a key above it.
    fn covers(&self, key: &[String], workspace: &[String]) -> bool {
        let pattern: Vec<&str> = self.key.split('.').collect();
        pattern.len() <= key.len() && Self::agree(&pattern, key, workspace)
    }

    /// Whether this rule's key lies beneath `key` (`key` is a key above it).
    fn beneath(&self, key: &[String], workspace: &[String]) -> bool {
        let pattern: Vec<&str> = self.key.split('.').collect();
        pattern.len() > key.len() && Self::agree(&pattern, key, workspace)
    }

    /// Whether the names `pattern` and `key` have in common match.
    fn agree(pattern: &[&str], key: &[String], workspace: &[String]) -> bool {
        pattern.iter().zip(key).all(|(p, k)| match *p {
            "*" => true,
            "{workspace}" => workspace.contains(k),
            p => p == k,
        })
    }
}

impl StateFile {
    /// How a change to `key` is treated in a run whose workspace is `workspace`.
    pub fn treatment(&self, key: &[String], workspace: &[String]) -> Treatment {
        self.rules
            .iter()
            .find(|r| r.covers(key, workspace))
            .map_or(self.other, |r| r.treatment)
    }

    /// How many names long the key of the rule that decides `key` is, when a rule does.
    pub(crate) fn rule_depth(&self, key: &[String], workspace: &[String]) -> Option<usize> {
        self.rules
            .iter()
            .find(|r| r.covers(key, workspace))
            .map(|r| r.key.split('.').count())
    }

    /// Whether a guarded key may lie beneath `key`: a change that replaces a whole table
    /// there with something else (or removes it) changes the guarded keys in it too.
    pub(crate) fn guards_beneath(&self, key: &[String], workspace: &[String]) -> bool {
        self.rules
            .iter()
            .any(|r| r.treatment == Treatment::Guarded && r.beneath(key, workspace))
    }
}

/// A key as a person reads it: `projects["/work/app"].mcpServers`.
pub fn key_text(key: &[String]) -> String {
    let mut out = String::new();
    for (i, k) in key.iter().enumerate() {
        let plain = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        match (plain, i) {
            (true, 0) => out.push_str(k),
            (true, _) => {
                out.push('.');
                out.push_str(k);
            }
            (false, _) => out.push_str(&format!("[{}]", serde_json::Value::from(k.as_str()))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_first_rule_that_covers_a_key_decides() {
        let file = merge::tests::claude_like(Treatment::Own);
        let t = |k: &[&str]| file.treatment(&key(k), &["/w/app".to_owned()]);
        assert_eq!(t(&["mcpServers", "evil", "command"]), Treatment::Guarded);
        assert_eq!(t(&["mcpServers"]), Treatment::Guarded);
        assert_eq!(t(&["numStartups"]), Treatment::Own);
        assert_eq!(
            t(&["projects", "/w/app", "hasTrustDialogAccepted"]),
            Treatment::Own
        );
        assert_eq!(
            t(&["projects", "/w/other", "hasTrustDialogAccepted"]),
            Treatment::Guarded
        );
        assert_eq!(
            t(&["projects", "/w/app", "mcpServers", "x"]),
            Treatment::Guarded
        );
        assert_eq!(t(&["projects", "/w/app", "lastCost"]), Treatment::Own);
        // A rule never covers the keys above it.
        assert_eq!(t(&["projects"]), Treatment::Own);
    }

    #[test]
    fn keys_read_as_a_person_writes_them() {
        assert_eq!(
            key_text(&key(&["projects", "/w/app", "mcpServers"])),
            "projects[\"/w/app\"].mcpServers"
        );
        assert_eq!(key_text(&key(&["mcpServers", "evil"])), "mcpServers.evil");
    }
}
