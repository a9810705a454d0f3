//! The floor made concrete for one run: which directories may be written, which paths are
//! bound read-only or hidden, and which protected paths do not exist yet.

use std::fmt;
use std::path::{Path, PathBuf};

use super::resolve::Resolver;
use super::spec::{CredentialSpec, Nested, Spec};
use crate::statefile::StateFile;

mod git;
pub mod made;
pub use git::git_hooks;

/// The temp directories every run may write (and `$TMPDIR`).
const TEMP: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// The temp directories of this machine and environment: `TEMP` and `$TMPDIR`.
pub fn temp_dirs() -> Vec<PathBuf> {
    let tmpdir = std::env::var_os("TMPDIR").filter(|v| !v.is_empty());
    TEMP.iter()
        .map(PathBuf::from)
        .chain(tmpdir.map(PathBuf::from))
        .collect()
}

/// Device files every program writes (`> /dev/null`) or opens for its terminal.
const DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// Package caches named by the tools' own variables (`$CARGO_HOME/registry`, ...), added
/// to the policy's `writable` list when set.
const ENV_CACHES: [(&str, &str); 8] = [
    ("CARGO_HOME", "registry"),
    ("CARGO_HOME", "git"),
    ("GOMODCACHE", ""),
    ("GOCACHE", ""),
    ("npm_config_cache", ""),
    ("PIP_CACHE_DIR", ""),
    ("UV_CACHE_DIR", ""),
    ("XDG_CACHE_HOME", ""),
];

/// The caches `ENV_CACHES` names in this environment.
pub fn env_caches() -> Vec<PathBuf> {
    ENV_CACHES
        .iter()
        .filter_map(|(var, sub)| {
            let base = std::env::var_os(var).filter(|v| !v.is_empty())?;
            let base = PathBuf::from(base);
            base.is_absolute().then(|| base.join(sub))
        })
        .collect()
}

/// What one run's floor starts from.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The workspace (`--workspace`, else the current directory).
    pub workspace: PathBuf,
    /// The home directory `~` means.
    pub home: PathBuf,
    /// Where the agent keeps its own state (declared by its shim).
    pub agent_state: Vec<PathBuf>,
    /// Never written besides the spec's `read_only`: the agent's own settings and hooks
    /// (declared by its shim), the wrapper's files (executables, run directory, audit log).
    pub protected: Vec<PathBuf>,
    /// The temp directories ([`temp_dirs`]).
    pub temp: Vec<PathBuf>,
    /// Package caches the environment names ([`env_caches`]).
    pub caches: Vec<PathBuf>,
    /// The agent's mixed state files (declared by its shim and this run's injection).
    pub mixed: Vec<StateFile>,
    /// Protected directories made, empty, when missing (declared by its shim).
    pub protected_dirs: Vec<PathBuf>,
    /// Paths relative to the workspace that are protected (declared by its shim).
    pub project: Vec<PathBuf>,
    /// Create the state and cache directories that are missing (a run does; printing the
    /// floor does not).
    pub create_missing: bool,
}

