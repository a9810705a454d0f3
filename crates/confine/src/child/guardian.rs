//! The guardian: a tiny process started with the wrapper (the small executable,
//! `ahp-wrap-hook guardian`; a fork of the wrapper where there is none) that outlives a
//! killed wrapper just long enough to take the agent down with it.
//!
//! A wrapper killed with SIGKILL runs no code, so the agent would be orphaned (and
//! `PR_SET_PDEATHSIG` reaches only the direct child, not the agent's own children). The
//! guardian holds one end of a socket pair whose other end only the wrapper has (a pipe
//! but for the descriptors it can carry): when the
//! wrapper dies, however it dies, the guardian reads EOF and ends the agent's whole tree
//! (see `tree::take_down`: the agent, its group when it has one, every descendant,
//! and every orphan the wrapper adopted and told it about), SIGTERM first and SIGKILL after
//! a grace period, then removes the wrapper's private run directory. A wrapper that ends
//! normally ends the tree itself and tells the guardian to stand down.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use nix::unistd::{fork, ForkResult};

use super::{cgroup, procfs, tree};
use ahp_wrap_floor::rundir;

/// How long the agent gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// The wrapper's end of the guardian's socket pair.
pub struct Guardian {
    pipe: std::fs::File,
    pid: i32,
    /// It was told the run directory ([`Guardian::clean_up`]).
    cleans: bool,
}

impl Guardian {
    /// Starts the guardian as `program guardian [args]`, its orders on its standard input and
    /// `stdout` as its standard output (for work it does first, which `args` name). It is
    /// spawned (`posix_spawn`): nothing of this process is copied, so the pages the wrapper
    /// writes later fault no copy, as they would for a forked guardian as long as it lives.
    /// Without `program` (no small executable beside this one), forks one: call it while the
    /// process is still single-threaded.
    pub fn spawn(
        program: Option<&std::path::Path>,
        args: &[&str],
        stdout: Option<OwnedFd>,
    ) -> std::io::Result<Guardian> {
        // A socket pair rather than a pipe, so that descriptors can travel with the orders
        // ([`Guardian::hold`]); it ends for the reader as a pipe does, when the last writer
        // is gone.
        let (read, write) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        if let Some(program) = program {
            use std::process::Stdio;
            let child = std::process::Command::new(program)
                .arg(GUARDIAN_ARG)
                .args(args)
                .stdin(Stdio::from(read))
                .stdout(stdout.map_or_else(Stdio::null, Stdio::from))
                .spawn()?;
            let pid = child.id() as i32;
            tree::register_own(pid);
            #[cfg(target_os = "linux")]
            beside_us(pid);
            return Ok(Guardian {
                pipe: std::fs::File::from(write),
                pid,
                cleans: false,
            });
        }
        drop(stdout);
        // SAFETY: called before any thread is started (see `run`), so the child may run
        // arbitrary code; it never returns into the caller.
        match unsafe { fork() }? {
            ForkResult::Child => {
                drop(write);
                guard(read, Vec::new())
            }
            ForkResult::Parent { child } => {
                tree::register_own(child.as_raw());
                drop(read);
                Ok(Guardian {
                    pipe: std::fs::File::from(write),
                    pid: child.as_raw(),
                    cleans: false,
                })
            }
        }
    }

    /// Whether the guardian has ended already (it was reaped now): one that never took
    /// orders, such as an older small executable that knows no `guardian`.
    pub fn ended(&self) -> bool {
        use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
        let pid = nix::unistd::Pid::from_raw(self.pid);
        !matches!(
            waitpid(pid, Some(WaitPidFlag::WNOHANG)),
            Ok(WaitStatus::StillAlive)
        )
    }

