//! Programs that write files their table entry does not name: a compiler or linker's output
//! (`gcc -o FILE`, `go build -o FILE`), and the binaries and attributes edited in place
//! (`patchelf`, `strip`, `upx`, `chattr`, `setfattr`, `setcap`, `objcopy`).
//!
//! Owns: reading those outputs and operands. Must not touch: what the compiled program does,
//! or settings files (`git`, `tools`).

use std::path::PathBuf;

use super::{has, option_value, positionals};

/// The program a compiler or linker is told to write (`-o FILE`, `-oFILE`, `--output FILE`):
/// `gcc -o ~/.local/bin/ls x.c` plants a program as surely as `cp` does.
pub(super) fn compiler_output(args: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if a == "-o" || a == "--output" {
            if let Some(f) = args.get(i + 1) {
                out.push(PathBuf::from(f));
            }
            i += 2;
            continue;
        }
        if let Some(f) = a.strip_prefix("--output=") {
            out.push(PathBuf::from(f));
        } else if let Some(f) = a
            .strip_prefix("-o")
            .filter(|f| !f.is_empty() && !a.starts_with("--"))
        {
            out.push(PathBuf::from(f));
        }
        i += 1;
    }
    out
}

/// Programs that change the files they are given in place (`patchelf`, `strip`, `upx`,
/// `chattr`, `setfattr`, `setcap`, `objcopy` with one file): their operands. `strip -o OUT`
/// and `objcopy IN OUT` write only the output.
pub(super) fn in_place(program: &str, args: &[String]) -> Vec<PathBuf> {
    let takes: &[&str] = match program {
        "patchelf" => &[
            "--set-interpreter",
            "--set-rpath",
            "--add-rpath",
            "--replace-needed",
            "--add-needed",
            "--remove-needed",
            "--set-soname",
            "--output",
            "--page-size",
            "--set-os-abi",
            "--add-debug-tag",
            "--rename-dynamic-symbols",
            "--clear-symbol-version",
        ],
        "strip" | "objcopy" => &[
            "-o",
            "-R",
            "--remove-section",
            "-K",
            "--keep-symbol",
            "-N",
            "--strip-symbol",
            "-F",
            "--target",
            "-I",
            "--input-target",
            "-O",
            "--output-target",
            "--add-section",
            "--update-section",
            "--set-section-flags",
        ],
        "upx" => &["-o"],
        "setfattr" => &[
            "-n",
            "--name",
            "-v",
            "--value",
            "-x",
            "--remove",
            "--restore",
        ],
        "setcap" => &["-v"],
        _ => &[],
    };
    let mut pos = positionals(args, takes);
    match program {
        // The first operand is the attribute or capability set (`+i`, `=a`, `cap_x+ep`); a
        // `-i` reads as an option and is gone already, and `setcap -r FILE` has none.
        "chattr" if pos.first().is_some_and(|m| m.starts_with(['+', '='])) => {
            pos.remove(0);
        }
        "setcap" if !pos.is_empty() && !has(args, &["-r"]) => {
            pos.remove(0);
        }
        "strip" | "upx" => {
            if let Some(out) = option_value(args, &["-o", "--output"]) {
                return vec![PathBuf::from(out)];
            }
        }
        "patchelf" => {
            if let Some(out) = option_value(args, &["--output"]) {
                return vec![PathBuf::from(out)];
            }
        }
        "objcopy" if pos.len() >= 2 => return vec![PathBuf::from(pos[pos.len() - 1])],
        _ => {}
    }
    pos.into_iter().map(PathBuf::from).collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::args;
    use super::*;

    #[test]
    fn in_place_editors_and_compilers_name_what_they_write() {
        assert_eq!(in_place("chattr", &args("+i /f")), [PathBuf::from("/f")]);
        assert_eq!(in_place("chattr", &args("-i /f")), [PathBuf::from("/f")]);
        assert_eq!(
            in_place("setcap", &args("cap_net_raw+ep /f")),
            [PathBuf::from("/f")]
        );
        assert_eq!(
            in_place("patchelf", &args("--set-interpreter /l /f")),
            [PathBuf::from("/f")]
        );
        assert_eq!(in_place("strip", &args("-o /o /f")), [PathBuf::from("/o")]);
        assert_eq!(
            compiler_output(&args("-O2 -o /b/ls x.c")),
            [PathBuf::from("/b/ls")]
        );
        assert_eq!(
            compiler_output(&args("-o/b/ls x.c")),
            [PathBuf::from("/b/ls")]
        );
        assert!(compiler_output(&args("-O2 -c x.c")).is_empty());
    }
}
