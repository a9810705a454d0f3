//! The tree's listeners, published on the user's loopback: what the tree serves (a dev
//! server, a login's callback listener) is reachable from the user's machine as it would be
//! without the floor.
//!
//! The connect bridge tells each TCP listener of the tree on its loopback (or on every
//! address of its namespace) as it is made. Publishing it is a `net` `pre_action` with
//! `direction: listen` (the listening process and its ancestry in its context), decided by
//! `[floor.net] publish` and the gate. Allowed, the wrapper listens on the same port of this
//! machine's loopback (`127.0.0.1` for an IPv4 listener, `::1` for an IPv6 one, both for the
//! IPv6 wildcard), and carries each connection it accepts into the tree's namespace, on a
//! socket the porter made there, to the tree's listener. A listener that cannot be published
//! (its port taken on this side on every address it would have) is said once, in words, at
//! the end of the run, audited, and told to the agent in its next tool call's context (the
//! user cannot reach it; it works inside the tree all the same).
//!
//! A port a program of the person's listens on or listened on, or a well-known service's
//! port, is never taken ([`ports`]): the tree's listener is published on a port of the
//! kernel's choosing instead, said at once (the agent is told in its next tool call's
//! context), at the end of the run, and audited. Each connection carried in is audited with
//! the process that made it.
//!
//! A published port closes when the tree's listener does (the namespace's socket table is
//! read every [`WATCH`] while anything is published, and a connection the listener refuses
//! closes it at once), and with the wrapper's process, whatever ends it: the listening
//! sockets are the wrapper's own.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::net::{TcpListener, TcpSocket};

use super::{Asker, Egress};
use crate::floor::bridge::Listening;
use crate::floor::porter::Porter;
use crate::floor::spec::Publishing;
use crate::protocol::{EventType, Final};

mod ports;
pub(crate) use ports::UserPorts;

/// How long a carried connection waits for its client's process to be found (a look at
/// `/proc`) before it is carried all the same.
const CLIENT_LOOKUP: Duration = Duration::from_secs(1);

/// How often the tree's socket table is read while something is published.
const WATCH: Duration = Duration::from_millis(200);

/// The run's published listeners and what they carried.
#[derive(Debug, Default)]
pub(crate) struct Published {
    /// Ports published (each family counted once).
    pub ports: AtomicU64,
    /// Connections carried into the tree.
    pub connections: AtomicU64,
    /// Listeners not published: refused, or their port taken on this side.
    pub refused: AtomicU64,
    /// What the end of the run says: each port taken on this side.
    pub taken: Mutex<Vec<String>>,
    /// The listeners published now, by the tree's address: the tasks that accept for them.
    live: Mutex<HashMap<SocketAddr, Vec<tokio::task::AbortHandle>>>,
    /// Whether the watch of the tree's socket table runs.
    watching: std::sync::atomic::AtomicBool,
    /// The tree's listeners said to be unpublished: each is said once, however often it
    /// listens again.
    said: Mutex<std::collections::HashSet<SocketAddr>>,
    /// The ports known to be the person's: never published on. Shared with the thread that
    /// reads them at the start (which holds nothing else of the run's: the audit log closes
    /// when the run ends, whether that thread has finished or not).
    pub user_ports: std::sync::Arc<UserPorts>,
}

