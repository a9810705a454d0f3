//! sed's script: the commands it runs (`e CMD`; `e` and `s///e`, which run its input), the
//! files it writes (`w FILE`, `s///w FILE`) and reads (`r FILE`, `R FILE`).
//!
//! Owns: finding the script in sed's arguments and reading it. Must not touch: `sed -i`,
//! editing its operands in place (`semantics` tells those writes).

use super::super::Command;
use super::option_values;

/// sed's `e COMMAND` (a command, returned), `e` and `s///e` (its input run as commands) and
/// `w FILE` / `s///w FILE` (writes), recorded on `cmd`.
pub(super) fn sed_script(cmd: &mut Command, args: &[String]) -> Vec<String> {
    let mut commands = Vec::new();
    let mut scripts = option_values(args, &["-e", "--expression"]);
    if scripts.is_empty() {
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "-f" || a == "--file" || a == "-l" {
                it.next();
            } else if !a.starts_with('-') {
                scripts.push(a.clone());
                break;
            }
        }
    }
    for script in scripts {
        for (kind, value) in sed_commands(&script) {
            match kind {
                'e' if value.is_empty() => {
                    cmd.dynamic_code =
                        Some("`sed` runs its input as commands (the `e` command)".to_owned());
                }
                'e' => commands.push(value),
                'E' => {
                    cmd.dynamic_code = Some(
                        "`sed` runs what it substitutes as a command (the `e` flag)".to_owned(),
                    );
                }
                'w' => cmd.code_paths.writes.push(value),
                // `r FILE` / `R FILE`: FILE's lines in the output.
                'r' if !value.is_empty() => cmd.code_paths.reads.push(value),
                _ => {}
            }
        }
    }
    commands
}

/// sed's commands that run, write or read: `('e', cmd)`, `('E', "")` for `s///e`, `('w',
/// file)`, `('r', file)` for `r`/`R`.
fn sed_commands(script: &str) -> Vec<(char, String)> {
    let mut out = Vec::new();
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let rest_of_line = |from: usize| -> (String, usize) {
        let end = chars[from..]
            .iter()
            .position(|c| *c == '\n')
            .map_or(chars.len(), |p| from + p);
        (
            chars[from..end]
                .iter()
                .collect::<String>()
                .trim()
                .to_owned(),
            end,
        )
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            's' | 'y' if i + 1 < chars.len() && !chars[i + 1].is_alphanumeric() => {
                let delim = chars[i + 1];
                let mut j = i + 2;
                let mut parts = 0;
                while j < chars.len() && parts < 2 {
                    if chars[j] == '\\' {
                        j += 2;
                        continue;
                    }
                    if chars[j] == delim {
                        parts += 1;
                    }
                    j += 1;
                }
                // Flags, up to the end of the command.
                while j < chars.len() && !matches!(chars[j], ';' | '\n' | '}') {
                    if c == 's' && chars[j] == 'e' {
                        out.push(('E', String::new()));
                    }
                    if c == 's' && chars[j] == 'w' {
                        let (file, end) = rest_of_line(j + 1);
                        out.push(('w', file));
                        j = end;
                        break;
                    }
                    j += 1;
                }
                i = j;
            }
            'e' | 'w' | 'W' | 'r' | 'R' => {
                let prev = chars[..i].iter().rev().find(|c| !c.is_whitespace());
                let starts = prev.is_none_or(|p| {
                    matches!(p, ';' | '\n' | '{' | '}' | '/' | '$') || p.is_ascii_digit()
                });
                let next_ok = chars
                    .get(i + 1)
                    .is_none_or(|n| n.is_whitespace() || *n == ';');
                if starts && next_ok {
                    let (value, end) = rest_of_line(i + 1);
                    let value = if c == 'e' {
                        value
                            .split(';')
                            .next()
                            .unwrap_or_default()
                            .trim()
                            .to_owned()
                    } else {
                        value
                    };
                    let kind = match c {
                        'e' => 'e',
                        'r' | 'R' => 'r',
                        _ => 'w',
                    };
                    out.push((kind, value));
                    i = end;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_commands_that_run_or_write_are_found() {
        assert_eq!(sed_commands("1e rm -rf ~"), [('e', "rm -rf ~".to_owned())]);
        assert_eq!(sed_commands("s/a/b/e"), [('E', String::new())]);
        assert_eq!(sed_commands("s/x/y/w /tmp/o"), [('w', "/tmp/o".to_owned())]);
        assert_eq!(sed_commands("/x/w out.txt"), [('w', "out.txt".to_owned())]);
        assert!(sed_commands("s/e/w/g; s|where|ewe|").is_empty());
        assert!(sed_commands("1d;$d").is_empty());
    }

    #[test]
    fn sed_r_reads_a_file() {
        assert_eq!(sed_commands("1r /tmp/k"), [('r', "/tmp/k".to_owned())]);
        assert_eq!(sed_commands("$R f.txt"), [('r', "f.txt".to_owned())]);
        assert!(sed_commands("s/r x/y/").is_empty());
    }
}