    /// The guardian's process id (protected from the agent like the wrapper's own).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The pipe's file descriptor, for the agent to register itself before it runs (see
    /// `announce`); it is close-on-exec, so the agent's program never holds it.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.pipe.as_raw_fd()
    }

    /// Another write end of the pipe (close-on-exec), for the tree tracker to report the
    /// orphans the wrapper adopts (`root <pid> <start>` lines; a line is written whole).
    pub fn link(&self) -> Option<std::fs::File> {
        self.pipe.try_clone().ok()
    }

    /// Watches `target`, sent as `kill(2)` takes it (a pid, or minus a process group id).
    pub fn watch(&mut self, target: super::ChildId) {
        let _ = writeln!(self.pipe, "watch {}", target.kill_target());
    }

    /// Removes `dir` (the run directory; the caches' layers) once the run is over, or if the
    /// wrapper dies without doing it. The path is sent as one line, so it must not contain a
    /// newline (ours never does). Whether the guardian will.
    pub fn clean_up(&mut self, dir: &std::path::Path) -> bool {
        let sent = dir
            .to_str()
            .filter(|d| !d.contains('\n'))
            .is_some_and(|d| writeln!(self.pipe, "rundir {d}").is_ok());
        self.cleans |= sent;
        sent
    }

    /// Marks the agent's tree: every process whose environment holds `entry` (`NAME=value`,
    /// unique to this run) is ended with it. This finds the orphans the wrapper adopted too
    /// recently to have reported them, unless they cleared their environment.
    pub fn mark(&mut self, entry: &str) {
        if !entry.contains('\n') {
            let _ = writeln!(self.pipe, "mark {entry}");
        }
    }

    /// Gives the guardian `fd` to hold until it exits: a descriptor whose last close would
    /// make the wrapper wait (the checkpoints' inotify instance, whose watches the kernel
    /// retires after a grace period) is then closed after the wrapper has exited. `false`
    /// (and `fd` closed here) when the guardian could not take it.
    pub fn hold(&mut self, fd: OwnedFd) -> bool {
        use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
        let fds = [fd.as_raw_fd()];
        let sent = sendmsg::<()>(
            self.pipe.as_raw_fd(),
            &[std::io::IoSlice::new(b"hold\n")],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::MSG_NOSIGNAL,
            None,
        );
        // In flight, the descriptor is the socket's too: this close is not its last.
        drop(fd);
        sent.is_ok()
    }

    /// The run ended normally (the agent's tree has ended): once the wrapper is gone, the
    /// guardian removes the directories it was told about ([`Guardian::clean_up`]) and
    /// exits, touching nothing else. Not before: removing the caches' layers and the run
    /// directory takes a disk's journal 1–2 ms of processor time, which would be taken from
    /// the wrapper's last steps (its audit log made durable among them). Whether the
    /// guardian removes them: else the caller does.
    pub fn release(mut self) -> bool {
        let told = writeln!(self.pipe, "release").is_ok() && self.cleans;
        // Our end stays open until this process exits: its close is the guardian's sign.
        std::mem::forget(self);
        told
    }
}

/// The first argument of the small executable (`ahp-wrap-hook`) that makes it a guardian.
pub const GUARDIAN_ARG: &str = "guardian";

/// Moves a process just started off the processor we run on, when we may run on another: a
/// new process waits for the processor of the one that started it until that one blocks,
/// and the guardian's first work (the agent's namespaces) is meant to be done while the
/// wrapper prepares, not once it waits for it. The guardian takes our mask back when our
/// first order comes ([`take_the_parents_processors`]).
#[cfg(target_os = "linux")]
fn beside_us(pid: i32) {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: plain system calls on a set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let cpu = libc::sched_getcpu();
        if cpu < 0 || libc::sched_getaffinity(0, size, &mut set) != 0 {
            return;
        }
        libc::CPU_CLR(cpu as usize, &mut set);
        if libc::CPU_COUNT(&set) > 0 {
            libc::sched_setaffinity(pid, size, &set);
        }
    }
}

/// The life of a guardian started as its own program ([`Guardian::spawn`]): its orders come
/// on its standard input. It holds `held` (the agent's namespaces, made ahead) until its
/// orders are carried out: their tear-down, the mounts of the agent's mount namespace among
/// them, then happens after the wrapper has exited, not while it waits for its agent.
pub fn run_spawned(held: Vec<OwnedFd>) -> ! {
    // Off descriptor 0, which detaching points at /dev/null.
    // SAFETY: duplicates our own standard input.
    match unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3) } {
        -1 => exit_now(),
        // SAFETY: a descriptor fcntl just made, ours alone.
        fd => guard(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }, held),
    }
}