impl Egress {
    /// Decides whether the tree's listener `l` is published, and publishes it. `chain`: the
    /// listening process and its ancestry, read while it still waited in `listen`.
    pub(crate) async fn publish(self: Arc<Self>, l: Listening, chain: Vec<(i32, Vec<String>)>) {
        // Before the listener is answered: no connection it carries is taken for the agent's.
        if l.pid == self.agent.load(std::sync::atomic::Ordering::SeqCst) {
            self.agent_serves
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let asker = Asker::from_chain(&chain);
        let inside = inside_address(l.addr);
        if self
            .published
            .live
            .lock()
            .is_ok_and(|m| m.contains_key(&inside))
        {
            return;
        }
        let ip = crate::floor::hosts::canonical(l.addr.ip());
        let shown = SocketAddr::new(ip, l.addr.port());
        let arguments = json!({
            "direction": "listen",
            "host": ip.to_string(),
            "port": l.addr.port(),
            "url": format!("tcp://{shown}/"),
        });
        let (event, origin) = self.event_with(arguments, "listen", asker.as_ref());
        let mode = self.rules.publish();
        let decision = match mode {
            Publishing::None => {
                let reason = format!(
                    "the tree's listener on {shown} stays inside its namespace ([floor.net] \
                     publish = \"none\")"
                );
                self.gate.refused(&event, reason, origin).await
            }
            Publishing::Loopback | Publishing::All => self.gate.decide(&event, false, origin).await,
        };
        if !matches!(decision.verdict, Final::Allow { .. }) {
            self.published.refused.fetch_add(1, Ordering::Relaxed);
            crate::telemetry::published("refused");
            return;
        }
        let porter = match l.porter {
            Ok(p) => p,
            Err(why) => return self.not_published(shown, why.to_string(), "refused").await,
        };
        // Never on a port of the person's: one of the kernel's choosing instead.
        let theirs = self.published.user_ports.theirs(l.addr.port());
        let mut tasks = Vec::new();
        let mut port = match theirs {
            Some(_) => 0,
            None => l.addr.port(),
        };
        let mut published_on = None;
        let mut failed = Vec::new();
        for outside in outside_addresses(l.addr, mode) {
            let outside = SocketAddr::new(outside.ip(), port);
            match TcpListener::bind(outside).await {
                Ok(listener) => {
                    let bound = listener.local_addr().unwrap_or(outside);
                    port = bound.port();
                    published_on.get_or_insert(bound);
                    self.published.user_ports.ours(port);
                    let me = self.clone();
                    let porter = porter.clone();
                    let task = tokio::spawn(async move {
                        me.carry(listener, inside, porter).await;
                    });
                    tasks.push(task.abort_handle());
                }
                Err(e) => failed.push(format!("{outside} cannot be listened on here: {e}")),
            }
        }
        // Published on one of its addresses (`::1` taken, `127.0.0.1` not): the user reaches
        // it there, nothing to say but in the log.
        match published_on {
            None if !failed.is_empty() => {
                return self.not_published(shown, failed.join("; "), "taken").await
            }
            Some(on) if !failed.is_empty() => tracing::info!(
                "floor: the tree's listener on {shown} is published at {on} only: {}",
                failed.join("; ")
            ),
            _ => {}
        }
        if let (Some(theirs), Some(on)) = (theirs, published_on) {
            self.published_elsewhere(shown, on, theirs).await;
        }
        if tasks.is_empty() {
            return;
        }
        self.published.ports.fetch_add(1, Ordering::Relaxed);
        crate::telemetry::published("port");
        tracing::info!("floor: the tree's listener on {shown} is published");
        if let Ok(mut live) = self.published.live.lock() {
            live.insert(inside, tasks);
        }
        if !self.published.watching.swap(true, Ordering::SeqCst) {
            let me = self.clone();
            tokio::spawn(async move { me.watch(&porter).await });
        }
    }

    /// Says (at once, at the end of the run, and to the agent after its next tool call) and
    /// audits a listener published on another port than its own, because its own is the
    /// person's.
    async fn published_elsewhere(&self, shown: SocketAddr, on: SocketAddr, why: ports::Theirs) {
        let m = format!(
            "floor: the tree's listener on {shown} is published on this machine at {on}, not at \
             its own port: {}",
            why.phrase(shown.port())
        );
        tracing::warn!("{m}");
        if let Ok(mut taken) = self.published.taken.lock() {
            taken.push(m.clone());
        }
        self.gate.floor_met.notice(format!(
            "ahp-wrap (the supervisor of this session): the server the agent's tree started on \
             port {} is reachable from this machine at {on} (http://{on}/ for a web server), not \
             at its own port, which is the user's: tell the user that address.",
            shown.port()
        ));
        let payload = json!({
            "source": "floor",
            "message": m,
            "listen": shown.to_string(),
            "published": on.to_string(),
        });
        self.gate.say(EventType::Error, payload).await;
    }

    /// Says once (at the end of the run, and to the agent after its next tool call) and
    /// audits a listener left unpublished: the user cannot reach it.
    async fn not_published(&self, shown: SocketAddr, why: String, what: &str) {
        self.published.refused.fetch_add(1, Ordering::Relaxed);
        crate::telemetry::published(what);
        let m = format!(
            "floor: the server the agent's tree started on {shown} cannot be reached from this \
             machine, only from inside the tree: {why}"
        );
        let first = self
            .published
            .said
            .lock()
            .is_ok_and(|mut said| said.insert(shown));
        if !first {
            tracing::debug!("{m}");
            return;
        }
        tracing::info!("{m}");
        if let Ok(mut taken) = self.published.taken.lock() {
            taken.push(m.clone());
        }
        self.gate.floor_met.notice(format!(
            "ahp-wrap (the supervisor of this session): the server the agent's tree started on \
             port {} cannot be reached by the user from this machine ({why}); it works only \
             inside this session: tell the user, or start it on another port.",
            shown.port()
        ));
        let payload = json!({"source": "floor", "message": m, "listen": shown.to_string()});
        self.gate.say(EventType::Error, payload).await;
    }

    /// Accepts on `listener` and carries each connection to `inside`, until the tree's
    /// listener refuses one (it is gone) or the task is aborted.
    async fn carry(
        self: Arc<Self>,
        listener: TcpListener,
        inside: SocketAddr,
        porter: Arc<Porter>,
    ) {
        loop {
            let (client, from) = match listener.accept().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!("floor: accept on a published port: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let stream = match connect_inside(&porter, inside).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::info!("floor: the tree's listener on {inside} is gone ({e})");
                    self.unpublish(inside);
                    return;
                }
            };
            self.published.connections.fetch_add(1, Ordering::Relaxed);
            crate::telemetry::published("connection");
            let _ = client.set_nodelay(true);
            let _ = stream.set_nodelay(true);
            let on = listener.local_addr().ok();
            let me = self.clone();
            tokio::spawn(async move {
                // Who connected, found while the client still holds its socket (it waits for
                // an answer): the pump starts once it is known, or after a moment at most.
                if let Some(on) = on {
                    me.audit_client(from, on, inside).await;
                }
                if let Err(e) = super::tunnel::pump_sockets(&client, &stream).await {
                    tracing::debug!("floor: a published connection: {e}");
                }
            });
        }
    }

