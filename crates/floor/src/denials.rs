//! The Landlock records of the audit log, sorted into the run's refusals.

use std::collections::{HashMap, HashSet};

const AUDIT_SYSCALL: u16 = 1300;
const AUDIT_EOE: u16 = 1320;
const AUDIT_LANDLOCK_ACCESS: u16 = 1423;
const AUDIT_LANDLOCK_DOMAIN: u16 = 1424;

/// Denials kept with their details (every one is counted).
const KEPT: usize = 1000;
/// Audit events read in part at once.
const MAX_PENDING: usize = 4096;

/// One refusal by the kernel of an act of the agent's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// What was refused, as Landlock names it (`fs.write_file`, `fs.remove_dir`,
    /// `scope.signal`, …; several joined by commas).
    pub access: String,
    /// The file it concerned, if one.
    pub path: Option<String>,
    /// For a signal: the process it was sent to.
    pub target: Option<(i32, String)>,
    /// The process refused: pid, command name, executable.
    pub pid: Option<i32>,
    /// Its command name (`comm=` of the event's `SYSCALL` record); `None` when the event
    /// had no system call record.
    pub comm: Option<String>,
    /// Its executable's path (`exe=` of the same record); `None` likewise.
    pub exe: Option<String>,
}

impl Denial {
    /// The tool an audit record calls it: `file`, `signal`, `socket`, or `floor`.
    pub fn tool(&self) -> &'static str {
        let a = self.access.as_str();
        if a.starts_with("fs.") {
            "file"
        } else if a.starts_with("scope.signal") {
            "signal"
        } else if a.starts_with("scope.abstract_unix_socket") {
            "socket"
        } else {
            "floor"
        }
    }

    /// One line for the person: `fs.write_file /etc/x (sh)`.
    pub fn line(&self) -> String {
        let mut s = self.access.clone();
        if let Some(p) = &self.path {
            s.push(' ');
            s.push_str(p);
        }
        if let Some((pid, comm)) = &self.target {
            s.push_str(&format!(" to {comm} ({pid})"));
        }
        if let Some(c) = &self.comm {
            s.push_str(&format!(" by {c}"));
        }
        s
    }
}

/// One audit event being read (its records share a serial).
#[derive(Debug, Default)]
struct Pending {
    access: Vec<(u64, Denial)>,
    pid: Option<i32>,
    comm: Option<String>,
    exe: Option<String>,
}

/// The records of the run's domains, from the audit log's stream (which carries every
/// domain's on this machine).
#[derive(Debug)]
pub struct Collector {
    agent: i32,
    ours: HashSet<u64>,
    pending: HashMap<u64, Pending>,
    /// The kernel's own count, from each of our domains' end.
    kernel_total: HashMap<u64, u64>,
    seen: u64,
}

impl Collector {
    /// For the domain the process `agent` makes (the agent, which restricts itself).
    pub fn new(agent: i32) -> Collector {
        Collector {
            agent,
            ours: HashSet::new(),
            pending: HashMap::new(),
            kernel_total: HashMap::new(),
            seen: 0,
        }
    }

