//! The handshake answer: what a harness negotiated, read leniently but version-checked.

use serde_json::Value;

use super::Negotiated;

/// Reads the handshake answer; any 2.x harness is accepted.
pub(super) fn parse_handshake(result: &Value) -> Result<Negotiated, String> {
    let version = result
        .get("protocol_version")
        .and_then(Value::as_str)
        .ok_or("the handshake answer has no protocol_version")?;
    if version.split('.').next() != Some("2") {
        return Err(format!(
            "the harness speaks AHP {version}; ahp-wrap needs a 2.x harness"
        ));
    }
    let info = result.get("harness_info");
    let text = |v: Option<&Value>, key: &str| {
        v.and_then(|i| i.get(key))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let config = result.get("config");
    let number = |key: &str| config.and_then(|c| c.get(key)).and_then(Value::as_u64);
    Ok(Negotiated {
        protocol_version: version.to_owned(),
        harness_name: text(info, "name"),
        harness_version: text(info, "version"),
        capabilities: info
            .and_then(|i| i.get("capabilities"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        timeout_ms: number("timeout_ms").filter(|&t| t > 0),
        batch_size: number("batch_size").map(|n| n as usize),
        max_depth: number("max_depth").map(|n| n.min(u32::MAX as u64) as u32),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn handshake_accepts_any_2x_and_reads_config() {
        let n = parse_handshake(&json!({
            "protocol_version": "2.0",
            "harness_info": {"name": "h", "version": "1", "capabilities": ["batch"]},
            "config": {"timeout_ms": 500, "batch_size": 10, "max_depth": 3}
        }))
        .unwrap();
        assert_eq!(n.timeout_ms, Some(500));
        assert_eq!(n.batch_size, Some(10));
        assert_eq!(n.max_depth, Some(3));
        assert_eq!(n.capabilities, ["batch"]);
        assert!(parse_handshake(&json!({"protocol_version": "3.0"})).is_err());
        assert!(parse_handshake(&json!({})).is_err());
    }
}
