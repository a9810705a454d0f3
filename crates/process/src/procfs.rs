//! The process table from /proc: the agent's tree (who descends from whom), and its
//! resource use for heartbeat events.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::time::Instant;

/// One reading.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Milliseconds since the [`Sampler`] was made (about when the agent started).
    pub uptime_ms: u64,
    /// CPU time of the whole tree over the wall time since the previous sample, in percent
    /// of one CPU (over 100 when several run); `None` on the first sample or without /proc.
    pub cpu_percent: Option<f32>,
    /// Resident memory of the whole tree, summed, in bytes; `None` when no process of it
    /// was found or /proc cannot be read.
    pub memory_bytes: Option<u64>,
    /// How many processes the tree has, the root included (0 when none was found).
    pub processes: usize,
}

/// Samples a process and its descendants.
pub struct Sampler {
    pid: i32,
    started: Instant,
    last: Option<(Instant, u64)>,
    clk_tck: f64,
    page_size: u64,
}

/// One process, as `/proc/<pid>/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The parent's pid (field 4); an orphan's is its adopter's (a subreaper, or init).
    pub ppid: i32,
    /// `R`, `S`, `Z` (a zombie: dead, not yet reaped), ...
    pub state: u8,
    /// Clock ticks after boot at which it started: with the pid, names one process even
    /// when the pid is reused.
    pub start: u64,
    ticks: u64,
    rss_pages: u64,
}

/// Every process visible in /proc, by pid; `None` when /proc cannot be read.
pub fn processes() -> Option<HashMap<i32, Stat>> {
    read_all()
}

/// The children of process `pid`, every thread's (`/proc/PID/task/*/children`: a process
/// adopted by a subreaper is the child of one of its threads); `None` when the kernel does
/// not list them (built without `CONFIG_PROC_CHILDREN`) or they cannot be read. A handful of
/// reads where [`processes`] reads one file per process on the machine.
///
/// The first thread is read last: a thread that ends hands its children to the first thread
/// still alive (that one, in a process whose main thread has not returned), so none is missed
/// by a thread ending while the others are read (one gone before its read is skipped).
pub fn children(pid: i32) -> Option<Vec<i32>> {
    let list = |tid: &OsStr| {
        std::fs::read_to_string(format!(
            "/proc/{pid}/task/{}/children",
            tid.to_string_lossy()
        ))
    };
    let first = pid.to_string();
    let mut out = Vec::new();
    let mut add = |list: &str| {
        out.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        )
    };
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let tid = task.ok()?.file_name();
        if tid == first.as_str() {
            continue;
        }
        match list(&tid) {
            Ok(l) => add(&l),
            // Ended since the listing: its children are another thread's.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return None,
        }
    }
    add(&list(OsStr::new(&first)).ok()?);
    // A thread that ended after its read has its children listed twice.
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// One process's entry, if it exists. Runs per hook call (the sender's ancestry), so it
/// reads the file the way a sweep does: one open, one read, no size query.
pub fn stat(pid: i32) -> Option<Stat> {
    let mut buf = Vec::new();
    read_stat(&format!("/proc/{pid}/stat"), &mut buf)
}

/// A process's command line, each argument lossily decoded and the whole capped at
/// [`CMDLINE_CAP`] bytes; `None` when it cannot be read. Read as [`stat`] reads: one open,
/// reads into a buffer of the cap (one, nearly always), no size query.
pub(crate) fn cmdline(pid: i32) -> Option<Vec<String>> {
    use std::io::Read;
    let mut file = std::fs::File::open(format!("/proc/{pid}/cmdline")).ok()?;
    let mut buf = [0u8; CMDLINE_CAP];
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
    let raw = &buf[..len];
    Some(
        raw.split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Most bytes of a command line [`cmdline`] reads.
pub(crate) const CMDLINE_CAP: usize = 2048;

/// The chain of processes from `pid` up to `agent` (both included), nearest first, each as
/// its pid and command line. It stops at the agent, at `me`, at pid 1, or after 64 steps;
/// the agent is absent when `pid` does not descend from it.
pub fn ancestry(pid: i32, agent: i32, me: i32) -> Vec<(i32, Vec<String>)> {
    let mut chain = Vec::new();
    let mut cur = pid;
    for _ in 0..64 {
        if cur <= 1 || cur == me {
            break;
        }
        chain.push((cur, cmdline(cur).unwrap_or_default()));
        if cur == agent {
            break;
        }
        match stat(cur) {
            Some(st) => cur = st.ppid,
            None => break,
        }
    }
    chain
}

/// Reads and parses one `/proc/<pid>/stat` into `buf` (reused across calls). A stat line
/// fits in one read nearly always; it reads on only when the buffer filled.
fn read_stat(path: &str, buf: &mut Vec<u8>) -> Option<Stat> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    buf.clear();
    buf.resize(1024, 0);
    let mut len = 0;
    loop {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if len < buf.len() {
                    break;
                }
                buf.resize(buf.len() * 2, 0);
            }
            Err(_) => return None,
        }
    }
    parse_stat(std::str::from_utf8(&buf[..len]).ok()?)
}

