//! The package caches on the floor: add, never change. An agent without hooks (the build
//! tools are what writes the caches) builds with a git dependency and installs from an npm
//! registry on 127.0.0.1, in a home outside the temp directories. What the tools add to the
//! caches is there after the run: the next run builds and installs offline. A change to an
//! entry that was there before the run, made from Python (not a build), does not land: the
//! run says it and keeps it aside, `ahp-wrap restore` applies it; a later build outside the
//! wrapper compiles what the cache held. With `--floor off` the change lands and the later
//! build compiles it, which shows the test can fail.

use ahp_wrap_testkit::common::{eventually, outside_tree, run, show, wrap_bin};

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// A workspace, a home, and a git repository `dep` (a crate) beside them.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

/// The Python that rewrites the dependency's source in cargo's cache (its checkout), as a
/// model's script would.
const PLANT: &str = r#"
import glob, os, sys
found = glob.glob(os.path.expanduser('~/.cargo/git/checkouts/dep-*/*/src/lib.rs'))
for path in found:
    try:
        with open(path, 'w') as f:
            f.write('pub fn answer() -> u32 { 666 }\n')
        print('planted', path)
    except OSError as e:
        print('refused', path, e)
sys.exit(0 if found else 3)
"#;

impl World {
    fn new() -> World {
        let (dir, root) = outside_tree(
            "floor-caches-",
            &["ws", "home/.cargo"],
            &[
                (
                    "dep/Cargo.toml",
                    "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
                ),
                ("dep/src/lib.rs", "pub fn answer() -> u32 { 42 }\n"),
                ("ws/plant.py", PLANT),
                // The caches hold something already: an empty cache gets no overlay, and
                // the first run's additions must go through one and be merged.
                (
                    "home/.cargo/git/CACHEDIR.TAG",
                    "Signature: 8a477f597d28d172789f06886806bc55\n",
                ),
                ("home/.npm/.keep", ""),
            ],
        );
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .arg("-C")
                .arg(root.join("dep"))
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        git(&["add", "."]);
        git(&[
            "-c",
            "user.email=d@e.test",
            "-c",
            "user.name=D",
            "commit",
            "-qm",
            "dep",
        ]);
        World { _dir: dir, root }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    /// A crate `name` in the workspace that prints the dependency's answer.
    fn app(&self, name: &str) {
        let dir = self.ws().join(name);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(
            dir.join("Cargo.toml"),
            format!(
                "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [dependencies]\ndep = {{ git = \"file://{}\" }}\n",
                self.root.join("dep").display()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("src/main.rs"),
            "fn main() { println!(\"{}\", dep::answer()); }\n",
        )
        .unwrap();
    }

    /// `script` in the workspace, as the user runs it: on the floor, with `--floor off`, or
    /// (`None`) without the wrapper. The toolchain's own `cargo` and `rustc` come first on
    /// the path; cargo's home is this world's.
    fn command(&self, floor: Option<bool>, script: &str) -> Command {
        let mut cmd = match floor {
            Some(on) => {
                let mut c = Command::new(wrap_bin());
                c.args(["--no-intercept", "--summary", "never", "--audit-log"]);
                c.arg(self.root.join("audit.jsonl"));
                if !on {
                    c.args(["--floor", "off"]);
                }
                c.args(["--", "sh", "-c", script]);
                c
            }
            None => {
                let mut c = Command::new("sh");
                c.args(["-c", script]);
                c
            }
        };
        let path = format!(
            "{}:{}",
            toolchain_bin().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.current_dir(self.ws())
            .env("HOME", self.home())
            .env("XDG_STATE_HOME", self.home().join(".local/state"))
            .env("PATH", path)
            .env("CARGO_HOME", self.home().join(".cargo"))
            .env("CARGO_TERM_COLOR", "never")
            .env_remove("RUSTUP_TOOLCHAIN")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("AHP_WRAP_FLOOR");
        cmd
    }

    fn run(&self, floor: Option<bool>, script: &str) -> Output {
        run(&mut self.command(floor, script), Duration::from_secs(240))
    }

    /// The dependency's source in cargo's cache.
    fn cached_source(&self) -> Vec<PathBuf> {
        let pattern = self.home().join(".cargo/git/checkouts");
        let mut found = Vec::new();
        for repo in std::fs::read_dir(pattern).into_iter().flatten().flatten() {
            for rev in std::fs::read_dir(repo.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let lib = rev.path().join("src/lib.rs");
                if lib.exists() {
                    found.push(lib);
                }
            }
        }
        found
    }

    /// The records of cache changes kept aside in this home's quarantine.
    fn kept_aside(&self) -> Vec<PathBuf> {
        let q = self.home().join(".local/state/ahp-wrap/quarantine");
        std::fs::read_dir(q)
            .into_iter()
            .flatten()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".cache.json"))
            .collect()
    }
}

/// The directory of the toolchain's `cargo` and `rustc` (not rustup's proxies, which want
/// the user's rustup home).
fn toolchain_bin() -> PathBuf {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("bin")
}

fn printed(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

#[test]
fn cargo_keeps_its_cache_warm_and_a_changed_entry_never_lands() {
    let w = World::new();
    w.app("first");
    let out = w.run(
        Some(true),
        "cargo build -q --manifest-path first/Cargo.toml && first/target/debug/first > first.out \
         && grep -F \"$CARGO_HOME/git \" /proc/self/mountinfo | grep -c ' - overlay ' > mounted.out",
    );
    assert_eq!(printed(&w.ws().join("first.out")), "42", "{}", show(&out));
    assert_eq!(
        printed(&w.ws().join("mounted.out")),
        "1",
        "cargo's git cache is an overlay in the tree: {}",
        show(&out)
    );
    // The repository's objects land (libgit2 checks them against their names when it reads
    // them); its checkout, which cargo would build without a check, stays in the run's layer.
    let db = std::fs::read_dir(w.home().join(".cargo/git/db")).map_or(0, |d| d.count());
    assert_eq!(
        db,
        1,
        "the repository was added to the cache: {}",
        show(&out)
    );
    assert!(
        w.cached_source().is_empty(),
        "the checkout was not: {}",
        show(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not kept") && stderr.contains("checkouts (git checkouts"),
        "the run says what it did not keep: {stderr}"
    );

    // The person's own build, outside the wrapper, makes the checkout from the repository
    // the run added, offline.
    w.app("own");
    let out = w.run(
        None,
        "cargo build -q --offline --manifest-path own/Cargo.toml && own/target/debug/own > own.out",
    );
    assert_eq!(printed(&w.ws().join("own.out")), "42", "{}", show(&out));
    let cached = w.cached_source();
    assert_eq!(cached.len(), 1, "{}", show(&out));

    // The next run builds offline from the cache, and rewrites the cached source.
    w.app("second");
    let out = w.run(
        Some(true),
        "cargo build -q --offline --manifest-path second/Cargo.toml && \
         second/target/debug/second > second.out && python3 plant.py > plant.out",
    );
    assert_eq!(printed(&w.ws().join("second.out")), "42", "{}", show(&out));
    assert!(
        printed(&w.ws().join("plant.out")).starts_with("planted"),
        "the tree sees its own change: {}",
        show(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&cached[0]).unwrap(),
        "pub fn answer() -> u32 { 42 }\n",
        "the change landed"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("src/lib.rs (changed); not applied") && stderr.contains("ahp-wrap restore"),
        "{stderr}"
    );
    // Audited: the cache, and what was kept aside.
    let audit = std::fs::read_to_string(w.root.join("audit.jsonl")).unwrap();
    let kept = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| {
            e["payload"]["cache"]
                .as_str()
                .is_some_and(|c| c.ends_with(".cargo/git"))
                && e["payload"]["changed"].is_array()
        })
        .unwrap_or_else(|| panic!("no cache event audited: {audit}"));
    assert!(
        kept["payload"]["changed"]
            .to_string()
            .contains("src/lib.rs (changed)"),
        "{kept}"
    );
    // Nothing is left of the runs' layers once they are over (the guardian removes them
    // after the wrapper exits).
    let layers = w.home().join(".local/state/ahp-wrap/caches");
    let left = || std::fs::read_dir(&layers).map_or(0, |d| d.count());
    assert!(
        eventually(|| left() == 0, std::time::Duration::from_secs(5)),
        "layers left: {:?}",
        std::fs::read_dir(&layers).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );
    // A later build outside the wrapper compiles what the cache held.
    w.app("later");
    let out = w.run(
        None,
        "cargo build -q --offline --manifest-path later/Cargo.toml && later/target/debug/later > later.out",
    );
    assert_eq!(printed(&w.ws().join("later.out")), "42", "{}", show(&out));

    // Kept aside, applied on request.
    let records = w.kept_aside();
    assert_eq!(records.len(), 1, "{records:?}: {stderr}");
    let restore = Command::new(wrap_bin())
        .arg("restore")
        .arg(&records[0])
        .env("HOME", w.home())
        .output()
        .unwrap();
    assert!(restore.status.success(), "{restore:?}");
    assert!(std::fs::read_to_string(&cached[0]).unwrap().contains("666"));

    // Without the floor, the change lands and the later build compiles it.
    let w = World::new();
    w.app("first");
    let out = w.run(
        Some(false),
        "cargo build -q --manifest-path first/Cargo.toml && python3 plant.py > plant.out",
    );
    assert!(
        printed(&w.ws().join("plant.out")).starts_with("planted"),
        "{}",
        show(&out)
    );
    w.app("later");
    let out = w.run(
        None,
        "cargo build -q --offline --manifest-path later/Cargo.toml && later/target/debug/later > later.out",
    );
    assert_eq!(printed(&w.ws().join("later.out")), "666", "{}", show(&out));
}

/// A registry on 127.0.0.1 serving the packages packed in `dir`; killed when dropped.
struct Registry {
    child: std::process::Child,
    port: u16,
}

impl Registry {
    fn start(dir: &Path) -> Registry {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/fake_npm_registry.py"
        );
        let mut child = Command::new("python3")
            .arg(script)
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Registry {
            port: line.trim().parse().expect("the registry's port"),
            child,
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn npm_installs_from_a_registry_and_installs_again_offline_from_what_it_cached() {
    let w = World::new();
    // A package, packed as a registry serves it.
    let pkg = w.root.join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"floor-left","version":"1.0.0","main":"index.js"}"#,
    )
    .unwrap();
    std::fs::write(pkg.join("index.js"), "module.exports = 'left';\n").unwrap();
    let tarballs = w.root.join("tarballs");
    std::fs::create_dir_all(&tarballs).unwrap();
    let packed = Command::new("npm")
        .args(["pack", "-q", "--pack-destination"])
        .arg(&tarballs)
        .current_dir(&pkg)
        .env("HOME", w.home())
        .output()
        .unwrap();
    assert!(packed.status.success(), "{packed:?}");
    let registry = Registry::start(&tarballs);
    let url = format!("http://127.0.0.1:{}/", registry.port);

    let install = |dir: &str, extra: &str| {
        format!(
            "mkdir -p {dir} && cd {dir} && echo '{{\"name\":\"{dir}\",\"version\":\"1.0.0\"}}' \
             > package.json && npm install -q --no-audit --no-fund --registry {url} {extra} \
             floor-left && node -e 'console.log(require(\"floor-left\"))' > ../{dir}.out"
        )
    };
    // Beside the install, the tree puts a package where a later `npx floor-left` would run
    // it from without fetching or checking it (npx's directory in npm's cache).
    let npx = "python3 -c \"import os; d = os.path.expanduser('~/.npm/_np' + 'x/0a1b2c3d/node_modules/floor-left'); os.makedirs(d); open(os.path.join(d, 'index.js'), 'w').write('evil')\"";
    let out = w.run(Some(true), &format!("{} && {npx}", install("one", "")));
    assert_eq!(printed(&w.ws().join("one.out")), "left", "{}", show(&out));
    assert!(
        w.home().join(".npm/_cacache/content-v2").is_dir(),
        "npm's cache kept what it fetched: {}",
        show(&out)
    );
    assert!(
        !w.home().join(".npm/_npx").exists(),
        "what the tree put in npx's directory did not land: {}",
        show(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not kept") && stderr.contains("_npx (packages npx installed"),
        "the run says what it did not keep: {stderr}"
    );
    drop(registry);

    // The registry is gone: only the cache the first run filled can serve it, to an install
    // and to `npm ci` from the lock file the first one wrote.
    let out = w.run(Some(true), &install("two", "--offline"));
    assert_eq!(printed(&w.ws().join("two.out")), "left", "{}", show(&out));
    let out = w.run(
        Some(true),
        "cp -r one three && cd three && rm -rf node_modules && npm ci -q --offline --no-audit \
         --no-fund && node -e 'console.log(require(\"floor-left\"))' > ../three.out",
    );
    assert_eq!(printed(&w.ws().join("three.out")), "left", "{}", show(&out));
    assert!(w.kept_aside().is_empty(), "npm changed nothing it had");
}

/// The overlays are mounted ahead, at start-up: the agent's process joins the mount
/// namespace the namespaces' maker made and mounted them in (it does not make its own), and
/// the guardian holds that namespace, so that its mounts come down after the run. Read from
/// `/proc`: the agent's mount namespace and the guardian's descriptors, while the agent runs.
#[test]
fn the_agent_joins_the_mount_namespace_made_ahead_and_the_guardian_holds_it() {
    let w = World::new();
    let mut child = w
        .command(
            Some(true),
            "readlink /proc/self/ns/mnt > ns.out && grep -c ' - overlay ' /proc/self/mountinfo \
             > overlays.out; sleep 30",
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (ns, overlays) = (w.ws().join("ns.out"), w.ws().join("overlays.out"));
    // Both written (the second a moment after the first) before the run is ended.
    assert!(
        eventually(
            || printed(&ns).starts_with("mnt:") && !printed(&overlays).is_empty(),
            Duration::from_secs(60)
        ),
        "the agent did not start"
    );
    let agents = printed(&ns);
    // The guardian: the wrapper's child that runs `ahp-wrap-hook guardian`.
    let wrapper = child.id();
    let children: Vec<u32> = std::fs::read_dir(format!("/proc/{wrapper}/task"))
        .unwrap()
        .flatten()
        .flat_map(|t| {
            std::fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter_map(|p| p.parse().ok())
        .collect();
    let guardian = children
        .iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"guardian"))
        })
        .expect("the wrapper's guardian");
    let held: Vec<String> = std::fs::read_dir(format!("/proc/{guardian}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .map(|l| l.display().to_string())
        .collect();
    // One overlay a cache of the run's plan (an empty or missing one too), as `policy
    // floor` lists them for the same home while the run lasts (a missing one the run made
    // is removed at its end, left empty).
    let floor = w
        .command(None, &format!("'{}' policy floor", wrap_bin().display()))
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&floor.stdout)
        .split("\ncaches (")
        .nth(1)
        .unwrap_or("")
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .count();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(wrapper as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
    assert!(listed >= 2, "{}", show(&floor));
    assert!(
        held.contains(&agents),
        "the guardian holds {held:?}, not the agent's {agents}"
    );
    assert_eq!(
        printed(&overlays),
        listed.to_string(),
        "each cache's overlay"
    );
}
