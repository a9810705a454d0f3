use super::*;

fn spec(read_only: &[&str], hidden: &[&str]) -> Spec {
    Spec {
        enabled: true,
        writable: Some(vec![]),
        caches: Some(vec!["~/.cache".into()]),
        read_only: Some(read_only.iter().map(|s| s.to_string()).collect()),
        hidden: Some(hidden.iter().map(|s| s.to_string()).collect()),
        keep: None,
        env: Default::default(),
        unix: Default::default(),
        net: Default::default(),
        credentials: None,
        run_files: None,
        nested_sandboxes: None,
    }
}

#[test]
fn protected_paths_beneath_writable_ones_are_bound_and_their_parents_pinned() {
    let t = crate::test_dir();
    let (home, ws) = (t.path().join("home"), t.path().join("home/ws"));
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".bashrc"), "").unwrap();
    let cx = Context {
        workspace: ws.clone(),
        home: home.clone(),
        agent_state: vec![home.join(".agent"), home.join(".local/share/agent")],
        create_missing: true,
        ..Context::default()
    };
    let plan = Plan::new(
        &spec(
            &[".git/hooks", ".mcp.json", "~/.bashrc"],
            &["~/.ssh", "~/.aws"],
        ),
        &cx,
    );
    assert!(plan.writable.contains(&ws));
    assert!(
        plan.writable.contains(&home.join(".agent")),
        "state created: {plan}"
    );
    assert!(
        plan.writable.contains(&home.join(".local/share/agent")),
        "state created with its parents in a fresh home: {plan}"
    );
    assert!(
        plan.writable.contains(&home.join(".cache")),
        "cache created: {plan}"
    );
    assert_eq!(plan.read_only, vec![ws.join(".git/hooks")]);
    assert_eq!(plan.pinned, vec![ws.join(".git")]);
    assert_eq!(plan.absent, vec![ws.join(".mcp.json")]);
    assert_eq!(plan.hidden, vec![home.join(".ssh")]);
    assert!(plan.reopened.is_empty());
    assert!(plan.appeared().is_empty());
    std::fs::write(ws.join(".mcp.json"), "{}").unwrap();
    assert_eq!(plan.appeared(), vec![Appeared::Path(ws.join(".mcp.json"))]);
    let plan = Plan::new(&spec(&[".claude/hooks"], &[]), &cx);
    std::fs::create_dir_all(ws.join(".claude/hooks")).unwrap();
    assert!(plan.appeared().is_empty(), "an empty directory counts");
    std::fs::write(ws.join(".claude/hooks/x.sh"), "").unwrap();
    assert_eq!(plan.appeared().len(), 1);
    // A link made on the way to it (into the home's own `.claude`) is what appeared: the
    // link, never the file it leads to.
    std::fs::remove_dir_all(ws.join(".claude")).unwrap();
    std::fs::create_dir_all(home.join(".claude/hooks")).unwrap();
    std::fs::write(home.join(".claude/hooks/user.sh"), "").unwrap();
    std::os::unix::fs::symlink(home.join(".claude"), ws.join(".claude")).unwrap();
    assert_eq!(
        plan.appeared(),
        vec![Appeared::Link {
            link: ws.join(".claude"),
            protected: ws.join(".claude/hooks"),
        }]
    );
}

