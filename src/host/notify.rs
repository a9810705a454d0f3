//! `--notify-webhook URL`: each escalation posted as Slack-compatible JSON (`{"text": …}`)
//! with a link to the approvals page. Best effort: a failed post is logged, never waited
//! for.

use std::time::Duration;

use serde_json::json;

/// Where escalations are announced, and the page they link to.
#[derive(Debug, Clone)]
pub(crate) struct Webhook {
    /// The `--notify-webhook` URL each escalation is POSTed to.
    pub url: String,
    /// The approvals page the message links to (`--public-url`, else where the page is
    /// served); `None`: the message has no link.
    pub page: Option<String>,
    client: reqwest::Client,
}

impl Webhook {
    /// A webhook whose posts give up after 10 s.
    pub(crate) fn new(url: String, page: Option<String>) -> Webhook {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Webhook { url, page, client }
    }

    /// The message for one escalation.
    pub(crate) fn message(
        &self,
        what: &str,
        reason: &str,
        rule: Option<&str>,
    ) -> serde_json::Value {
        let mut text = format!("ahp-wrap: a person must decide: {what}\nReason: {reason}");
        if let Some(rule) = rule {
            text.push_str(&format!(" (rule {rule})"));
        }
        if let Some(page) = &self.page {
            text.push_str(&format!("\nApprove or deny: {page}"));
        }
        json!({ "text": text })
    }

    /// Posts one escalation in the background.
    pub(crate) fn post(&self, what: &str, reason: &str, rule: Option<&str>) {
        let body = self.message(what, reason, rule);
        let (client, url) = (self.client.clone(), self.url.clone());
        tokio::spawn(async move {
            match client
                .post(&url)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => tracing::warn!("notify webhook {url}: HTTP {}", r.status()),
                Err(e) => tracing::warn!("notify webhook {url}: {e}"),
            }
        });
    }
}