/// The floor of one run, every path absolute and (where it exists) canonical.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Directories written beneath (Landlock), and the device files below.
    pub writable: Vec<PathBuf>,
    /// The package caches among them (none beneath another writable root): each is an
    /// overlay in the tree's mount namespace ([`Plan::overlays`]), whose new entries the run
    /// adds to the cache at its end; a change to an entry that was there is kept aside.
    pub caches: Vec<PathBuf>,
    /// Writable roots beneath a cache (an agent's state in `~/.cache`): the directory itself
    /// bound over the overlay's view of it, written in place.
    pub through: Vec<PathBuf>,
    /// The layers the run made for [`Plan::caches`] (none where the kernel cannot mount an
    /// overlay in a user namespace: the caches are then written in place).
    pub overlays: Vec<Overlay>,
    /// The device files the tree may write (`/dev/null`, `/dev/tty`, `/dev/ptmx`, …), those
    /// of a fixed list that exist on this machine.
    pub devices: Vec<PathBuf>,
    /// Directories between a writable root and a read-only path, bound onto themselves so
    /// that they cannot be renamed away (and replaced) while the run lasts.
    pub pinned: Vec<PathBuf>,
    /// Bound read-only: protected paths beneath a writable directory.
    pub read_only: Vec<PathBuf>,
    /// Writable directories beneath a read-only path (an agent's overlay in the run
    /// directory, when that lies in a temp directory): bound writable again over it.
    pub reopened: Vec<PathBuf>,
    /// Mounted over with something empty and read-only: never read.
    pub hidden: Vec<PathBuf>,
    /// Protected paths beneath a writable directory that do not exist yet: nothing can be
    /// bound over them, so the run looks at them again at its end.
    pub absent: Vec<PathBuf>,
    /// The agent's mixed state files whose directory exists (each `path` with symlinks
    /// resolved; never one beneath a hidden path): what the agent changes in them is sorted
    /// key by key at the end (a file outside the writable roots through a private copy bound
    /// over it, [`Plan::copies`]).
    pub mixed: Vec<StateFile>,
    /// The private copies the run made of [`Plan::mixed`] files: each bound writable over
    /// its file (the file itself is no writable root).
    pub copies: Vec<Copy>,
    /// The network part (`[floor.net]`), when asked for: whether loopback TCP reaches this
    /// machine's services.
    pub net: Option<NetPlan>,
    /// Whether a process of the tree may make a user and mount namespace of its own (a
    /// sandbox of its own: bubblewrap, the agent's): the writes outside the writable roots
    /// are then refused by read-only mounts (`EROFS`) rather than by Landlock (`EACCES`),
    /// where the kernel allows it (docs/floor.md, "Sandboxes inside the floor").
    pub nested: bool,
}

/// A mixed state file and the run's private copy of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    /// The file the agent names.
    pub file: PathBuf,
    /// The copy bound over it.
    pub copy: PathBuf,
}

/// A cache and the run's layer of changes over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    /// The cache (the overlay's lower layer and its mount point).
    pub cache: PathBuf,
    /// What the tree wrote (the overlay's upper layer).
    pub upper: PathBuf,
    /// The overlay's work directory, beside `upper`.
    pub work: PathBuf,
}

impl Overlay {
    /// The options of this overlay's mount (its layers, in a user namespace, unsynced).
    pub fn options(&self) -> Vec<u8> {
        let mut options = b"lowerdir=".to_vec();
        options.extend(self.cache.as_os_str().as_encoded_bytes());
        options.extend(b",upperdir=");
        options.extend(self.upper.as_os_str().as_encoded_bytes());
        options.extend(b",workdir=");
        options.extend(self.work.as_os_str().as_encoded_bytes());
        // volatile: no sync of the upper layer's file system (its unmount would wait for one);
        // a run that did not end cleanly never merges its layer anyway.
        options.extend(b",userxattr,volatile");
        options
    }
}

/// The network part of a plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetPlan {
    /// Whether the tree may connect over TCP to this machine's loopback services
    /// (`[floor.net] loopback`, default `true`).
    pub loopback: bool,
    /// Where the tree's TCP listeners are published.
    pub publish: super::spec::Publishing,
}

/// Of `caches`, those a run overlays: a cache beneath another writable root is written as
/// that root is, one beneath another cache is part of it. An empty cache is overlaid too:
/// what the tree adds to it is decided at the end like any addition (an `_npx` package put
/// in a fresh `~/.npm` would otherwise be trusted by every later `npx`).
fn overlaid(caches: &[PathBuf], writable: &[PathBuf], paths: &mut Resolver) -> Vec<PathBuf> {
    let mut caches: Vec<PathBuf> = caches.iter().filter_map(|d| paths.dir(d)).collect();
    dedup(&mut caches);
    let outer = caches.clone();
    caches.retain(|c| {
        !writable.iter().any(|w| c.starts_with(w))
            && !outer.iter().any(|o| o != c && c.starts_with(o))
    });
    caches
}

/// The caches [`Plan::new`] will overlay for a run in `ws` under `spec`, told before the
/// agent is known, for the mount namespace made ahead (`NamespaceReceiver::ask_overlays` in
/// `crates/confine`): found by the plan's own steps, without the agent's state directories
/// among the writable roots (none holds a cache), making a missing cache where its parent
/// exists as the plan does. Where the plan finds otherwise,
/// its list differs and the namespace made ahead is not used.
pub fn caches_ahead(spec: &Spec, home: &Path, ws: &Path) -> Vec<PathBuf> {
    let cx = Context {
        workspace: ws.to_owned(),
        home: home.to_owned(),
        temp: temp_dirs(),
        caches: env_caches(),
        create_missing: true,
        ..Context::default()
    };
    roots(spec, &cx, &mut Resolver::default()).caches
}

