//! A policy file read and checked ([`Checked`]), the default policy it may extend built only
//! when [`Checked::build`] is called: a run checks its `--policy` file before the agent starts
//! and builds it once the agent has started.

use ahp_wrap_floor::hosts::HostRules;

use crate::error::PolicyError;
use crate::rules::{RawPolicy, Rule, Settings};
use crate::{examples, hosts};

/// The default policy, compiled in.
pub(crate) const DEFAULT_TOML: &str = include_str!("default.toml");

/// A policy file read and checked, the default policy it extends not built yet (see
/// [`Policy::check_file`](crate::Policy::check_file); [`Checked::build`], beside the engine in
/// the crate root, builds it).
#[derive(Debug)]
pub struct Checked {
    /// Its own rules, compiled.
    pub(crate) own: Vec<Rule>,
    /// It extends the default policy.
    pub(crate) extends: bool,
    /// The default rules it leaves out (each one the default has).
    pub(crate) disable: Vec<String>,
    pub(crate) settings: Option<Settings>,
    pub(crate) hosts: Option<HostRules>,
}

impl Checked {
    /// Reads `text`; with `examples`, runs its rules' examples.
    pub(crate) fn read(text: &str, origin: &str, examples: bool) -> Result<Checked, PolicyError> {
        let raw: RawPolicy = toml::from_str(text).map_err(|source| PolicyError::Toml {
            origin: origin.to_owned(),
            source,
        })?;
        if let Some(v) = raw.version.filter(|v| *v != 1) {
            return Err(PolicyError::Version(v));
        }
        let hosts = hosts::host_rules(raw.floor.as_ref().map(|f| &f.net))?;
        let extends = match raw.extends.as_deref() {
            None if raw.disable.is_empty() => false,
            None => {
                return Err(PolicyError::Extends(
                    "`disable` names default rules, so it needs `extends = \"default\"`".into(),
                ))
            }
            Some("default") => {
                let ids = default_rule_ids()?;
                if let Some(id) = raw.disable.iter().find(|id| !ids.contains(id)) {
                    return Err(PolicyError::Extends(format!(
                        "`disable` names {id:?}, which is not a rule of the default policy \
                         (`ahp-wrap policy default` lists them)"
                    )));
                }
                true
            }
            Some(other) => {
                return Err(PolicyError::Extends(format!(
                    "extends = {other:?}: only \"default\" (the built-in policy) can be extended"
                )))
            }
        };
        let mut own: Vec<Rule> = Vec::with_capacity(raw.rules.len());
        for r in raw.rules {
            if own.iter().any(|x| x.id == r.id) {
                return Err(PolicyError::InvalidRule {
                    rule: r.id,
                    message: "the id is used by another rule".into(),
                });
            }
            own.push(Rule::compile(r)?);
        }
        if examples {
            let (_, failures) = examples::check(&own);
            if !failures.is_empty() {
                return Err(PolicyError::Examples(failures));
            }
        }
        Ok(Checked {
            own,
            extends,
            disable: raw.disable,
            settings: raw.settings,
            hosts,
        })
    }
}

/// The ids of the default policy's rules, read without compiling them.
fn default_rule_ids() -> Result<Vec<String>, PolicyError> {
    #[derive(serde::Deserialize)]
    struct Id {
        id: String,
    }
    #[derive(serde::Deserialize)]
    struct Ids {
        #[serde(default)]
        rule: Vec<Id>,
    }
    let ids: Ids = toml::from_str(DEFAULT_TOML).map_err(|source| PolicyError::Toml {
        origin: "(default)".into(),
        source,
    })?;
    Ok(ids.rule.into_iter().map(|r| r.id).collect())
}
