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

impl Pattern {
    fn parse(s: &str) -> Result<Pattern, String> {
        let s = s.trim();
        if let Some(domain) = s.strip_prefix("*.") {
            return match Target::parse(domain) {
                Some(Target::Name(n)) => Ok(Pattern::Below(n)),
                _ => Err(format!("`{s}`: `*.` goes before a domain name")),
            };
        }
        if let Some((addr, len)) = s.split_once('/') {
            let addr = addr.trim_start_matches('[').trim_end_matches(']');
            let addr: IpAddr = addr
                .parse()
                .map_err(|_| format!("`{s}`: not an address network"))?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let len: u8 = len
                .parse()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| format!("`{s}`: the prefix length is not 0 to {max}"))?;
            return Ok(Pattern::Net(canonical(addr), len));
        }
        match Target::parse(s) {
            Some(Target::Name(n)) => Ok(Pattern::Name(n)),
            Some(Target::Addr(a)) => Ok(Pattern::Net(a, if a.is_ipv4() { 32 } else { 128 })),
            None => Err(format!("`{s}` is not a host")),
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
    publish: crate::floor::spec::Publishing,
}

impl HostRules {
    /// The rules of `spec`, with the agent's own `model_hosts` allowed.
    pub fn new(spec: &NetSpec, model_hosts: &[&str]) -> Result<HostRules, String> {
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
            publish: spec.publish(),
        })
    }

    /// Whether loopback may be reached.
    pub fn loopback(&self) -> bool {
        self.loopback
    }

    /// Where the tree's listeners are published.
    pub fn publish(&self) -> crate::floor::spec::Publishing {
        self.publish
    }

    /// What becomes of a connection to `target` (before any name is resolved).
    pub fn judge(&self, target: &Target) -> Judgement {
        if is_loopback(target) {
            return match self.loopback {
                true => Judgement::Allowed,
                false => Judgement::Denied(
                    "loopback is not reachable ([floor.net] loopback = false)".into(),
                ),
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

    /// Why an address a name resolved to may not be reached, if it may not: a denied
    /// address, or loopback when it is off.
    pub fn refuse_resolved(&self, addr: IpAddr) -> Option<String> {
        let target = Target::Addr(canonical(addr));
        if is_loopback(&target) {
            return (!self.loopback).then(|| format!("the name resolves to loopback ({target})"));
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
    pub fn parse(patterns: &[String]) -> Result<HostList, String> {
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

/// `localhost` and its subdomains, 127.0.0.0/8 and ::1.
pub(crate) fn is_loopback(target: &Target) -> bool {
    match target {
        Target::Name(n) => n == "localhost" || n.ends_with(".localhost"),
        Target::Addr(a) => a.is_loopback(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(unknown: Unknown) -> HostRules {
        let spec: crate::floor::Spec = toml::from_str(
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
        assert!(r.refuse_resolved("127.0.0.1".parse().unwrap()).is_some());
        assert!(r
            .refuse_resolved("169.254.169.254".parse().unwrap())
            .is_some());
        assert!(r
            .refuse_resolved("::ffff:169.254.169.254".parse().unwrap())
            .is_some());
        assert!(r
            .refuse_resolved("93.184.216.34".parse().unwrap())
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
