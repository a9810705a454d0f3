//! `ahp-wrap setup container-profile [--from FILE] [--output FILE]`: a container engine's
//! own default seccomp profile with the system calls the floor's namespaces need allowed, for
//! `--security-opt seccomp=FILE` (Docker, Podman), a devcontainer's `runArgs`, a GitLab
//! runner's `security_opt` or a Kubernetes pod's `seccompProfile` (docs/floor.md, "In a
//! container"). Nothing else of the engine's profile changes: the output is its JSON with those
//! names taken out of the entries that held them (allowed only with `CAP_SYS_ADMIN`, or only
//! without namespace flags) and one entry added that allows them.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::exit::{self, CommandResult, Exit, Failure};

/// The name `ahp-wrap setup` knows this by.
pub const CONTAINER_PROFILE: &str = "container-profile";

/// The system calls the floor makes or lets its tree make, which an engine's default profile
/// allows only to a container with `CAP_SYS_ADMIN`: `unshare` (the user, mount, network and
/// PID namespaces), `setns` (joining those made at start-up), `mount` and `umount2` (the
/// read-only binds, the empty mounts over secrets, the caches' overlays, the tree's `/proc`),
/// `mount_setattr` (a run that nests sandboxes: every mount read-only), and for the sandboxes
/// the tree may nest (bubblewrap, Codex's, Claude Code's) `clone` with namespace flags and
/// `pivot_root`. `clone3` stays as the engine has it (refused with `ENOSYS` without the
/// capability, and the C library then uses `clone`).
pub(super) const NAMESPACE_CALLS: &[&str] = &[
    "unshare",
    "setns",
    "mount",
    "umount2",
    "mount_setattr",
    "clone",
    "pivot_root",
];

/// Where an engine keeps its default profile, first found first taken: Podman's, Buildah's
/// and CRI-O's (containers-common; an administrator's copy in /etc first), then Docker's as
/// Debian ships its source (golang-github-docker-docker-dev).
const KNOWN: &[(&str, &str)] = &[
    (
        "/etc/containers/seccomp.json",
        "containers-common (Podman, Buildah, CRI-O)",
    ),
    (
        "/usr/share/containers/seccomp.json",
        "containers-common (Podman, Buildah, CRI-O)",
    ),
    (
        "/usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json",
        "Docker (moby)",
    ),
];

/// The comment of the entry the profile gains (the engines' profiles carry comments so).
const COMMENT: &str = "ahp-wrap: the floor's user, mount, network and PID namespaces and the \
                       sandboxes its tree nests (ahp-wrap setup container-profile; docs/floor.md, \
                       \"In a container\")";

