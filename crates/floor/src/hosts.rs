//! The `[floor.net]` host rules: what the egress proxy makes of the host a connection asks
//! for, before the gate is asked.
//!
//! A host is read the way the programs that would connect read it: a name in any case with or
//! without its trailing dot, an IPv6 literal with or without brackets, an IPv4-mapped IPv6
//! address as the IPv4 one, and an IPv4 address in every spelling `inet_aton` accepts
//! (`2852039166`, `0xa9fea9fe`, `0251.0376.0251.0376`, `169.254.43518`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::spec::{NetSpec, Unknown};

/// A host as a connection names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A name, in lower case and without a trailing dot.
    Name(String),
    /// An address (an IPv4-mapped IPv6 address is its IPv4 one).
    Addr(IpAddr),
}

impl Target {
    /// Reads `host` (no port). `None` for an empty host or one with characters no host has.
    pub fn parse(host: &str) -> Option<Target> {
        let host = host.trim();
        let inner = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(v6) = inner.parse::<Ipv6Addr>() {
            return Some(Target::Addr(canonical(IpAddr::V6(v6))));
        }
        let name = inner.trim_end_matches('.').to_ascii_lowercase();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        {
            return None;
        }
        match inet_aton(&name) {
            Some(v4) => Some(Target::Addr(IpAddr::V4(v4))),
            None => Some(Target::Name(name)),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Name(n) => f.write_str(n),
            Target::Addr(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Target::Addr(a) => write!(f, "{a}"),
        }
    }
}

/// An IPv4-mapped IPv6 address as its IPv4 address; anything else as it is.
pub fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// IPv4 as `inet_aton` reads it: one to four parts, each decimal, `0x` hex or `0` octal, the
/// last part filling the remaining bytes.
fn inet_aton(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(4);
    for p in &parts {
        let v = if let Some(hex) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
            if hex.is_empty() {
                0
            } else {
                u64::from_str_radix(hex, 16).ok()?
            }
        } else if p.len() > 1 && p.starts_with('0') {
            u64::from_str_radix(&p[1..], 8).ok()?
        } else {
            p.parse::<u64>().ok()?
        };
        values.push(v);
    }
    let (last, head) = values.split_last()?;
    if head.iter().any(|&v| v > 255) {
        return None;
    }
    let rest_bits = 8 * (4 - head.len() as u32);
    if rest_bits < 64 && *last >= 1u64 << rest_bits {
        return None;
    }
    let mut n: u64 = 0;
    for (i, v) in head.iter().enumerate() {
        n |= v << (24 - 8 * i as u32);
    }
    Some(Ipv4Addr::from((n | last) as u32))
}

/// One entry of `allow` or `deny`.
#[derive(Debug, Clone)]
enum Pattern {
    /// A name exactly.
    Name(String),
    /// The subdomains of a name (`*.example.com`).
    Below(String),
    /// An address network (a single address is a full-length one).
    Net(IpAddr, u8),
}

/// A host pattern (`[floor.net]`'s `allow`, `deny`, a credential's `hosts`) that is not
/// one, with the pattern as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// `*.` before something that is not a domain name.
    #[error("`{0}`: `*.` goes before a domain name")]
    BelowNotAName(String),
    /// An address with a `/` that does not parse.
    #[error("`{0}`: not an address network")]
    NotANetwork(String),
    /// A network's prefix length beyond its address's bits (the maximum).
    #[error("`{0}`: the prefix length is not 0 to {1}")]
    PrefixLength(String, u8),
    /// Neither a name nor an address.
    #[error("`{0}` is not a host")]
    NotAHost(String),
}

