//! The subcommands other than running an agent: `serve`, `policy …`, `audit …`, `doctor`,
//! `restore`, `setup`, `shim check`, `completions`, `man`.
//!
//! Owns: what each prints and its exit code. Must not touch: the run (`run/`), or the
//! engine, log or listeners themselves (`policy/`, `audit/`, `serve/`).

mod doctor;
mod restore;
mod setup;
#[cfg(target_os = "linux")]
mod setup_apparmor;
mod setup_container;
mod undo;
pub use doctor::doctor;
pub use restore::restore;
pub use setup::setup;
pub use setup_container::{container_profile, CONTAINER_PROFILE};
pub use undo::{changes, undo};

use std::sync::Arc;
use std::time::Duration;

use crate::audit::{self, load_key, KEY_ENV};
use serde_json::Value;

use crate::cli::{AuditCommand, PolicyCommand, ServeArgs, ShimCommand};
use crate::exit::{self, CommandResult, Exit, Failure, OrExit};
use crate::gate::{Approver, Decider, Embedded, Harness};
use crate::policy::Policy;
use crate::protocol::Event;
use crate::serve::{Advertised, Engine, Listen};

/// `ahp-wrap shim check`: loads a shim manifest, tries it on the payloads recorded from the
/// real agent, and prints the report; exit 0 when all is well, 1 otherwise.
pub fn shim(cmd: ShimCommand) -> Exit {
    match cmd {
        ShimCommand::Check { file, samples } => {
            let report = crate::frameworks::manifest::check::check(&file, samples.as_deref());
            exit::print(&(report.lines.join("\n") + "\n"));
            if report.ok {
                Exit::OK
            } else {
                Exit::Problem
            }
        }
    }
}

/// `ahp-wrap audit verify|show|summary`: checks a log's hash chain (its outcome, 0 to 4, is
/// the exit code), shows the trail's decisions (paged on a terminal), or summarises a log.
pub fn audit(cmd: AuditCommand) -> CommandResult {
    match cmd {
        AuditCommand::Verify { path, key_file } => {
            let key = load_key(key_file.as_deref(), std::env::var(KEY_ENV).ok())?;
            // The commit head this machine keeps for the log, if any (see audit::head).
            let head = audit::head::default_dir()
                .map(|dir| audit::head::head_path(&dir, &path))
                .and_then(|p| audit::head::read(&p));
            let report = audit::verify_with_head(&path, key.as_deref(), head.as_ref());
            exit::print(&report.to_text());
            Ok(Exit::Status(report.outcome() as u8))
        }
        AuditCommand::Show(show) => {
            let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
            let size = tty
                .then(terminal_size::terminal_size)
                .flatten()
                .map(|(w, h)| (usize::from(w.0), usize::from(h.0)));
            let columns = std::env::var("COLUMNS").ok();
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            let layout = audit::show::Layout {
                width: audit::fit::width(columns.as_deref(), size.map(|s| s.0)),
                home: home.as_deref(),
            };
            let text = audit::show::render(&show, audit::trail::default_dir().as_deref(), layout)
                .map_err(|e| Failure::new(Exit::Error, e))?;
            audit::show::page(&text, size.map(|s| s.1));
            Ok(Exit::OK)
        }
        AuditCommand::Summary { path, markdown } => {
            let s = audit::summary(&path)?;
            exit::print(&if markdown {
                s.to_markdown()
            } else {
                s.to_text()
            });
            Ok(Exit::OK)
        }
    }
}

/// Loads `--policy FILE`, or the default policy.
pub(crate) fn load_policy(file: Option<&std::path::Path>) -> Result<Policy, String> {
    match file {
        Some(f) => Policy::load(f).map_err(|e| crate::error_chain(&e)),
        None => Ok(Policy::default_policy()),
    }
}

/// The floor a run of `framework`'s agent would get on this machine under `spec`, in
/// `workspace`, and what of it the kernel enforces.
fn floor_here(
    spec: &crate::floor::Spec,
    framework: &'static dyn crate::frameworks::Framework,
    workspace: std::path::PathBuf,
) -> (crate::floor::Plan, crate::floor::Report) {
    let cx = crate::run::floor::context(framework, std::path::Path::new(""), workspace);
    let plan = crate::floor::Plan::new(spec, &cx);
    #[cfg(target_os = "linux")]
    let report = crate::run::floor::container::report(&plan);
    #[cfg(not(target_os = "linux"))]
    let report = crate::floor::report(&plan);
    (plan, report)
}

