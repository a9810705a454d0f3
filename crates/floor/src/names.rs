//! The names the tree's resolver gave out: each name it answers gets an address of its own,
//! from ranges no host uses (198.18.0.0/15, set aside for benchmarking, and a unique-local
//! IPv6 /64), kept for the run. A connection to one of those addresses is a connection to
//! its name: the bridge hands it to the run, which decides and makes it by name.
//!
//! Owns: the mapping. Must not touch: what a name may reach (the gate and the host rules
//! decide), or how it is reached.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Mutex;

/// The IPv4 range names are given addresses from: 198.18.0.0/15.
const V4_BASE: u32 = u32::from_be_bytes([198, 18, 0, 0]);
const V4_MASK: u32 = !((1 << 17) - 1);
/// The IPv6 range: a unique-local /64 of the project's (fd8a:77e3:52c1::/64).
const V6_PREFIX: u128 = 0xfd8a_77e3_52c1_0000_u128 << 64;
const V6_MASK: u128 = !((1u128 << 64) - 1);
/// How many names a run may be given addresses for (the IPv4 range's, less its first and
/// last address).
const CAPACITY: u32 = (1 << 17) - 2;

/// The names given addresses in one run.
#[derive(Debug, Default)]
pub struct Names {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_name: HashMap<String, u32>,
    /// The name of index `i + 1`.
    by_index: Vec<String>,
}

/// The addresses one name was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Given {
    /// Its address in 198.18.0.0/15 (the resolver's `A` answer).
    pub v4: Ipv4Addr,
    /// Its address in fd8a:77e3:52c1::/64, with the same index (the `AAAA` answer).
    pub v6: Ipv6Addr,
}

impl Names {
    /// The addresses of `name` (lower case, no trailing dot), given now if it had none;
    /// `None` once the run has given out all it has.
    pub fn give(&self, name: &str) -> Option<Given> {
        let mut inner = self.inner.lock().ok()?;
        let index = match inner.by_name.get(name) {
            Some(&i) => i,
            None => {
                if inner.by_index.len() as u32 >= CAPACITY {
                    return None;
                }
                inner.by_index.push(name.to_owned());
                let i = inner.by_index.len() as u32;
                inner.by_name.insert(name.to_owned(), i);
                i
            }
        };
        Some(Given {
            v4: Ipv4Addr::from(V4_BASE + index),
            v6: Ipv6Addr::from(V6_PREFIX | u128::from(index)),
        })
    }

    /// The name `addr` was given to, if it is one of the run's addresses.
    pub fn name_of(&self, addr: IpAddr) -> Option<String> {
        let index = index_of(addr)?;
        let inner = self.inner.lock().ok()?;
        inner.by_index.get(index.checked_sub(1)? as usize).cloned()
    }
}

/// Whether `addr` lies in the ranges names are given addresses from (given or not).
pub fn is_given(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => u32::from(v4) & V4_MASK == V4_BASE,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_given(IpAddr::V4(v4)),
            None => u128::from(v6) & V6_MASK == V6_PREFIX,
        },
    }
}

fn index_of(addr: IpAddr) -> Option<u32> {
    if !is_given(addr) {
        return None;
    }
    match super::hosts::canonical(addr) {
        IpAddr::V4(v4) => Some(u32::from(v4) - V4_BASE),
        IpAddr::V6(v6) => u32::try_from(u128::from(v6) & !V6_MASK).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_keeps_its_addresses_and_they_lead_back_to_it() {
        let names = Names::default();
        let a = names.give("example.com").unwrap();
        let b = names.give("other.example").unwrap();
        assert_eq!(a.v4, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(b.v4, Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(names.give("example.com"), Some(a));
        assert_eq!(a.v6, "fd8a:77e3:52c1::1".parse::<Ipv6Addr>().unwrap());
        for addr in [
            IpAddr::V4(a.v4),
            IpAddr::V6(a.v6),
            IpAddr::V6(a.v4.to_ipv6_mapped()),
        ] {
            assert_eq!(
                names.name_of(addr).as_deref(),
                Some("example.com"),
                "{addr}"
            );
        }
        // In the ranges but never given; outside them.
        assert!(is_given("198.19.255.254".parse().unwrap()));
        assert_eq!(names.name_of("198.19.255.254".parse().unwrap()), None);
        assert_eq!(names.name_of("198.18.0.0".parse().unwrap()), None);
        assert!(!is_given("198.20.0.1".parse().unwrap()));
        assert!(!is_given("fd8a:77e3:52c2::1".parse().unwrap()));
        assert_eq!(names.name_of("93.184.216.34".parse().unwrap()), None);
    }
}
