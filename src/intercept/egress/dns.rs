//! The tree's resolver: its `resolv.conf` names port 53 of its loopback, where this answers.
//! No question goes any further: a name gets an address of the run's
//! ([`Names`]), and a connection to that address is decided by name, where the connecting
//! process is known (see `carry`). A name the `[floor.net]` rules deny is answered
//! NXDOMAIN and audited, with the asking process where the bridge noted it.
//!
//! A and AAAA questions get the name's addresses; `localhost` and names beneath it get
//! loopback; HTTPS and SVCB questions (asked beside A by some clients) get no records; every
//! other kind (SRV, TXT, MX…) is refused (`REFUSED`), as the real answer would have to be
//! asked of the outside. Only UDP is answered (the answers are small, never truncated).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use serde_json::json;

use super::{asking_process, Egress};
use crate::floor::hosts::{HostRules, Judgement, Target};
use crate::floor::names::Names;

/// How long a client may keep an answer: the name keeps its address for the whole run.
const TTL: u32 = 300;

impl Egress {
    /// Answers the tree's questions on `socket`, on a thread of its own (a question is
    /// answered as soon as the kernel wakes it), until the run's proxy is gone. `askers`: the
    /// process behind each client port, as the bridge noted it. A refusal is audited on
    /// the runtime the caller runs on.
    pub(crate) fn answer_names(
        self: &Arc<Self>,
        socket: std::net::UdpSocket,
        names: Arc<Names>,
        askers: crate::floor::bridge::Askers,
    ) -> std::io::Result<()> {
        let runtime = tokio::runtime::Handle::current();
        let me = Arc::downgrade(self);
        let rules = self.rules.clone();
        socket.set_read_timeout(Some(std::time::Duration::from_millis(500)))?;
        std::thread::Builder::new()
            .name("ahp-wrap-dns".into())
            .spawn(move || {
                let mut buf = [0u8; 4096];
                let mut told = HashSet::new();
                loop {
                    let (n, peer) = match socket.recv_from(&mut buf) {
                        Ok(r) => r,
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock
                                    | std::io::ErrorKind::TimedOut
                                    | std::io::ErrorKind::Interrupted
                            ) =>
                        {
                            // The run is over once nothing holds its proxy.
                            if me.strong_count() == 0 {
                                return;
                            }
                            continue;
                        }
                        Err(e) => {
                            tracing::debug!("floor resolver: {e}");
                            return;
                        }
                    };
                    let (reply, denied) = answer(&buf[..n], &rules, &names);
                    if let Some(reply) = reply {
                        let _ = socket.send_to(&reply, peer);
                    }
                    let Some(denied) = denied else { continue };
                    let pid = askers
                        .lock()
                        .ok()
                        .and_then(|a| a.get(&peer.port()).copied());
                    // A name refused once to a process is audited once (it asks A and AAAA,
                    // and again).
                    if told.len() < 4096 && told.insert((denied.name.clone(), pid)) {
                        let Some(me) = me.upgrade() else { return };
                        runtime.spawn(me.name_refused(denied, pid));
                    }
                }
            })?;
        Ok(())
    }

    /// Audits a name the resolver refused.
    async fn name_refused(self: Arc<Self>, denied: Denied, pid: Option<i32>) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let agent = self.agent.load(Ordering::SeqCst);
        let asker = pid.and_then(|pid| asking_process(pid, agent));
        let arguments = json!({
            "host": denied.name,
            "port": 53,
            "record": denied.record,
            "url": format!("dns://{}/", denied.name),
        });
        let (event, origin) = self.event_with(arguments, "dns", asker.as_ref());
        self.refused(&event, denied.reason, origin).await;
    }
}

/// A question the resolver refused by the host rules.
#[derive(Debug, PartialEq, Eq)]
struct Denied {
    name: String,
    record: String,
    reason: String,
}

/// The answer to the question `query` (none to what is not a DNS question), and what was
/// denied.
fn answer(query: &[u8], rules: &HostRules, names: &Names) -> (Option<Vec<u8>>, Option<Denied>) {
    let Ok(query) = Message::from_vec(query) else {
        // The id, where there is one, gets a format error.
        return match query {
            [a, b, ..] => {
                let id = u16::from_be_bytes([*a, *b]);
                let reply = Message::error_msg(id, OpCode::Query, ResponseCode::FormErr);
                (reply.to_vec().ok(), None)
            }
            _ => (None, None),
        };
    };
    if query.metadata.message_type != MessageType::Query {
        return (None, None);
    }
    let mut reply = Message::response(query.metadata.id, query.metadata.op_code);
    reply.metadata.recursion_desired = query.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    if query.edns.is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(1232);
        reply.set_edns(edns);
    }
    let mut denied = None;
    let rcode = match (query.metadata.op_code, query.queries.as_slice()) {
        (OpCode::Query, [q]) if q.query_class == DNSClass::IN => {
            reply.add_query(q.clone());
            let name = q.name.to_ascii().trim_end_matches('.').to_ascii_lowercase();
            let ((code, addrs), refused) = records(&name, q.query_type, rules, names);
            for addr in addrs {
                reply.add_answer(Record::from_rdata(q.name.clone(), TTL, RData::from(addr)));
            }
            denied = refused.map(|reason| Denied {
                name,
                record: q.query_type.to_string(),
                reason,
            });
            code
        }
        (OpCode::Query, [q]) => {
            reply.add_query(q.clone());
            ResponseCode::Refused
        }
        (OpCode::Query, _) => ResponseCode::FormErr,
        _ => ResponseCode::NotImp,
    };
    reply.metadata.response_code = rcode;
    (reply.to_vec().ok(), denied)
}

