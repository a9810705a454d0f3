//! vi, vim, ex and ed: the ex commands an editor is given (`-c CMD`, `+CMD`, `--cmd CMD`, and
//! in ex mode its stdin), and what they do: the shell commands they run (`!cmd`, `r !cmd`,
//! `call system('cmd')`), the files they read and write (`r FILE`, `w FILE`,
//! `writefile(…)`), and the code of other languages they run (`py3 CODE`, `perl CODE`).
//!
//! Owns: reading ex and ed command text. Must not touch: which programs are editors and when
//! their stdin is ex commands (the dispatch in `options` decides), or the commands found.

use std::sync::LazyLock;

use regex::Regex;

use super::super::builtins::Nested;
use super::super::Command;
use super::option_values;

/// An editor's `-c CMD`, `+CMD` and `--cmd CMD`: the shell commands in them (`!cmd`,
/// `r !cmd`, `w !cmd`, `call system('cmd')`).
#[cfg(test)]
pub(super) fn editor_commands(args: &[String]) -> Vec<String> {
    ex_shell_commands(&editor_texts(args))
}

/// An editor's ex commands: `-c CMD`, `--cmd CMD`, `+CMD`.
pub(super) fn editor_texts(args: &[String]) -> Vec<String> {
    let mut ex = option_values(args, &["-c", "--cmd", "-S"]);
    ex.extend(
        args.iter()
            .filter_map(|a| a.strip_prefix('+'))
            .filter(|c| !c.is_empty() && !c.chars().all(|ch| ch.is_ascii_digit()))
            .map(str::to_owned),
    );
    ex
}

/// The shell commands in ex (or ed) command text: `!cmd`, `r !cmd`, `w !cmd`, `e !cmd`,
/// `%!cmd`, `call system('cmd')`.
pub(super) fn ex_shell_commands(texts: &[String]) -> Vec<String> {
    static BANG: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(
            // `:w! FILE` and `:e! FILE` force; `:w !cmd` (a space first) and `:r!cmd` run.
            r"(?:^|\|)\s*:*\s*(?:silent!?\s*)?(?:[%$.\d]*,?[%$.\d]*\s*)?(?:r(?:ead)?\s*|(?:w(?:rite)?|e(?:dit)?)\s+|\.)?!(.*)",
        )
    });
    static SYSTEM: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(r#"\b(?:system|systemlist|jobstart|termopen)\s*\(\s*['"]([^'"]*)['"]"#)
    });
    let mut out = Vec::new();
    for text in texts {
        for line in text.split('\n') {
            if let Some(c) = BANG.captures(line) {
                out.push(c[1].to_owned());
            }
            out.extend(SYSTEM.captures_iter(line).map(|c| c[1].to_owned()));
        }
    }
    out
}

/// What ex (or ed) commands do with files and other languages: `r FILE`, `e FILE`, `so FILE`
/// read; `w FILE`, `sav FILE`, `writefile(…, 'FILE')` write; `py3 CODE`, `perl CODE`, `ruby
/// CODE`, `lua CODE` run code of those languages (walked as `python3 -c CODE` and the like).
/// Their shell commands are `ex_shell_commands`'.
pub(super) fn ex_commands(cmd: &mut Command, texts: &[String], out: &mut Vec<Nested>) {
    static FILE: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(
            r"^\s*:*\s*(?:sil(?:ent)?!?\s+)?[%$.\d,]*\s*(r|re|rea|read|e|ed|edi|edit|so|sou|sour|sourc|source|sp|spl|spli|split|vs|vsp|vspl|vspli|vsplit|tabe|tabed|tabedi|tabedit|new|w|wr|wri|writ|write|wq|x|xi|xit|exi|exit|sav|save|savea|saveas|up|upd|upda|updat|update|W)!?(?:\s*>>)?\s+(\S.*?)\s*$",
        )
    });
    static LANGUAGE: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(
            r"^\s*:*\s*(?:sil(?:ent)?!?\s+)?(py3|python3|py|python|pyx|pythonx|pe|perl|rub|ruby|lua)\s+(\S.*)$",
        )
    });
    static WRITEFILE: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern(
            r#"\b(writefile|readfile|delete)\s*\(\s*(?:(?:\[[^\]]*\]|[^,()]*(?:\([^)]*\))?)\s*,\s*)?(?:expand\(\s*)?['"]([^'"]+)['"]"#,
        )
    });
    for text in texts {
        for m in WRITEFILE.captures_iter(text) {
            let path = m[2].to_owned();
            match &m[1] {
                "readfile" => cmd.code_paths.reads.push(path),
                _ => cmd.code_paths.writes.push(path),
            }
        }
        for line in text.split('\n') {
            if let Some(c) = LANGUAGE.captures(line) {
                let code = c[2].to_owned();
                if code.starts_with("<<") {
                    continue;
                }
                let argv = match &c[1] {
                    "pe" | "perl" => ["perl", "-e"],
                    "rub" | "ruby" => ["ruby", "-e"],
                    "lua" => ["lua", "-e"],
                    _ => ["python3", "-c"],
                };
                out.push(Nested::Argv(vec![argv[0].into(), argv[1].into(), code]));
                continue;
            }
            for piece in line.split('|') {
                let Some(c) = FILE.captures(piece) else {
                    continue;
                };
                let file = c[2].to_owned();
                if file.starts_with('!') {
                    continue; // a shell command (`ex_shell_commands`)
                }
                match &c[1] {
                    "r" | "re" | "rea" | "read" | "e" | "ed" | "edi" | "edit" | "so" | "sou"
                    | "sour" | "sourc" | "source" | "sp" | "spl" | "spli" | "split" | "vs"
                    | "vsp" | "vspl" | "vspli" | "vsplit" | "tabe" | "tabed" | "tabedi"
                    | "tabedit" | "new" => cmd.code_paths.reads.push(file),
                    _ => cmd.code_paths.writes.push(file),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{strings, with_stdin};
    use super::*;

    #[test]
    fn ex_commands_read_write_and_run_other_languages() {
        let mut cmd = with_stdin("vim", None);
        let mut out = Vec::new();
        let texts = strings(&[
            ":r ~/.ssh/id_rsa",
            ":w! /tmp/k | q!",
            ":py3 import os",
            "call writefile(['x'], expand('~/.bashrc'), 'a')",
            "set number",
            "%s/a/b/g",
            "wq",
        ]);
        ex_commands(&mut cmd, &texts, &mut out);
        assert_eq!(cmd.code_paths.reads, ["~/.ssh/id_rsa"]);
        assert_eq!(cmd.code_paths.writes, ["/tmp/k", "~/.bashrc"]);
        assert!(
            matches!(&out[..], [Nested::Argv(a)] if a == &strings(&["python3", "-c", "import os"]))
        );
        assert_eq!(
            ex_shell_commands(&strings(&["!cat x", "e !id", "%!sort", "w"])),
            ["cat x", "id", "sort"]
        );
    }
}
