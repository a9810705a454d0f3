//! The network part of a run's floor: what the wrapper holds of it before the agent runs,
//! and once it runs, the egress proxy, the tree's resolver, the connect bridge (with the
//! connections to names it hands over) and the publishing of the tree's listeners, started
//! together.

use std::path::PathBuf;
use std::sync::Arc;

use crate::floor;
use crate::floor::hosts::HostRules;
use crate::intercept::egress::Egress;

/// The wrapper's side of the network part, before the agent runs.
pub(in crate::run) struct NetSide {
    #[cfg(target_os = "linux")]
    pub(super) peer: floor::NetPeer,
    pub(super) rules: HostRules,
    pub(super) proxy_port: u16,
    /// The proxy's listener on this machine's loopback, made by the wrapper when the tree
    /// has no network namespace of its own (else the agent's process makes it there).
    pub(super) own_proxy: Option<std::net::TcpListener>,
    /// Whether Landlock refuses the tree's own TCP connections (ABI 4).
    pub(super) kernel_refuses_tcp: bool,
    /// Path sockets the tree may reach although it did not bind them.
    pub(super) unix_allow: Vec<PathBuf>,
    /// The declared credentials and the run's CA, when there are any.
    pub(super) injection: Option<crate::intercept::egress::Injection>,
}