/// A run's writable roots and caches, resolved: what [`Plan::new`] starts from.
struct Roots {
    ws: PathBuf,
    home: PathBuf,
    /// The workspace, the temp directories, `/dev/pts`, the agent's state and the spec's
    /// `writable`: those that exist.
    writable: Vec<PathBuf>,
    /// The caches overlaid.
    caches: Vec<PathBuf>,
}

/// The roots `spec` asks for the run `cx` describes. Creates the agent's state directories
/// and the spec's writable ones and caches when missing and their parent exists, when `cx`
/// says so (a rule needs a directory to hold on to).
fn roots(spec: &Spec, cx: &Context, paths: &mut Resolver) -> Roots {
    let ws = paths.canonical(&cx.workspace);
    let home = paths.canonical(&cx.home);
    let mut writable = vec![ws.clone()];
    writable.extend(cx.temp.iter().cloned());
    writable.push(PathBuf::from("/dev/pts"));
    let listed = spec.writable(&home, &ws);
    let mut caches = spec.caches(&home, &ws);
    caches.extend(cx.caches.iter().cloned());
    // The agent's own state is made with its missing parents beneath the home (a fresh
    // home has no `~/.local/share` for an agent that keeps its state there; the agent
    // would make it, and cannot on the floor); a cache only where its parent exists.
    // Those made are removed at the run's end when still empty (`made`).
    for dir in &cx.agent_state {
        if cx.create_missing && !dir.exists() && dir.starts_with(&cx.home) && cx.home.is_dir() {
            made::make_all(dir);
        }
    }
    for dir in cx.agent_state.iter().chain(&listed).chain(&caches) {
        if cx.create_missing && !dir.exists() && dir.parent().is_some_and(Path::is_dir) {
            made::make(dir);
        }
    }
    writable.extend(cx.agent_state.iter().chain(&listed).cloned());
    let mut writable: Vec<PathBuf> = writable.iter().filter_map(|d| paths.dir(d)).collect();
    dedup(&mut writable);
    let caches = overlaid(&caches, &writable, paths);
    Roots {
        ws,
        home,
        writable,
        caches,
    }
}

/// What only the run knows of its floor, beside its spec and [`Context`]: what
/// [`Plan::for_run`] adds to [`Plan::new`]'s plan.
pub struct RunInputs<'a> {
    /// Directories the tree never reads besides the spec's `hidden`, canonical (the
    /// checkpoints' store, which holds copies of other workspaces' files).
    pub hidden: Vec<PathBuf>,
    /// The credentials declared for this run besides the spec's (`--credential`): a file one
    /// is read from is hidden from the tree, as a secret is.
    pub credentials: &'a [CredentialSpec],
    /// Makes the private directory the caches' layers lie in, called only when the plan has
    /// a cache (`None` when it cannot be made).
    pub layers: &'a dyn Fn() -> Option<PathBuf>,
    /// `--nested-sandboxes`, over the spec's `nested_sandboxes`.
    pub nested: Option<Nested>,
    /// Whether the agent starts a sandbox of its own (its shim's answer, for `auto`), asked
    /// only when the setting is `auto`.
    pub own_sandbox: &'a dyn Fn() -> bool,
}

