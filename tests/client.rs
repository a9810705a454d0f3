//! The AHP client as a library: pipelined requests matched by id, and `ahp/query`.

use ahp_wrap_testkit::common;

use std::time::Duration;

use ahp_wrap::client::{Client, ClientConfig};
use ahp_wrap::protocol::{Event, EventType};
use ahp_wrap::transport::{AuthScheme, HarnessSpec, LinkConfig};
use common::support;
use serde_json::json;
use tokio::time::Instant;

fn client(mode: &str) -> Client {
    let spec = HarnessSpec::Stdio {
        argv: vec![
            "python3".into(),
            support("fault_harness.py").display().to_string(),
            mode.into(),
        ],
    };
    Client::start(
        spec,
        ClientConfig {
            link: LinkConfig {
                token: None,
                auth: AuthScheme::Bearer,
                max_frame: 1 << 20,
            },
            session_id: "s-1".into(),
            agent_id: "a-1".into(),
            framework: "test".into(),
            framework_version: "0".into(),
            batch_window: Duration::from_millis(5),
        },
    )
}

fn event(n: usize) -> Event {
    Event {
        event_type: EventType::PreAction,
        session_id: "s-1".into(),
        agent_id: "a-1".into(),
        timestamp: ahp_wrap::protocol::now_rfc3339(),
        depth: 0,
        payload: json!({"n": n}),
        context: None,
        metadata: None,
    }
}

#[tokio::test]
async fn many_requests_in_flight_each_get_their_own_answer() {
    let c = client("modify");
    let n = c.wait_ready(Duration::from_secs(20)).await.unwrap();
    assert_eq!(n.harness_name, "fault-harness");
    let deadline = Instant::now() + Duration::from_secs(30);
    let calls = (0..200).map(|i| {
        let c = c.clone();
        async move { (i, c.event(&event(i), deadline).await) }
    });
    for (i, answer) in futures_util::future::join_all(calls).await {
        let answer = answer.unwrap();
        // The harness echoes each payload back in its modify: answers went to the right caller.
        assert_eq!(answer["modified_payload"]["n"], i, "{answer}");
    }
    c.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn query_goes_as_ahp_query() {
    let c = client("ok");
    c.wait_ready(Duration::from_secs(20)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let answer = c
        .query(
            "should_i_proceed",
            json!({"question": "?"}),
            "s-1",
            "a-1",
            deadline,
        )
        .await
        .unwrap();
    assert_eq!(
        answer,
        json!({"answer": "yes", "reason": "asked should_i_proceed by s-1"})
    );
}
