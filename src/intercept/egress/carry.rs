//! Connections to a name, carried out: a program that ignores the proxy variables connects
//! to the address the tree's resolver gave a name, and the bridge hands that `connect(2)`
//! here ([`Carry`]). It is decided by name, with the connecting process, by the same rules
//! and gate as the proxy's connections (`net` pre_action, `via: "name"`); when it may go,
//! the name is resolved here (never before the decision), the addresses checked again, and
//! the connection made from the wrapper's namespace and put in the caller's place.
//!
//! A blocking caller is answered once connected (each address tried in turn). A
//! non-blocking one is answered `EINPROGRESS` once the connection to the first address is
//! under way, and finds it made or refused as it would its own (`poll`, `SO_ERROR`); while
//! the policy decides, it waits in `connect` like a blocking one.
//!
//! A client tries each address of a name in turn (ssh, Python's `create_connection`, Node):
//! once the name is refused to a process, its next try at the same port within
//! [`REMEMBERED`] is refused without a second decision (nor a second question to a person).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::floor::bridge::Carry;
use crate::floor::hosts::Target;

use super::{Egress, CONNECT_TIMEOUT};

/// How long a refusal of a name to a process holds for its next address.
pub(super) const REMEMBERED: Duration = Duration::from_secs(2);

/// Names refused lately: (name, port, process) and when.
#[derive(Debug, Default)]
pub(super) struct Recent(Mutex<HashMap<(String, u16, i32), Instant>>);

impl Recent {
    fn refused_lately(&self, key: &(String, u16, i32)) -> bool {
        let Ok(mut recent) = self.0.lock() else {
            return false;
        };
        recent.retain(|_, at| at.elapsed() < REMEMBERED);
        recent.contains_key(key)
    }

    fn note(&self, key: (String, u16, i32)) {
        if let Ok(mut recent) = self.0.lock() {
            if recent.len() < 4096 {
                recent.insert(key, Instant::now());
            }
        }
    }
}