    /// Takes one record; returns the denials of ours that the end of its event completes.
    pub fn feed(&mut self, ty: u16, text: &str) -> Vec<Denial> {
        let Some((serial, fields)) = split(text) else {
            return Vec::new();
        };
        match ty {
            AUDIT_LANDLOCK_ACCESS => {
                let Some(domain) = field(fields, "domain").and_then(|d| hex(&d)) else {
                    return Vec::new();
                };
                let denial = Denial {
                    access: field(fields, "blockers").unwrap_or_default(),
                    path: field(fields, "path"),
                    target: field(fields, "opid")
                        .and_then(|p| p.parse().ok())
                        .map(|p| (p, field(fields, "ocomm").unwrap_or_default())),
                    pid: None,
                    comm: None,
                    exe: None,
                };
                // Events whose end never comes (no system call context) are closed oldest
                // first past a bound: the stream carries every domain's on this machine.
                let mut done = Vec::new();
                if self.pending.len() >= MAX_PENDING && !self.pending.contains_key(&serial) {
                    if let Some(&oldest) = self.pending.keys().min() {
                        done = self.close(oldest);
                    }
                }
                self.pending
                    .entry(serial)
                    .or_default()
                    .access
                    .push((domain, denial));
                done
            }
            AUDIT_LANDLOCK_DOMAIN => {
                let domain = field(fields, "domain").and_then(|d| hex(&d));
                match (domain, field(fields, "status").as_deref()) {
                    (Some(d), Some("allocated"))
                        if field(fields, "pid").and_then(|p| p.parse().ok())
                            == Some(self.agent) =>
                    {
                        self.ours.insert(d);
                    }
                    (Some(d), Some("deallocated")) if self.ours.contains(&d) => {
                        let n = field(fields, "denials").and_then(|n| n.parse().ok());
                        self.kernel_total.insert(d, n.unwrap_or(0));
                    }
                    _ => {}
                }
                Vec::new()
            }
            AUDIT_SYSCALL => {
                if let Some(p) = self.pending.get_mut(&serial) {
                    p.pid = field(fields, "pid").and_then(|p| p.parse().ok());
                    p.comm = field(fields, "comm");
                    p.exe = field(fields, "exe");
                }
                Vec::new()
            }
            AUDIT_EOE => self.close(serial),
            _ => Vec::new(),
        }
    }

    /// Completes every event still open (at the end of the run).
    pub fn close_all(&mut self) -> Vec<Denial> {
        let mut serials: Vec<u64> = self.pending.keys().copied().collect();
        serials.sort_unstable();
        serials.into_iter().flat_map(|s| self.close(s)).collect()
    }

    fn close(&mut self, serial: u64) -> Vec<Denial> {
        let Some(p) = self.pending.remove(&serial) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (domain, mut d) in p.access {
            if !self.ours.contains(&domain) {
                continue;
            }
            self.seen += 1;
            d.pid = p.pid;
            d.comm = p.comm.clone();
            d.exe = p.exe.clone();
            out.push(d);
        }
        out
    }

    /// Whether one of our domains has denied something and its end is not read yet.
    pub fn awaiting_end(&self) -> bool {
        self.ours.len() > self.kernel_total.len()
    }

    /// How many refusals: the kernel's count where a domain's end was read, else what was
    /// read of its records.
    pub fn total(&self) -> u64 {
        self.seen.max(self.kernel_total.values().sum())
    }
}

/// Keeps the details of the first `KEPT` (1000) denials (every one is counted elsewhere).
pub fn keep(kept: &mut Vec<Denial>, new: Vec<Denial>) {
    let room = KEPT.saturating_sub(kept.len());
    kept.extend(new.into_iter().take(room));
}

/// `audit(1795617089.948:5): a=b c="d"` → the serial (5) and the fields' text.
fn split(text: &str) -> Option<(u64, &str)> {
    let rest = text.strip_prefix("audit(")?;
    let (stamp, fields) = rest.split_once("):")?;
    let serial = stamp.rsplit_once(':')?.1.parse().ok()?;
    Some((serial, fields))
}

/// The value of `key=` in a record's fields: a quoted string as written, an unquoted one
/// hex-decoded when the kernel encoded it (it does for strings with spaces or quotes), else
/// as written.
fn field(fields: &str, key: &str) -> Option<String> {
    let mut rest = fields;
    loop {
        let at = rest.find(key)?;
        let before = rest[..at].chars().next_back();
        let after = &rest[at + key.len()..];
        if matches!(before, None | Some(' ')) {
            if let Some(value) = after.strip_prefix('=') {
                if let Some(q) = value.strip_prefix('"') {
                    return Some(q.split('"').next().unwrap_or("").to_string());
                }
                let raw = value.split(' ').next().unwrap_or("");
                if key == "path" || key == "comm" || key == "exe" || key == "ocomm" {
                    if let Some(decoded) = unhex(raw) {
                        return Some(decoded);
                    }
                }
                return Some(raw.to_string());
            }
        }
        rest = after;
    }
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 16).ok()
}