impl Plan {
    /// The whole floor of one run: [`Plan::new`]'s, with what only the run knows
    /// ([`RunInputs`]): its hidden directories, the files its credentials are read from
    /// (hidden unless a writable root lies beneath them), the caches' layers (bound
    /// read-only where they lie beneath a writable root), and whether the tree may start
    /// sandboxes of its own. Also the layers' directory, when the plan made one.
    pub fn for_run(spec: &Spec, cx: &Context, run: &RunInputs<'_>) -> (Plan, Option<PathBuf>) {
        let mut plan = Plan::new(spec, cx);
        plan.hidden.extend(run.hidden.iter().cloned());
        // The caches' layers lie out of the tree's reach; made only when a cache needs one.
        let layers = match plan.caches.is_empty() {
            true => None,
            false => (run.layers)(),
        };
        if let Some(dir) = &layers {
            if plan.writable.iter().any(|w| dir.starts_with(w)) {
                plan.read_only.push(dir.clone());
            }
        }
        // The point of a placeholder is that the tree never holds the value.
        for c in spec.credentials.iter().flatten().chain(run.credentials) {
            let Some(file) = &c.from_file else { continue };
            let path = crate::spec::resolve(file, &cx.home, &cx.workspace);
            if let Ok(real) = path.canonicalize() {
                if !plan.hidden.contains(&real)
                    && !plan.writable.iter().any(|w| w.starts_with(&real))
                {
                    plan.hidden.push(real);
                }
            }
        }
        plan.nested = match run.nested.or(spec.nested_sandboxes) {
            Some(Nested::On) => true,
            Some(Nested::Off) => false,
            None | Some(Nested::Auto) => (run.own_sandbox)(),
        };
        (plan, layers)
    }

    /// The floor `spec` asks for, for the run `cx` describes. Creates the agent's state
    /// directories and the spec's writable ones when missing and their parent exists (a
    /// rule needs a directory to hold on to).
    pub fn new(spec: &Spec, cx: &Context) -> Plan {
        let mut paths = Resolver::default();
        let Roots {
            ws,
            home,
            mut writable,
            caches,
        } = roots(spec, cx, &mut paths);
        let through = writable
            .iter()
            .filter(|w| caches.iter().any(|c| w.starts_with(c)))
            .cloned()
            .collect();
        writable.extend(caches.iter().cloned());
        let devices = DEVICES
            .iter()
            .map(PathBuf::from)
            .filter(|d| d.exists())
            .collect();

        // What exists of it; never what would hide the work itself.
        let hidden: Vec<PathBuf> = spec
            .hidden(&home, &ws)
            .iter()
            .filter_map(|p| match paths.look(p) {
                (h, Some(_)) => Some(h),
                (_, None) => None,
            })
            .filter(|h| !writable.iter().any(|w| w.starts_with(h)))
            .collect();

        // Where the parent exists: the run makes the file itself if need be (an empty table),
        // as a place to bind the copy over.
        let mut mixed: Vec<StateFile> = Vec::new();
        for declared in &cx.mixed {
            let p = &declared.path;
            let Some((dir, Some(true))) = p.parent().map(|d| paths.look(d)) else {
                continue;
            };
            let Some(name) = p.file_name() else { continue };
            let (path, Some(false) | None) = paths.look(&dir.join(name)) else {
                continue; // a directory
            };
            if !hidden.iter().any(|h| path.starts_with(h)) && !mixed.iter().any(|m| m.path == path)
            {
                mixed.push(StateFile {
                    path,
                    ..declared.clone()
                });
            }
        }

        // What the policy lets the agent write although its shim or the policy protects it.
        let keep: Vec<PathBuf> = spec
            .keep(&home, &ws)
            .iter()
            .map(|k| paths.look(k).0)
            .collect();
        let kept = |p: &Path| keep.iter().any(|k| p.starts_with(k));
        for dir in &cx.protected_dirs {
            let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
                continue;
            };
            // Looked at through its parent: what is looked at is remembered as it is now.
            if cx.create_missing
                && !dir.exists()
                && parent.is_dir()
                && !kept(&paths.look(parent).0.join(name))
            {
                made::make(dir);
            }
        }
        let project: Vec<PathBuf> = cx.project.iter().map(|p| ws.join(p)).collect();

