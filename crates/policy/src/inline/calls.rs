//! The calls inline code makes, per language: the names of those that run commands, evaluate
//! code, delete, modify or write files, compiled to regexes.

use std::sync::LazyLock;

use regex::Regex;

use super::Lang;

/// Call names per language: (runs a shell command, runs a program argv, evaluates code of the
/// same language, deletes trees, modifies files, writes files).
struct Calls {
    shell: &'static str,
    eval: &'static str,
    delete_tree: &'static str,
    modify: &'static str,
    write: &'static str,
}

/// The call names of `lang`.
fn calls(lang: Lang) -> &'static Calls {
    const PY: Calls = Calls {
        shell: r"\bos\.(?:system|popen|exec[lv]p?e?|spawn[lv]p?e?)|\bsubprocess\.(?:run|call|check_call|check_output|Popen|getoutput|getstatusoutput)|\bcommands\.getoutput|\bpty\.spawn|(?:^|[^.\w])(?:system|popen)|\b(?:c|ctx|context|conn|connection)\.(?:run|sudo|local)",
        // Not a method (`re.compile`, `cursor.execute`): the builtins.
        eval: r"(?:^|[^.\w])(?:exec|eval|compile)",
        delete_tree: r"\bshutil\.rmtree|\bos\.removedirs|\brmtree",
        modify: r"\bos\.(?:remove|unlink|truncate|rmdir|chmod|rename|replace)|\bunlink|\.unlink|\.rmdir",
        write: r"\bshutil\.(?:copy\w*|move)|\bos\.(?:link|symlink)|\.write_text|\.write_bytes|\.symlink_to|\.hardlink_to",
    };
    const JS: Calls = Calls {
        shell: r"\bexecSync|\bexec|\bspawnSync|\bspawn|\bexecFileSync|\bexecFile|\bBun\.spawn(?:Sync)?|\bDeno\.run|\bDeno\.Command",
        eval: r"\beval|\bFunction|\bvm\.runIn\w+|\bnew\s+Function",
        delete_tree: r"\brmSync|\brmdirSync|\bfs\.rm|\bfs\.promises\.rm|\brimraf|\bDeno\.remove",
        modify: r"\bunlinkSync|\bunlink|\btruncateSync|\btruncate|\bchmodSync|\brenameSync|\brename",
        write: r"\bwriteFileSync|\bappendFileSync|\bwriteFile|\bappendFile|\bcreateWriteStream|\bcopyFileSync|\bcopyFile|\bsymlinkSync|\blinkSync|\bcpSync|\bDeno\.writeTextFile|\bBun\.write",
    };
    const PERL: Calls = Calls {
        shell: r"\bsystem|\bexec|\bqx",
        eval: r"\beval",
        delete_tree: r"\brmtree|\bremove_tree|\bFile::Path::rmtree",
        modify: r"\bunlink|\btruncate|\bchmod|\brename|\brmdir",
        write: r"\bcopy|\bmove|\bsymlink|\blink",
    };
    const RUBY: Calls = Calls {
        shell: r"\bsystem|\bexec|\bspawn|%x|\bIO\.popen|\bOpen3\.\w+|\bKernel\.system",
        eval: r"\beval|\binstance_eval|\bclass_eval",
        delete_tree: r"\bFileUtils\.rm_rf|\bFileUtils\.rm_r|\bFileUtils\.remove_dir|\bFileUtils\.remove_entry\w*|\brm_rf",
        modify: r"\bFile\.(?:delete|unlink|truncate|chmod|rename)|\bFileUtils\.(?:rm|rm_f|mv|chmod)",
        write: r"\bFile\.(?:write|symlink|link)|\bIO\.write|\bFileUtils\.(?:cp|cp_r|ln_s|ln|install|touch)",
    };
    const PHP: Calls = Calls {
        shell: r"\bsystem|\bexec|\bshell_exec|\bpassthru|\bproc_open|\bpopen|\bpcntl_exec",
        eval: r"\beval|\bassert|\bcreate_function",
        delete_tree: r"\brmdir",
        modify: r"\bunlink|\bchmod|\brename|\bftruncate",
        write: r"\bfile_put_contents|\bcopy|\bsymlink|\blink|\bfopen",
    };
    const AWK: Calls = Calls {
        shell: r"\bsystem",
        eval: r"$^",
        delete_tree: r"$^",
        modify: r"$^",
        write: r"$^",
    };
    match lang {
        Lang::Python => &PY,
        Lang::Js => &JS,
        Lang::Perl => &PERL,
        Lang::Ruby => &RUBY,
        Lang::Php => &PHP,
        Lang::Awk => &AWK,
    }
}

/// One language's calls, as regexes matching a call up to its opening bracket (or the
/// literal right after the name).
pub(super) struct Compiled {
    pub shell: Regex,
    pub eval: Regex,
    pub delete_tree: Regex,
    pub modify: Regex,
    pub write: Regex,
}

/// The compiled calls of `lang` (compiled once, for every language).
#[allow(clippy::expect_used, reason = "the table is built from every language")]
pub(super) fn compiled(lang: Lang) -> &'static Compiled {
    static ALL: LazyLock<Vec<(Lang, Compiled)>> = LazyLock::new(|| {
        [
            Lang::Python,
            Lang::Js,
            Lang::Perl,
            Lang::Ruby,
            Lang::Php,
            Lang::Awk,
        ]
        .into_iter()
        .map(|l| {
            let c = calls(l);
            // A call: the name, optional whitespace, then `(` (or a literal right away for the
            // languages that allow calls without parentheses).
            // Perl and Ruby also call without parentheses: `system "…"`.
            let bare = matches!(l, Lang::Perl | Lang::Ruby);
            let call = |names: &str| {
                let tail = if bare { r"|\s+['\x22\[]" } else { "" };
                crate::pattern(&format!(r"(?:{names})(?:\s*(?:\(|\{{){tail})"))
            };
            (
                l,
                Compiled {
                    shell: call(c.shell),
                    eval: call(c.eval),
                    delete_tree: call(c.delete_tree),
                    modify: call(c.modify),
                    write: call(c.write),
                },
            )
        })
        .collect()
    });
    &ALL.iter()
        .find(|(l, _)| *l == lang)
        .expect("every language")
        .1
}
