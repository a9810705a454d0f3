//! The one [`Framework`] that carries out any manifest.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::shape::Reader;
use super::{json_table, render, Event, Manifest, Rendering, TimeUnit, ENV_SHIM};
use crate::frameworks::adapter::shared::settings::{
    append_hook_groups, command_group, write_private, SystemSettings,
};
use crate::frameworks::adapter::shared::timeout;
use crate::frameworks::adapter::{
    run_nonce, AgentCommand, AgentFiles, CallerReply, Final, Framework, FrameworkError,
    HookContext, Mapped, Proven, RunContext, Shim, StateFile,
};

/// A manifest, as a framework.
#[derive(Debug)]
pub(crate) struct ManifestShim {
    manifest: Manifest,
    /// The file it was loaded from; `None` when built in.
    file: Option<PathBuf>,
}

impl ManifestShim {
    /// A built-in manifest.
    pub(crate) fn new(manifest: Manifest) -> ManifestShim {
        ManifestShim {
            manifest,
            file: None,
        }
    }

    /// A manifest loaded from `file`: a run hands the path on to its agent (in
    /// `AHP_WRAP_SHIM`), so that a hook process can answer in the agent's terms even when
    /// the wrapper is gone.
    pub(crate) fn from_file(manifest: Manifest, file: PathBuf) -> ManifestShim {
        ManifestShim {
            manifest,
            file: Some(file),
        }
    }

    /// The checked manifest this shim carries out.
    pub(crate) fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    fn shim(&self) -> Shim {
        Shim {
            framework: self.manifest.name,
            agent: self.manifest.agent,
        }
    }

    fn event(&self, hook: &str) -> Option<&Event> {
        self.manifest.events.iter().find(|e| e.name == hook)
    }

    /// The settings the agent reads for this run: the file ours replaces (if any), with
    /// our hooks appended and the manifest's settings forced.
    fn settings(
        &self,
        run: &RunContext,
        base: Map<String, Value>,
    ) -> Result<Map<String, Value>, FrameworkError> {
        let inject = &self.manifest.inject;
        let shim = self.shim();
        let timeout = match inject.timeout_unit {
            TimeUnit::Seconds => timeout::hook_timeout_s(run),
            TimeUnit::Milliseconds => timeout::hook_timeout_ms(run),
        };
        let nonce = run_nonce();
        let mut groups = Vec::new();
        for event in &self.manifest.events {
            // Agents that read these files expand `$VAR` or hand the command to a shell.
            let command = shim.plain_hook_command(&run.self_exe, &nonce, event.name)?;
            let matcher = event.tool.then_some(inject.tool_matcher.as_str());
            groups.push((event.name, command_group(command, timeout, matcher)));
        }
        let mut settings = base;
        append_hook_groups(&mut settings, "the settings", groups)
            .map_err(|why| shim.prepare_error(why))?;
        settings.extend(json_table(&inject.set));
        Ok(settings)
    }

    /// A flag that turns the agent's hooks off, before any `--`.
    fn refused_flag(&self, cmd: &AgentCommand) -> Option<String> {
        let refused = &self.manifest.inject.refuse_flags;
        cmd.args
            .iter()
            .filter_map(|a| a.to_str())
            .take_while(|a| *a != "--")
            .find(|a| {
                refused.iter().any(|r| {
                    a.strip_prefix(r.as_str())
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
                })
            })
            .map(str::to_owned)
    }
}

