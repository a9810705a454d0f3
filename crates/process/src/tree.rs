//! The agent's whole process tree, including what tried to leave it: the wrapper is a
//! child subreaper, so a descendant that double-forks or calls `setsid` comes back to us as
//! an orphan instead of going to init; we tell the guardian about each such orphan, reap
//! them, and end every descendant still running when the agent ends.
//!
//! The mechanism is a /proc walk (ppid links) plus the subreaper attribute: it needs no
//! privilege and works in any container. Its limit: an orphan adopted less than one
//! [`TICK`] before the wrapper is SIGKILLed is not yet known to the guardian. Where the
//! machine lets us make a cgroup v2 sub-group, the agent runs in one too (see
//! [`super::cgroup`]), and its member list closes that gap.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::cgroup::{self, Cgroup};
use super::procfs::{self, Stat};

/// How often the wrapper looks for orphans it adopted (and reaps the dead ones).
pub const TICK: Duration = Duration::from_millis(250);
/// How long descendants left behind by an agent that exited get between SIGTERM and
/// SIGKILL: short, since the wrapper's own exit waits for it.
pub const LEFTOVER_GRACE: Duration = Duration::from_millis(1000);
/// Rounds of "stop what is new, look again" before giving up on a process that forks
/// faster than we can look.
const MAX_ROUNDS: usize = 50;
/// Between two looks while waiting for processes to end.
const POLL: Duration = Duration::from_millis(20);

/// Children of the wrapper that are not the agent's: the guardian, a stdio harness.
static OWN: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Records a child the wrapper started for itself, outside the agent's tree: it is never
/// signalled or reaped as an orphan (the code that started it waits for it). Every child
/// the wrapper starts, other than the agent, must be recorded here: any other child of
/// ours is taken for an orphan of the agent's tree.
pub fn register_own(pid: i32) {
    if let Ok(mut own) = OWN.lock() {
        own.push(pid);
    }
}

fn own() -> Vec<i32> {
    OWN.lock().map(|o| o.clone()).unwrap_or_default()
}

/// Makes this process a child subreaper: orphaned descendants are re-parented to us rather
/// than to init, so they stay in our tree.
pub fn become_subreaper() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_child_subreaper(true)?;
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "no child subreaper on this system",
        ))
    }
}

/// Children of `me` that belong to the agent's tree: the agent, and the orphans we adopted
/// (every child that is not one of our own).
fn adopted_and_agent(table: &HashMap<i32, Stat>, me: i32) -> Vec<i32> {
    let own = own();
    table
        .iter()
        .filter(|(pid, st)| st.ppid == me && !own.contains(pid))
        .map(|(&pid, _)| pid)
        .collect()
}

/// Whether process `pid` comes from the agent's tree: the agent is among its ancestors, or
/// it descends from an orphan the wrapper (`me`) adopted. A walk up the ppid links; with the
/// answer comes `pid`'s parent when the walk read it (a caller that climbs further starts
/// there without reading it again).
pub fn descends_from(pid: i32, agent: i32, me: i32) -> (bool, Option<i32>) {
    let mut cur = pid;
    let mut parent = None;
    // A chain longer than this is a loop read across a pid reuse.
    for _ in 0..1024 {
        if cur == agent && agent > 0 {
            return (true, parent);
        }
        let Some(st) = procfs::stat(cur) else {
            return (false, parent);
        };
        parent = parent.or(Some(st.ppid));
        if st.ppid == me {
            // A child of ours: the agent (caught above), one of our own, or an adopted orphan.
            return (cur != me && !own().contains(&cur), parent);
        }
        if st.ppid <= 1 {
            return (false, parent);
        }
        cur = st.ppid;
    }
    (false, parent)
}

/// The wrapper's view of the agent's tree while it runs.
pub struct Tracker {
    me: i32,
    agent: i32,
    reported: HashSet<(i32, u64)>,
    guardian: Option<std::fs::File>,
    cgroup: Option<Cgroup>,
}

