//! The AMQP side: connecting (with the heartbeat and connection timeout the URI may not
//! say), the durable topology, and publishing that waits for the broker's confirm.

use std::time::Duration;

use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::uri::AMQPUri;
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, Consumer};

use super::{task_queue, ABORT_EXCHANGE, TASK_EXCHANGE};

/// AMQP delivery mode of messages the broker keeps on disk.
const PERSISTENT: u8 = 2;

/// Why talking to the broker failed.
#[derive(Debug, thiserror::Error)]
pub enum AmqpError {
    /// The URI does not parse, or asks for `amqps://`, which this build cannot speak.
    #[error("invalid AMQP URI {uri:?}: {why}")]
    Uri {
        /// The URI as given (it may hold a password).
        uri: String,
        /// The parser's reason, or why the scheme is refused.
        why: String,
    },
    /// The connection attempt failed before the timeout.
    #[error("cannot connect to the broker at {at}")]
    Connect {
        /// The broker as `host:port/vhost`, without credentials ([`Target::shown`]).
        at: String,
        /// lapin's error.
        #[source]
        source: lapin::Error,
    },
    /// The connection attempt did not finish within the target's timeout.
    #[error("no connection to the broker at {at} within {secs} s")]
    ConnectTimeout {
        /// The broker as `host:port/vhost`, without credentials.
        at: String,
        /// The timeout, in whole seconds.
        secs: u64,
    },
    /// A call on an open connection or channel failed.
    #[error("failed to {what}")]
    Broker {
        /// What was being done, as a verb phrase (`"open a channel"`).
        what: String,
        /// lapin's error.
        #[source]
        source: lapin::Error,
    },
    /// The broker answered a publish with a nack; holds `nack for "exchange"/"routing key"`.
    #[error("the broker refused to take the message ({0})")]
    Nacked(String),
    /// A mandatory publish came back unrouted; holds the routing key (the capability).
    #[error("no queue takes messages for {0:?}: no worker of that capability has declared it")]
    Unroutable(String),
}

/// Shorthand for a broker call that failed while doing `what`.
pub(crate) fn broker(what: &str) -> impl FnOnce(lapin::Error) -> AmqpError + '_ {
    move |source| AmqpError::Broker {
        what: what.to_owned(),
        source,
    }
}

/// Where to connect: the URI, completed with our heartbeat and timeout unless it says.
#[derive(Debug, Clone)]
pub struct Target {
    uri: AMQPUri,
    /// The URI without its password, for messages.
    pub shown: String,
    /// Bound on one connection attempt; also the URI's `connection_timeout` unless it sets one.
    pub timeout: Duration,
}

impl Target {
    /// Parses an `amqp://` URI, adding `heartbeat` (seconds) and `connection_timeout` to
    /// its query when it does not set them. `amqps://` is refused.
    pub(crate) fn parse(
        uri: &str,
        heartbeat_secs: u16,
        timeout: Duration,
    ) -> Result<Target, AmqpError> {
        let mut parsed: AMQPUri = uri.parse().map_err(|why| AmqpError::Uri {
            uri: uri.to_owned(),
            why,
        })?;
        if parsed.scheme == lapin::uri::AMQPScheme::AMQPS {
            return Err(AmqpError::Uri {
                uri: uri.to_owned(),
                why: "amqps:// is not supported: this build has no TLS stack (use amqp:// to a \
                      local broker, or a TLS tunnel)"
                    .into(),
            });
        }
        parsed.query.heartbeat.get_or_insert(heartbeat_secs);
        parsed
            .query
            .connection_timeout
            .get_or_insert(timeout.as_millis() as u64);
        let shown = format!(
            "{}:{}/{}",
            parsed.authority.host, parsed.authority.port, parsed.vhost
        );
        Ok(Target {
            uri: parsed,
            shown,
            timeout,
        })
    }

    /// One connection attempt, bounded by the timeout.
    pub(crate) async fn connect(&self, name: &str) -> Result<Connection, AmqpError> {
        let props = ConnectionProperties::default().with_connection_name(name.into());
        let attempt = Connection::connect_uri(self.uri.clone(), props);
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(source)) => Err(AmqpError::Connect {
                at: self.shown.clone(),
                source,
            }),
            Err(_) => Err(AmqpError::ConnectTimeout {
                at: self.shown.clone(),
                secs: self.timeout.as_secs(),
            }),
        }
    }
}

/// A channel with publisher confirms on.
pub(crate) async fn confirmed_channel(conn: &Connection) -> Result<Channel, AmqpError> {
    let ch = conn
        .create_channel()
        .await
        .map_err(broker("open a channel"))?;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(broker("turn publisher confirms on"))?;
    Ok(ch)
}

