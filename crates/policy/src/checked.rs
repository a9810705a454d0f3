//! A policy file read and checked ([`Checked`]), the default policy it may extend built only
//! when [`Checked::build`] is called: a run checks its `--policy` file before the agent starts
//! and builds it once the agent has started.

use ahp_wrap_confine::floor::hosts::HostRules;

use crate::rules::{RawPolicy, Rule, Settings};
use crate::{examples, hosts, Policy, PolicyError, DEFAULT_TOML};

/// A policy file read and checked, the default policy it extends not built yet (see
/// [`Policy::check_file`]).
#[derive(Debug)]
pub struct Checked {
    /// Its own rules, compiled.
    own: Vec<Rule>,
    /// It extends the default policy.
    extends: bool,
    /// The default rules it leaves out (each one the default has).
    disable: Vec<String>,
    settings: Option<Settings>,
    hosts: Option<HostRules>,
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

    /// The policy: the default's rules first when it extends the default (less those it
    /// disables or replaces with a rule of the same id), then its own.
    pub fn build(self) -> Policy {
        let (mut rules, inherited, settings) = if self.extends {
            let base = Policy::default_policy();
            let mut rules = base.rules;
            rules.retain(|r| !self.disable.contains(&r.id));
            // A rule of this file with a default rule's id takes its place.
            rules.retain(|r| !self.own.iter().any(|own| own.id == r.id));
            let inherited = rules.len();
            (rules, inherited, self.settings.unwrap_or(base.settings))
        } else {
            (Vec::new(), 0, self.settings.unwrap_or_default())
        };
        rules.extend(self.own);
        Policy {
            rules,
            inherited,
            settings,
            hosts: self.hosts,
            ..Policy::allow_all()
        }
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