/// `ahp-wrap policy floor`: the floor a run here would get, printed.
fn floor(
    policy: Option<&std::path::Path>,
    framework: Option<&str>,
    workspace: Option<std::path::PathBuf>,
) -> CommandResult {
    let spec = crate::policy::floor_spec(policy)?;
    let name = framework.unwrap_or("generic");
    let framework = crate::frameworks::find(name)
        .ok_or_else(|| Failure::new(Exit::Error, format!("unknown framework {name:?}")))?;
    let workspace = workspace
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| "/".into());
    let mut out = String::new();
    if let Some(w) = crate::run::floor::workspace_warning(&workspace) {
        out.push_str(&format!("warning: {w}\n"));
    }
    let (plan, report) = floor_here(&spec, framework, workspace);
    if !spec.enabled {
        out.push_str("the policy turns the floor off (enabled = false)\n");
    }
    for e in &report.enforced {
        out.push_str(&format!("enforced: {e}\n"));
    }
    for g in &report.gaps {
        out.push_str(&format!("missing:  {g}\n"));
    }
    if !report.refusals.is_empty() {
        out.push_str(&format!("{}\n", report.refusals));
    }
    let net = &spec.net;
    if net.enabled() {
        let unknown = match net.unknown {
            Some(crate::floor::spec::Unknown::Ask) => "ask (a person answers)",
            Some(crate::floor::spec::Unknown::Block) => "block",
            Some(crate::floor::spec::Unknown::Allow) | None => "allow (the gate decides)",
        };
        out.push_str(&format!(
            "network: {} allowed host pattern(s) (and the agent's model API), {} denied, \
             unknown hosts: {unknown}; loopback services {}; the tree's listeners {}\n",
            net.allow.as_ref().map_or(0, Vec::len),
            net.deny.as_ref().map_or(0, Vec::len),
            if net.loopback() { "reached" } else { "refused" },
            match net.publish() {
                crate::floor::spec::Publishing::Loopback => "published on loopback",
                crate::floor::spec::Publishing::All =>
                    "published as they listen (publish = \"all\")",
                crate::floor::spec::Publishing::None => "kept inside (publish = \"none\")",
            },
        ));
    } else {
        out.push_str("network: not confined (the policy's [floor.net] enabled = false)\n");
    }
    if spec.env.removes() {
        let keep = framework.own_env(&[]).into_iter();
        let keep = keep.chain(spec.env.keep.iter().flatten().cloned());
        let (keep, mut removed) = crate::floor::secrets::of_this_environment(keep);
        // A declared credential is given as a placeholder, not removed (said below).
        let declared = spec.credentials.iter().flatten();
        let declared: Vec<&str> = declared.map(|c| c.env.as_str()).collect();
        if net.enabled() {
            removed.retain(|n| !declared.contains(&n.as_str()));
        }
        out.push_str(&format!(
            "environment: credentials removed before the agent starts; of this one: {}; kept \
             when present: {}\n",
            if removed.is_empty() {
                "none".to_owned()
            } else {
                removed.join(", ")
            },
            keep.join(", ")
        ));
    } else {
        out.push_str(
            "environment: passed on whole (the policy's [floor.env] remove_credentials = false)\n",
        );
    }
    out.push_str(&credentials_plan(&spec, &framework.own_env(&[])));
    let list = |v: &Option<Vec<String>>| match v.as_deref() {
        None | Some([]) => "none".to_owned(),
        Some(v) => v.join(", "),
    };
    if net.enabled() {
        out.push_str(&format!(
            "path Unix sockets: those the tree binds; besides them: {} (and the run \
             directory)\n",
            list(&spec.unix.allow)
        ));
    }
    out.push_str(&format!(
        "protected, but the agent's to write ([floor] keep): {}\n",
        list(&spec.keep)
    ));
    out.push('\n');
    out.push_str(&plan.to_string());
    exit::print(&out);
    Ok(if report.complete() && spec.enabled {
        Exit::OK
    } else {
        Exit::Problem
    })
}