/// The guardian's life: detached, it takes orders until the wrapper is gone, then carries
/// them out.
fn guard(read: OwnedFd, held: Vec<OwnedFd>) -> ! {
    let mut keep: Vec<std::os::fd::RawFd> = held.iter().map(AsRawFd::as_raw_fd).collect();
    keep.push(read.as_raw_fd());
    detach(&keep);
    let orders = Orders::read(std::fs::File::from(read));
    match orders.released {
        true => orders.remove_dirs(),
        false => orders.carry_out(),
    }
    drop(held);
    exit_now()
}

/// Ends the guardian at once.
fn exit_now() -> ! {
    // SAFETY: _exit only ends the process; no destructors or atexit handlers of the
    // forked copy may run.
    unsafe { libc::_exit(0) }
}

/// Leaves the terminal's session and every file but those in `keep` (the pipe, the
/// namespaces held).
fn detach(keep: &[std::os::fd::RawFd]) {
    // Leave the terminal's session so that Ctrl-C or a hangup cannot take us out, and
    // hold no stdio open: a reader of the wrapper's output must see EOF when it exits.
    let _ = nix::unistd::setsid();
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..=2 {
            let _ = nix::unistd::dup2(null.as_raw_fd(), fd);
        }
    }
    close_from(3, keep);
}

/// Closes every descriptor from `first` on except those in `keep`: one `close_range(2)`
/// call per gap between them, or, where the kernel has none (before 5.9), one `close` per
/// descriptor below 1024.
fn close_from(first: std::os::fd::RawFd, keep: &[std::os::fd::RawFd]) {
    #[cfg(target_os = "linux")]
    {
        let mut kept: Vec<std::os::fd::RawFd> =
            keep.iter().copied().filter(|fd| *fd >= first).collect();
        kept.sort_unstable();
        let range = |lo: std::os::fd::RawFd, hi: u32| {
            // SAFETY: closing descriptors this process no longer uses.
            unsafe { libc::syscall(libc::SYS_close_range, lo as u32, hi, 0u32) }
        };
        let mut lo = first;
        let mut ok = true;
        for &fd in &kept {
            if fd > lo {
                ok &= range(lo, (fd - 1) as u32) == 0;
            }
            lo = fd + 1;
        }
        if ok && range(lo, u32::MAX) == 0 {
            return;
        }
    }
    for fd in first..1024 {
        if !keep.contains(&fd) {
            let _ = nix::unistd::close(fd);
        }
    }
}

/// Our parent's processors again: the wrapper moves a guardian it spawned off its own
/// processor for its first work ([`beside_us`]), after starting it and before writing it any
/// order, so once an order has come the move is behind us (taken back earlier, a move that
/// came late would pin the guardian for the whole run).
fn take_the_parents_processors() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on a set we own.
    unsafe {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(libc::getppid(), size, &mut set) == 0 {
            libc::sched_setaffinity(0, size, &set);
        }
    }
}

/// What the wrapper told the guardian to end and remove should it die.
#[derive(Default)]
struct Orders {
    /// The agent: a pid, or minus its process group id (0 until it registers).
    target: i32,
    /// Processes to end with their tree, by pid and start time (a reused pid is not ours).
    roots: Vec<(i32, u64)>,
    /// The directories to remove: the run directory, the caches' layers.
    clean_up: Vec<PathBuf>,
    /// The agent's cgroup.
    group_dir: Option<PathBuf>,
    /// The environment entry that marks the agent's tree.
    mark: Option<String>,
    /// The run ended normally: nothing to end, only the directories to remove.
    released: bool,
}