    /// Audits a connection carried into the tree from `from`, with the process of this
    /// machine that made it (found in `/proc`; given up after [`CLIENT_LOOKUP`]).
    async fn audit_client(&self, from: SocketAddr, on: SocketAddr, inside: SocketAddr) {
        let lookup =
            tokio::task::spawn_blocking(move || crate::child::sockets::client_of(from, on));
        let client = tokio::time::timeout(CLIENT_LOOKUP, lookup)
            .await
            .ok()
            .and_then(Result::ok)
            .flatten();
        let payload = json!({
            "tool_name": "net",
            "arguments": {
                "direction": "inbound",
                "published": on.to_string(),
                "listener": inside.to_string(),
                "from": from.to_string(),
            },
            "context": {
                "interceptor": "egress",
                "client": client.map(|(pid, argv)| json!({"pid": pid, "argv": argv})),
            },
        });
        self.gate.say(EventType::PostAction, payload).await;
    }

    /// Closes the published ports of the tree's listener at `inside`.
    fn unpublish(&self, inside: SocketAddr) {
        let tasks = self
            .published
            .live
            .lock()
            .ok()
            .and_then(|mut live| live.remove(&inside));
        for task in tasks.into_iter().flatten() {
            task.abort();
        }
    }

    /// Reads what the tree listens on every [`WATCH`] (through a socket-diagnostics socket
    /// the porter made in the tree's namespace, else the porter's `/proc`), and closes what
    /// the tree no longer listens on.
    async fn watch(self: Arc<Self>, porter: &Porter) {
        let diagnostics = porter.diagnostics();
        if let Err(e) = &diagnostics {
            tracing::debug!("floor: the tree's socket diagnostics: {e}; reading its /proc");
        }
        loop {
            tokio::time::sleep(WATCH).await;
            let listening = match &diagnostics {
                // While the porter lives (the socket would keep the namespace).
                Ok(fd) if std::path::Path::new(&format!("/proc/{}", porter.pid())).exists() => {
                    use std::os::fd::AsFd;
                    crate::child::sockets::listeners_through(fd.as_fd())
                        .ok()
                        .map(|rows| rows.iter().map(|r| r.local.port()).collect())
                }
                Ok(_) => None,
                Err(_) => listening_ports(porter.pid()),
            };
            let Some(listening) = listening else {
                return;
            };
            let gone: Vec<SocketAddr> = match self.published.live.lock() {
                Ok(live) => live
                    .keys()
                    .filter(|a| !listening.contains(&a.port()))
                    .copied()
                    .collect(),
                Err(_) => return,
            };
            for inside in gone {
                tracing::info!("floor: the tree's listener on {inside} closed");
                self.unpublish(inside);
            }
        }
    }
}

