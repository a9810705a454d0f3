//! What the user's `codex` command line says: the subcommand, and the `-c` overrides that
//! concern hooks or features, applied the way Codex applies them.

use std::ffi::OsString;

use toml::{Table, Value as Toml};

use super::SHIM;
use ahp_wrap_adapter::FrameworkError;

/// Root options of `codex` (and `codex exec`) that take a value, to find the subcommand.
const VALUE_FLAGS: [&str; 20] = [
    "-c",
    "--config",
    "--enable",
    "--disable",
    "--remote",
    "--remote-auth-token-env",
    "-i",
    "--image",
    "-m",
    "--model",
    "--local-provider",
    "-p",
    "--profile",
    "-s",
    "--sandbox",
    "-C",
    "--cd",
    "--add-dir",
    "-a",
    "--ask-for-approval",
];

/// One `-c key=value` of the user's that concerns hooks or features.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Override {
    pub(super) path: Vec<String>,
    pub(super) value: Toml,
}

/// What we found on the user's command line.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Scan {
    /// The user's `-c` overrides under `hooks` or `features`, in the order Codex applies them.
    pub(super) overrides: Vec<Override>,
    /// Indices of the arguments that carried a `-c hooks…`: replaced by our merged one.
    pub(super) hook_args: Vec<usize>,
    /// The subcommand is `exec` (or `e`): a session whose first hook is `SessionStart`.
    pub(super) exec: bool,
}

/// A `-c` value as Codex reads it: TOML if it parses, else the raw string.
pub(super) fn parse_value(raw: &str) -> Toml {
    match format!("_x_ = {raw}").parse::<Table>() {
        Ok(mut t) => t
            .remove("_x_")
            .unwrap_or_else(|| Toml::String(raw.to_owned())),
        Err(_) => Toml::String(raw.to_owned()),
    }
}

pub(super) fn scan(args: &[OsString]) -> Result<Scan, FrameworkError> {
    let mut scan = Scan::default();
    let mut positional_seen = false;
    let mut i = 0;
    while i < args.len() {
        // Arguments that are not UTF-8 are never one of Codex's flags.
        let Some(arg) = args[i].to_str() else {
            positional_seen = true;
            i += 1;
            continue;
        };
        if arg == "--" {
            break;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ if arg.starts_with("-c") && arg.len() > 2 => ("-c", Some(&arg[2..])),
            _ => (arg, None),
        };
        let value_at = |i: usize| {
            args.get(i)
                .and_then(|v| v.to_str())
                .ok_or_else(|| SHIM.prepare_error(format!("{flag} is missing its value")))
        };
        let (value, used) = match (VALUE_FLAGS.contains(&flag), inline) {
            (true, Some(v)) => (Some(v), vec![i]),
            (true, None) => (Some(value_at(i + 1)?), vec![i, i + 1]),
            (false, _) => (None, vec![i]),
        };
        match (flag, value) {
            ("-c" | "--config", Some(kv)) => {
                let (key, raw) = kv
                    .split_once('=')
                    .ok_or_else(|| SHIM.prepare_error(format!("-c {kv:?} is not key=value")))?;
                let path: Vec<String> = key.trim().split('.').map(str::to_owned).collect();
                if matches!(path[0].as_str(), "hooks" | "features") {
                    if path[0] == "hooks" {
                        scan.hook_args.extend(&used);
                    }
                    scan.overrides.push(Override {
                        path,
                        value: parse_value(raw.trim()),
                    });
                }
            }
            ("--disable", Some("hooks")) => {
                return Err(SHIM.prepare_error(
                    "--disable hooks turns off Codex's hooks, so the run could not be supervised",
                ))
            }
            (_, None) if !arg.starts_with('-') && !positional_seen => {
                positional_seen = true;
                scan.exec = matches!(arg, "exec" | "e");
            }
            _ => {}
        }
        i += used.len();
    }
    Ok(scan)
}

/// Applies `-c` overrides the way Codex does: walk the dotted path, creating (or replacing
/// with) tables, and set the last key. A later override of the same path wins.
#[allow(
    clippy::expect_used,
    reason = "a path of at least one key, made a table just above"
)]
pub(super) fn apply(overrides: &[Override]) -> Table {
    let mut root = Table::new();
    for o in overrides {
        let (last, parents) = o.path.split_last().expect("split never yields nothing");
        let mut table = &mut root;
        for key in parents {
            let slot = table
                .entry(key.clone())
                .or_insert_with(|| Toml::Table(Table::new()));
            if !slot.is_table() {
                *slot = Toml::Table(Table::new());
            }
            table = slot.as_table_mut().expect("made a table just above");
        }
        table.insert(last.clone(), o.value.clone());
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn scan_finds_exec_and_the_users_hook_overrides() {
        let s = scan(&os(&[
            "-m",
            "exec",
            "-c",
            "hooks.Stop=[]",
            "exec",
            "--config=features.x=true",
            "-chooks.state={}",
            "-c",
            "model=\"o3\"",
            "fix it",
            "--",
            "-c",
            "hooks.PreToolUse=[]",
        ]))
        .unwrap();
        // `exec` after -m is the model's name; the second one is the subcommand.
        assert!(s.exec);
        assert_eq!(s.hook_args, vec![2, 3, 6]);
        let paths: Vec<String> = s.overrides.iter().map(|o| o.path.join(".")).collect();
        assert_eq!(paths, ["hooks.Stop", "features.x", "hooks.state"]);
        assert_eq!(s.overrides[1].value, Toml::Boolean(true));
        assert!(!scan(&os(&["fix it", "exec"])).unwrap().exec);
        assert!(scan(&os(&["e", "x"])).unwrap().exec);
        // A value that is not TOML is a string, as in Codex.
        assert_eq!(parse_value("not toml"), Toml::String("not toml".into()));
    }

    #[test]
    fn later_overrides_win_as_in_codex() {
        let s = scan(&os(&[
            "-c",
            "hooks.Stop=[1]",
            "-c",
            "hooks={Stop=[2], PreToolUse=[3]}",
            "-c",
            "hooks.PreToolUse=[4]",
        ]))
        .unwrap();
        let t = apply(&s.overrides);
        assert_eq!(t["hooks"]["Stop"], Toml::Array(vec![Toml::Integer(2)]));
        assert_eq!(
            t["hooks"]["PreToolUse"],
            Toml::Array(vec![Toml::Integer(4)])
        );
    }
}