/// An audit-encoded string (hex of its bytes), when `raw` is one.
fn unhex(raw: &str) -> Option<String> {
    if raw.is_empty() || !raw.len().is_multiple_of(2) || !raw.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..raw.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&raw[i..i + 2], 16).ok())
        .collect();
    Some(String::from_utf8_lossy(&bytes?).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Records as this machine's kernel (6.18) wrote them for a `sh -c 'echo x > f'` under a
    // domain made by pid 7923.
    const ACCESS: &str = "audit(1795617089.948:5): domain=102a9bb5c blockers=fs.write_file \
                          path=\"/tmp/llx/f\" dev=\"vda\" ino=10338319";
    const DOMAIN: &str = "audit(1795617089.948:5): domain=102a9bb5c status=allocated \
                          mode=enforcing pid=7923 uid=0 exe=\"/usr/bin/python3.11\" comm=\"python3\"";
    const SYSCALL: &str = "audit(1795617089.948:5): arch=c000003e syscall=257 success=no \
                           exit=-13 a0=ffffff9c items=0 ppid=7880 pid=7923 auid=4294967295 \
                           uid=0 comm=\"sh\" exe=\"/usr/bin/dash\" key=(null)";
    const EOE: &str = "audit(1795617089.948:5): ";
    const END: &str = "audit(1795617090.008:6): domain=102a9bb5c status=deallocated denials=3";

    #[test]
    fn a_denial_of_our_domain_is_read_with_its_process() {
        let mut c = Collector::new(7923);
        assert!(c.feed(AUDIT_LANDLOCK_ACCESS, ACCESS).is_empty());
        assert!(c.feed(AUDIT_LANDLOCK_DOMAIN, DOMAIN).is_empty());
        assert!(c.feed(AUDIT_SYSCALL, SYSCALL).is_empty());
        let got = c.feed(AUDIT_EOE, EOE);
        assert_eq!(
            got,
            vec![Denial {
                access: "fs.write_file".into(),
                path: Some("/tmp/llx/f".into()),
                target: None,
                pid: Some(7923),
                comm: Some("sh".into()),
                exe: Some("/usr/bin/dash".into()),
            }]
        );
        assert_eq!(got[0].tool(), "file");
        assert_eq!(got[0].line(), "fs.write_file /tmp/llx/f by sh");
        assert!(c.awaiting_end());
        assert_eq!(c.total(), 1);
        c.feed(AUDIT_LANDLOCK_DOMAIN, END);
        assert!(!c.awaiting_end());
        assert_eq!(
            c.total(),
            3,
            "the kernel's count holds where records were lost"
        );
    }

    #[test]
    fn another_processs_domain_is_not_ours() {
        let mut c = Collector::new(1);
        c.feed(AUDIT_LANDLOCK_ACCESS, ACCESS);
        c.feed(AUDIT_LANDLOCK_DOMAIN, DOMAIN);
        assert!(c.feed(AUDIT_EOE, EOE).is_empty());
        c.feed(AUDIT_LANDLOCK_DOMAIN, END);
        assert_eq!(c.total(), 0);
        assert!(!c.awaiting_end());
    }

    #[test]
    fn events_that_never_end_are_closed_oldest_first_past_a_bound() {
        let mut c = Collector::new(5);
        c.feed(
            AUDIT_LANDLOCK_DOMAIN,
            "audit(1.0:1): domain=a status=allocated mode=enforcing pid=5 uid=0",
        );
        let mut got = Vec::new();
        for serial in 1..=MAX_PENDING as u64 + 1 {
            let text = format!("audit(1.0:{serial}): domain=a blockers=fs.make_reg path=\"/x\"");
            got.extend(c.feed(AUDIT_LANDLOCK_ACCESS, &text));
        }
        assert_eq!(got.len(), 1, "the oldest is closed to make room");
        assert_eq!(c.pending.len(), MAX_PENDING);
        assert_eq!(c.close_all().len(), MAX_PENDING);
    }

    #[test]
    fn an_event_without_its_end_is_closed_at_the_end() {
        let mut c = Collector::new(7923);
        c.feed(AUDIT_LANDLOCK_ACCESS, ACCESS);
        c.feed(AUDIT_LANDLOCK_DOMAIN, DOMAIN);
        let got = c.close_all();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].pid, None);
    }

    #[test]
    fn encoded_and_signal_fields_are_read() {
        // A path with a space is hex-encoded by the kernel.
        let access = "audit(1.0:9): domain=a blockers=fs.make_reg path=2F746D702F6120622E74787420 \
                      dev=\"vda\" ino=1";
        assert_eq!(
            field(access.split_once("):").unwrap().1, "path").as_deref(),
            Some("/tmp/a b.txt ")
        );
        let signal = "audit(1.0:9): domain=a blockers=scope.signal opid=42 ocomm=\"ahp-wrap\"";
        let mut c = Collector::new(5);
        c.feed(AUDIT_LANDLOCK_ACCESS, signal);
        c.feed(
            AUDIT_LANDLOCK_DOMAIN,
            "audit(1.0:9): domain=a status=allocated mode=enforcing pid=5 uid=0",
        );
        let got = c.close_all();
        assert_eq!(got[0].target, Some((42, "ahp-wrap".into())));
        assert_eq!(got[0].tool(), "signal");
        // A key that only ends another one's name is not it.
        assert_eq!(field("xpid=1 pid=2", "pid").as_deref(), Some("2"));
    }
}

