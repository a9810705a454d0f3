//! The layers the modules of each crate keep, from the bottom up, and the exceptions
//! (none); [`super`] checks them.

/// What each module of the application (`src/`) may import, from the bottom layer up.
/// `is_plain_name` is the crate root's helper, `error_chain` and `random_hex` the confinement
/// crate's; `termlog` is a leaf.
pub(super) const LAYERS: &[(&str, &[&str])] = &[
    ("termlog", &[]),
    // Paths the wrapper acts on for the agent, resolved without following links: a leaf of
    // the confinement crate, re-exported.
    ("beneath", &[]),
    ("control", &["child", "jsonrpc", "random_hex"]),
    ("transport", &["child", "jsonrpc", "error_chain"]),
    ("audit", &["protocol", "jsonrpc", "termlog", "error_chain"]),
    (
        "telemetry",
        &["audit", "control", "error_chain", "protocol"],
    ),
    ("client", &["jsonrpc", "protocol", "transport"]),
    // The workspace's checkpoints: its store lies in the state directory (termlog's); the
    // refs undo puts back are written atomically as state files are.
    (
        "checkpoint",
        &[
            "beneath",
            "policy",
            "protocol",
            "random_hex",
            "statefile",
            "termlog",
        ],
    ),
    // The registry and its two built-in shims import the adapter crate alone; these three
    // are named only in strings, by the test of that rule (`frameworks/rule.rs`).
    ("frameworks", &["control", "protocol", "random_hex"]),
    (
        "gate",
        &[
            "audit",
            "checkpoint",
            "client",
            "control",
            "error_chain",
            "floor",
            "policy",
            "protocol",
            "telemetry",
        ],
    ),
    // A question at the terminal holds the agent's tree still (`child::tree`) and asks the
    // terminal what `nix` has no safe call for (`tty`).
    ("ask", &["child", "gate", "protocol", "tty"]),
    (
        "intercept",
        &[
            "audit",
            "beneath",
            "child",
            "control",
            "error_chain",
            "exit",
            "floor",
            "frameworks",
            "gate",
            "jsonrpc",
            "policy",
            "protocol",
            "random_hex",
            "statefile",
            "telemetry",
            "termlog",
        ],
    ),
    ("host", &["ask", "control", "gate", "jsonrpc", "protocol"]),
    (
        "serve",
        &[
            "audit",
            "control",
            "gate",
            "host",
            "jsonrpc",
            "protocol",
            "telemetry",
        ],
    ),
    ("cli", &["audit", "gate", "host", "telemetry", "transport"]),
    (
        "config",
        &[
            "audit",
            "cli",
            "control",
            "floor",
            "frameworks",
            "gate",
            "host",
            "intercept",
            "telemetry",
            "transport",
        ],
    ),
    ("report", &["audit", "config", "termlog"]),
    (
        "run",
        &[
            "ask",
            "audit",
            "beneath",
            "checkpoint",
            "child",
            "client",
            "config",
            "control",
            "error_chain",
            "exit",
            "floor",
            "frameworks",
            "gate",
            "host",
            "intercept",
            "policy",
            "protocol",
            "random_hex",
            "report",
            "rundir",
            "statefile",
            "telemetry",
            "termlog",
        ],
    ),
    (
        "commands",
        &[
            "audit",
            "beneath",
            "checkpoint",
            "cli",
            "error_chain",
            "exit",
            "floor",
            "frameworks",
            "gate",
            "host",
            "policy",
            "protocol",
            "random_hex",
            "run",
            "serve",
            "statefile",
            "telemetry",
            "termlog",
        ],
    ),
    (
        "fleet",
        &[
            "child",
            "cli",
            "commands",
            "error_chain",
            "exit",
            "gate",
            "is_plain_name",
            "policy",
            "protocol",
            "random_hex",
            "telemetry",
        ],
    ),
];

/// The same for the confinement crate (`crates/confine/src`): the kernel's part of the floor
/// above the process that shares our memory, the agent's process above both (it tells the
/// floor's PID namespace when its `exec` fails: `floor::pidns::exec_failed`); `test_dir` is
/// the crate root's helper for tests.
pub(super) const CONFINE_LAYERS: &[(&str, &[&str])] = &[
    ("vfork", &[]),
    ("tty", &[]),
    ("floor", &["test_dir", "vfork"]),
    ("child", &["floor", "vfork"]),
];

/// The same for the kernel's part of the floor (`crates/confine/src/floor`), whose modules
/// import each other as `super::x` (or `crate::floor::x`): the system calls every step
/// shares (`sys`: a failure said between `fork` and `exec`, descriptors passed over a
/// socket) at the bottom, then the audit socket, the PID namespace, the porter, the connect
/// filter's bridge, the network namespace, the user and mount namespaces, the namespaces
/// made at start-up, and on top the kernel's probe and the confinement applied (`kernel`).
/// `FloorError`, `Mode`, `NamespaceReceiver` and the floor's data (`plan`, `spec`,
/// `caches`…, re-exported from `crates/floor`) are the module root's.
pub(super) const CONFINE_FLOOR_LAYERS: &[(&str, &[&str])] = &[
    ("sys", &[]),
    ("denials", &["Feature", "Unavailable"]),
    ("pidns", &["FloorError", "decimal", "sys"]),
    ("porter", &["sys"]),
    ("bridge", &["Unavailable", "hosts", "names", "porter"]),
    ("netns", &["FloorError", "bridge", "sys"]),
    (
        "namespaces",
        &[
            "FloorError",
            "Plan",
            "Writes",
            "hosts",
            "netns",
            "plan",
            "sys",
        ],
    ),
    (
        "premade",
        &[
            "Mode",
            "Unavailable",
            "apparmor",
            "caches",
            "namespaces",
            "netns",
            "plan",
            "sys",
        ],
    ),
    (
        "kernel",
        &[
            "ENV_FLOOR",
            "Finished",
            "FloorError",
            "Mode",
            "NamespaceReceiver",
            "Plan",
            "Report",
            "Support",
            "Unavailable",
            "Writes",
            "apparmor",
            "caches",
            "denials",
            "finished",
            "namespaces",
            "netns",
            "pidns",
            "plan",
            "premade",
            "spec",
            "sys",
        ],
    ),
];

