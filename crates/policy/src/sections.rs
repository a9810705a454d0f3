//! The sections a run reads on their own at start-up, before (and without) the whole policy:
//! `[floor]` here, `[checkpoints]` in `checkpoints`. The default policy's are read from JSON
//! that build.rs makes of `default.toml` when the crate is built; a policy file's, from its
//! TOML.

use std::path::Path;

use crate::error::PolicyError;

/// The default policy's `[checkpoints]` and `[floor]` sections, as JSON (read from
/// `default.toml` by build.rs): each run reads both at start-up.
pub(crate) const DEFAULT_CHECKPOINTS_JSON: &str =
    include_str!(concat!(env!("OUT_DIR"), "/default-checkpoints.json"));
const DEFAULT_FLOOR_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/default-floor.json"));

/// The floor a policy asks for: its `[floor]` section, each list it leaves out taken from the
/// default policy's; `None` for the default policy itself. Only that section is read (the
/// rules are compiled when the first event comes), so that start-up stays cheap.
#[allow(
    clippy::expect_used,
    reason = "the compiled-in default policy, whose [floor] section the tests read"
)]
pub fn floor_spec(file: Option<&Path>) -> Result<ahp_wrap_floor::Spec, PolicyError> {
    #[derive(serde::Deserialize)]
    struct FloorOnly {
        floor: Option<ahp_wrap_floor::Spec>,
    }
    // Read once a process: a run asks at start-up (for what is made ahead) and again when it
    // prepares its floor.
    static DEFAULT: std::sync::OnceLock<ahp_wrap_floor::Spec> = std::sync::OnceLock::new();
    let default = DEFAULT
        .get_or_init(|| {
            // Read into JSON when the crate was built (build.rs): a tenth of the time.
            let default: FloorOnly = serde_json::from_str(DEFAULT_FLOOR_JSON)
                .expect("the default [floor] section, read when the crate was built, reads");
            default
                .floor
                .expect("the default policy has a [floor] section")
        })
        .clone();
    let Some(path) = file else {
        return Ok(default);
    };
    let own: FloorOnly = read_section(path)?;
    Ok(match own.floor {
        Some(spec) => spec.or(&default),
        None => default,
    })
}

/// The policy file at `path` read as `T` (the one section a caller wants; the rest is
/// checked when the policy is loaded).
pub(crate) fn read_section<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, PolicyError> {
    let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|source| PolicyError::Toml {
        origin: path.display().to_string(),
        source,
    })
}
