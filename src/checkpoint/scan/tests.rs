//! The walk's tests: trees made in a temporary directory, a store beside each.

use super::*;

/// A tree large enough to be looked at by two threads: a change, a deletion and a new
/// file are each found once, and an unchanged tree gives an empty delta.
#[test]
fn a_large_tree_is_walked_by_two_threads_and_every_change_found() {
    let dir = tempfile::tempdir().unwrap();
    let (root, store) = (dir.path().join("ws"), Store::at(dir.path().join("store")));
    store.create().unwrap();
    for i in 0..(PARALLEL_FROM + 100) {
        let sub = root.join(format!("d{}", i % 7));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{i}")), format!("{i}\n")).unwrap();
    }
    std::fs::create_dir_all(root.join("node_modules/x")).unwrap();
    std::fs::write(root.join("node_modules/x/skipped.js"), "").unwrap();
    std::fs::write(root.join("package.json"), "{}").unwrap();
    let rules = Rules {
        exclude: vec!["node_modules".into()],
        tracked: HashSet::new(),
        max_file: 1 << 20,
        at_once: u64::MAX,
        max_files: 1 << 20,
    };
    let first = manifest(&root, &rules, &Manifest::new(), &store, None).unwrap();
    assert_eq!(first.len(), PARALLEL_FROM + 101);
    assert!(scan(&root, &rules, &first, &store, None)
        .unwrap()
        .is_empty());
    std::fs::write(root.join("d1/f1"), "changed\n").unwrap();
    std::fs::remove_file(root.join("d2/f2")).unwrap();
    std::fs::write(root.join("d3/new"), "new\n").unwrap();
    let delta = scan(&root, &rules, &first, &store, None).unwrap();
    let mut set: Vec<&str> = delta.set.iter().map(|(p, _)| p.as_str()).collect();
    set.sort();
    assert_eq!(set, ["d1/f1", "d3/new"]);
    assert_eq!(delta.deleted, ["d2/f2"]);
    let changed = &delta.set.iter().find(|(p, _)| p == "d1/f1").unwrap().1;
    let Kind::File(hash) = &changed.kind else {
        panic!("a file: {changed:?}");
    };
    assert_eq!(store.read(hash).unwrap(), b"changed\n");
}

/// Only what the watches name is looked at again, and the manifest it gives is the one a
/// whole walk gives: after edits, a deletion, a directory made with files in it, one
/// moved, one deleted, and one replaced by a file.
#[test]
fn a_rescan_of_what_the_watches_name_gives_what_a_walk_gives() {
    let dir = tempfile::tempdir().unwrap();
    let (root, store) = (dir.path().join("ws"), Store::at(dir.path().join("store")));
    store.create().unwrap();
    for d in ["a/b", "c", "gone/deep", "swap", "node_modules/x"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for f in [
        "a/b/1",
        "a/2",
        "c/3",
        "gone/deep/4",
        "swap/5",
        "top",
        "node_modules/x/y",
        "package.json",
    ] {
        std::fs::write(root.join(f), f).unwrap();
    }
    let rules = Rules {
        exclude: vec!["node_modules".into()],
        tracked: HashSet::new(),
        max_file: 1 << 20,
        at_once: u64::MAX,
        max_files: 1 << 20,
    };
    let mut watch = Watch::new(None);
    let mut current = manifest(&root, &rules, &Manifest::new(), &store, Some(&mut watch)).unwrap();
    assert_eq!(
        watch.count(),
        8,
        "every directory walked is watched, and node_modules for its .bin to come"
    );
    let rounds: [&dyn Fn(); 4] = [
        &|| {
            std::fs::write(root.join("a/b/1"), "edited").unwrap();
            std::fs::remove_file(root.join("top")).unwrap();
            std::fs::create_dir_all(root.join("fresh/inner")).unwrap();
            std::fs::write(root.join("fresh/inner/6"), "6").unwrap();
            std::fs::write(root.join("node_modules/x/z"), "skipped").unwrap();
        },
        &|| {
            std::fs::rename(root.join("a"), root.join("c/a")).unwrap();
            std::fs::remove_dir_all(root.join("gone")).unwrap();
            std::fs::remove_dir_all(root.join("swap")).unwrap();
            std::fs::write(root.join("swap"), "now a file").unwrap();
        },
        &|| {
            // Under the moved directory's new name, reported by its watch made again.
            std::fs::write(root.join("c/a/b/7"), "7").unwrap();
            std::fs::write(root.join("fresh/inner/6"), "six").unwrap();
            std::fs::create_dir_all(root.join("node_modules/.bin")).unwrap();
            std::fs::write(root.join("node_modules/.bin/jest"), "#!/bin/sh\n").unwrap();
        },
        &|| {
            std::fs::write(root.join("node_modules/.bin/jest"), "#!/bin/sh\nevil\n").unwrap();
        },
    ];
    for (n, round) in rounds.iter().enumerate() {
        round();
        let super::super::watch::Changed::Paths(paths) = watch.drain() else {
            panic!("round {n}: a walk was asked for");
        };
        let delta = rescan(&root, &rules, &current, &store, &paths, Some(&mut watch)).unwrap();
        delta.apply(&mut current);
        let walked = manifest(&root, &rules, &Manifest::new(), &store, None).unwrap();
        assert_eq!(
            current, walked,
            "round {n}: what the watches named: {paths:?}"
        );
    }
    assert!(current.contains_key("c/a/b/7") && !current.contains_key("node_modules/x/z"));
    assert!(current.contains_key("node_modules/.bin/jest"));
}

/// A directory the tree replaced by a link out of the workspace is followed neither by a
/// rescan of what the watches named under it nor by the end's count of a left-out
/// directory: nothing of the outside is recorded or listed.
#[test]
fn a_link_the_tree_made_is_followed_neither_by_a_rescan_nor_by_the_count() {
    let dir = tempfile::tempdir().unwrap();
    let (root, store) = (dir.path().join("ws"), Store::at(dir.path().join("store")));
    let outside = dir.path().join("home");
    store.create().unwrap();
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::create_dir_all(outside.join("sub")).unwrap();
    std::fs::write(outside.join("sub/secret"), "theirs").unwrap();
    std::os::unix::fs::symlink("theirs", outside.join("sub/link")).unwrap();
    std::fs::write(outside.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        outside.join("run.sh"),
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(root.join("package.json"), "{}").unwrap();
    let rules = Rules {
        exclude: vec!["node_modules".into()],
        tracked: HashSet::new(),
        max_file: 1 << 20,
        at_once: u64::MAX,
        max_files: 1 << 20,
    };
    let first = manifest(&root, &rules, &Manifest::new(), &store, None).unwrap();
    std::fs::remove_dir(root.join("a")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("a")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("node_modules")).unwrap();
    let named: BTreeSet<String> = ["a/sub", "a/sub/secret", "a/sub/link"]
        .map(String::from)
        .into();
    let delta = rescan(&root, &rules, &first, &store, &named, None).unwrap();
    assert!(delta.set.is_empty(), "{:?}", delta.set);
    let dirs: BTreeSet<String> = ["node_modules".to_owned()].into();
    assert!(left_out(&root, &dirs, 0, &Manifest::new()).is_empty());
}
