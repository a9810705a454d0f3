//! TCP sockets as `/proc` shows them: which ports a network namespace listens on, which
//! socket joins two addresses, and which process holds a socket. What the floor asks to
//! decide a connection to this machine's loopback (who listens on that port) and to audit
//! one carried to a published listener (who connected).

#![forbid(unsafe_code)]

mod diag;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// One row of a `/proc/net/tcp` or `tcp6` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The local address.
    pub local: SocketAddr,
    /// The remote address (unspecified for a listener).
    pub remote: SocketAddr,
    /// The socket's TCP state (`0A`: LISTEN).
    pub state: u8,
    /// The socket's inode (its `socket:[N]` link).
    pub inode: u64,
}

/// The state of a listening socket.
pub const LISTEN: u8 = 0x0a;

/// The TCP sockets of the network namespace of `pid` (`None`: this process's own).
pub fn table(pid: Option<i32>) -> Vec<Row> {
    let base = match pid {
        Some(p) => format!("/proc/{p}/net"),
        None => "/proc/net".to_owned(),
    };
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(format!("{base}/{f}")).ok())
        .flat_map(|t| parse(&t))
        .collect()
}

/// The listening TCP sockets of this process's network namespace: from the kernel's socket
/// diagnostics, which walk only its table of listeners, or (where those are not to be had)
/// from `/proc/net/tcp` and `tcp6`.
pub fn listeners() -> Vec<Row> {
    match diag::dump(1 << LISTEN) {
        Ok(rows) => rows,
        Err(e) => {
            tracing::debug!("socket diagnostics: {e}; reading /proc/net/tcp");
            table(None)
                .into_iter()
                .filter(|r| r.state == LISTEN)
                .collect()
        }
    }
}

/// A socket of this process's network namespace to ask [`listeners_through`] with, made
/// here and used from any namespace (a socket belongs to the namespace that made it).
pub fn diagnostics_socket() -> std::io::Result<std::os::fd::OwnedFd> {
    diag::open()
}

/// The listening TCP sockets of the network namespace of `diagnostics`, a socket
/// [`diagnostics_socket`] made there.
pub fn listeners_through(diagnostics: std::os::fd::BorrowedFd<'_>) -> std::io::Result<Vec<Row>> {
    diag::dump_on(diagnostics, 1 << LISTEN)
}

/// The ports listened on in `rows`.
pub fn listening(rows: &[Row]) -> Vec<u16> {
    let mut ports: Vec<u16> = rows
        .iter()
        .filter(|r| r.state == LISTEN)
        .map(|r| r.local.port())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// The rows of a `/proc/net/tcp` (or `tcp6`) table.
pub fn parse(table: &str) -> Vec<Row> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Some(Row {
                local: address(f.get(1)?)?,
                remote: address(f.get(2)?)?,
                state: u8::from_str_radix(f.get(3)?, 16).ok()?,
                inode: f.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// `0100007F:4965` (IPv4, the address a little-endian word) or 32 hex digits (IPv6, four
/// words each in this machine's byte order), a colon and the port.
fn address(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok();
    let ip: IpAddr = match ip.len() {
        8 => Ipv4Addr::from(word(0)?.to_le_bytes()).into(),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?.to_ne_bytes());
            }
            Ipv6Addr::from(bytes).into()
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The sockets (inodes) held by the processes `which` picks (by pid), of those this user
/// may read.
pub fn socket_inodes_of(which: impl Fn(i32) -> bool) -> std::collections::HashSet<u64> {
    let mut found = std::collections::HashSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if !which(pid) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        found.extend(fds.flatten().filter_map(|fd| {
            let link = std::fs::read_link(fd.path()).ok()?;
            link.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse::<u64>()
                .ok()
        }));
    }
    found
}

/// The processes (pid and command line) holding the sockets `inodes`, from every process's
/// descriptors that this user may read: one pass over `/proc`.
pub fn holders(inodes: &[u64]) -> HashMap<u64, (i32, Vec<String>)> {
    let mut found = HashMap::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(link) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let link = link.to_string_lossy();
            let Some(inode) = link
                .strip_prefix("socket:[")
                .and_then(|l| l.strip_suffix(']'))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if inodes.contains(&inode) && !found.contains_key(&inode) {
                let argv = super::procfs::cmdline(pid).unwrap_or_default();
                found.insert(inode, (pid, argv));
            }
        }
        if found.len() == inodes.len() {
            break;
        }
    }
    found
}

