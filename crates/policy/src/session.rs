//! What one run's decisions change and read besides the policy: what each of its sessions
//! wrote and where untrusted content entered it (the memory), and what the run says of
//! itself once, before its agent starts (whether the floor's egress proxy decides the
//! connections of the agent's tree, which variables hold a credential's placeholder).
//!
//! The [`crate::Policy`] is immutable once built, and may be shared by any number of
//! sessions; a decision changes only its session.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::memory::Memory;

/// The state of one run's decisions (of one `serve` harness's, for all the sessions it
/// decides for): see the module's documentation. A new one remembers nothing.
#[derive(Debug, Default)]
pub struct Session {
    /// What each session wrote, so that code run from those files is judged on it, and
    /// where content from the network entered it.
    pub(crate) memory: Memory,
    /// Whether the floor's egress proxy decides the connections of the agent's tree (a run
    /// on the network floor says so): then the hosts shell commands contact are left to it,
    /// which asks about each connection they make, instead of being asked about twice.
    egress: AtomicBool,
    /// The variables that hold a declared credential's placeholder in this run, once the run
    /// names them: their value is known (the run's own placeholder, the same for the whole
    /// run), not a value known only when the command runs.
    placeholders: OnceLock<Vec<String>>,
}

impl Session {
    /// Says whether the floor's egress proxy decides the connections of the agent's tree;
    /// while it does, the hosts shell commands contact are left to it.
    pub fn leave_commands_to_egress(&self, egress: bool) {
        self.egress.store(egress, Ordering::Relaxed);
    }

    /// Names the variables that hold a declared credential's placeholder in this run (the
    /// egress proxy puts the real value on requests to the credential's hosts, and refuses it
    /// elsewhere): what a command or its code does with them is not sending a secret, so the
    /// rules about secret-named variables do not see them. Set once.
    pub fn placeholder_vars(&self, names: Vec<String>) {
        if !names.is_empty() {
            let _ = self.placeholders.set(names);
        }
    }

    /// Whether the egress proxy decides the tree's connections.
    pub(crate) fn egress(&self) -> bool {
        self.egress.load(Ordering::Relaxed)
    }

    /// The variables that hold a placeholder (none until the run names them).
    pub(crate) fn placeholders(&self) -> &[String] {
        self.placeholders.get().map_or(&[], Vec::as_slice)
    }
}
