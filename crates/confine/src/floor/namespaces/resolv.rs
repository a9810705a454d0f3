//! The tree's name resolution, with the floor's network part: its `/etc/resolv.conf` and
//! `/etc/hosts`, files of the run's bound over the machine's.

use std::path::Path;

use super::{cstring, locked_flags, Mount, Namespaces};
use crate::floor::FloorError;

impl Namespaces {
    /// With the network part: the tree's `/etc/resolv.conf` names its own resolver (port 53
    /// of its loopback, which the wrapper answers), and its `/etc/hosts` keeps only the
    /// entries for loopback addresses (every other name is the resolver's to answer, so that
    /// a connection to it is decided by name). Files of the run's in `scratch`, bound over
    /// the machine's where it has them.
    pub(in crate::floor) fn resolve_inside(&mut self, scratch: &Path) -> Result<(), FloorError> {
        let hosts = std::fs::read_to_string("/etc/hosts").ok();
        let files = [
            (
                "/etc/resolv.conf",
                "floor-resolv.conf",
                Some(RESOLV_CONF.to_owned()),
            ),
            (
                "/etc/hosts",
                "floor-hosts",
                hosts.map(|h| loopback_hosts(&h)),
            ),
        ];
        for (path, name, text) in files {
            let (path, Some(text)) = (Path::new(path), text) else {
                continue;
            };
            // Following a link (resolv.conf often is one): a file that is not there is not
            // read by anyone either (a resolver without one asks 127.0.0.1, ours).
            if !path.is_file() {
                continue;
            }
            let src = scratch.join(name);
            std::fs::write(&src, text).map_err(|source| FloorError::Prepare {
                what: "the tree's resolver settings in",
                path: scratch.display().to_string(),
                source,
            })?;
            self.mounts.push(Mount::File {
                src: cstring(&src)?,
                path: cstring(path)?,
                flags: locked_flags(path),
            });
        }
        Ok(())
    }
}

/// The tree's `resolv.conf`: its own resolver, and nothing to search (a name is asked as
/// it was written).
const RESOLV_CONF: &str = "# ahp-wrap: names are answered by the run (docs/floor.md)\n\
                           nameserver 127.0.0.1\noptions timeout:2 attempts:2\n";

/// The lines of a hosts file that name loopback addresses (`localhost`, the machine's own
/// name where it is on 127.0.1.1), for the tree's.
fn loopback_hosts(hosts: &str) -> String {
    let mut out = String::from("# ahp-wrap: the machine's loopback entries (docs/floor.md)\n");
    for line in hosts.lines() {
        let addr = line.split_whitespace().next().unwrap_or("");
        let addr = addr.split('%').next().unwrap_or(addr);
        if addr
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| crate::floor::hosts::canonical(a).is_loopback())
        {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
#[test]
fn the_trees_hosts_file_keeps_only_loopback_entries() {
    let hosts = "127.0.0.1\tlocalhost\n# a comment\n::1 localhost ip6-localhost\n\
                 127.0.1.1 box.example box\n198.51.100.1 allowed.test\nff02::1 ip6-allnodes\n\
                 10.0.0.5 db.internal\n";
    let kept = loopback_hosts(hosts);
    for line in [
        "127.0.0.1\tlocalhost",
        "::1 localhost",
        "127.0.1.1 box.example",
    ] {
        assert!(kept.contains(line), "{line}: {kept}");
    }
    for name in ["allowed.test", "ip6-allnodes", "db.internal", "a comment"] {
        assert!(!kept.contains(name), "{name}: {kept}");
    }
}