impl Pattern {
    fn parse(s: &str) -> Result<Pattern, PatternError> {
        let s = s.trim();
        if let Some(domain) = s.strip_prefix("*.") {
            return match Target::parse(domain) {
                Some(Target::Name(n)) => Ok(Pattern::Below(n)),
                _ => Err(PatternError::BelowNotAName(s.to_owned())),
            };
        }
        if let Some((addr, len)) = s.split_once('/') {
            let addr = addr.trim_start_matches('[').trim_end_matches(']');
            let addr: IpAddr = addr
                .parse()
                .map_err(|_| PatternError::NotANetwork(s.to_owned()))?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let len: u8 = len
                .parse()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| PatternError::PrefixLength(s.to_owned(), max))?;
            return Ok(Pattern::Net(canonical(addr), len));
        }
        match Target::parse(s) {
            Some(Target::Name(n)) => Ok(Pattern::Name(n)),
            Some(Target::Addr(a)) => Ok(Pattern::Net(a, if a.is_ipv4() { 32 } else { 128 })),
            None => Err(PatternError::NotAHost(s.to_owned())),
        }
    }

    fn matches(&self, target: &Target) -> bool {
        match (self, target) {
            (Pattern::Name(p), Target::Name(n)) => p == n,
            (Pattern::Below(p), Target::Name(n)) => n
                .strip_suffix(p.as_str())
                .is_some_and(|head| head.ends_with('.')),
            (Pattern::Net(net, len), Target::Addr(a)) => in_net(*a, *net, *len),
            _ => false,
        }
    }
}

fn in_net(addr: IpAddr, net: IpAddr, len: u8) -> bool {
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// What the host rules make of a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Named by `allow` or by the agent's shim: the gate decides.
    Allowed,
    /// Neither list names it: the `unknown` treatment.
    Unknown(Unknown),
    /// Refused whatever the gate says, for this reason.
    Denied(String),
}

/// The compiled `[floor.net]` host rules of one run.
#[derive(Debug, Clone)]
pub struct HostRules {
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
    unknown: Unknown,
    loopback: bool,
    /// The ports of this machine's loopback reached without a decision of their own.
    loopback_ports: Vec<u16>,
    publish: crate::spec::Publishing,
}

