use super::*;

/// A cache and a layer over it, as the overlay leaves them, beneath the build's target
/// directory (one file system with the quarantine).
struct Fixture {
    _layers: Layers,
    _t: tempfile::TempDir,
    overlay: Overlay,
    quarantine: PathBuf,
}

fn fixture() -> Fixture {
    let t = crate::test_dir();
    // Cargo's home, whose kinds of entry the merge knows (`kinds.rs`).
    let cache = t.path().join(".cargo");
    std::fs::create_dir_all(cache.join("registry/src/dep-1.0")).unwrap();
    std::fs::write(cache.join("registry/src/dep-1.0/build.rs"), "fn main() {}").unwrap();
    std::fs::write(cache.join("registry/src/dep-1.0/lib.rs"), "// dep").unwrap();
    std::fs::write(cache.join(".package-cache"), "").unwrap();
    let (layers, made, gaps) =
        make(std::slice::from_ref(&cache), &t.path().join("layers")).unwrap();
    assert!(gaps.is_empty());
    Fixture {
        _layers: layers,
        quarantine: t.path().join("quarantine"),
        overlay: made.into_iter().next().unwrap(),
        _t: t,
    }
}

#[test]
fn new_entries_are_added_and_changes_to_existing_ones_kept_aside_then_applied_on_request() {
    let f = fixture();
    let (cache, up) = (&f.overlay.cache, &f.overlay.upper);
    // What a build adds: the index's entry for a new crate, which cargo checks with the
    // registry; and its extracted source, which it would build without a check: held.
    std::fs::create_dir_all(up.join("registry/index/reg/.cache/ne/w-")).unwrap();
    std::fs::write(
        up.join("registry/index/reg/.cache/ne/w-/new-crate"),
        "index",
    )
    .unwrap();
    std::fs::create_dir_all(up.join("registry/src/new-2.0")).unwrap();
    std::fs::write(up.join("registry/src/new-2.0/lib.rs"), "// new").unwrap();
    // A lock file opened for writing and written the same: no change.
    std::fs::write(up.join(".package-cache"), "").unwrap();
    // The attack: the existing crate's build script rewritten.
    std::fs::create_dir_all(up.join("registry/src/dep-1.0")).unwrap();
    std::fs::write(up.join("registry/src/dep-1.0/build.rs"), "evil").unwrap();

    let merged = merge(&f.overlay, Some(&f.quarantine), &Verified::default()).unwrap();
    assert_eq!(merged.added, 1);
    assert!(merged.lost.is_empty(), "{:?}", merged.lost);
    assert_eq!(
        merged
            .held
            .iter()
            .map(|(p, _)| p.clone())
            .collect::<Vec<_>>(),
        vec![PathBuf::from("registry/src/new-2.0")]
    );
    assert!(
        !cache.join("registry/src/new-2.0").exists(),
        "held in the layer"
    );
    assert_eq!(
        merged.kept,
        vec![Change {
            path: "registry/src/dep-1.0/build.rs".into(),
            removed: false
        }]
    );
    let read = |p: &str| std::fs::read_to_string(cache.join(p)).unwrap();
    assert_eq!(read("registry/index/reg/.cache/ne/w-/new-crate"), "index");
    assert_eq!(read("registry/src/dep-1.0/build.rs"), "fn main() {}");

    let record_path = merged.record.unwrap();
    let record: Record = serde_json::from_slice(&std::fs::read(&record_path).unwrap()).unwrap();
    apply(&record_path, &record).unwrap();
    assert_eq!(read("registry/src/dep-1.0/build.rs"), "evil");
    assert_eq!(
        std::fs::read_to_string(
            record
                .held
                .with_extension("before")
                .join("registry/src/dep-1.0/build.rs")
        )
        .unwrap(),
        "fn main() {}",
        "what the cache held is kept"
    );
    assert!(!record_path.exists());
}

#[test]
fn removals_and_replaced_directories_are_changes_not_applied() {
    let f = fixture();
    let (cache, up) = (&f.overlay.cache, &f.overlay.upper);
    // The tree removed the existing crate's directory and made one of the same name.
    std::fs::create_dir_all(up.join("registry/src/dep-1.0")).unwrap();
    std::fs::write(up.join("registry/src/dep-1.0/lib.rs"), "evil").unwrap();
    let set = rustix::fs::setxattr(
        up.join("registry/src/dep-1.0"),
        c"user.overlay.opaque",
        b"y",
        rustix::fs::XattrFlags::empty(),
    );
    assert!(set.is_ok(), "user extended attributes on this file system");
    // And removed the lock file: a whiteout (a process that may make device files makes it).
    let whiteout = nix::sys::stat::mknod(
        &up.join(".package-cache"),
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::empty(),
        0,
    );
    let merged = merge(&f.overlay, Some(&f.quarantine), &Verified::default()).unwrap();
    assert_eq!(merged.added, 0);
    let mut expected = vec![Change {
        path: "registry/src/dep-1.0".into(),
        removed: false,
    }];
    if whiteout.is_ok() {
        expected.insert(
            0,
            Change {
                path: ".package-cache".into(),
                removed: true,
            },
        );
    }
    let mut kept = merged.kept.clone();
    kept.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(kept, expected);
    assert_eq!(
        std::fs::read_to_string(cache.join("registry/src/dep-1.0/build.rs")).unwrap(),
        "fn main() {}"
    );
    assert!(cache.join(".package-cache").exists());
}