/// The same for the floor's data (`crates/floor/src`): the leaves (secrets, paths, exit
/// codes, mount tables), the agent's state files and command above the paths, the spec above the
/// ecosystems' files, the network's rules and credentials above the spec, the plan above
/// them, the caches and the explanations above the plan; the seccomp programs, and what the kernel offers with the report of a run (`support`), then the plan completed for the kernel
/// (`finished`: the mixed state files' copies, the caches' overlays) on top. `random_hex`,
/// `error_chain`, `test_dir`, `Unavailable` (with its causes' `Feature`, `Sysctl` and `ProfileFound`, from
/// `unavailable`) and `ENV_FLOOR` are the crate root's.
pub(super) const FLOOR_LAYERS: &[(&str, &[&str])] = &[
    ("unavailable", &[]),
    ("secrets", &[]),
    ("resolve", &[]),
    ("denials", &["Unavailable"]),
    ("mountinfo", &[]),
    ("exit", &["error_chain"]),
    ("beneath", &["test_dir"]),
    ("rundir", &["random_hex"]),
    ("statefile", &["beneath", "random_hex", "test_dir"]),
    ("agent", &["statefile"]),
    ("runfiles", &["secrets"]),
    ("spec", &[]),
    ("hosts", &["spec"]),
    ("names", &["hosts"]),
    ("credentials", &["hosts", "random_hex", "secrets", "spec"]),
    (
        "apparmor",
        &["ENV_FLOOR", "ProfileFound", "Sysctl", "Unavailable"],
    ),
    (
        "plan",
        &["beneath", "resolve", "spec", "statefile", "test_dir"],
    ),
    (
        "caches",
        &[
            "Feature",
            "Unavailable",
            "beneath",
            "mountinfo",
            "plan",
            "rundir",
            "statefile",
            "test_dir",
        ],
    ),
    ("explain", &["plan"]),
    ("seccomp", &[]),
    (
        "support",
        &[
            "ENV_FLOOR",
            "Plan",
            "Report",
            "Unavailable",
            "apparmor",
            "caches",
            "spec",
        ],
    ),
    (
        "finished",
        &[
            "Plan",
            "Report",
            "Support",
            "Unavailable",
            "beneath",
            "caches",
            "error_chain",
            "plan",
            "statefile",
            "test_dir",
        ],
    ),
];

/// The same for the process tree (`crates/process/src`).
pub(super) const PROCESS_LAYERS: &[(&str, &[&str])] = &[
    ("procfs", &[]),
    ("signals", &[]),
    ("fds", &["procfs"]),
    ("sockets", &["procfs"]),
    ("cgroup", &[]),
    ("tree", &["cgroup", "procfs"]),
];

/// The same for the wire crate (`crates/wire/src`).
/// `is_plain_name` is its root's helper.
pub(super) const WIRE_LAYERS: &[(&str, &[&str])] = &[
    ("jsonrpc", &[]),
    ("protocol", &["jsonrpc"]),
    ("control", &["is_plain_name", "jsonrpc"]),
];

/// The same for the policy crate (`crates/policy/src`), the diagram of its `lib.rs` from the
/// bottom up: the simple command as data, under the readers of commands and code, under the
/// walker of shell commands, under an event's facts, under the rules and what checks them.
/// A session's memory of written files sits beneath the paths, whose resolver carries it.
/// What a run's decisions change and read (`session`: that memory, egress, placeholders) sits
/// on the memory, beside the paths.
/// `pattern` is the crate root's helper (a regular expression of this crate's own); the
/// engine itself (`Policy`, in the root) uses them all and none of them uses it.
pub(super) const POLICY_LAYERS: &[(&str, &[&str])] = &[
    ("command", &[]),
    ("error", &[]),
    ("sections", &["error"]),
    ("checkpoints", &["error", "sections"]),
    ("memory", &["command"]),
    ("session", &["memory"]),
    ("paths", &["memory"]),
    ("protected", &["paths"]),
    ("inline", &["command", "pattern"]),
    ("semantics", &["command"]),
    (
        "shell",
        &["command", "inline", "paths", "pattern", "semantics"],
    ),
    (
        "extract",
        &[
            "command",
            "memory",
            "paths",
            "pattern",
            "protected",
            "semantics",
            "shell",
        ],
    ),
    ("taint", &["extract"]),
    ("reversible", &["command", "extract", "paths"]),
    ("rules", &["checkpoints", "error", "extract", "paths"]),
    ("hosts", &["error", "extract", "rules", "sections"]),
    (
        "examples",
        &["error", "extract", "paths", "protected", "rules"],
    ),
    ("checked", &["error", "examples", "hosts", "rules"]),
    // The crate's tests of the whole engine, above the root (`use super::*`) and what it
    // keeps private there.
    (
        "tests",
        &[
            "DEFAULT_TOML",
            "TAINT_RULE",
            "checkpoints",
            "floor_spec",
            "memory",
        ],
    ),
];

/// Imports against the layers, to be taken out (issue: "put types where they belong").
/// None left: the five the review named (child -> frameworks, audit -> gate, frameworks -> run,
/// cli <-> config, host -> cli) were taken out by moving each type below its users.
pub(super) const EXCEPTIONS: &[(&str, &str, &str)] = &[];
