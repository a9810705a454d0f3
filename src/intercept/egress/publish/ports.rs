//! The ports of this machine a program of the person's listens on, or listened on: the
//! tree's listener is never published on one. A client of the person's that finds its own
//! server down would otherwise connect to the tree's and hand it what it means for its own (a
//! token, a session); so would a client of a well-known service's port.
//!
//! What the wrapper sees: the ports listened on when the run starts and whenever the tree asks
//! to publish (this machine's listening sockets, the wrapper's own published ports
//! and other runs' left out), and those earlier runs saw, kept in the state directory
//! (`listened-ports`, below the ephemeral range, the most recent 1024).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Mutex;

/// Ports of well-known services, each with the name of what listens there: a program of the
/// person's talks to them (with their credentials) whether or not the service runs now.
const WELL_KNOWN: &[(u16, &str)] = &[
    (21, "FTP"),
    (22, "SSH"),
    (25, "SMTP"),
    (53, "DNS"),
    (80, "HTTP"),
    (443, "HTTPS"),
    (631, "CUPS"),
    (1433, "SQL Server"),
    (1521, "Oracle"),
    (2375, "the Docker API"),
    (2376, "the Docker API (TLS)"),
    (2379, "etcd"),
    (3306, "MySQL"),
    (4317, "an OpenTelemetry collector"),
    (4318, "an OpenTelemetry collector"),
    (5432, "PostgreSQL"),
    (5672, "AMQP"),
    (5984, "CouchDB"),
    (6379, "Redis"),
    (6443, "the Kubernetes API"),
    (8200, "Vault"),
    (8500, "Consul"),
    (9042, "Cassandra"),
    (9092, "Kafka"),
    (9200, "Elasticsearch"),
    (9222, "a browser's remote debugging"),
    (9229, "Node's inspector"),
    (10250, "the kubelet"),
    (11211, "memcached"),
    (11434, "Ollama"),
    (27017, "MongoDB"),
];

/// The first port of Linux's default ephemeral range: a port above it a program listened on
/// once is no habit of it, and not kept between runs.
const EPHEMERAL: u16 = 32768;

/// How many ports the state directory keeps.
const KEPT: usize = 1024;

/// Why the tree's listener on a port is published elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Theirs {
    /// A program of the person's listens there now, or did (in this run or an earlier one).
    Listened,
    /// A well-known service's port.
    Service(&'static str),
}

impl Theirs {
    pub(crate) fn phrase(&self, port: u16) -> String {
        match self {
            Theirs::Listened => format!(
                "a program of yours listened on {port} (now or in an earlier run), and one of \
                 yours connecting there would reach the tree"
            ),
            Theirs::Service(name) => format!(
                "{port} is {name}'s port, and a program of yours connecting there would reach \
                 the tree"
            ),
        }
    }
}

/// The ports known to be the person's.
#[derive(Debug, Default)]
pub(crate) struct UserPorts {
    /// Done once, before the first question about a port (when the run's start did not).
    loaded: std::sync::OnceLock<()>,
    seen: Mutex<BTreeSet<u16>>,
    /// The ports this run published (its own listeners on this machine).
    ours: Mutex<BTreeSet<u16>>,
}

impl UserPorts {
    /// Reads what is listened on now, and what earlier runs saw; keeps the union (off the
    /// start-up path: on a thread of the runtime's).
    pub(crate) fn load(&self) {
        self.loaded.get_or_init(|| {
            let mut seen = kept();
            seen.extend(listened_now(&BTreeSet::new()));
            if let Ok(mut s) = self.seen.lock() {
                s.extend(seen.iter().copied());
            }
            keep(&seen);
        });
    }

    /// Whether `port` is the person's, looking at what is listened on now too.
    pub(crate) fn theirs(&self, port: u16) -> Option<Theirs> {
        self.load();
        let ours = self.ours.lock().map(|o| o.clone()).unwrap_or_default();
        let now = listened_now(&ours);
        let listened = match self.seen.lock() {
            Ok(mut seen) => {
                seen.extend(now.iter().copied());
                seen.contains(&port)
            }
            Err(_) => true,
        };
        if listened {
            return Some(Theirs::Listened);
        }
        WELL_KNOWN
            .iter()
            .find(|(p, _)| *p == port)
            .map(|(_, name)| Theirs::Service(name))
    }

    /// Notes a port this run publishes itself (not the person's).
    pub(crate) fn ours(&self, port: u16) {
        if let Ok(mut o) = self.ours.lock() {
            o.insert(port);
        }
    }
}

/// The TCP ports listened on on this machine now, but `ours` and those of another run's
/// published listeners (held by an `ahp-wrap` process). Only the wrappers' descriptors are
/// read: every process's would cost a pass over thousands of them on a busy machine.
fn listened_now(ours: &BTreeSet<u16>) -> BTreeSet<u16> {
    use ahp_wrap_confine::child::sockets;
    let wrappers = sockets::socket_inodes_of(|pid| {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        exe.file_name().is_some_and(|n| n == "ahp-wrap")
    });
    sockets::listeners()
        .into_iter()
        .filter(|r| !ours.contains(&r.local.port()))
        .filter(|r| !wrappers.contains(&r.inode))
        .map(|r| r.local.port())
        .collect()
}

fn file() -> Option<PathBuf> {
    crate::termlog::state_dir().map(|d| d.join("listened-ports"))
}

/// The ports earlier runs saw.
fn kept() -> BTreeSet<u16> {
    file()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Keeps `seen` (below the ephemeral range, at most [`KEPT`]) for later runs, when it adds
/// to what is kept.
fn keep(seen: &BTreeSet<u16>) {
    let Some(path) = file() else { return };
    let old = kept();
    let new: BTreeSet<u16> = seen
        .iter()
        .copied()
        .filter(|p| *p < EPHEMERAL)
        .chain(old.iter().copied())
        .take(KEPT)
        .collect();
    if new == old {
        return;
    }
    let text: String = new.iter().map(|p| format!("{p}\n")).collect();
    if let Some(dir) = path.parent() {
        let _ = crate::termlog::make_private_dir(dir);
    }
    let _ = crate::statefile::merge::write_atomic_as(&path, text.as_bytes(), 0o600);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_listened_on_now_or_well_known_is_the_persons() {
        let ports = UserPorts::default();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(ports.theirs(port), Some(Theirs::Listened));
        drop(l);
        // Seen once, it stays theirs for the run.
        assert_eq!(ports.theirs(port), Some(Theirs::Listened));
        assert_eq!(ports.theirs(5432), Some(Theirs::Service("PostgreSQL")));
        ports.ours(5432);
        assert!(ports.theirs(5432).is_some(), "a service's port stays one");
    }
}