impl Orders {
    /// Reads orders, one a line, until the socket ends (the wrapper is gone), `release`
    /// among them. A descriptor sent with an order ([`Guardian::hold`]) is kept open, never
    /// closed before the guardian exits.
    fn read(pipe: std::fs::File) -> Orders {
        use nix::sys::socket::{recvmsg, MsgFlags};
        let mut orders = Orders::default();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 256];
        let mut first = true;
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 4]);
        loop {
            let mut iov = [std::io::IoSliceMut::new(&mut chunk)];
            let n = match recvmsg::<()>(
                pipe.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) {
                // The descriptors received are now this process's, held as they are.
                Ok(msg) => msg.bytes,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => break,
            };
            if n == 0 {
                break;
            }
            if std::mem::take(&mut first) {
                take_the_parents_processors();
            }
            buf.extend_from_slice(&chunk[..n]);
            while let Some(i) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                orders.take(String::from_utf8_lossy(&line).trim());
            }
        }
        orders
    }

    /// Takes one order: `release`, `watch <target>`, `root <pid> <start>`, `mark <entry>`,
    /// `cgroup <dir>`, `rundir <dir>`, `hold` (a descriptor came with it: nothing to do).
    fn take(&mut self, line: &str) {
        if line == "release" {
            self.released = true;
        }
        if let Some(t) = line
            .strip_prefix("watch ")
            .and_then(|t| t.parse::<i32>().ok())
        {
            self.target = t;
            if let Some(st) = procfs::stat(t.abs()) {
                self.roots.push((t.abs(), st.start));
            }
        }
        if let Some((pid, start)) = line.strip_prefix("root ").and_then(|r| r.split_once(' ')) {
            if let (Ok(pid), Ok(start)) = (pid.parse(), start.parse()) {
                self.roots.push((pid, start));
            }
        }
        if let Some(entry) = line.strip_prefix("mark ") {
            self.mark = Some(entry.to_owned());
        }
        if let Some(dir) = line.strip_prefix("cgroup ") {
            self.group_dir = Some(dir.into());
        }
        if let Some(dir) = line.strip_prefix("rundir ") {
            self.clean_up.push(dir.into());
        }
    }

    /// Ends the agent's tree (with the marked processes and the cgroup's), removes the
    /// cgroup, then the run directory.
    fn carry_out(mut self) {
        // Once, not in every round below: reading every environment is the costly part.
        if let (Some(entry), Some(table)) = (&self.mark, procfs::processes()) {
            for pid in procfs::with_env(&table, entry.as_bytes()) {
                self.roots.push((pid, table[&pid].start));
            }
        }
        if self.target != 0 || !self.roots.is_empty() || self.group_dir.is_some() {
            let group = (self.target < 0).then_some(self.target);
            let (roots, group_dir) = (&self.roots, &self.group_dir);
            tree::take_down(
                |table| {
                    let mut from: Vec<i32> = roots
                        .iter()
                        .filter(|(pid, start)| table.get(pid).is_some_and(|st| st.start == *start))
                        .map(|&(pid, _)| pid)
                        .collect();
                    from.extend(group_dir.iter().flat_map(|d| cgroup::members(d)));
                    from
                },
                group,
                GRACE,
            );
        }
        if let Some(dir) = &self.group_dir {
            cgroup::kill_and_remove(dir);
        }
        // The run directory (control socket, generated settings) of a wrapper that could not
        // remove it itself; the caches' layers, never merged.
        self.remove_dirs();
    }

    /// Removes the directories the wrapper named: its run directory, the caches' layers.
    fn remove_dirs(&self) {
        for dir in &self.clean_up {
            let _ = rundir::remove_all(dir);
        }
    }
}

/// Registers the calling process (or its group, when `group` is set) with the guardian on
/// `fd`. Runs in the forked agent before `exec`, so the agent is watched before it can do
/// anything, whenever the wrapper dies; it is async-signal-safe (no allocation, no locks).
pub(crate) fn announce(fd: std::os::fd::RawFd, group: bool) {
    // SAFETY: getpid and write are async-signal-safe; `line` lives on this stack.
    let pid = unsafe { libc::getpid() };
    let mut line = [0u8; 32];
    let mut n = 0;
    for b in b"watch " {
        line[n] = *b;
        n += 1;
    }
    if group {
        line[n] = b'-';
        n += 1;
    }
    let mut digits = [0u8; 12];
    let mut d = 0;
    let mut v = pid.unsigned_abs();
    loop {
        digits[d] = b'0' + (v % 10) as u8;
        d += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        line[n] = digits[d];
        n += 1;
    }
    line[n] = b'\n';
    n += 1;
    // SAFETY: `line[..n]` is initialised; a failed write only loses the registration.
    unsafe {
        libc::write(fd, line.as_ptr().cast(), n);
    }
}

#[cfg(test)]
mod tests;