impl Tracker {
    /// `guardian` is a write end of the guardian's pipe, to tell it about adopted orphans;
    /// `cgroup` the group the agent was asked to join before it ran.
    pub fn new(agent: i32, mut guardian: Option<std::fs::File>, cgroup: Option<Cgroup>) -> Tracker {
        let cgroup = cgroup.filter(|c| c.contains(agent));
        match &cgroup {
            Some(c) => {
                tracing::debug!(
                    "process tree: cgroup v2 {}, child subreaper and /proc walk",
                    c.dir().display()
                );
                if let (Some(g), Some(dir)) = (guardian.as_mut(), c.dir().to_str()) {
                    let _ = writeln!(g, "cgroup {dir}");
                }
            }
            None => tracing::debug!("process tree: child subreaper and /proc walk (no cgroup)"),
        }
        Tracker {
            me: std::process::id() as i32,
            agent,
            reported: HashSet::new(),
            guardian,
            cgroup,
        }
    }

    /// One look: tells the guardian about orphans adopted since the last look, so it can
    /// end them if we are killed, and reaps those that died.
    pub fn tick(&mut self) {
        for (pid, st) in self.adopted() {
            if st.state == b'Z' {
                reap(pid);
                self.reported.remove(&(pid, st.start));
            } else if self.reported.insert((pid, st.start)) {
                tracing::debug!(pid, "adopted an orphan of the agent's tree");
                if let Some(g) = self.guardian.as_mut() {
                    let _ = writeln!(g, "root {pid} {}", st.start);
                }
            }
        }
    }

    /// The orphans adopted so far (the wrapper's children that are neither the agent nor its
    /// own), with their entries: from the wrapper's list of children where the kernel keeps
    /// one, else from the whole process table.
    fn adopted(&self) -> Vec<(i32, Stat)> {
        let foreign = |pid: &i32| *pid != self.agent;
        match procfs::children(self.me) {
            Some(children) => {
                let own = own();
                children
                    .into_iter()
                    .filter(|pid| foreign(pid) && !own.contains(pid))
                    .filter_map(|pid| procfs::stat(pid).map(|st| (pid, st)))
                    .collect()
            }
            None => {
                let Some(table) = procfs::processes() else {
                    return Vec::new();
                };
                adopted_and_agent(&table, self.me)
                    .into_iter()
                    .filter(foreign)
                    .map(|pid| (pid, table[&pid]))
                    .collect()
            }
        }
    }

    /// Whether nothing of the agent's tree is left, known without reading the whole process
    /// table: the wrapper, a subreaper, adopts every orphan, so once the agent has ended,
    /// whatever is left of its tree hangs below a child of the wrapper that is not its own,
    /// or sits in the agent's cgroup. `false` when either cannot be read.
    fn nothing_left(&self) -> bool {
        let Some(children) = procfs::children(self.me) else {
            return false;
        };
        let own = own();
        children.iter().all(|pid| own.contains(pid))
            && self
                .cgroup
                .as_ref()
                .is_none_or(|c| cgroup::is_empty(c.dir()))
    }

    /// The agent has ended: ends everything still in its tree (SIGTERM, then SIGKILL after
    /// `grace`), reaps it, and returns how many processes that was.
    pub fn end(&mut self, grace: Duration) -> usize {
        if self.nothing_left() {
            // The common end of a run: one look at the wrapper's children, no sweep.
            if let Some(c) = &self.cgroup {
                cgroup::kill_and_remove(c.dir());
            }
            return 0;
        }
        let me = self.me;
        let dir = self.cgroup.as_ref().map(|c| c.dir().to_owned());
        let ended = take_down(
            |table| {
                let mut roots = adopted_and_agent(table, me);
                roots.extend(dir.iter().flat_map(|d| cgroup::members(d)));
                roots
            },
            None,
            grace,
        );
        if let Some(dir) = &dir {
            cgroup::kill_and_remove(dir);
        }
        if ended == 0 {
            // The sweep found nothing of the agent's tree, not even a zombie: nothing to reap.
            return 0;
        }
        if let Some(table) = procfs::processes() {
            for pid in adopted_and_agent(&table, me) {
                // The agent is reaped by whoever waits for it (its exit status is ours).
                if pid != self.agent && table[&pid].state == b'Z' {
                    reap(pid);
                }
            }
        }
        ended
    }
}