#[test]
fn an_agents_instructions_are_protected_in_its_state_and_the_project_unless_kept() {
    let t = crate::test_dir();
    let (home, ws) = (t.path().join("home"), t.path().join("ws"));
    std::fs::create_dir_all(home.join(".agent")).unwrap();
    std::fs::create_dir_all(ws.join(".agent/commands")).unwrap();
    let cx = Context {
        workspace: ws.clone(),
        home: home.clone(),
        agent_state: vec![home.join(".agent")],
        protected: vec![home.join(".agent/MEMORY.md")],
        protected_dirs: vec![home.join(".agent/commands"), home.join(".agent/skills")],
        project: vec![".agent/commands".into(), ".agent/MEMORY.md".into()],
        create_missing: true,
        ..Context::default()
    };
    let mut policy = spec(&[], &[]);
    let plan = Plan::new(&policy, &cx);
    assert!(home.join(".agent/skills").is_dir(), "made, empty");
    assert_eq!(
        plan.read_only,
        vec![
            home.join(".agent/commands"),
            home.join(".agent/skills"),
            ws.join(".agent/commands")
        ]
    );
    assert_eq!(
        plan.absent,
        vec![home.join(".agent/MEMORY.md"), ws.join(".agent/MEMORY.md")]
    );
    policy.keep = Some(vec!["~/.agent/MEMORY.md".into(), ".agent".into()]);
    let plan = Plan::new(&policy, &cx);
    assert_eq!(
        plan.read_only,
        vec![home.join(".agent/commands"), home.join(".agent/skills")]
    );
    assert!(plan.absent.is_empty(), "{plan}");
}

#[test]
fn git_hooks_are_where_core_hooks_path_says() {
    let t = crate::test_dir();
    let ws = t.path().join("repo");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(&ws)
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    assert_eq!(git_hooks(&ws), None, ".git/hooks is the policy's");
    git(&["config", "core.hooksPath", ".husky/_"]);
    assert_eq!(git_hooks(&ws.join("sub")), Some(ws.join("sub/../.husky")));
    git(&["config", "core.hooksPath", "/opt/hooks"]);
    assert_eq!(git_hooks(&ws), Some(PathBuf::from("/opt/hooks")));
    // Set in a file the repository's configuration includes.
    git(&["config", "--unset", "core.hooksPath"]);
    std::fs::write(ws.join("hooks.inc"), "[core]\n\thooksPath = /opt/inc\n").unwrap();
    git(&["config", "include.path", "../hooks.inc"]);
    assert_eq!(git_hooks(&ws), Some(PathBuf::from("/opt/inc")));
    assert_eq!(git_hooks(t.path()), None, "no repository");
}

#[test]
fn a_writable_directory_beneath_a_read_only_one_is_reopened() {
    let t = crate::test_dir();
    let run = t.path().join("ws/run");
    std::fs::create_dir_all(run.join("overlay")).unwrap();
    let cx = Context {
        workspace: t.path().join("ws"),
        home: t.path().to_owned(),
        agent_state: vec![run.join("overlay")],
        protected: vec![run.clone()],
        ..Context::default()
    };
    let plan = Plan::new(&spec(&[], &[]), &cx);
    let run = run.canonicalize().unwrap();
    assert_eq!(plan.read_only, vec![run.clone()]);
    assert_eq!(plan.reopened, vec![run.join("overlay")]);
}

#[test]
fn a_hidden_path_never_hides_the_workspace() {
    let t = crate::test_dir();
    let ws = t.path().join("secret/ws");
    std::fs::create_dir_all(&ws).unwrap();
    let cx = Context {
        workspace: ws,
        home: t.path().to_owned(),
        ..Context::default()
    };
    assert!(Plan::new(&spec(&[], &["~/secret"]), &cx).hidden.is_empty());
}

#[test]
fn caches_are_the_outermost_ones_outside_other_writable_roots_and_what_lies_beneath_goes_through() {
    let t = crate::test_dir();
    let (home, ws) = (t.path().join("home"), t.path().join("home/ws"));
    std::fs::create_dir_all(ws.join(".cache")).unwrap();
    std::fs::create_dir_all(home.join(".cache/pip")).unwrap();
    let cx = Context {
        workspace: ws.clone(),
        home: home.clone(),
        agent_state: vec![home.join(".cache/agent")],
        caches: vec![home.join(".cache/pip"), ws.join(".cache")],
        create_missing: true,
        ..Context::default()
    };
    let plan = Plan::new(&spec(&[], &[]), &cx);
    assert_eq!(plan.caches, vec![home.join(".cache")], "{plan}");
    assert_eq!(plan.through, vec![home.join(".cache/agent")], "{plan}");
    assert!(plan.writable.contains(&home.join(".cache")));
    assert!(plan.to_string().contains("caches (new entries kept"));
}