/// Where the wrapper connects in the tree's namespace for a listener at `addr`: its own
/// loopback address (a wildcard listener is reached on loopback).
fn inside_address(addr: SocketAddr) -> SocketAddr {
    let ip: IpAddr = match addr {
        SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
        SocketAddr::V6(a) if a.ip().to_ipv4_mapped().is_some() => Ipv4Addr::LOCALHOST.into(),
        SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
    };
    SocketAddr::new(ip, addr.port())
}

/// Where the wrapper listens on this machine for a listener of the tree at `addr`: loopback
/// of the same family (both families for the IPv6 wildcard, which takes IPv4 too); with
/// `publish = "all"`, a wildcard listener's own wildcard.
fn outside_addresses(addr: SocketAddr, mode: Publishing) -> Vec<SocketAddr> {
    let port = addr.port();
    let ip = crate::floor::hosts::canonical(addr.ip());
    let v4 = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port);
    let v6 = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), port);
    match ip {
        IpAddr::V4(a) if a.is_unspecified() && mode == Publishing::All => {
            vec![SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port)]
        }
        IpAddr::V6(a) if a.is_unspecified() && mode == Publishing::All => {
            vec![SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port)]
        }
        IpAddr::V6(a) if a.is_unspecified() => vec![v6, v4],
        IpAddr::V4(_) => vec![v4],
        IpAddr::V6(_) => vec![v6],
    }
}

/// A connection to the tree's listener at `inside`, on a socket of its namespace.
async fn connect_inside(
    porter: &Porter,
    inside: SocketAddr,
) -> std::io::Result<tokio::net::TcpStream> {
    let fd = porter.socket(inside.is_ipv6())?;
    // A TCP socket the porter just made; ours alone.
    let std = std::net::TcpStream::from(fd);
    std.set_nonblocking(true)?;
    let socket = TcpSocket::from_std_stream(std);
    tokio::time::timeout(Duration::from_secs(5), socket.connect(inside))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

/// The TCP ports listened on in the network namespace of `pid`, from its `/proc/<pid>/net/tcp`
/// and `tcp6` (the latter absent where IPv6 is off); `None` once that process is gone.
fn listening_ports(pid: i32) -> Option<Vec<u16>> {
    use crate::child::sockets;
    let mut rows = sockets::parse(&std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).ok()?);
    if let Ok(tcp6) = std::fs::read_to_string(format!("/proc/{pid}/net/tcp6")) {
        rows.extend(sockets::parse(&tcp6));
    }
    Some(sockets::listening(&rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_table_gives_the_listening_ports_only() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:4965 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:A3D2 0100007F:4965 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1\n";
        let rows = crate::child::sockets::parse(table);
        assert_eq!(crate::child::sockets::listening(&rows), vec![0x4965]);
    }

    #[test]
    fn a_wildcard_listener_is_published_on_loopback_unless_all_is_asked() {
        let any6: SocketAddr = "[::]:3000".parse().unwrap();
        let any4: SocketAddr = "0.0.0.0:3000".parse().unwrap();
        let lo4: SocketAddr = "127.0.0.1:3000".parse().unwrap();
        let lo6: SocketAddr = "[::1]:3000".parse().unwrap();
        assert_eq!(outside_addresses(any4, Publishing::Loopback), vec![lo4]);
        assert_eq!(
            outside_addresses(any6, Publishing::Loopback),
            vec![lo6, lo4]
        );
        assert_eq!(outside_addresses(lo6, Publishing::Loopback), vec![lo6]);
        assert_eq!(
            outside_addresses(any4, Publishing::All),
            vec!["0.0.0.0:3000".parse().unwrap()]
        );
        // A listener on loopback stays on loopback whatever `publish` says.
        assert_eq!(outside_addresses(lo4, Publishing::All), vec![lo4]);
        assert_eq!(inside_address(any6), lo6);
        assert_eq!(inside_address(any4), lo4);
    }
}
