//! The capability declaration (HCP L3): a TOML file naming what a worker offers, its
//! input and output contract, its risk ceiling and its operational constraints.
//!
//! ```toml
//! name = "fix-tests"
//! description = "Fixes the failing tests of a checkout"
//! risk_ceiling = "R2"           # tasks declaring R3..R5 are refused
//!
//! [input_schema]                # a JSON-Schema subset (see `Schema`)
//! type = "object"
//! required = ["repo"]
//! properties.repo.type = "string"
//!
//! [output_schema]
//! type = "object"
//!
//! [constraints]
//! max_data_class = "T2"         # T1 public .. T4 restricted
//! hazards = ["filesystem-write"]  # hazard categories a task may declare
//! max_duration_secs = 600       # a longer run is stopped and reported aborted
//! ```
//!
//! Unknown fields anywhere are an error: a ceiling misspelt must not silently not apply.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An HCP risk level, R1 (lowest) to R5 (highest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Risk {
    /// The lowest level; what `task submit` declares unless `--risk` says otherwise.
    R1,
    /// Level 2 of 5: refused by a capability whose ceiling is `R1`.
    R2,
    /// Level 3 of 5: refused by a capability whose ceiling is `R1` or `R2`.
    R3,
    /// Level 4 of 5: taken only by a capability whose ceiling is `R4` or `R5`.
    R4,
    /// The highest level: taken only by a capability whose ceiling is `R5`.
    R5,
}

/// An HCP data classification, T1 (public) to T4 (restricted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DataClass {
    /// Public data; the default for a task and for `max_data_class`.
    #[default]
    T1,
    /// Class 2 of 4, above public: needs `max_data_class` of `T2` or more.
    T2,
    /// Class 3 of 4: needs `max_data_class` of `T3` or `T4`.
    T3,
    /// Restricted data, the most sensitive class: needs `max_data_class = "T4"`.
    T4,
}

/// A capability, as declared.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Capability {
    /// What tasks name to reach this worker; also the routing key and the queue's suffix
    /// (`hcp.task.<name>`). A plain name: 1 to 128 letters, digits, `-`, `_`, `.`, `:`.
    pub name: String,
    /// Free text for people reading the file; required, but the worker does not act on it.
    pub description: String,
    /// The highest risk a task may declare; a task above it is refused at L3.
    pub risk_ceiling: Risk,
    /// What a task's `input` must fit; `None` accepts any JSON object.
    #[serde(default)]
    pub input_schema: Option<Schema>,
    /// What the agent writes to `$HCP_OUTPUT_FILE` must fit, else the task is `failed`;
    /// `None` checks nothing.
    #[serde(default)]
    pub output_schema: Option<Schema>,
    /// Limits on data class, hazards and duration; the `[constraints]` table (optional).
    #[serde(default)]
    pub constraints: Constraints,
}

/// Operational constraints every task of the capability runs under.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    /// The most sensitive data class a task may carry (default T1: public data only).
    #[serde(default)]
    pub max_data_class: DataClass,
    /// The hazard categories a task may declare; any other is refused.
    #[serde(default)]
    pub hazards: Vec<String>,
    /// The longest a task may run; then it is stopped and reported aborted.
    #[serde(default)]
    pub max_duration_secs: Option<u64>,
}

/// The JSON-Schema subset a capability's contract is written in: `type`, `required`,
/// `properties`, `additionalProperties` (a boolean), `items`, `enum`, and the annotations
/// `title` and `description`. Any other keyword is an error when the file loads.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Schema {
    /// The `type` keyword: one JSON type name (`object`, `array`, `string`, `number`,
    /// `integer`, `boolean`, `null`); `None` allows any type.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Keys an object value must have; ignored for other values.
    #[serde(default)]
    pub required: Vec<String>,
    /// The schema each named key of an object value must fit.
    #[serde(default)]
    pub properties: BTreeMap<String, Schema>,
    /// `additionalProperties`: `Some(false)` refuses keys not in `properties`; `None` or
    /// `Some(true)` allows them unchecked.
    #[serde(default, rename = "additionalProperties")]
    pub additional_properties: Option<bool>,
    /// The schema every element of an array value must fit; `None` checks no elements.
    #[serde(default)]
    pub items: Option<Box<Schema>>,
    /// The `enum` keyword: the value must equal one of these; `None` allows any value.
    #[serde(default, rename = "enum")]
    pub one_of_values: Option<Vec<Value>>,
    /// Annotation only: never checked.
    #[serde(default)]
    pub title: Option<String>,
    /// Annotation only: never checked.
    #[serde(default)]
    pub description: Option<String>,
}