/// The `[[floor.credentials]]` lines of `policy floor`: each declared credential, its hosts,
/// and whether a run here would use it (its variable set; no command is run to know).
fn credentials_plan(spec: &crate::floor::Spec, own_env: &[String]) -> String {
    let declared = spec.credentials.as_deref().unwrap_or_default();
    if declared.is_empty() {
        return "credentials: none declared ([[floor.credentials]])\n".to_owned();
    }
    let mut out = String::from(
        "credentials (the agent holds a placeholder; the value goes on HTTPS requests to these \
         hosts only; [[floor.credentials]], --credential):\n",
    );
    for c in declared {
        let used = if !spec.net.enabled() {
            "not used: the network floor is off".to_owned()
        } else if own_env
            .iter()
            .any(|k| crate::floor::secrets::matches(k, &c.env))
        {
            "left real: the agent needs it itself".to_owned()
        } else if let Some(cmd) = &c.from_command {
            format!("from `{}` when a run starts", cmd.join(" "))
        } else if let Some(file) = &c.from_file {
            format!("from the file {file}")
        } else {
            let var = c.from_env.as_deref().unwrap_or(&c.env);
            match std::env::var_os(var).is_some() {
                true => format!("set here ({var})"),
                false => format!("not set here ({var}): nothing to do"),
            }
        };
        out.push_str(&format!("  {} -> {}: {used}\n", c.env, c.hosts.join(", ")));
    }
    out
}

/// `ahp-wrap completions SHELL`: the completion script, from the command line's definition.
pub fn completions(shell: clap_complete::Shell) -> Exit {
    let mut cmd = <crate::cli::Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "ahp-wrap", &mut out);
    exit::print(&String::from_utf8_lossy(&out));
    Exit::OK
}

/// `ahp-wrap man`: the manual page (roff), from the command line's definition (its
/// SUBCOMMANDS section lists the others; each has its own `--help`).
pub fn man() -> CommandResult {
    let cmd = <crate::cli::Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .map_err(|e| Failure::new(Exit::Error, format!("cannot render the manual page: {e}")))?;
    exit::print(&String::from_utf8_lossy(&out));
    Ok(Exit::OK)
}

/// `ahp-wrap policy default|check|floor|eval|explain`. `check` exits 1 for a policy that
/// does not load; `eval` and `explain` exit as a script reads a decision (0 allowed,
/// 1 blocked, 3 escalated).
#[allow(
    clippy::expect_used,
    reason = "loading the policy checked its examples already"
)]
pub fn policy(cmd: PolicyCommand) -> CommandResult {
    match cmd {
        PolicyCommand::Default => {
            exit::print(Policy::default_toml());
            Ok(Exit::OK)
        }
        PolicyCommand::Check { file } => {
            let p = Policy::load(&file).map_err(|e| Failure::from(e).exiting(Exit::Problem))?;
            let report = p.check().expect("load checked the examples");
            let base = match p.inherited_rules() {
                0 => String::new(),
                n => format!(" (on top of {n} rules of the default policy)"),
            };
            exit::print(&format!(
                "{}: {} rules{base}, {} examples passed\n",
                file.display(),
                report.rules,
                report.examples
            ));
            Ok(Exit::OK)
        }
        PolicyCommand::Floor {
            policy,
            framework,
            workspace,
        } => floor(policy.as_deref(), framework.as_deref(), workspace),
        PolicyCommand::Eval { file } => {
            let (policy, event) = policy_and_event(file.as_deref())?;
            let d = policy.evaluate(&event);
            let mut out = d.verdict.to_json();
            out["rule"] = d.rule.clone().map(Value::String).unwrap_or(Value::Null);
            exit::print(&format!("{out}\n"));
            Ok(decision_exit(&d))
        }
        PolicyCommand::Explain { file } => {
            let (policy, event) = policy_and_event(file.as_deref())?;
            let (d, rules) = policy.explain(&event);
            exit::print(&explained(&d, &rules));
            Ok(decision_exit(&d))
        }
    }
}

