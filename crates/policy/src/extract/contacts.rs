//! What a call will contact: the network URLs under its arguments' URL-named keys (`url`,
//! `uri`, `href`, `endpoint` and names ending in them), as opposed to URLs a text merely
//! mentions.

use serde_json::Value;

use super::{keys, parse_url};
use ahp_wrap_wire::protocol::Event;

/// The hosts the tool of `event` would contact (as the facts' `contacts` hold them, without
/// the rest of the facts): what a person who allowed the call allowed it to reach.
pub fn contacted_hosts(event: &Event) -> Vec<String> {
    let payload = &event.payload;
    let Some(args) = ["arguments", "tool_input", "input", "args"]
        .iter()
        .find_map(|k| payload.get(*k).filter(|v| v.is_object()))
    else {
        return Vec::new();
    };
    let snake = keys::has_camel_keys(args).then(|| keys::snake_keys(args));
    let mut urls = Vec::new();
    contacted_urls(snake.as_ref().unwrap_or(args), None, 0, &mut urls);
    // On this machine's loopback a port is what is approved (one port is not another),
    // whichever of its names the URL uses.
    urls.iter()
        .filter_map(|u| {
            let host = u.host_str()?;
            let loopback = ahp_wrap_floor::hosts::Target::parse(host)
                .is_some_and(|t| ahp_wrap_floor::hosts::is_loopback(&t));
            Some(match (loopback, u.port_or_known_default()) {
                (true, Some(port)) => format!("loopback:{port}"),
                _ => host.to_owned(),
            })
        })
        .collect()
}

/// The network URLs under the URL-named keys of `value` (`key` is the key it is under), to
/// a bounded depth.
pub(super) fn contacted_urls(
    value: &Value,
    key: Option<&str>,
    depth: usize,
    out: &mut Vec<url::Url>,
) {
    const MAX_DEPTH: usize = 16;
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::String(s) if key.is_some_and(names_a_url) => {
            out.extend(parse_url(s.trim()).filter(is_network));
        }
        Value::Array(items) => {
            for item in items {
                contacted_urls(item, key, depth + 1, out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                contacted_urls(v, Some(k), depth + 1, out);
            }
        }
        _ => {}
    }
}

/// Whether a URL reaches the network (not `file:`, `data:`, …).
pub(super) fn is_network(url: &url::Url) -> bool {
    matches!(url.scheme(), "http" | "https" | "ws" | "wss" | "ftp")
}

/// Whether an argument's name says its value is a URL to contact: `url`, `uri`, `href`,
/// `endpoint` and the names ending in them (`callback_url`, `redirect_uri`,
/// `api_endpoint`), singular or plural.
fn names_a_url(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let key = key.strip_suffix('s').unwrap_or(&key);
    ["url", "uri", "href", "endpoint"]
        .iter()
        .any(|end| key == *end || key.ends_with(&format!("_{end}")))
}