fn reap(pid: i32) {
    let _ = nix::sys::wait::waitpid(
        Pid::from_raw(pid),
        Some(nix::sys::wait::WaitPidFlag::WNOHANG),
    );
}

/// Ends `roots(table)` and everything below them, and the process group `group` when
/// given. First every member is stopped (SIGSTOP), looking again until no new process
/// appears, so that none can fork away while we work; then each gets SIGTERM (and SIGCONT
/// to receive it); after `grace`, what is left gets SIGKILL. Members are remembered by pid
/// and start time, so one that was re-parented meanwhile is still ours, and a reused pid is
/// not. Returns how many processes were signalled.
///
/// Runs in the wrapper at the end of a run and in the guardian when the wrapper died.
pub fn take_down(
    roots: impl Fn(&HashMap<i32, Stat>) -> Vec<i32>,
    group: Option<i32>,
    grace: Duration,
) -> usize {
    let mut sweep = Sweep {
        roots,
        members: HashMap::new(),
    };
    sweep.stop_all();
    if sweep.members.is_empty() && group.is_none() {
        return 0;
    }
    sweep.terminate(group);
    if !sweep.ended_within(group, grace) {
        sweep.kill_rest(group);
    }
    sweep.members.len()
}

/// The processes [`take_down`] ends: what `roots` finds in the process table and everything
/// below, remembered by pid and start time.
struct Sweep<R> {
    roots: R,
    members: HashMap<i32, u64>,
}

impl<R: Fn(&HashMap<i32, Stat>) -> Vec<i32>> Sweep<R> {
    /// One look at the process table: adds the members not seen before and returns them
    /// (zombies aside), with how many members are alive.
    fn grow(&mut self) -> (Vec<i32>, usize) {
        let Some(table) = procfs::processes() else {
            return (Vec::new(), 0);
        };
        let mut from = (self.roots)(&table);
        from.extend(
            self.members
                .iter()
                .filter(|(pid, start)| table.get(pid).is_some_and(|st| st.start == **start))
                .map(|(&pid, _)| pid),
        );
        let mut new = Vec::new();
        for pid in procfs::descendants(&table, &from) {
            let st = table[&pid];
            if self.members.insert(pid, st.start).is_none() && st.state != b'Z' {
                new.push(pid);
            }
        }
        let alive = self
            .members
            .iter()
            .filter(|(pid, start)| {
                table
                    .get(pid)
                    .is_some_and(|st| st.start == **start && st.state != b'Z')
            })
            .count();
        (new, alive)
    }

    /// Stops (SIGSTOP) every member, looking again until no new process appears, so that
    /// none can fork away while we work.
    fn stop_all(&mut self) {
        for _ in 0..MAX_ROUNDS {
            let (new, _) = self.grow();
            if new.is_empty() {
                break;
            }
            for pid in new {
                send(pid, Signal::SIGSTOP);
            }
        }
    }

    /// Sends SIGTERM, and SIGCONT to receive it, to the group and every member.
    fn terminate(&self, group: Option<i32>) {
        if let Some(g) = group {
            send(g, Signal::SIGTERM);
            send(g, Signal::SIGCONT);
        }
        for &pid in self.members.keys() {
            send(pid, Signal::SIGTERM);
            send(pid, Signal::SIGCONT);
        }
    }