/// The policy (a file, or the default) and the event on stdin, for `eval` and `explain`.
fn policy_and_event(file: Option<&std::path::Path>) -> Result<(Policy, Event), Failure> {
    let policy = load_policy(file).or_exit(Exit::Error)?;
    let mut input = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut input)
        .map_err(|e| Failure::new(Exit::Error, format!("cannot read stdin: {e}")))?;
    let event = event_from_json(&input).or_exit(Exit::Error)?;
    Ok((policy, event))
}

/// As a script reads it: 0 goes ahead, 1 is refused, 3 waits for a person.
fn decision_exit(d: &crate::policy::PolicyDecision) -> Exit {
    match d.verdict {
        crate::protocol::Verdict::Block { .. } => Exit::Problem,
        crate::protocol::Verdict::Escalate { .. } => Exit::Status(3),
        _ => Exit::OK,
    }
}

/// `policy explain`'s text: the decision, the rules that matched, the ones that came close.
fn explained(d: &crate::policy::PolicyDecision, rules: &[crate::policy::RuleExplained]) -> String {
    /// Near misses shown at most.
    const CLOSE: usize = 5;
    let mut out = match (&d.rule, d.reason()) {
        (Some(rule), Some(why)) => {
            format!("decision: {} by rule {rule}: {why}\n", d.verdict.name())
        }
        (Some(rule), None) => format!("decision: {} by rule {rule}\n", d.verdict.name()),
        (None, _) => {
            "decision: no rule matched (no opinion: the agent's own prompts decide)\n".to_owned()
        }
    };
    let keys = |r: &crate::policy::RuleExplained, held: bool| -> Vec<&str> {
        r.checks
            .iter()
            .filter(|(k, h)| *h == held && !matches!(*k, "events" | "tools" | "tools_not"))
            .map(|(k, _)| *k)
            .collect()
    };
    let matched: Vec<_> = rules.iter().filter(|r| r.matched()).collect();
    if !matched.is_empty() {
        out.push_str(&format!(
            "matched ({}, the strictest decides):\n",
            matched.len()
        ));
        for r in &matched {
            let held = keys(r, true);
            let why = if held.is_empty() {
                "every event of its types".to_owned()
            } else {
                held.join(", ")
            };
            out.push_str(&format!("  {} ({}): {why}\n", r.id, r.decision.name()));
        }
    }
    // Close: a condition that says what the event is held (a `…_not` one holds for nearly
    // everything), the most of them first, then the fewest that failed.
    let positive = |r: &crate::policy::RuleExplained| {
        keys(r, true)
            .iter()
            .filter(|k| !k.ends_with("_not"))
            .count()
    };
    let mut close: Vec<_> = rules
        .iter()
        .filter(|r| !r.matched() && positive(r) > 0)
        .collect();
    close.sort_by_key(|r| (std::cmp::Reverse(positive(r)), keys(r, false).len()));
    close.truncate(CLOSE);
    if !close.is_empty() {
        out.push_str("came close (some conditions held):\n");
        for r in close {
            out.push_str(&format!(
                "  {} ({}): held {}; not {}\n",
                r.id,
                r.decision.name(),
                keys(r, true).join(", "),
                keys(r, false).join(", ")
            ));
        }
    }
    out
}

/// An AHP event from JSON: the `params` of an `ahp/event`, where only `event_type` and
/// `payload` are required (a whole JSON-RPC message is accepted too).
fn event_from_json(text: &str) -> Result<Event, String> {
    let mut v: Value =
        serde_json::from_str(text).map_err(|e| format!("the event is not JSON: {e}"))?;
    if v.get("method").is_some() {
        v = v["params"].take();
    }
    let obj = v.as_object_mut().ok_or("the event is not a JSON object")?;
    obj.entry("session_id")
        .or_insert_with(|| "policy-eval".into());
    obj.entry("agent_id")
        .or_insert_with(|| "policy-eval".into());
    obj.entry("timestamp")
        .or_insert_with(|| crate::protocol::now_rfc3339().into());
    obj.entry("depth").or_insert_with(|| 0.into());
    obj.entry("payload")
        .or_insert_with(|| Value::Object(Default::default()));
    serde_json::from_value(v).map_err(|e| format!("not an AHP event: {e}"))
}