const TYPES: [&str; 7] = [
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Why a capability file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CapabilityError {
    /// The file cannot be read.
    #[error("failed to read capability file {path}")]
    Read {
        /// The file, as displayed.
        path: String,
        /// The read's error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not TOML of the declaration's shape (an unknown field included).
    #[error("capability file {path} is invalid")]
    Parse {
        /// The file, as displayed.
        path: String,
        /// The TOML parser's error, which names the place.
        #[source]
        source: toml::de::Error,
    },
    /// The file parses but fails [`Capability::check`] (a bad name, an unknown schema type).
    #[error("capability file {path}: {why}")]
    Invalid {
        /// The file, as displayed.
        path: String,
        /// What is wrong, with where (`input_schema: properties.x: …`).
        why: String,
    },
}

impl Capability {
    /// Reads and checks a capability file.
    pub fn load(path: &Path) -> Result<Capability, CapabilityError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| CapabilityError::Read {
            path: shown.clone(),
            source,
        })?;
        let cap: Capability = toml::from_str(&text).map_err(|source| CapabilityError::Parse {
            path: shown.clone(),
            source,
        })?;
        cap.check()
            .map_err(|why| CapabilityError::Invalid { path: shown, why })?;
        Ok(cap)
    }

    /// What `load` checks beyond the shape: a usable name, valid schemas.
    pub(crate) fn check(&self) -> Result<(), String> {
        if !super::is_name(&self.name) {
            return Err(format!(
                "name {:?} is not a plain name (1 to 128 letters, digits, - _ . :)",
                self.name
            ));
        }
        for (what, schema) in [
            ("input", &self.input_schema),
            ("output", &self.output_schema),
        ] {
            if let Some(s) = schema {
                s.check().map_err(|e| format!("{what}_schema: {e}"))?;
            }
        }
        Ok(())
    }
}

impl Schema {
    fn check(&self) -> Result<(), String> {
        if let Some(k) = &self.kind {
            if !TYPES.contains(&k.as_str()) {
                return Err(format!("unknown type {k:?} (known: {})", TYPES.join(", ")));
            }
        }
        for (name, sub) in &self.properties {
            sub.check().map_err(|e| format!("properties.{name}: {e}"))?;
        }
        if let Some(items) = &self.items {
            items.check().map_err(|e| format!("items: {e}"))?;
        }
        Ok(())
    }

    /// Checks `value`; the error names the first place that does not fit.
    pub fn validate(&self, value: &Value) -> Result<(), String> {
        self.validate_at(value, "$")
    }

    fn validate_at(&self, value: &Value, at: &str) -> Result<(), String> {
        if let Some(kind) = &self.kind {
            if !has_type(value, kind) {
                return Err(format!("{at} is not of type {kind}"));
            }
        }
        if let Some(allowed) = &self.one_of_values {
            if !allowed.contains(value) {
                return Err(format!("{at} is not one of the allowed values"));
            }
        }
        if let Value::Object(map) = value {
            for name in &self.required {
                if !map.contains_key(name) {
                    return Err(format!("{at}.{name} is required"));
                }
            }
            for (name, v) in map {
                match self.properties.get(name) {
                    Some(sub) => sub.validate_at(v, &format!("{at}.{name}"))?,
                    None if self.additional_properties == Some(false) => {
                        return Err(format!("{at}.{name} is not allowed"))
                    }
                    None => {}
                }
            }
        }
        if let (Value::Array(items), Some(schema)) = (value, &self.items) {
            for (i, v) in items.iter().enumerate() {
                schema.validate_at(v, &format!("{at}[{i}]"))?;
            }
        }
        Ok(())
    }
}

fn has_type(value: &Value, kind: &str) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FILE: &str = r#"
name = "fix-tests"
description = "Fixes tests"
risk_ceiling = "R2"
[input_schema]
type = "object"
required = ["repo"]
additionalProperties = false
properties.repo.type = "string"
properties.tries = { type = "integer" }
[constraints]
max_data_class = "T2"
hazards = ["filesystem-write"]
max_duration_secs = 60
"#;

    fn parse(text: &str) -> Result<Capability, String> {
        let cap: Capability = toml::from_str(text).map_err(|e| e.to_string())?;
        cap.check()?;
        Ok(cap)
    }

    #[test]
    fn a_full_declaration_loads() {
        let cap = parse(FILE).unwrap();
        assert_eq!(cap.risk_ceiling, Risk::R2);
        assert_eq!(cap.constraints.max_data_class, DataClass::T2);
        assert_eq!(cap.constraints.max_duration_secs, Some(60));
    }

    #[test]
    fn unknown_fields_and_keywords_are_errors() {
        let misspelt = FILE.replace("risk_ceiling", "risk_cieling");
        assert!(parse(&misspelt).unwrap_err().contains("risk_cieling"));
        let keyword = FILE.replace("additionalProperties = false", "minLength = 3");
        assert!(parse(&keyword).unwrap_err().contains("minLength"));
        let constraint = FILE.replace("max_duration_secs", "max_duration");
        assert!(parse(&constraint).is_err());
        let risk = FILE.replace("\"R2\"", "\"R9\"");
        assert!(parse(&risk).is_err());
        let name = FILE.replace("fix-tests", "fix tests");
        assert!(parse(&name).unwrap_err().contains("plain name"));
        let kind = FILE.replace("type = \"integer\"", "type = \"int\"");
        assert!(parse(&kind).unwrap_err().contains("unknown type"));
    }

    #[test]
    fn the_schema_subset_validates() {
        let schema = parse(FILE).unwrap().input_schema.unwrap();
        assert!(schema.validate(&json!({"repo": "x", "tries": 2})).is_ok());
        assert_eq!(
            schema.validate(&json!({})).unwrap_err(),
            "$.repo is required"
        );
        assert!(schema
            .validate(&json!({"repo": 1}))
            .unwrap_err()
            .contains("$.repo is not of type string"));
        assert!(schema
            .validate(&json!({"repo": "x", "other": 1}))
            .unwrap_err()
            .contains("not allowed"));
        assert!(schema.validate(&json!("x")).is_err());
    }

    #[test]
    fn levels_are_ordered() {
        assert!(Risk::R1 < Risk::R5);
        assert!(DataClass::T4 > DataClass::T2);
    }
}