impl Egress {
    /// Decides and makes the connection `carry` waits for.
    pub(crate) async fn connect_by_name(self: Arc<Self>, carry: Carry) {
        let key = (carry.name.clone(), carry.port, carry.pid);
        if self.refused_names.refused_lately(&key) {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return carry.refuse(libc::EACCES);
        }
        let scheme = match carry.port {
            80 => "http",
            443 => "https",
            22 => "ssh",
            _ => "tcp",
        };
        // A port of this machine's loopback no rule names is decided as its address and port.
        let (target, via) = match carry.loopback {
            Some(addr) => (Target::Addr(addr.ip()), "loopback"),
            None => (Target::Name(carry.name.clone()), "name"),
        };
        let (addrs, asker) = match self
            .allow(&target, carry.port, (scheme, via), Some(carry.pid))
            .await
        {
            Ok(allowed) => allowed,
            Err(refusal) => {
                tracing::debug!("egress: {}:{}: {}", carry.name, carry.port, refusal.reason);
                // A refusal is the floor's EACCES; a name that leads nowhere, no route.
                if refusal.decided {
                    self.refused_names.note(key);
                }
                carry.refuse(match refusal.decided {
                    true => libc::EACCES,
                    false => libc::EHOSTUNREACH,
                });
                return;
            }
        };
        if self.injects_for(&target) {
            return self.carry_injected(carry, addrs, asker).await;
        }
        let addrs = in_the_callers_family(addrs, carry.v6);
        if carry.nonblocking {
            let Some(&first) = addrs.first() else {
                return carry.refuse(libc::EHOSTUNREACH);
            };
            match crate::floor::bridge::start_connect(first, (carry.nodelay, carry.keepalive)) {
                Ok((socket, result)) => {
                    if carry.put(&socket, result).is_ok() {
                        self.allowed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(e) => carry.refuse(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)),
            }
            return;
        }
        let mut last = libc::EHOSTUNREACH;
        for addr in addrs {
            let socket = match addr {
                SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
                SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
            };
            let connected = match socket {
                Ok(s) => {
                    let _ = s.set_keepalive(carry.keepalive);
                    tokio::time::timeout(CONNECT_TIMEOUT, s.connect(addr)).await
                }
                Err(e) => Ok(Err(e)),
            };
            let stream = match connected {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    last = e.raw_os_error().unwrap_or(libc::ECONNREFUSED);
                    continue;
                }
                Err(_) => {
                    last = libc::ETIMEDOUT;
                    continue;
                }
            };
            let _ = stream.set_nodelay(carry.nodelay);
            let Ok(stream) = stream.into_std() else {
                continue;
            };
            let _ = stream.set_nonblocking(false);
            if carry.put(&stream, 0).is_ok() {
                self.allowed.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        carry.refuse(last);
    }
}

impl Egress {
    /// A connection to a name a credential is bound to: made here, then served by the
    /// proxy's [`intercept`](Egress::intercept) through a loopback connection of the
    /// wrapper's, whose other end is put in the caller's place (connected: a non-blocking
    /// caller too finds it so).
    async fn carry_injected(
        self: Arc<Self>,
        carry: Carry,
        addrs: Vec<SocketAddr>,
        asker: Option<Arc<super::Asker>>,
    ) {
        let mut last = libc::EHOSTUNREACH;
        let mut upstream = None;
        for addr in addrs {
            match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await
            {
                Ok(Ok(s)) => {
                    upstream = Some(s);
                    break;
                }
                Ok(Err(e)) => last = e.raw_os_error().unwrap_or(libc::ECONNREFUSED),
                Err(_) => last = libc::ETIMEDOUT,
            }
        }
        let Some(upstream) = upstream else {
            return carry.refuse(last);
        };
        let pair = loopback_pair(carry.v6).await;
        let (ours, theirs) = match pair {
            Ok(p) => p,
            Err(e) => return carry.refuse(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)),
        };
        let _ = theirs.set_nodelay(carry.nodelay);
        let Ok(theirs) = theirs.into_std() else {
            return carry.refuse(libc::ECONNREFUSED);
        };
        if !carry.nonblocking {
            let _ = theirs.set_nonblocking(false);
        }
        let host = carry.name.to_ascii_lowercase();
        if carry.put(&theirs, 0).is_err() {
            return;
        }
        drop(theirs);
        self.allowed.fetch_add(1, Ordering::Relaxed);
        self.intercept(ours, host, upstream, asker).await;
    }
}

/// Both ends of a TCP connection over this namespace's loopback (of the caller's family,
/// IPv4 when IPv6 has no loopback here): the proxy's end, and the one put in a caller's place.
async fn loopback_pair(
    v6: bool,
) -> std::io::Result<(tokio::net::TcpStream, tokio::net::TcpStream)> {
    let listener = match v6 {
        true => match tokio::net::TcpListener::bind("[::1]:0").await {
            Ok(l) => l,
            Err(_) => tokio::net::TcpListener::bind("127.0.0.1:0").await?,
        },
        false => tokio::net::TcpListener::bind("127.0.0.1:0").await?,
    };
    let addr = listener.local_addr()?;
    let theirs = tokio::net::TcpStream::connect(addr).await?;
    let mine = theirs.local_addr()?;
    // Only the connection just made (another process of this machine could race for it).
    loop {
        let (ours, from) = listener.accept().await?;
        if from == mine {
            return Ok((ours, theirs));
        }
    }
}

/// `addrs` as a socket of the caller's family reaches them: for an IPv6 caller, IPv6 ones
/// first, then IPv4 ones through their mapped addresses; for an IPv4 caller, IPv4 ones
/// first (an IPv6-only host is then reached by an IPv6 socket in its place).
fn in_the_callers_family(addrs: Vec<SocketAddr>, v6: bool) -> Vec<SocketAddr> {
    let (mut v4s, v6s): (Vec<_>, Vec<_>) = addrs.into_iter().partition(SocketAddr::is_ipv4);
    if v6 {
        for a in &mut v4s {
            if let SocketAddr::V4(v4) = a {
                *a = SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port());
            }
        }
        v6s.into_iter().chain(v4s).collect()
    } else {
        v4s.into_iter().chain(v6s).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_tried_in_the_callers_family_first() {
        let a4: SocketAddr = "192.0.2.1:22".parse().unwrap();
        let a6: SocketAddr = "[2001:db8::1]:22".parse().unwrap();
        assert_eq!(in_the_callers_family(vec![a6, a4], false), vec![a4, a6]);
        let mapped: SocketAddr = "[::ffff:192.0.2.1]:22".parse().unwrap();
        assert_eq!(in_the_callers_family(vec![a4, a6], true), vec![a6, mapped]);
    }
}