impl Framework for ManifestShim {
    fn name(&self) -> &'static str {
        self.manifest.name
    }

    fn executables(&self) -> &'static [&'static str] {
        self.manifest.executables
    }

    fn packages(&self) -> &'static [&'static str] {
        self.manifest.packages
    }

    fn model_hosts(&self) -> &'static [&'static str] {
        self.manifest.model_hosts
    }

    fn model_url_env(&self) -> &'static [&'static str] {
        self.manifest.model_url_env
    }

    fn instruction_files(&self) -> &'static [&'static str] {
        self.manifest.instructions
    }

    fn model_url_files(&self, home: &Path) -> Vec<std::path::PathBuf> {
        self.manifest
            .model_url_files
            .iter()
            .map(|f| match f.strip_prefix("~/") {
                Some(rest) => home.join(rest),
                None => std::path::PathBuf::from(f),
            })
            .collect()
    }

    fn own_env(&self, _args: &[std::ffi::OsString]) -> Vec<String> {
        self.manifest
            .own_env
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    fn proven(&self) -> Option<Proven> {
        self.manifest.proven.map(|(from, to)| Proven { from, to })
    }

    fn agent_files(&self, home: &Path) -> AgentFiles {
        let files = &self.manifest.files;
        AgentFiles {
            state: files.state.iter().map(|p| home.join(p)).collect(),
            protected: files.protected.iter().map(|p| home.join(p)).collect(),
            protected_dirs: files.protected_dirs.iter().map(|p| home.join(p)).collect(),
            project: files.project.iter().map(Into::into).collect(),
            mixed: files
                .mixed
                .iter()
                .map(|m| StateFile {
                    path: home.join(&m.path),
                    format: m.format,
                    rules: m.keys.clone(),
                    other: m.other,
                    through: None,
                    lock: m.lock.as_ref().map(|l| home.join(l)),
                })
                .collect(),
        }
    }

    fn prepare(&self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
        let shim = self.shim();
        if let Some(flag) = self.refused_flag(cmd) {
            return Err(shim.prepare_error(format!(
                "{flag} would keep {} from loading the hooks this run injects, so the run \
                 could not be supervised",
                self.manifest.agent
            )));
        }
        let inject = &self.manifest.inject;
        if let Some(env) = &inject.env {
            // The variable names one file: the one it names already (else the one it
            // replaces, if any) is merged into ours.
            let system = SystemSettings {
                framework: self.manifest.name,
                env_settings: env,
                defaults: inject
                    .defaults_env
                    .as_deref()
                    .zip(inject.defaults_file.as_deref()),
                default_path: inject.replaces.as_deref(),
                file_name: inject.file.get_ref(),
            };
            let real = system.real_path();
            let base = match &real {
                Some(path) => system.read(path)?,
                None => Map::new(),
            };
            let merged = self.settings(run, base)?;
            system.install(run, cmd, real.as_deref(), merged)?;
        } else if let Some(flag) = &inject.flag {
            let settings = self.settings(run, Map::new())?;
            let path = write_private(run, inject.file.get_ref(), &Value::Object(settings))
                .map_err(|why| shim.prepare_error(why))?;
            cmd.args.splice(0..0, [flag.into(), path.into()]);
        }
        cmd.expect_hook = inject.expect_hook.clone();
        if let Some(file) = &self.file {
            cmd.env.push((ENV_SHIM.into(), with_file(file)));
        }
        Ok(())
    }

    fn map(&self, cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
        let event = self
            .event(cx.hook)
            .ok_or_else(|| self.shim().unknown_hook(cx.hook))?;
        let payload: Value = serde_json::from_slice(payload)?;
        let reader = Reader {
            manifest: &self.manifest,
            cx,
            payload: &payload,
        };
        Ok(Some(Mapped {
            event_type: event.ahp,
            payload: reader.payload(event.shape)?,
            framework_session: reader.session_id(),
        }))
    }

    fn render(
        &self,
        cx: &HookContext<'_>,
        _event: Option<&Mapped>,
        verdict: &Final,
    ) -> CallerReply {
        match self.event(cx.hook) {
            Some(event) => render::render(&self.manifest, event, verdict),
            None => render::unknown_hook(&self.manifest, verdict),
        }
    }

    fn native_ask(&self, cx: &HookContext<'_>) -> bool {
        self.event(cx.hook)
            .is_some_and(|e| matches!(e.ask, Rendering::Native(_)))
    }
}

/// `AHP_WRAP_SHIM` as it is, with `file` added.
fn with_file(file: &Path) -> OsString {
    let mut paths: Vec<PathBuf> = std::env::var_os(ENV_SHIM)
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    if !paths.iter().any(|p| p == file) {
        paths.push(file.to_owned());
    }
    std::env::join_paths(paths).unwrap_or_else(|_| file.as_os_str().to_owned())
}