impl HostRules {
    /// The rules of `spec`, with the agent's own `model_hosts` allowed.
    pub fn new(spec: &NetSpec, model_hosts: &[&str]) -> Result<HostRules, PatternError> {
        let compile = |list: Option<&Vec<String>>, extra: &[&str]| {
            list.into_iter()
                .flatten()
                .map(String::as_str)
                .chain(extra.iter().copied())
                .map(Pattern::parse)
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(HostRules {
            allow: compile(spec.allow.as_ref(), model_hosts)?,
            deny: compile(spec.deny.as_ref(), &[])?,
            unknown: spec.unknown.unwrap_or(Unknown::Allow),
            loopback: spec.loopback(),
            loopback_ports: spec.loopback_ports.clone().unwrap_or_default(),
            publish: spec.publish(),
        })
    }

    /// `self`, with `ports` of this machine's loopback reached without a decision too (those
    /// the run was started with: its agent's model API, a URL in its command line).
    pub fn with_loopback_ports(mut self, ports: impl IntoIterator<Item = u16>) -> HostRules {
        for p in ports {
            if !self.loopback_ports.contains(&p) {
                self.loopback_ports.push(p);
            }
        }
        self
    }

    /// The ports of this machine's loopback reached without a decision of their own.
    pub fn loopback_ports(&self) -> &[u16] {
        &self.loopback_ports
    }

    /// Why a connection to `target:port` with no rule of its own is asked about or refused,
    /// as a phrase (`unknown` treatment): a host no list names, or a loopback port.
    pub fn unnamed(&self, target: &Target, port: u16) -> String {
        match is_loopback(target) {
            true => format!(
                "a connection to port {port} of this machine's loopback ({target}), which \
                 [floor.net] loopback_ports does not name (a program of yours listens there, \
                 with your rights; `--loopback-port {port}`, or `loopback_ports = [{port}]` \
                 under [floor.net] in a policy file, lets the run reach it)"
            ),
            false => format!(
                "a connection to {target}:{port}, a host [floor.net] does not name \
                 (`allow = [\"{target}\"]` under [floor.net] in a policy file lets it \
                 through)"
            ),
        }
    }

    /// Whether loopback may be reached.
    pub fn loopback(&self) -> bool {
        self.loopback
    }

    /// Where the tree's listeners are published.
    pub fn publish(&self) -> crate::spec::Publishing {
        self.publish
    }

    /// What becomes of a connection to `target` (before any name is resolved), at a port
    /// not known yet: a loopback name or address is decided when the port is
    /// ([`Self::judge_at`]).
    pub fn judge(&self, target: &Target) -> Judgement {
        self.judge_at(target, None)
    }

    /// What becomes of a connection to `target` at `port`: on this machine's loopback, a
    /// port [`Self::loopback_ports`] names is let through, any other gets the `unknown`
    /// treatment (a program of the person's listens there: a debugger, a database, an
    /// admin port).
    pub fn judge_at(&self, target: &Target, port: Option<u16>) -> Judgement {
        if is_loopback(target) {
            return match (self.loopback, port) {
                (false, _) => Judgement::Denied(
                    "loopback is not reachable ([floor.net] loopback = false)".into(),
                ),
                (true, Some(p)) if !self.loopback_ports.contains(&p) => {
                    Judgement::Unknown(self.unknown)
                }
                (true, _) => Judgement::Allowed,
            };
        }
        if let Some(p) = self.deny.iter().find(|p| p.matches(target)) {
            return Judgement::Denied(format!("{target} is denied by the floor ({})", show(p)));
        }
        if self.allow.iter().any(|p| p.matches(target)) {
            return Judgement::Allowed;
        }
        match target {
            Target::Addr(_) => Judgement::Denied(format!(
                "{target} is a raw address, which the floor refuses unless [floor.net] allow names it"
            )),
            Target::Name(_) => Judgement::Unknown(self.unknown),
        }
    }

    /// Why an address a name resolved to may not be reached at `port`, if it may not: a
    /// denied address, or loopback when it is off or the port is not one it names.
    pub fn refuse_resolved(&self, addr: IpAddr, port: u16) -> Option<String> {
        let target = Target::Addr(canonical(addr));
        if is_loopback(&target) {
            return match self.loopback && self.loopback_ports.contains(&port) {
                true => None,
                false => Some(format!(
                    "the name resolves to this machine's loopback ({target}), port {port}, which \
                     [floor.net] loopback_ports does not name"
                )),
            };
        }
        self.deny.iter().find(|p| p.matches(&target)).map(|p| {
            format!(
                "the name resolves to {target}, which the floor denies ({})",
                show(p)
            )
        })
    }
}

/// A list of host patterns (`host`, `*.domain`, an address or a network), as `[floor.net]`
/// writes them: the hosts a credential may be sent to.
#[derive(Debug, Clone, Default)]
pub struct HostList(Vec<Pattern>);

impl HostList {
    /// The list of `patterns`, or what is wrong with one.
    pub fn parse(patterns: &[String]) -> Result<HostList, PatternError> {
        patterns
            .iter()
            .map(|p| Pattern::parse(p))
            .collect::<Result<Vec<_>, _>>()
            .map(HostList)
    }

    /// Whether a pattern of the list names `target`.
    pub(crate) fn matches(&self, target: &Target) -> bool {
        self.0.iter().any(|p| p.matches(target))
    }