        let mut read_only = Vec::new();
        let mut absent = Vec::new();
        let mut pinned = Vec::new();
        let protected = spec.read_only(&home, &ws);
        let protected = protected
            .iter()
            .chain(&cx.protected)
            .chain(&cx.protected_dirs)
            .chain(&project);
        for p in protected {
            let (p, exists) = paths.look(p);
            if mixed.iter().any(|m| m.path == p) || kept(&p) {
                continue; // written through its copy, merged key by key; or the agent's
            }
            let Some(root) = writable
                .iter()
                .filter(|w| p.starts_with(w))
                .max_by_key(|w| w.as_os_str().len())
            else {
                continue; // not writable anyway
            };
            if hidden.iter().any(|h| p.starts_with(h)) {
                continue;
            }
            if exists.is_some() {
                let mut between = p.parent();
                while let Some(dir) = between.filter(|d| d != root && d.starts_with(root)) {
                    pinned.push(dir.to_owned());
                    between = dir.parent();
                }
                read_only.push(p);
            } else {
                absent.push(p);
            }
        }
        dedup(&mut read_only);
        dedup(&mut absent);
        dedup(&mut pinned);
        // Shallow first: a directory is pinned before what is bound beneath it.
        pinned.sort_by_key(|p| p.components().count());
        let reopened = writable
            .iter()
            .filter(|w| read_only.iter().any(|r| w.starts_with(r) && *w != r))
            .cloned()
            .collect();
        Plan {
            writable,
            caches,
            through,
            overlays: Vec::new(),
            devices,
            pinned,
            read_only,
            reopened,
            hidden,
            absent,
            mixed,
            copies: Vec::new(),
            net: spec.net.enabled().then(|| NetPlan {
                loopback: spec.net.loopback(),
                publish: spec.net.publish(),
            }),
            nested: spec.nested_sandboxes == Some(Nested::On),
        }
    }

    /// The protected paths that were absent at the start and are there now (an empty
    /// directory does not count: agents make their own), each reached without following a
    /// link; where a link lies on the way instead (`proj/.claude` made a link to
    /// `~/.claude`), that link: the tree made it (the path was resolved at the start), and a
    /// later session would read the protected path through it.
    pub fn appeared(&self) -> Vec<Appeared> {
        let mut out: Vec<Appeared> = Vec::new();
        for p in &self.absent {
            let found = match crate::beneath::kind(p) {
                Ok(Some(crate::beneath::FileType::Directory)) => std::fs::read_dir(p)
                    .is_ok_and(|mut d| d.next().is_some())
                    .then(|| Appeared::Path(p.clone())),
                Ok(Some(_)) => Some(Appeared::Path(p.clone())),
                Ok(None) => None,
                Err(crate::beneath::Refused::Link(link)) => Some(Appeared::Link {
                    link,
                    protected: p.clone(),
                }),
                Err(_) => None,
            };
            if let Some(a) = found {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
        out
    }
}

/// A protected path found at the end of a run where there was none at its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Appeared {
    /// The path itself.
    Path(PathBuf),
    /// A symbolic link on the way to it, made during the run.
    Link {
        /// The link.
        link: PathBuf,
        /// The protected path it leads to.
        protected: PathBuf,
    },
}

impl Appeared {
    /// What is moved aside: the path, or the link (never what it points at).
    pub fn moved(&self) -> &Path {
        match self {
            Appeared::Path(p) => p,
            Appeared::Link { link, .. } => link,
        }
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = |title: &str, paths: &[PathBuf]| -> fmt::Result {
            writeln!(f, "{title}:")?;
            if paths.is_empty() {
                writeln!(f, "  (none)")?;
            }
            for p in paths {
                writeln!(f, "  {}", p.display())?;
            }
            Ok(())
        };
        let writable: Vec<PathBuf> = self
            .writable
            .iter()
            .filter(|w| !self.caches.contains(w))
            .cloned()
            .collect();
        list("writable (and everything beneath)", &writable)?;
        list(
            "caches (new entries kept; an existing entry never changed or removed)",
            &self.caches,
        )?;
        list("writable device files", &self.devices)?;
        list("never written (bound read-only)", &self.read_only)?;
        list("pinned (cannot be renamed away)", &self.pinned)?;
        list("writable again beneath a read-only path", &self.reopened)?;
        list("never read (hidden)", &self.hidden)?;
        list(
            "protected but absent (checked again at the end)",
            &self.absent,
        )?;
        let mixed: Vec<PathBuf> = self.mixed.iter().map(|m| m.path.clone()).collect();
        list(
            "mixed state files (the agent's own keys merged at the end, instructions kept \
             aside)",
            &mixed,
        )?;
        match &self.net {
            Some(net) => writeln!(
                f,
                "network: only through the wrapper's egress proxy or by name through the \
                 tree's own resolver (each connection asked of the gate); this machine's \
                 loopback over TCP: {}",
                if net.loopback { "yes" } else { "no" }
            ),
            None => writeln!(f, "network: not confined ([floor.net] enabled = false)"),
        }
    }
}

fn dedup(v: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    v.retain(|p| seen.insert(p.clone()));
}

#[cfg(test)]
mod tests;