    /// Waits up to `grace` for every member and the group to end, sending SIGTERM to what
    /// they start meanwhile; whether they all did.
    fn ended_within(&mut self, group: Option<i32>, grace: Duration) -> bool {
        let until = Instant::now() + grace;
        loop {
            std::thread::sleep(POLL);
            // Whatever they start while handling SIGTERM is ended too.
            let (new, alive) = self.grow();
            for pid in new {
                send(pid, Signal::SIGTERM);
            }
            let group_alive = group.is_some_and(|g| kill(Pid::from_raw(g), None).is_ok());
            if alive == 0 && !group_alive {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
        }
    }

    /// Sends SIGKILL to the group and to every member still alive, until none is (or
    /// [`MAX_ROUNDS`] have passed).
    fn kill_rest(&mut self, group: Option<i32>) {
        if let Some(g) = group {
            send(g, Signal::SIGKILL);
        }
        for _ in 0..MAX_ROUNDS {
            let (_, alive) = self.grow();
            if alive == 0 {
                break;
            }
            let table = procfs::processes().unwrap_or_default();
            for (&pid, &start) in &self.members {
                if table.get(&pid).is_some_and(|st| st.start == start) {
                    send(pid, Signal::SIGKILL);
                }
            }
            std::thread::sleep(POLL);
        }
    }
}

/// Sends `sig` to `pid` (a process, or minus a group), ignoring failure: it may be gone.
fn send(pid: i32, sig: Signal) {
    let _ = kill(Pid::from_raw(pid), sig);
}

/// The agent's tree held still (while the wrapper has the terminal): its cgroup frozen, or
/// each of its processes stopped. Resumed when dropped.
#[derive(Debug)]
pub struct Paused {
    how: Held,
}

#[derive(Debug)]
enum Held {
    /// `cgroup.freeze` written in this cgroup v2 directory: no process of it runs, and
    /// none sees a signal for it.
    Frozen(std::path::PathBuf),
    /// These processes (pid, start time) got SIGSTOP.
    Stopped(Vec<(i32, u64)>),
}

/// How long pausing waits for the kernel to have every process held.
const PAUSE_WAIT: Duration = Duration::from_millis(500);

/// Holds `root` and everything below it still: by freezing `cgroup` (a cgroup v2 directory
/// holding the tree) when there is one, else by stopping each process (SIGSTOP, looking again
/// until no new one appears). Returns once every process is held, or after half a second.
pub fn pause(root: i32, cgroup: Option<&std::path::Path>) -> Paused {
    if let Some(dir) = cgroup {
        if std::fs::write(dir.join("cgroup.freeze"), "1").is_ok() {
            let until = Instant::now() + PAUSE_WAIT;
            while Instant::now() < until {
                let events = std::fs::read_to_string(dir.join("cgroup.events")).unwrap_or_default();
                if events.lines().any(|l| l == "frozen 1") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            return Paused {
                how: Held::Frozen(dir.to_owned()),
            };
        }
    }
    let mut sweep = Sweep {
        roots: |_: &HashMap<i32, Stat>| vec![root],
        members: HashMap::new(),
    };
    sweep.stop_all();
    let members: Vec<(i32, u64)> = sweep.members.into_iter().collect();
    // SIGSTOP takes effect when each process next runs: wait until none is left running.
    let until = Instant::now() + PAUSE_WAIT;
    while Instant::now() < until {
        let running = members.iter().any(|&(pid, start)| {
            procfs::stat(pid).is_some_and(|st| {
                st.start == start && !matches!(st.state, b'T' | b't' | b'Z' | b'X')
            })
        });
        if !running {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Paused {
        how: Held::Stopped(members),
    }
}

impl Paused {
    /// Lets the tree run a moment (so that it reads what is waiting for it), then holds it
    /// again: the same processes, and those it started meanwhile.
    pub fn breathe(&mut self, root: i32, moment: Duration) {
        let cgroup = match &self.how {
            Held::Frozen(dir) => Some(dir.clone()),
            Held::Stopped(_) => None,
        };
        self.resume();
        std::thread::sleep(moment);
        *self = pause(root, cgroup.as_deref());
    }

    fn resume(&mut self) {
        match &mut self.how {
            Held::Frozen(dir) => {
                let _ = std::fs::write(dir.join("cgroup.freeze"), "0");
            }
            Held::Stopped(members) => {
                for (pid, start) in members.drain(..) {
                    if procfs::stat(pid).is_some_and(|st| st.start == start) {
                        send(pid, Signal::SIGCONT);
                    }
                }
            }
        }
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        self.resume();
    }
}