/// The environment process `pid` started with (`/proc/PID/environ`: the kernel's copy,
/// whatever the process changed since), its first 256 KiB; `None` when it cannot be read
/// (gone, or another user's).
pub fn environ(pid: i32) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut env = Vec::new();
    std::fs::File::open(format!("/proc/{pid}/environ"))
        .ok()?
        .take(256 * 1024)
        .read_to_end(&mut env)
        .ok()?;
    Some(env)
}

/// The value of `name` in an environment as [`environ`] reads it.
pub fn env_value<'a>(environ: &'a [u8], name: &str) -> Option<&'a [u8]> {
    environ.split(|&b| b == 0).find_map(|entry| {
        entry
            .strip_prefix(name.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"="))
    })
}

/// The processes in `table` whose environment holds the entry `needle` (`NAME=value`), as
/// far as we may read it (only our own user's processes).
pub fn with_env(table: &HashMap<i32, Stat>, needle: &[u8]) -> Vec<i32> {
    table
        .keys()
        .copied()
        .filter(|&pid| environ(pid).is_some_and(|env| env.split(|&b| b == 0).any(|e| e == needle)))
        .collect()
}

/// Every process below `roots` in `table` (the roots included when they are in it).
pub(crate) fn descendants(table: &HashMap<i32, Stat>, roots: &[i32]) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, st) in table {
        children.entry(st.ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<i32> = roots.to_vec();
    while let Some(pid) = stack.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if table.contains_key(&pid) {
            out.push(pid);
        }
        if let Some(kids) = children.get(&pid) {
            stack.extend(kids);
        }
    }
    out
}

impl Sampler {
    /// A sampler for the tree rooted at `pid`; its uptime counts from now.
    pub fn new(pid: i32) -> Sampler {
        use nix::unistd::{sysconf, SysconfVar};
        let clk_tck = sysconf(SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100) as f64;
        let page_size = sysconf(SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .unwrap_or(4096) as u64;
        Sampler {
            pid,
            started: Instant::now(),
            last: None,
            clk_tck,
            page_size,
        }
    }

    /// Reads the whole process table once and sums the root and its descendants (by parent
    /// links); the CPU share is over the time since the previous call.
    pub fn sample(&mut self) -> Sample {
        let now = Instant::now();
        let uptime_ms = now.duration_since(self.started).as_millis() as u64;
        let Some(stats) = read_all() else {
            return Sample {
                uptime_ms,
                cpu_percent: None,
                memory_bytes: None,
                processes: 0,
            };
        };
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for (&pid, st) in &stats {
            children.entry(st.ppid).or_default().push(pid);
        }
        let (mut ticks, mut rss, mut count) = (0u64, 0u64, 0usize);
        let mut stack = vec![self.pid];
        while let Some(pid) = stack.pop() {
            if let Some(st) = stats.get(&pid) {
                ticks += st.ticks;
                rss += st.rss_pages;
                count += 1;
            }
            if let Some(kids) = children.get(&pid) {
                stack.extend(kids);
            }
        }
        let cpu_percent = self.last.map(|(at, before)| {
            let wall = now.duration_since(at).as_secs_f64();
            let busy = ticks.saturating_sub(before) as f64 / self.clk_tck;
            if wall > 0.0 {
                (busy / wall * 100.0) as f32
            } else {
                0.0
            }
        });
        self.last = Some((now, ticks));
        Sample {
            uptime_ms,
            cpu_percent,
            memory_bytes: (count > 0).then_some(rss * self.page_size),
            processes: count,
        }
    }
}

fn read_all() -> Option<HashMap<i32, Stat>> {
    let mut out = HashMap::new();
    // One buffer for every file: a sweep runs at every run's end, so its syscalls count.
    let mut buf = Vec::with_capacity(1024);
    let mut path = String::with_capacity(32);
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|s| s.parse::<i32>().is_ok()) else {
            continue;
        };
        path.clear();
        path.push_str("/proc/");
        path.push_str(name);
        path.push_str("/stat");
        if let (Ok(pid), Some(st)) = (name.parse(), read_stat(&path, &mut buf)) {
            out.insert(pid, st);
        }
    }
    Some(out)
}