/// A netlink message's header: length, type, flags, sequence, port.
const NLMSG_HDRLEN: usize = 16;

/// What a run says of counting the floor's refusals, given the reader it opened.
pub fn said<R>(reader: &Result<R, crate::Unavailable>) -> String {
    match reader {
        Ok(_) => "refusals: each one the kernel makes is counted and audited (read from the \
                  kernel's audit log)"
            .into(),
        Err(why) => format!(
            "refusals: the kernel's file and signal refusals are not counted: {why} (refused \
             connections are)"
        ),
    }
}

/// The netlink messages in one datagram: type and text (the record, trailing NULs cut).
pub fn messages(mut buf: &[u8]) -> impl Iterator<Item = (u16, &str)> {
    std::iter::from_fn(move || {
        if buf.len() < NLMSG_HDRLEN {
            return None;
        }
        let len = u32::from_ne_bytes(buf[0..4].try_into().ok()?) as usize;
        let ty = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < NLMSG_HDRLEN || len > buf.len() {
            return None;
        }
        let body = &buf[NLMSG_HDRLEN..len];
        let next = ((len + 3) & !3).min(buf.len());
        buf = &buf[next..];
        let body = match body.iter().position(|&b| b == 0) {
            Some(end) => &body[..end],
            None => body,
        };
        Some((ty, std::str::from_utf8(body).unwrap_or("")))
    })
}

#[cfg(test)]
mod netlink_tests {
    use super::*;

    #[test]
    fn netlink_messages_are_split() {
        let mut buf = Vec::new();
        for (ty, text) in [(1423u16, "abc"), (1320u16, "de")] {
            let len = NLMSG_HDRLEN + text.len() + 1;
            buf.extend_from_slice(&(len as u32).to_ne_bytes());
            buf.extend_from_slice(&ty.to_ne_bytes());
            buf.extend_from_slice(&[0; 10]);
            buf.extend_from_slice(text.as_bytes());
            buf.push(0);
            while buf.len() % 4 != 0 {
                buf.push(0);
            }
        }
        let got: Vec<(u16, &str)> = messages(&buf).collect();
        assert_eq!(got, vec![(1423, "abc"), (1320, "de")]);
    }
}
