use super::*;
use crate::floor::Unavailable;

/// Forks a child that runs `f` and exits with what it returns; returns that code.
fn in_child(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child runs `f` (system calls, and allocation, which glibc keeps usable
    // after fork) and exits without unwinding.
    match unsafe { libc::fork() } {
        0 => unsafe { libc::_exit(f()) },
        pid => {
            let mut status = 0;
            // SAFETY: reaps our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            libc::WEXITSTATUS(status)
        }
    }
}

/// `plan` completed as a run completes it, every step possible.
fn finished(
    plan: Plan,
    support: &Support,
    layers: Option<&Path>,
    ahead: &mut dyn FnMut(&[std::path::PathBuf]) -> Option<crate::floor::caches::Laid>,
) -> Finished {
    let cx = crate::floor::finished::Completion {
        support,
        state: Path::new("/nonexistent"),
        layers,
        ahead,
    };
    let finished = plan.complete(cx, &mut crate::floor::Report::default());
    assert_eq!(finished.plan().caches.len(), finished.plan().overlays.len());
    finished
}

/// The agent's process, given a floor with a network part, ends up in user, mount and
/// network namespaces of its own, loopback up, its writes confined: whether it joins
/// namespaces made ahead (as the guardian's child makes them) or makes them itself (when
/// the maker failed).
#[test]
fn the_agents_process_gets_its_namespaces_made_ahead_or_by_itself() {
    let support = probe();
    if support.landlock_abi < 1 || support.namespaces.is_err() {
        eprintln!("skipped: no Landlock or no user namespaces here");
        return;
    }
    let ours = |ns: &str| std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
    let (user, net, mnt) = (ours("user"), ours("net"), ours("mnt"));
    let scratch = tempfile::tempdir().unwrap();
    let outside = scratch.path().with_extension("outside");
    let plan = Plan {
        writable: vec![scratch.path().to_owned()],
        net: Some(super::super::plan::NetPlan {
            loopback: true,
            publish: crate::floor::spec::Publishing::Loopback,
        }),
        ..Plan::default()
    };
    let request = NetRequest {
        proxy_port: 45_678,
        control: None,
    };
    for made_ahead in [true, false] {
        let premade = made_ahead.then(|| {
            let (mut premade, maker) = super::super::premade::wanted(super::super::Mode::On)
                .expect("namespaces are possible here");
            premade.ask_overlays(Vec::new(), None);
            assert_eq!(
                in_child(|| {
                    maker.make();
                    0
                }),
                0
            );
            premade
        });
        let plan = finished(plan.clone(), &support, None, &mut |_| None);
        let (prepared, peer) =
            Prepared::new(&plan, &support, scratch.path(), Some(&request), premade).unwrap();
        let ns = prepared.namespaces.as_ref().unwrap();
        assert_eq!(ns.made.is_some(), made_ahead);
        let code = in_child(|| {
            if prepared.apply().is_err() {
                return 1;
            }
            if ours("user") == user || ours("net") == net || ours("mnt") == mnt {
                return 2;
            }
            // Loopback is up: its address can be bound (a datagram sent with an address,
            // a connect or a listen would wait for the wrapper's bridge, which this test
            // does not run).
            if std::net::UdpSocket::bind("127.0.0.1:0").is_err() {
                return 3;
            }
            if std::fs::write(&outside, b"x").is_ok() {
                return 4;
            }
            match std::fs::write(scratch.path().join("inside"), b"x") {
                Ok(()) => 0,
                Err(_) => 5,
            }
        });
        assert_eq!(code, 0, "made premade: {made_ahead} (1 apply, 2 namespaces, 3 loopback, 4 write outside, 5 write inside)");
        assert!(!outside.exists());
        assert!(
            peer.unwrap().receive().is_ok(),
            "the sockets made in the namespace"
        );
    }
}

/// The caches' overlays mounted ahead are the agent's when they are its plan's: it
/// joins their mount namespace (in its working directory), and what it writes in the
/// cache lands in the run's layer, the cache unchanged; when the plan's overlays are
/// others, its process mounts them itself, with the same outcome.
#[test]
fn the_caches_overlays_made_ahead_are_the_agents_when_they_are_its_plans() {
    let support = probe();
    if support.landlock_abi < 1
        || support.namespaces.is_err()
        || super::super::caches::possible().is_err()
    {
        eprintln!("skipped: no Landlock, user namespaces or overlays in them here");
        return;
    }
    let dir = crate::test_dir();
    let (cache, ws) = (dir.path().join("cache"), dir.path().join("ws"));
    std::fs::create_dir(&cache).unwrap();
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(cache.join("old"), b"before").unwrap();
    let here = std::env::current_dir().unwrap();
    let request = NetRequest {
        proxy_port: 45_678,
        control: None,
    };
    for ahead in [true, false] {
        let (mut premade, maker) = super::super::premade::wanted(super::super::Mode::On)
            .expect("namespaces are possible here");
        premade.ask_overlays(
            vec![cache.clone()],
            Some(&dir.path().join(format!("a-{ahead}"))),
        );
        assert_eq!(
            in_child(|| {
                maker.make();
                0
            }),
            0
        );
        let plan = Plan {
            writable: vec![ws.clone(), cache.clone()],
            caches: vec![cache.clone()],
            net: Some(super::super::plan::NetPlan {
                loopback: true,
                publish: crate::floor::spec::Publishing::Loopback,
            }),
            ..Plan::default()
        };
        let b = dir.path().join("b");
        let plan = finished(plan, &support, Some(&b), &mut |c| {
            ahead.then(|| premade.overlays_for(c)).flatten()
        });
        let (prepared, _peer) =
            Prepared::new(&plan, &support, &ws, Some(&request), Some(premade)).unwrap();
        let ns = prepared.namespaces.as_ref().unwrap();
        assert_eq!(
            ns.premounted, ahead,
            "the mount namespace made ahead joined"
        );
        let code = in_child(|| {
            if prepared.apply().is_err() {
                return 1;
            }
            if std::env::current_dir().ok() != Some(here.clone()) {
                return 2;
            }
            let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
            let point = format!(" {} ", cache.display());
            if !table
                .lines()
                .any(|l| l.contains(&point) && l.contains(" - overlay "))
            {
                return 3;
            }
            let new = std::fs::write(cache.join("new"), b"added");
            let old = std::fs::write(cache.join("old"), b"changed");
            match (new, old) {
                (Ok(()), Ok(())) => 0,
                _ => 4,
            }
        });
        assert_eq!(
            code, 0,
            "ahead: {ahead} (1 apply, 2 working directory, 3 no overlay, 4 write)"
        );
        assert_eq!(std::fs::read(cache.join("old")).unwrap(), b"before");
        assert!(!cache.join("new").exists(), "written in the cache itself");
        let upper = &plan.plan().overlays[0].upper;
        assert_eq!(std::fs::read(upper.join("new")).unwrap(), b"added");
        assert_eq!(std::fs::read(upper.join("old")).unwrap(), b"changed");
    }
}

#[test]
fn this_kernel_reports_what_it_offers() {
    let s = probe();
    let plan = Plan {
        net: Some(super::super::plan::NetPlan {
            loopback: true,
            publish: crate::floor::spec::Publishing::Loopback,
        }),
        ..Plan::default()
    };
    let r = s.report(
        &plan,
        crate::floor::denials::said::<()>(&Err(Unavailable::AuditOff)),
    );
    assert_eq!(r.enforced.is_empty(), s.landlock_abi < 1);
    assert!(r.refusals.contains("audit subsystem is off"), "{r:?}");
    if s.landlock_abi >= 6 && s.namespaces.is_ok() {
        assert!(r.complete(), "{r:?}");
    }
}