/// Parses `/proc/<pid>/stat`; the command name may contain spaces and parentheses.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) … utime(11) stime(12) … starttime(19) … rss(21).
    Some(Stat {
        ppid: f.get(1)?.parse().ok()?,
        state: *f.first()?.as_bytes().first()?,
        start: f.get(19)?.parse().ok()?,
        ticks: f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
        rss_pages: f.get(21)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_children_are_listed_while_a_thread_ends() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let me = std::process::id() as i32;
        // Each listing with a thread of ours ending at some moment of it.
        let lost = (0..2000u64)
            .filter(|i| {
                let until = Instant::now() + std::time::Duration::from_micros(i % 60);
                let ending = std::thread::spawn(move || while Instant::now() < until {});
                let listed = children(me);
                ending.join().unwrap();
                !listed.is_some_and(|c| c.contains(&pid))
            })
            .count();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(lost, 0, "listings without the child, of 2000");
    }

    #[test]
    fn parses_stat_with_odd_names() {
        let line = "42 (a) b (c)) S 7 42 42 0 -1 4194560 100 0 0 0 25 5 0 0 20 0 1 0 100 1000 300 18446744073709551615";
        let st = parse_stat(line).unwrap();
        assert_eq!(st.ppid, 7);
        assert_eq!(st.state, b'S');
        assert_eq!(st.start, 100);
        assert_eq!(st.ticks, 30);
        assert_eq!(st.rss_pages, 300);
    }

    #[test]
    fn descendants_follow_ppid_links() {
        let st = |ppid| Stat {
            ppid,
            state: b'S',
            start: 0,
            ticks: 0,
            rss_pages: 0,
        };
        let table = HashMap::from([
            (1, st(0)),
            (10, st(1)),
            (11, st(10)),
            (12, st(11)),
            (20, st(1)),
        ]);
        let mut below = descendants(&table, &[10]);
        below.sort();
        assert_eq!(below, [10, 11, 12]);
        assert_eq!(descendants(&table, &[99]), Vec::<i32>::new());
    }

    #[test]
    fn reads_a_variable_of_a_processs_environment() {
        let env = environ(std::process::id() as i32).unwrap();
        let path = std::env::var_os("PATH").unwrap();
        assert_eq!(
            env_value(&env, "PATH"),
            Some(path.as_encoded_bytes()),
            "PATH as this process started with it"
        );
        assert_eq!(env_value(b"PATHX=1\0PAT=2\0", "PATH"), None);
        assert_eq!(env_value(b"A=1\0PATH=/x\0", "PATH"), Some(&b"/x"[..]));
    }

    #[test]
    fn finds_processes_by_an_environment_entry() {
        let table = processes().unwrap();
        let me = std::process::id() as i32;
        let path = std::env::var("PATH").unwrap();
        assert!(with_env(&table, format!("PATH={path}").as_bytes()).contains(&me));
        assert!(!with_env(&table, b"AHP_WRAP_NO_SUCH_ENTRY=x").contains(&me));
    }

    #[test]
    fn ancestry_climbs_from_a_process_to_the_agent() {
        // sh (the "agent") runs sleep; the chain from sleep stops at sh.
        let mut agent = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & wait"])
            .spawn()
            .unwrap();
        let agent_pid = agent.id() as i32;
        let me = std::process::id() as i32;
        let sleeper = (0..200)
            .find_map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                let table = processes()?;
                table
                    .iter()
                    .find(|(_, st)| st.ppid == agent_pid)
                    .map(|(pid, _)| *pid)
            })
            .expect("sleep started");
        let chain = ancestry(sleeper, agent_pid, me);
        let _ = agent.kill();
        let _ = agent.wait();
        let pids: Vec<i32> = chain.iter().map(|(p, _)| *p).collect();
        assert_eq!(pids, [sleeper, agent_pid]);
        assert_eq!(chain[0].1, ["sleep", "5"]);
        assert_eq!(chain[1].1[0], "sh");
        // Not below the agent: climbs to the wrapper (here: this test) and stops.
        assert!(ancestry(me, agent_pid, me).is_empty());
    }

    #[test]
    fn samples_this_process() {
        let mut s = Sampler::new(std::process::id() as i32);
        let first = s.sample();
        assert!(first.processes >= 1);
        assert!(first.memory_bytes.unwrap() > 0);
        assert!(first.cpu_percent.is_none());
        assert!(s.sample().cpu_percent.is_some());
    }
}