/// The process listening on `port` of this machine's loopback (or every address), if this
/// user may see it.
pub fn listener_on(port: u16) -> Option<(i32, Vec<String>)> {
    let rows = listeners();
    let inodes: Vec<u64> = rows
        .iter()
        .filter(|r| {
            r.state == LISTEN
                && r.local.port() == port
                && (r.local.ip().is_loopback() || r.local.ip().is_unspecified())
        })
        .map(|r| r.inode)
        .collect();
    holders(&inodes).into_values().next()
}

/// The process whose socket is connected from `client` to `server` (both as this side of
/// loopback sees them): the client of a connection a listener accepted.
pub fn client_of(client: SocketAddr, server: SocketAddr) -> Option<(i32, Vec<String>)> {
    let same = |a: SocketAddr, b: SocketAddr| {
        a.port() == b.port() && canonical(a.ip()) == canonical(b.ip())
    };
    let found = match diag::one(client, server) {
        Ok(row) => row,
        Err(e) => {
            tracing::debug!("socket diagnostics: {e}; reading /proc/net/tcp");
            table(None)
                .into_iter()
                .find(|r| same(r.local, client) && same(r.remote, server))
        }
    };
    let inode = found?.inode;
    holders(&[inode]).remove(&inode)
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_reads_as_its_addresses_states_and_inodes() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:4965 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 17 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:A3D2 0100007F:4965 01 00000000:00000000 00:00000000 00000000     0        0 18 1 0000000000000000 20 4 30 10 -1\n";
        let rows = parse(v4);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].local, "127.0.0.1:18789".parse().unwrap());
        assert_eq!(rows[0].state, LISTEN);
        assert_eq!(rows[1].remote, "127.0.0.1:18789".parse().unwrap());
        assert_eq!(rows[1].inode, 18);
        assert_eq!(listening(&rows), vec![18789]);
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(parse(v6)[0].local, "[::1]:8080".parse().unwrap());
    }

    /// This process's own listener is found with its holder (itself), and so is the client
    /// of a connection to it.
    #[test]
    fn the_listener_and_the_client_of_a_connection_are_found() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let me = std::process::id() as i32;
        assert_eq!(listener_on(port).map(|(pid, _)| pid), Some(me));
        let c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_accepted, from) = l.accept().unwrap();
        assert_eq!(from, c.local_addr().unwrap());
        assert_eq!(
            client_of(from, l.local_addr().unwrap()).map(|(pid, _)| pid),
            Some(me)
        );
        assert!(listening(&table(None)).contains(&port));
        assert!(listening(&listeners()).contains(&port));
    }

    /// The kernel's socket diagnostics and `/proc/net/tcp` name the same listeners, with
    /// their inodes; a connection is found by its two addresses, either family.
    #[test]
    fn the_diagnostics_agree_with_proc() {
        let v4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let v6 = std::net::TcpListener::bind("[::1]:0").unwrap();
        let from_proc: Vec<Row> = table(None)
            .into_iter()
            .filter(|r| r.state == LISTEN)
            .collect();
        let from_diag = diag::dump(1 << LISTEN).unwrap();
        for l in [&v4, &v6] {
            let a = l.local_addr().unwrap();
            let p = from_proc.iter().find(|r| r.local == a).expect("in /proc");
            let d = from_diag
                .iter()
                .find(|r| r.local == a)
                .expect("in the diagnostics");
            assert_eq!(p, d);
        }
        let c = std::net::TcpStream::connect(v6.local_addr().unwrap()).unwrap();
        let (accepted, from) = v6.accept().unwrap();
        let row = diag::one(c.local_addr().unwrap(), v6.local_addr().unwrap())
            .unwrap()
            .expect("the client's socket");
        assert_eq!((row.local, row.remote), (from, v6.local_addr().unwrap()));
        assert_eq!(row.state, 1, "established");
        drop(accepted);
        let none = diag::one(
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        );
        assert!(none.unwrap().is_none());
    }
}