/// The answer's code and records for `name`'s `kind` question, and why it was denied.
fn records(
    name: &str,
    kind: RecordType,
    rules: &HostRules,
    names: &Names,
) -> ((ResponseCode, Vec<IpAddr>), Option<String>) {
    let wanted = |v4: Ipv4Addr, v6: Ipv6Addr| match kind {
        RecordType::A => vec![IpAddr::V4(v4)],
        RecordType::AAAA => vec![IpAddr::V6(v6)],
        _ => Vec::new(),
    };
    let known = matches!(
        kind,
        RecordType::A | RecordType::AAAA | RecordType::HTTPS | RecordType::SVCB
    );
    if name == "localhost" || name.ends_with(".localhost") {
        return (
            (
                ResponseCode::NoError,
                wanted(Ipv4Addr::LOCALHOST, Ipv6Addr::LOCALHOST),
            ),
            None,
        );
    }
    let target = match Target::parse(name) {
        Some(Target::Name(n)) => n,
        // An address is not a name to look up.
        _ => return ((ResponseCode::NXDomain, Vec::new()), None),
    };
    if let Judgement::Denied(reason) = rules.judge(&Target::Name(target.clone())) {
        return ((ResponseCode::NXDomain, Vec::new()), Some(reason));
    }
    if !known {
        return ((ResponseCode::Refused, Vec::new()), None);
    }
    match names.give(&target) {
        Some(given) => ((ResponseCode::NoError, wanted(given.v4, given.v6)), None),
        // The run has given out every address it has.
        None => ((ResponseCode::ServFail, Vec::new()), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use hickory_proto::rr::Name;

    fn rules() -> HostRules {
        let spec: crate::floor::spec::NetSpec = toml::from_str(
            "enabled = true\nallow = [\"allowed.test\"]\ndeny = [\"evil.test\"]\nunknown = \"block\"\n",
        )
        .unwrap();
        HostRules::new(&spec, &[]).unwrap()
    }

    fn ask(name: &str, kind: RecordType, names: &Names) -> (Message, Option<Denied>) {
        let mut q = Message::query();
        q.metadata.recursion_desired = true;
        q.add_query(Query::query(Name::from_ascii(name).unwrap(), kind));
        let (reply, denied) = answer(&q.to_vec().unwrap(), &rules(), names);
        let reply = Message::from_vec(&reply.expect("an answer")).unwrap();
        assert_eq!(reply.metadata.id, q.metadata.id);
        (reply, denied)
    }

    fn addrs(m: &Message) -> Vec<String> {
        m.answers.iter().map(|r| r.data.to_string()).collect()
    }

    #[test]
    fn names_get_the_runs_addresses_and_denied_ones_do_not_exist() {
        let names = Names::default();
        let (a, denied) = ask("Allowed.Test.", RecordType::A, &names);
        assert_eq!(a.metadata.response_code, ResponseCode::NoError);
        assert_eq!(addrs(&a), ["198.18.0.1"]);
        assert_eq!(denied, None);
        // Unknown names get addresses too: they are decided when connected to.
        let (aaaa, _) = ask("unknown.example", RecordType::AAAA, &names);
        assert_eq!(addrs(&aaaa), ["fd8a:77e3:52c1::2"]);
        assert_eq!(
            names.name_of("198.18.0.2".parse().unwrap()).as_deref(),
            Some("unknown.example")
        );
        let (nx, denied) = ask("evil.test", RecordType::A, &names);
        assert_eq!(nx.metadata.response_code, ResponseCode::NXDomain);
        assert!(nx.answers.is_empty());
        assert_eq!(denied.map(|d| d.name).as_deref(), Some("evil.test"));
        let (local, _) = ask("app.localhost", RecordType::A, &names);
        assert_eq!(addrs(&local), ["127.0.0.1"]);
        // Asked beside A: no records. Anything else: refused, never asked outside.
        let (https, _) = ask("allowed.test", RecordType::HTTPS, &names);
        assert_eq!(https.metadata.response_code, ResponseCode::NoError);
        assert!(https.answers.is_empty());
        let (txt, _) = ask("allowed.test", RecordType::TXT, &names);
        assert_eq!(txt.metadata.response_code, ResponseCode::Refused);
    }

    #[test]
    fn what_is_not_a_question_gets_a_format_error_or_nothing() {
        let names = Names::default();
        let (reply, _) = answer(b"\x12\x34garbage", &rules(), &names);
        let reply = Message::from_vec(&reply.unwrap()).unwrap();
        assert_eq!(reply.metadata.id, 0x1234);
        assert_eq!(reply.metadata.response_code, ResponseCode::FormErr);
        assert_eq!(answer(b"x", &rules(), &names).0, None);
    }
}