/// The caches told to the namespaces' maker before the agent is known are those the run's
/// plan overlays, found by the same steps: a non-empty, an empty and a missing cache (made)
/// overlaid, one inside the workspace not.
#[test]
fn the_caches_found_ahead_are_the_plans() {
    let t = crate::test_dir();
    let (home, ws) = (t.path().join("home"), t.path().join("ws"));
    std::fs::create_dir_all(home.join(".cache/pip")).unwrap();
    std::fs::create_dir_all(home.join(".npm")).unwrap();
    std::fs::create_dir_all(ws.join("vendor/crate")).unwrap();
    let mut spec = spec(&[], &[]);
    spec.caches = Some(vec![
        "~/.cache".into(),
        "~/.npm".into(),
        "~/.missing".into(),
        "vendor".into(),
    ]);
    let ahead = caches_ahead(&spec, &home, &ws);
    let cx = Context {
        workspace: ws.clone(),
        home: home.clone(),
        temp: temp_dirs(),
        caches: env_caches(),
        create_missing: true,
        ..Context::default()
    };
    let plan = Plan::new(&spec, &cx);
    // (Beside the caches the environment names, as `cargo test`'s `$CARGO_HOME`.)
    let ours: Vec<&PathBuf> = ahead.iter().filter(|c| c.starts_with(&home)).collect();
    assert_eq!(
        ours,
        vec![
            &home.join(".cache"),
            &home.join(".npm"),
            &home.join(".missing")
        ]
    );
    assert_eq!(ahead, plan.caches, "{plan}");
    // A cache in the workspace is written as the workspace is: no overlay, nothing merged
    // there (what lets the run's last checkpoint be taken while the caches merge).
    let ws = ws.canonicalize().unwrap();
    assert!(!plan.caches.iter().any(|c| c.starts_with(&ws)), "{plan}");
    assert!(
        home.join(".missing").is_dir(),
        "the plan made the missing cache"
    );
}

#[test]
fn a_runs_plan_hides_its_store_and_credential_files_and_binds_the_layers_read_only() {
    let t = crate::test_dir();
    let (home, ws) = (t.path().join("home"), t.path().join("home/ws"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(home.join(".cache")).unwrap();
    std::fs::write(home.join("token"), "secret").unwrap();
    let store = t.path().join("store");
    let cx = Context {
        workspace: ws.clone(),
        home: home.clone(),
        ..Context::default()
    };
    let credential = CredentialSpec {
        from_file: Some("~/token".into()),
        ..CredentialSpec::new("TOKEN", vec!["example.com".into()])
    };
    let layers = home.join(".cache/layers");
    let asked = std::cell::Cell::new(0);
    let run = RunInputs {
        hidden: vec![store.clone()],
        credentials: std::slice::from_ref(&credential),
        layers: &|| Some(layers.clone()),
        nested: None,
        own_sandbox: &|| {
            asked.set(asked.get() + 1);
            true
        },
    };
    let (plan, made) = Plan::for_run(&spec(&[], &[]), &cx, &run);
    assert_eq!(made.as_ref(), Some(&layers), "a cache needs the layers");
    assert!(
        plan.read_only.contains(&layers),
        "beneath a writable root: {plan}"
    );
    assert!(plan.hidden.contains(&store), "{plan}");
    let token = home.join("token").canonicalize().unwrap();
    assert!(
        plan.hidden.contains(&token),
        "the credential's file: {plan}"
    );
    assert!(
        plan.nested && asked.get() == 1,
        "auto asks the agent's shim"
    );
    let run = RunInputs {
        nested: Some(Nested::Off),
        ..run
    };
    let (plan, _) = Plan::for_run(&spec(&[], &[]), &cx, &run);
    assert!(
        !plan.nested && asked.get() == 1,
        "off is off, without asking"
    );
}