    /// The patterns, as written back.
    pub fn shown(&self) -> Vec<String> {
        self.0.iter().map(show).collect()
    }
}

fn show(p: &Pattern) -> String {
    match p {
        Pattern::Name(n) => n.clone(),
        Pattern::Below(n) => format!("*.{n}"),
        Pattern::Net(a, l) if (a.is_ipv4() && *l == 32) || *l == 128 => a.to_string(),
        Pattern::Net(a, l) => format!("{a}/{l}"),
    }
}

/// The ports of the URLs in `text` whose host is this machine's loopback
/// (`http://127.0.0.1:4873/`, `ws://localhost:9000`, `http://user@[::1]:8080`): only URLs,
/// a scheme before them, and only an explicit port.
pub fn loopback_url_ports(text: &str) -> Vec<u16> {
    let mut ports = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let scheme_ok = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric());
        let after = &rest[at + 3..];
        rest = after;
        if !scheme_ok {
            continue;
        }
        let authority = after
            .split(|c: char| {
                c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"' || c == '\''
            })
            .next()
            .unwrap_or("");
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let Some((host, port)) = host_port.rsplit_once(':') else {
            continue;
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let (Some(target), Ok(port)) = (Target::parse(host), port.parse::<u16>()) else {
            continue;
        };
        if is_loopback(&target) || matches!(target, Target::Addr(a) if a.is_unspecified()) {
            ports.push(port);
        }
    }
    ports
}

/// The variables `text` refers to as `{env:NAME}` (OpenCode's configuration) or `${NAME}`.
pub fn variables_named(text: &str) -> impl Iterator<Item = String> + '_ {
    let braced = text
        .split("{env:")
        .skip(1)
        .filter_map(|r| r.split_once('}'));
    let dollar = text.split("${").skip(1).filter_map(|r| r.split_once('}'));
    braced
        .chain(dollar)
        .map(|(name, _)| name.trim().to_owned())
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
}