/// The network part while the agent runs: the egress proxy, the connect bridge's thread
/// and the task that audits what it refuses. Its tasks end when it is dropped.
pub(in crate::run) struct NetRunning {
    pub(in crate::run) egress: Arc<Egress>,
    #[cfg(target_os = "linux")]
    pub(in crate::run) counts: Arc<floor::bridge::Counts>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for NetRunning {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl NetSide {
    /// Once the agent runs: takes the sockets it made in its namespace, starts the proxy on
    /// one and the connect bridge on another; returns the control socket to serve there too.
    #[cfg(target_os = "linux")]
    pub(in crate::run) fn start(
        self,
        gate: Arc<crate::gate::Gate>,
        agent: i32,
    ) -> std::io::Result<(NetRunning, Option<std::os::unix::net::UnixListener>)> {
        let received = self.peer.receive()?;
        let host = self.own_proxy.is_some();
        let proxy = received
            .proxy
            .or(self.own_proxy)
            .ok_or_else(|| std::io::Error::other("no socket for the egress proxy"))?;
        proxy.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(proxy)?;
        let askers = floor::bridge::Askers::default();
        let egress = Egress::new(gate, self.rules.clone(), askers.clone());
        let egress = Arc::new(egress.injecting(self.injection));
        egress.agent_is(agent);
        egress
            .only_the_tree
            .store(host, std::sync::atomic::Ordering::Relaxed);
        // What the person's programs listen on (and earlier runs saw), read off the start,
        // on a thread of its own that runs only when a processor is idle: a run that ends
        // first does not wait for it (its file is replaced whole or not at all).
        {
            let ports = egress.published.user_ports.clone();
            let _ = std::thread::Builder::new()
                .name("user-ports".into())
                .spawn(move || {
                    crate::child::idle_priority_for_this_thread();
                    ports.load();
                });
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (listens, mut listened) = tokio::sync::mpsc::unbounded_channel();
        let (carries, mut carried) = tokio::sync::mpsc::unbounded_channel();
        let names = Arc::new(floor::names::Names::default());
        let dns_askers = floor::bridge::Askers::default();
        let counts = Arc::new(floor::bridge::Counts::default());
        // The porter is the small executable when there is one (it starts faster), else us.
        let exe = std::env::current_exe()?;
        let porter = super::super::phases::small_executable(&exe).unwrap_or(exe);
        let bridge = floor::bridge::Bridge {
            loopback: self.rules.loopback(),
            loopback_ports: self.rules.loopback_ports().to_vec(),
            proxy_port: self.proxy_port,
            askers,
            counts: counts.clone(),
            unix_allow: self.unix_allow.clone(),
            // Called on the bridge's thread while the caller still waits in connect(2): its
            // command line is read now, before a caller that gives up at once has exited.
            report: Box::new(move |r| {
                let me = std::process::id() as i32;
                let chain = crate::child::procfs::ancestry(r.pid, agent, me);
                let _ = tx.send((r, chain));
            }),
            // Without a namespace the tree's listeners are on this machine's addresses.
            publish: (!host).then(|| {
                floor::bridge::Publish::new(
                    porter,
                    crate::child::tree::register_own,
                    &listener,
                    Box::new(move |l: floor::bridge::Listening| {
                        let me = std::process::id() as i32;
                        let chain = crate::child::procfs::ancestry(l.pid, agent, me);
                        let _ = listens.send((l, chain));
                    }),
                )
            }),
            names: names.clone(),
            carry: Box::new(move |c| {
                let _ = carries.send(c);
            }),
            dns_askers: dns_askers.clone(),
            host: host.then(|| {
                let tcp = self.kernel_refuses_tcp;
                floor::bridge::HostNet::new(tree_listens(agent), tree_holds(agent), tcp)
            }),
        };
        bridge.spawn(received.notify)?;
        if let Some(dns) = received.dns {
            egress.answer_names(dns, names, dns_askers)?;
        }
        let carry = {
            let egress = egress.clone();
            tokio::spawn(async move {
                while let Some(c) = carried.recv().await {
                    tokio::spawn(egress.clone().connect_by_name(c));
                }
            })
        };
        let audit = {
            let egress = egress.clone();
            tokio::spawn(async move {
                while let Some((r, chain)) = rx.recv().await {
                    egress.direct_refused(r, chain).await;
                }
            })
        };
        let publish = {
            let egress = egress.clone();
            tokio::spawn(async move {
                while let Some((l, chain)) = listened.recv().await {
                    tokio::spawn(egress.clone().publish(l, chain));
                }
            })
        };
        let serve = tokio::spawn(egress.clone().serve(listener));
        Ok((
            NetRunning {
                egress,
                counts,
                tasks: vec![serve, audit, publish, carry],
            },
            received.control,
        ))
    }
}

/// Whether a process of the agent's tree (`agent`) listens on a TCP port of this machine's
/// loopback, for the bridge without a network namespace.
#[cfg(target_os = "linux")]
fn tree_listens(agent: i32) -> Box<dyn Fn(u16) -> bool + Send> {
    let me = std::process::id() as i32;
    // Every listener on the port must be the tree's: a port it shares with a program of the
    // person's (`SO_REUSEPORT`, the same user) would let the kernel hand the connection to
    // that one.
    Box::new(move |port| {
        let inodes: Vec<u64> = crate::child::sockets::listeners()
            .iter()
            .filter(|r| r.local.port() == port)
            .filter(|r| r.local.ip().is_loopback() || r.local.ip().is_unspecified())
            .map(|r| r.inode)
            .collect();
        let holders = crate::child::sockets::holders(&inodes);
        !inodes.is_empty()
            && inodes.iter().all(|i| {
                holders
                    .get(i)
                    .is_some_and(|(pid, _)| crate::child::tree::descends_from(*pid, agent, me).0)
            })
    })
}

/// Whether a process of the agent's tree (`agent`) holds a socket, by its inode.
#[cfg(target_os = "linux")]
fn tree_holds(agent: i32) -> Box<dyn Fn(u64) -> bool + Send> {
    let me = std::process::id() as i32;
    Box::new(move |inode| {
        crate::child::sockets::holders(&[inode])
            .get(&inode)
            .is_some_and(|(pid, _)| crate::child::tree::descends_from(*pid, agent, me).0)
    })
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    /// A process that listens on `port` of the loopback (0: one the kernel picks) with
    /// `SO_REUSEPORT`, as a person's program may: its pid and port. `apart`: started by a
    /// shell that exits at once, so that it is not this process's child (the wrapper's
    /// children are the tree's).
    #[allow(
        clippy::zombie_processes,
        reason = "the listener not apart is waited for by its pid (`end`)"
    )]
    fn listener(port: u16, apart: bool) -> (i32, u16) {
        let script = format!(
            "import os, socket, time\n\
             s = socket.socket()\n\
             s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n\
             s.bind(('127.0.0.1', {port}))\n\
             s.listen(8)\n\
             print(os.getpid(), s.getsockname()[1], flush=True)\n\
             time.sleep(30)\n"
        );
        let mut cmd = match apart {
            true => Command::new("sh"),
            false => Command::new("python3"),
        };
        match apart {
            true => cmd.args(["-c", "python3 -c \"$0\" &", &script]),
            false => cmd.args(["-c", &script]),
        };
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        if apart {
            let _ = child.wait();
        }
        let mut words = line.split_whitespace().map(|w| w.parse().unwrap_or(0));
        let pid = words.next().unwrap_or(0);
        let port = words.next().unwrap_or(0) as u16;
        assert!(pid > 0 && port > 0, "the listener said {line:?}");
        (pid, port)
    }

    fn end(pid: i32) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
    }

    /// A port the tree shares with a program of the person's (`SO_REUSEPORT`, the same
    /// user) is not the tree's own server: the kernel may hand the bridge's connection to
    /// either listener. It is the tree's once the person's listener is gone.
    #[test]
    fn a_port_shared_with_a_program_outside_the_tree_is_not_the_trees() {
        let (person, port) = listener(0, true);
        let (tree, _) = listener(port, false);
        let listens = super::tree_listens(tree);
        let shared = listens(port);
        end(person);
        // (Not this process's child: its socket closes once the kill is delivered.)
        let alone = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            listens(port)
        });
        end(tree);
        assert!(
            !shared,
            "a port shared with a listener outside the tree counted as the tree's"
        );
        assert!(
            alone,
            "the tree's own listener, alone on its port, was not seen"
        );
    }
}
