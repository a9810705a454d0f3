//! Shells (`bash -c …`): their `-c` flag and their script, past their own options.

/// The script a shell runs: `bash -c SCRIPT` (options parsed as bash parses its own).
pub(crate) fn shell_script(args: &[String]) -> Option<String> {
    let (dash_c, rest) = shell_options(args);
    match rest.first() {
        Some(script) if dash_c => Some(script.clone()),
        _ => None,
    }
}

/// A shell's `-c` flag, and the arguments after its options.
pub(crate) fn shell_options(args: &[String]) -> (bool, &[String]) {
    let mut dash_c = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        if matches!(a, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 2;
            continue;
        }
        if a == "--command" {
            dash_c = true;
            i += 1;
            continue;
        }
        if a.starts_with("--") {
            i += 1;
            continue;
        }
        match a.strip_prefix(['-', '+']) {
            Some(cluster) if !cluster.is_empty() => {
                dash_c |= cluster.contains('c') && a.starts_with('-');
                // `-o opt` inside a cluster (`-eo pipefail`) takes the next word.
                if cluster.ends_with('o') || cluster.ends_with('O') {
                    i += 1;
                }
            }
            _ => break,
        }
        i += 1;
    }
    (dash_c, args.get(i..).unwrap_or_default())
}
