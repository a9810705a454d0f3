//! The AppArmor profile `ahp-wrap setup apparmor` writes for Ubuntu's restriction of user
//! namespaces, read by AppArmor 4's own parser (Debian's package, unpacked by
//! tests/apparmor/setup.sh), parse-only: this kernel enforces no AppArmor, so loading it and
//! a run under it are checked by hand on Ubuntu (docs/floor.md says how). Which decision a
//! run takes in each case is the floor's unit tests' (`floor::apparmor`).

use std::path::{Path, PathBuf};
use std::process::Command;

use ahp_wrap::floor::apparmor;

/// AppArmor 4's parser, or a failure that says how to get it.
fn parser() -> PathBuf {
    let parser = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/.cache/apparmor/parser");
    assert!(
        parser.exists(),
        "AppArmor's parser is not at {}: run tests/apparmor/setup.sh first",
        parser.display()
    );
    parser
}

/// `parser -Q` on `text`: its exit status and what it said.
fn parse(text: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(apparmor::PROFILE_NAME);
    std::fs::write(&file, text).unwrap();
    // -Q: parse and compile, load nothing; -K: no cache.
    let out = Command::new(parser())
        .args(["-Q", "-K"])
        .arg(&file)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn apparmor_4_accepts_the_profile_for_an_install_path() {
    let scratch = tempfile::tempdir().unwrap();
    for wrapper in [
        scratch.path().join("bin/ahp-wrap"),
        scratch.path().join("my tools/bin/ahp-wrap"),
    ] {
        let text = apparmor::profile(&wrapper).unwrap();
        let (ok, said) = parse(&text);
        assert!(
            ok,
            "the parser refused the profile for {}: {said}\n{text}",
            wrapper.display()
        );
        assert_eq!(apparmor::profiled_wrapper(&text), Some(wrapper));
    }
    // The parser does refuse what is wrong: a rule it does not know.
    let text = apparmor::profile(&scratch.path().join("bin/ahp-wrap")).unwrap();
    let (ok, said) = parse(&text.replace("userns,", "usernamespaces,"));
    assert!(!ok, "a broken profile passed: {said}");
}