/// A queue of our own (server-named, exclusive, deleted with us), bound to `exchange` when
/// one is given, and consumed without acks as `tag`: where replies or aborts come to one
/// caller or worker. Returns its name and the consumer; `what` names it in errors.
pub async fn private_queue(
    ch: &Channel,
    what: &str,
    exchange: Option<&str>,
    tag: &str,
) -> Result<(String, Consumer), AmqpError> {
    let private = QueueDeclareOptions {
        exclusive: true,
        auto_delete: true,
        ..Default::default()
    };
    let q = ch
        .queue_declare("".into(), private, FieldTable::default())
        .await
        .map_err(broker(&format!("declare the {what}")))?;
    if let Some(exchange) = exchange {
        let bind = (QueueBindOptions::default(), FieldTable::default());
        ch.queue_bind(q.name().clone(), exchange.into(), "".into(), bind.0, bind.1)
            .await
            .map_err(broker(&format!("bind the {what}")))?;
    }
    let no_ack = BasicConsumeOptions {
        no_ack: true,
        ..Default::default()
    };
    let consumer = ch
        .basic_consume(q.name().clone(), tag.into(), no_ack, FieldTable::default())
        .await
        .map_err(broker(&format!("consume the {what}")))?;
    Ok((q.name().to_string(), consumer))
}

/// Declares the durable task exchange, the capability's durable queue bound to it, and the
/// abort exchange. Declaring is idempotent: every worker and caller may do it.
pub(crate) async fn declare_topology(ch: &Channel, capability: &str) -> Result<(), AmqpError> {
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.exchange_declare(
        TASK_EXCHANGE.into(),
        lapin::ExchangeKind::Direct,
        durable,
        FieldTable::default(),
    )
    .await
    .map_err(broker("declare the task exchange"))?;
    ch.exchange_declare(
        ABORT_EXCHANGE.into(),
        lapin::ExchangeKind::Fanout,
        durable,
        FieldTable::default(),
    )
    .await
    .map_err(broker("declare the abort exchange"))?;
    let queue = task_queue(capability);
    ch.queue_declare(
        queue.as_str().into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .map_err(broker("declare the task queue"))?;
    ch.queue_bind(
        queue.as_str().into(),
        TASK_EXCHANGE.into(),
        capability.into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .map_err(broker("bind the task queue"))
}

/// JSON message properties; persistent ones are kept on disk by the broker.
pub fn json_props(correlation_id: &str, persistent: bool) -> BasicProperties {
    let props = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_correlation_id(correlation_id.into())
        .with_message_id(crate::random_hex(8).into());
    if persistent {
        props.with_delivery_mode(PERSISTENT)
    } else {
        props
    }
}

/// Publishes and waits for the broker's confirm; a mandatory message nobody routes is an
/// error ([`AmqpError::Unroutable`]).
pub async fn publish(
    ch: &Channel,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    props: BasicProperties,
    mandatory: bool,
) -> Result<(), AmqpError> {
    let options = BasicPublishOptions {
        mandatory,
        ..Default::default()
    };
    let confirm = ch
        .basic_publish(exchange.into(), routing_key.into(), options, body, props)
        .await
        .map_err(broker("publish"))?
        .await
        .map_err(broker("get the broker's confirm"))?;
    match confirm {
        Confirmation::Ack(None) | Confirmation::NotRequested => Ok(()),
        Confirmation::Ack(Some(_)) => Err(AmqpError::Unroutable(routing_key.to_owned())),
        Confirmation::Nack(_) => Err(AmqpError::Nacked(format!(
            "nack for {exchange:?}/{routing_key:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_get_our_heartbeat_unless_they_say() {
        let t = Target::parse("amqp://u:secret@h:5673/v", 7, Duration::from_secs(3)).unwrap();
        assert_eq!(t.uri.query.heartbeat, Some(7));
        assert_eq!(t.uri.query.connection_timeout, Some(3000));
        assert!(!t.shown.contains("secret"), "{}", t.shown);
        let t = Target::parse("amqp://h/v?heartbeat=2", 7, Duration::from_secs(3)).unwrap();
        assert_eq!(t.uri.query.heartbeat, Some(2));
    }

    #[test]
    fn bad_uris_say_why() {
        let tls = Target::parse("amqps://h/v", 7, Duration::from_secs(3)).unwrap_err();
        assert!(tls.to_string().contains("no TLS"), "{tls}");
        assert!(Target::parse("not a uri", 7, Duration::from_secs(3)).is_err());
    }
}