/// What `ahp-wrap setup container-profile` does: reads the engine's profile (`from`, else the
/// first of [`KNOWN`] found), writes the floor's to `output` (else standard output), and
/// says on stderr what it read and what changed.
pub fn container_profile(from: Option<&Path>, output: Option<&Path>) -> CommandResult {
    let fail = |why: String| Failure::new(Exit::Problem, why);
    let (path, engine) = match from {
        Some(p) => (p.to_owned(), None),
        None => KNOWN
            .iter()
            .find(|(p, _)| Path::new(p).is_file())
            .map(|(p, e)| (PathBuf::from(p), Some(*e)))
            .ok_or_else(|| {
                fail(format!(
                    "no container engine's default seccomp profile here ({}): give yours with \
                     --from FILE (Docker's is profiles/seccomp/default.json of moby's source at \
                     your engine's version)",
                    KNOWN.iter().map(|(p, _)| *p).collect::<Vec<_>>().join(", ")
                ))
            })?,
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
    let profile: Value = serde_json::from_str(&text)
        .map_err(|e| fail(format!("{} is not JSON: {e}", path.display())))?;
    let (profile, gated) =
        with_namespace_calls(profile).map_err(|why| fail(format!("{}: {why}", path.display())))?;
    let mut json = serde_json::to_string_pretty(&profile)
        .map_err(|e| fail(format!("cannot write the profile: {e}")))?;
    json.push('\n');
    match output {
        Some(out) => std::fs::write(out, &json)
            .map_err(|e| fail(format!("cannot write {}: {e}", out.display())))?,
        None => exit::print(&json),
    }
    let read = match engine {
        Some(engine) => format!("{} ({engine})", path.display()),
        None => path.display().to_string(),
    };
    let changed = match gated.is_empty() {
        true => {
            "it allowed them already; the profile is the same but for its entries' order".to_owned()
        }
        false => format!("allowed without CAP_SYS_ADMIN now: {}", gated.join(", ")),
    };
    let to = output.map_or("standard output".into(), |o| o.display().to_string());
    eprintln!(
        "ahp-wrap: read {read}; wrote it to {to} with {} allowed ({changed}). What that costs the \
         container and the options each engine takes it with: docs/floor.md, \"In a container\"",
        NAMESPACE_CALLS.join(", ")
    );
    Ok(Exit::OK)
}

/// `profile` (an engine's seccomp profile, as Docker, Podman and the OCI runtimes read it)
/// with [`NAMESPACE_CALLS`] taken out of every entry and allowed by one entry of their own;
/// also the names it did not allow unconditionally before.
pub(super) fn with_namespace_calls(mut profile: Value) -> Result<(Value, Vec<String>), String> {
    let calls = profile
        .get_mut("syscalls")
        .and_then(Value::as_array_mut)
        .ok_or("no \"syscalls\" list: not a container engine's seccomp profile")?;
    let granted = |n: &Value| n.as_str().is_some_and(|n| NAMESPACE_CALLS.contains(&n));
    let mut allowed_before: Vec<&str> = Vec::new();
    for entry in calls.iter() {
        let unconditional = entry.get("action").and_then(Value::as_str) == Some("SCMP_ACT_ALLOW")
            && entry
                .get("args")
                .is_none_or(|a| a.as_array().is_none_or(Vec::is_empty))
            && ["includes", "excludes"].iter().all(|k| {
                entry
                    .get(*k)
                    .is_none_or(|c| c.as_object().is_none_or(|o| o.is_empty()))
            });
        if !unconditional {
            continue;
        }
        for name in names(entry) {
            if let Some(n) = NAMESPACE_CALLS.iter().find(|c| **c == name) {
                allowed_before.push(n);
            }
        }
    }
    let gated: Vec<String> = NAMESPACE_CALLS
        .iter()
        .filter(|c| !allowed_before.contains(c))
        .map(|c| (*c).to_owned())
        .collect();
    for entry in calls.iter_mut() {
        if let Some(list) = entry.get_mut("names").and_then(Value::as_array_mut) {
            list.retain(|n| !granted(n));
        }
        // The format before `names` (one `name` an entry).
        if entry.get("name").is_some_and(granted) {
            if let Some(o) = entry.as_object_mut() {
                o.remove("name");
            }
        }
    }
    calls.retain(|entry| !names(entry).is_empty());
    calls.push(json!({
        "names": NAMESPACE_CALLS,
        "action": "SCMP_ACT_ALLOW",
        "comment": COMMENT,
    }));
    Ok((profile, gated))
}

/// The system calls an entry names (`names`, or the older `name`).
fn names(entry: &Value) -> Vec<&str> {
    let list = entry.get("names").and_then(Value::as_array);
    let mut out: Vec<&str> = list
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    out.extend(entry.get("name").and_then(Value::as_str));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of Docker's profile, cut down: the namespace calls behind CAP_SYS_ADMIN,
    /// clone allowed without namespace flags, clone3 refused with ENOSYS.
    fn docker_like() -> Value {
        json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [
                {"names": ["read", "write", "landlock_create_ruleset"], "action": "SCMP_ACT_ALLOW", "args": [], "includes": {}, "excludes": {}},
                {"names": ["bpf", "clone", "clone3", "mount", "setns", "umount2", "unshare", "mount_setattr"], "action": "SCMP_ACT_ALLOW", "args": [], "includes": {"caps": ["CAP_SYS_ADMIN"]}, "excludes": {}},
                {"names": ["clone"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 2114060288, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}], "includes": {}, "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
                {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38, "args": [], "includes": {}, "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
                {"names": ["pivot_root"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
            ]
        })
    }

    #[test]
    fn the_namespace_calls_leave_their_gated_entries_and_get_one_of_their_own() {
        let (out, gated) = with_namespace_calls(docker_like()).unwrap();
        assert_eq!(gated, NAMESPACE_CALLS);
        let calls = out["syscalls"].as_array().unwrap();
        // The arg-limited clone and pivot_root's entry had nothing else: gone.
        assert_eq!(calls.len(), 4, "{calls:#?}");
        assert_eq!(
            calls[0]["names"],
            json!(["read", "write", "landlock_create_ruleset"])
        );
        assert_eq!(calls[1]["names"], json!(["bpf", "clone3"]));
        assert_eq!(calls[1]["includes"], json!({"caps": ["CAP_SYS_ADMIN"]}));
        assert_eq!(calls[2]["names"], json!(["clone3"]));
        assert_eq!(calls[2]["errnoRet"], json!(38));
        assert_eq!(calls[3]["names"], json!(NAMESPACE_CALLS));
        assert_eq!(calls[3]["action"], json!("SCMP_ACT_ALLOW"));
        assert!(calls[3].get("includes").is_none() && calls[3].get("args").is_none());
        assert_eq!(out["defaultAction"], json!("SCMP_ACT_ERRNO"));
    }

    #[test]
    fn a_profile_that_allowed_them_already_is_said_so() {
        let podman_like = json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["read", "clone", "mount", "mount_setattr", "pivot_root", "setns", "umount2", "unshare"], "action": "SCMP_ACT_ALLOW", "args": [], "includes": {}, "excludes": {}}]
        });
        let (out, gated) = with_namespace_calls(podman_like).unwrap();
        assert!(gated.is_empty(), "{gated:?}");
        assert_eq!(out["syscalls"][0]["names"], json!(["read"]));
    }

    #[test]
    fn the_old_format_and_a_file_that_is_no_profile() {
        let old = json!({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
            {"name": "mount", "action": "SCMP_ACT_ALLOW", "args": []},
            {"name": "read", "action": "SCMP_ACT_ALLOW", "args": []},
        ]});
        let (out, _) = with_namespace_calls(old).unwrap();
        assert_eq!(out["syscalls"].as_array().unwrap().len(), 2);
        assert_eq!(out["syscalls"][0]["name"], json!("read"));
        assert!(with_namespace_calls(json!({"defaultAction": "SCMP_ACT_ALLOW"})).is_err());
    }
}
