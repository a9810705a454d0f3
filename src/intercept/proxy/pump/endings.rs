//! How the proxy ends: the first of its ends awaited, then the client gone (the server's
//! stdin closed, its last output passed on for a while), the server gone (every call it
//! left open answered with an error), or a shutdown.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Map, Value};

use super::{lock, Ended, Engine, Gone, InFlight, Pump, PROXY_ERROR};
use crate::intercept::proxy::{Decide, Direction, GateEvent, Protocol};
use crate::jsonrpc::error_response;
use crate::protocol::EventType;

/// Waits for the first end, and ends the other side.
pub(super) async fn ends<P: Protocol, G: Decide>(
    engine: &Engine<P, G>,
    to_server: &mut Pump,
    to_client: &mut Pump,
    shutdown: Pin<&mut impl Future<Output = ()>>,
) -> Ended {
    // The pump that is not finished is stopped (a pump stopped in the middle of a write
    // leaves that way out marked broken, see `Out`, so no frame is ever cut in two) before
    // the other side is ended, except the server's last output after the client left.
    tokio::select! {
        gone = to_server.ended() => match gone {
            Gone { server: false, fault } => {
                engine.client_gone(to_client).await;
                fault.map_or(Ended::ClientClosed, Ended::ClientFault)
            }
            Gone { server: true, fault } => {
                to_client.stop().await;
                engine.server_gone(fault).await
            }
        },
        gone = to_client.ended() => match gone {
            Gone { server: true, fault } => {
                to_server.stop().await;
                engine.server_gone(fault).await
            }
            Gone { server: false, fault } => {
                to_server.stop().await;
                engine.outs[Direction::ToServer.index()].close().await;
                Ended::ClientFault(fault.unwrap_or_else(|| "the client went away".into()))
            }
        },
        () = shutdown => {
            to_server.stop().await;
            to_client.stop().await;
            engine.fail_pending("ahp-wrap is shutting down").await;
            engine.outs[Direction::ToServer.index()].close().await;
            Ended::Shutdown
        }
    }
}

impl<P: Protocol, G: Decide> Engine<P, G> {
    /// The client is gone: close the server's stdin and pass on what the server still
    /// writes, for a while.
    pub(super) async fn client_gone(&self, to_client: &mut Pump) {
        self.outs[Direction::ToServer.index()].close().await;
        if tokio::time::timeout(self.options.drain, to_client.ended())
            .await
            .is_err()
        {
            to_client.stop().await;
        }
    }

    /// The server is gone: every request it did not answer gets an error, the harness hears
    /// of a fault, and its stdin is closed (it may still be running).
    pub(super) async fn server_gone(&self, fault: Option<String>) -> Ended {
        let why = fault
            .clone()
            .unwrap_or_else(|| "it closed its output".to_owned());
        let unanswered = self.fail_pending(&why).await;
        self.outs[Direction::ToServer.index()].close().await;
        if fault.is_some() || unanswered > 0 {
            let mut payload = Map::new();
            payload.insert("source".into(), "proxy".into());
            payload.insert("server".into(), self.protocol.server_label().into());
            payload.insert("message".into(), why.into());
            payload.insert("unanswered_requests".into(), unanswered.into());
            let event = GateEvent {
                event_type: EventType::Error,
                payload: Value::Object(payload),
                metadata: Map::new(),
            };
            self.gate.notify(event).await;
        }
        fault.map_or(Ended::ServerClosed, Ended::ServerFault)
    }

    /// Answers every client request still waiting for the server with an error; returns
    /// how many there were.
    pub(super) async fn fail_pending(&self, why: &str) -> usize {
        let mut left: Vec<InFlight> = lock(&self.pending[Direction::ToServer.index()])
            .drain()
            .map(|(_, f)| f)
            .collect();
        left.sort_by_key(|f| f.id.to_string());
        let label = self.protocol.server_label();
        for f in &left {
            let message = format!("ahp-wrap: {label} ended before it answered ({why})");
            let line = error_response(&f.id.to_value(), PROXY_ERROR, &message);
            if self.answer(Direction::ToClient, line).await.is_err() {
                break;
            }
        }
        left.len()
    }
}