#[test]
fn what_appeared_in_the_cache_meanwhile_stays() {
    let f = fixture();
    let (cache, up) = (&f.overlay.cache, &f.overlay.upper);
    std::fs::write(up.join("fresh"), "tree's").unwrap();
    std::fs::write(cache.join("fresh"), "another build's").unwrap();
    let merged = merge(&f.overlay, Some(&f.quarantine), &Verified::default()).unwrap();
    // It is now an existing entry with other content: kept aside, not applied.
    assert_eq!(merged.kept.len(), 1);
    assert_eq!(
        std::fs::read_to_string(cache.join("fresh")).unwrap(),
        "another build's"
    );
}

/// A `.crate` file lands with a checksum the workspace's lock file recorded before the run
/// (its directories made on the way); a forged one, and what npx installed, stay in the layer.
#[test]
fn a_crate_lands_with_a_known_checksum_and_what_is_trusted_unchecked_is_held() {
    use sha2::Digest;
    let f = fixture();
    let (cache, up) = (&f.overlay.cache, &f.overlay.upper);
    let dir = up.join("registry/cache/reg");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("itoa-1.0.0.crate"), "real crate").unwrap();
    std::fs::write(dir.join("serde-1.0.0.crate"), "forged crate").unwrap();
    let sum = |b: &[u8]| hex(&sha2::Sha256::digest(b));
    let lock = format!(
        "[[package]]\nname = \"itoa\"\nversion = \"1.0.0\"\nchecksum = \"{}\"\n\n\
         [[package]]\nname = \"serde\"\nversion = \"1.0.0\"\nchecksum = \"{}\"\n",
        sum(b"real crate"),
        sum(b"the real serde"),
    );
    let merged = merge(&f.overlay, Some(&f.quarantine), &Verified::from_lock(&lock)).unwrap();
    assert_eq!(merged.added, 1, "{merged:?}");
    assert!(cache.join("registry/cache/reg/itoa-1.0.0.crate").is_file());
    assert!(!cache.join("registry/cache/reg/serde-1.0.0.crate").exists());
    assert_eq!(
        merged
            .held
            .iter()
            .map(|(p, _)| p.clone())
            .collect::<Vec<_>>(),
        vec![PathBuf::from("registry/cache/reg/serde-1.0.0.crate")]
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn a_path_the_overlay_options_cannot_carry_gets_no_layer() {
    let t = crate::test_dir();
    let odd = t.path().join("a,b");
    std::fs::create_dir(&odd).unwrap();
    let (_layers, made, gaps) = make(&[odd], &t.path().join("layers")).unwrap();
    assert!(made.is_empty());
    assert!(gaps[0].contains("written in place"), "{gaps:?}");
}

#[test]
fn layers_are_removed_with_their_run_and_swept_once_no_run_holds_them() {
    let t = crate::test_dir();
    let cache = t.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let (layers, _, _) =
        make(std::slice::from_ref(&cache), &t.path().join("layers/run-a")).unwrap();
    let swept = |what: &str| {
        sweep(&t.path().join("layers"));
        let gone = || !t.path().join(what).exists();
        let start = std::time::Instant::now();
        while !gone() && start.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        gone()
    };
    sweep(&t.path().join("layers"));
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        t.path().join("layers/run-a/0-upper").is_dir(),
        "a live run's layers stay"
    );
    drop(layers);
    assert!(!t.path().join("layers/run-a").exists(), "renamed at once");
    assert!(swept("layers/.done-run-a"), "then removed by a sweep");
    // A run killed before its end: its directory is left, unlocked.
    std::fs::create_dir_all(t.path().join("layers/run-b/0-work/work")).unwrap();
    std::fs::set_permissions(
        t.path().join("layers/run-b/0-work/work"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    assert!(swept("layers/run-b"));
}

#[test]
fn the_mount_table_says_which_overlays_are_missing_and_which_file_systems_cannot_hold_one() {
    assert_eq!(
        crate::mountinfo::unescape(r"/home/a\040b/.cache"),
        "/home/a b/.cache"
    );
    assert_eq!(crate::mountinfo::unescape(r"/x\134y"), "/x\\y");
    assert_eq!(crate::mountinfo::unescape(r"/odd\9"), r"/odd\9");
    let t = crate::test_dir();
    let o = Overlay {
        cache: t.path().to_owned(),
        upper: t.path().join("u"),
        work: t.path().join("w"),
    };
    // Nothing is mounted over it in this process.
    assert_eq!(
        unmounted(std::process::id() as i32, std::slice::from_ref(&o)),
        vec![o.cache.clone()]
    );
    assert!(unmounted(i32::MAX, &[o]).is_empty(), "a process gone");
    // The build's directory: an ordinary disk file system here.
    upper_possible(t.path()).unwrap();
}