/// `ahp-wrap serve`: checks the options (exit 2 when they do not hold together), then runs
/// the policy engine as an AHP harness on `--listen` until the listener ends.
pub fn serve(args: ServeArgs) -> CommandResult {
    let listen = Listen::parse(&args.listen).or_exit(Exit::Error)?;
    let policy = load_policy(args.policy.as_deref()).or_exit(Exit::Error)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::new(Exit::Error, format!("cannot start the runtime: {e}")))?;
    let host_options =
        crate::host::HostOptions::from_args(&args.host.request()).or_exit(Exit::Error)?;
    if args
        .approval_timeout
        .is_some_and(|s| s.saturating_mul(1000) >= args.timeout)
    {
        return Err(Failure::new(
            Exit::Error,
            format!(
                "--approval-timeout must be shorter than --timeout ({} ms), the deadline \
                 wrappers are given",
                args.timeout
            ),
        ));
    }
    if host_options.is_some()
        && !matches!(listen, Listen::Http(_))
        && args.host.host_listen.is_none()
    {
        return Err(Failure::new(
            Exit::Error,
            "the approvals host needs --listen http://ADDR or --host-listen http://ADDR",
        ));
    }
    runtime.block_on(serve_async(args, listen, policy, host_options))
}

/// `serve` once its options are checked: the audit log, the host, the engine, the listener.
async fn serve_async(
    args: ServeArgs,
    listen: Listen,
    policy: Policy,
    host_options: Option<crate::host::HostOptions>,
) -> CommandResult {
    // Metrics are always kept: the HTTP listener serves them at /metrics.
    let telemetry = args.telemetry.options("serve", true)?;
    crate::telemetry::start(telemetry)
        .await
        .or_exit(Exit::Error)?;
    let audit =
        crate::audit::Auditor::open(args.audit_log.as_deref(), args.audit_key_file.as_deref())
            .or_exit(Exit::Error)?
            .observed_by(crate::telemetry::get().map(|t| t.observer()));
    let embedded = Arc::new(Embedded::new(policy, args.mode.into()));
    let host = match &host_options {
        None => None,
        Some(options) => {
            let page = match &listen {
                Listen::Http(addr) => Some(format!("http://{addr}/")),
                _ => None,
            };
            let (host, own) = options.listen(page).await?;
            if let Some(page) = own {
                eprintln!("ahp-wrap serve: approvals page on {page}");
            }
            Some(host)
        }
    };
    let decider = Decider {
        harness: Harness::Embedded(embedded),
        fail_mode: args.fail_mode.into(),
        timeout: approval_timeout(args.approval_timeout, args.timeout),
        approver: host.clone().map(|host| host as Arc<dyn Approver>),
    };
    let engine = Arc::new(Engine::new(
        decider,
        audit,
        Advertised {
            timeout_ms: args.timeout,
            batch_size: args.batch_size.max(1),
            max_depth: args.max_depth,
        },
    ));
    // The approvals page on the harness's own HTTP listener is said with it (on its own
    // listener, `start_host` said it already).
    let page_here = host.is_some() && host_options.as_ref().is_some_and(|o| o.listen.is_none());
    let announce = move |addr: String| {
        if let (true, Some(base)) = (page_here, addr.strip_suffix("/ahp")) {
            eprintln!("ahp-wrap serve: approvals page on {base}/");
        }
        eprintln!("ahp-wrap serve: listening on {addr}");
    };
    let token = args.token.filter(|t| !t.is_empty());
    crate::serve::serve(engine, listen, token, host, announce).await?;
    Ok(Exit::OK)
}

/// How long an escalation waits for a person: `--approval-timeout`, else a second less
/// than the advertised event timeout (so that the wrapper hears the fail mode's answer
/// before its own deadline).
fn approval_timeout(secs: Option<u64>, timeout_ms: u64) -> Duration {
    match secs {
        Some(s) => Duration::from_secs(s),
        None => Duration::from_millis(timeout_ms.saturating_sub(1000).max(500)),
    }
}