/// `localhost` and its subdomains, 127.0.0.0/8 and ::1.
pub fn is_loopback(target: &Target) -> bool {
    match target {
        Target::Name(n) => n == "localhost" || n.ends_with(".localhost"),
        Target::Addr(a) => a.is_loopback(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(unknown: Unknown) -> HostRules {
        let spec: crate::spec::Spec = toml::from_str(
            r#"
            [net]
            allow = ["registry.npmjs.org", "*.crates.io", "10.1.0.0/16"]
            deny = ["169.254.0.0/16", "fd00:ec2::254", "metadata.google.internal"]
            "#,
        )
        .unwrap();
        let mut net = spec.net;
        net.unknown = Some(unknown);
        HostRules::new(&net, &["api.anthropic.com"]).unwrap()
    }

    #[test]
    fn the_loopback_ports_of_urls_are_found_and_nothing_else() {
        let found = loopback_url_ports(
            "--registry http://127.0.0.1:4873/ x model_providers.f={base_url=\"http://localhost:9000/v1\"} \
             ws://user:pw@[::1]:8080/x https://example.com:443/ 127.0.0.1:5432 http://127.0.0.2:7 \
             http://10.0.0.1:80/",
        );
        assert_eq!(found, vec![4873, 9000, 8080, 7]);
        assert!(
            loopback_url_ports("http://127.0.0.1/").is_empty(),
            "no port given"
        );
    }

    #[test]
    fn a_loopback_port_no_rule_names_gets_the_unknown_treatment() {
        let spec = NetSpec {
            loopback_ports: Some(vec![5432]),
            unknown: Some(Unknown::Ask),
            ..NetSpec::default()
        };
        let r = HostRules::new(&spec, &[])
            .unwrap()
            .with_loopback_ports([4873]);
        let lo = Target::parse("127.0.0.1").unwrap();
        assert!(matches!(r.judge_at(&lo, Some(5432)), Judgement::Allowed));
        assert!(matches!(r.judge_at(&lo, Some(4873)), Judgement::Allowed));
        assert!(matches!(
            r.judge_at(&lo, Some(9229)),
            Judgement::Unknown(Unknown::Ask)
        ));
        assert!(matches!(
            r.judge_at(&Target::parse("localhost").unwrap(), Some(9229)),
            Judgement::Unknown(_)
        ));
        assert!(r
            .refuse_resolved("127.0.0.1".parse().unwrap(), 9229)
            .is_some());
        assert!(r
            .refuse_resolved("127.0.0.1".parse().unwrap(), 5432)
            .is_none());
        assert!(r
            .unnamed(&lo, 9229)
            .contains("port 9229 of this machine's loopback"));
    }

    #[test]
    fn every_spelling_of_an_address_is_the_address() {
        let meta = Target::Addr("169.254.169.254".parse().unwrap());
        for s in [
            "169.254.169.254",
            "2852039166",
            "0xa9fea9fe",
            "0XA9FEA9FE",
            "0251.0376.0251.0376",
            "169.254.43518",
            "169.16689662",
            "[::ffff:169.254.169.254]",
            "::ffff:a9fe:a9fe",
            "169.254.169.254.",
        ] {
            assert_eq!(Target::parse(s).as_ref(), Some(&meta), "{s}");
        }
        assert_eq!(
            Target::parse("Registry.NPMJS.org.").unwrap(),
            Target::Name("registry.npmjs.org".into())
        );
        assert_eq!(Target::parse("a b"), None);
        assert_eq!(
            Target::parse("1.2.3.256").unwrap(),
            Target::Name("1.2.3.256".into())
        );
    }

    #[test]
    fn metadata_and_raw_addresses_are_denied_in_every_spelling() {
        let r = rules(Unknown::Allow);
        for s in [
            "169.254.169.254",
            "0xa9fea9fe",
            "[fd00:ec2::254]",
            "metadata.google.internal.",
            "169.254.170.2",
        ] {
            let j = r.judge(&Target::parse(s).unwrap());
            assert!(matches!(j, Judgement::Denied(_)), "{s}: {j:?}");
        }
        let j = r.judge(&Target::parse("93.184.216.34").unwrap());
        assert!(
            matches!(&j, Judgement::Denied(why) if why.contains("raw address")),
            "{j:?}"
        );
        assert_eq!(
            r.judge(&Target::parse("10.1.2.3").unwrap()),
            Judgement::Allowed
        );
    }

    #[test]
    fn named_hosts_pass_and_others_get_the_unknown_treatment() {
        let r = rules(Unknown::Block);
        let judge = |s: &str| r.judge(&Target::parse(s).unwrap());
        assert_eq!(judge("registry.npmjs.org"), Judgement::Allowed);
        assert_eq!(judge("static.crates.io"), Judgement::Allowed);
        assert_eq!(judge("API.anthropic.com"), Judgement::Allowed);
        assert_eq!(judge("crates.io"), Judgement::Unknown(Unknown::Block));
        assert_eq!(judge("evilcrates.io"), Judgement::Unknown(Unknown::Block));
        assert_eq!(judge("localhost"), Judgement::Allowed);
        assert_eq!(judge("127.0.0.2"), Judgement::Allowed);
    }

    #[test]
    fn loopback_can_be_closed_and_resolution_is_checked() {
        let spec = NetSpec {
            loopback: Some(false),
            deny: Some(vec!["169.254.0.0/16".into()]),
            ..NetSpec::default()
        };
        let r = HostRules::new(&spec, &[]).unwrap();
        assert!(matches!(
            r.judge(&Target::parse("[::1]").unwrap()),
            Judgement::Denied(_)
        ));
        assert!(r
            .refuse_resolved("127.0.0.1".parse().unwrap(), 80)
            .is_some());
        assert!(r
            .refuse_resolved("169.254.169.254".parse().unwrap(), 80)
            .is_some());
        assert!(r
            .refuse_resolved("::ffff:169.254.169.254".parse().unwrap(), 80)
            .is_some());
        assert!(r
            .refuse_resolved("93.184.216.34".parse().unwrap(), 80)
            .is_none());
        assert!(HostRules::new(
            &NetSpec {
                allow: Some(vec!["*.".into()]),
                ..NetSpec::default()
            },
            &[]
        )
        .is_err());
    }
}
