//! `stdio:` harness: a child process speaking newline-delimited JSON on its stdin/stdout;
//! its stderr goes to our log.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};

use super::{pump_lines, ConnectError, Incoming, Link, LinkConfig, Outgoing, CHANNEL_DEPTH};

/// How long a harness may take to exit after its stdin closes.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// The longest stderr line of the harness we log whole.
const MAX_LOG_LINE: usize = 8 * 1024;

pub(super) fn connect(argv: &[String], cfg: &LinkConfig) -> Result<Link, ConnectError> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: a Ctrl-C meant for the agent must not kill the harness.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| ConnectError(format!("cannot start harness {:?}: {e}", argv[0])))?;
    if let Some(pid) = child.id() {
        // Not part of the agent's tree: the wrapper's orphan reaper must leave it alone.
        crate::child::tree::register_own(pid as i32);
    }
    let mut stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    let (out_tx, mut out_rx) = mpsc::channel::<Outgoing>(CHANNEL_DEPTH);
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_DEPTH);

    let (closed_tx, closed_rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            let mut line = msg.text.into_bytes();
            line.push(b'\n');
            if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                break;
            }
        }
        // Dropping stdin closes the pipe: a well-behaved harness exits on EOF.
        drop(stdin);
        let _ = closed_tx.send(());
    });

    // The child's keeper: reports how it ended, and kills it if it outlives its stdin.
    let (status_tx, status_rx) = oneshot::channel::<String>();
    tokio::spawn(async move {
        let status = tokio::select! {
            st = child.wait() => st,
            _ = closed_rx => match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
                Ok(st) => st,
                Err(_) => {
                    tracing::warn!("the stdio harness ignored EOF on its stdin; killing it");
                    let _ = child.start_kill();
                    child.wait().await
                }
            },
        };
        let _ = status_tx.send(match status {
            Ok(st) => format!("the harness process exited ({st})"),
            Err(e) => format!("the harness process is gone ({e})"),
        });
    });

    let name = argv[0].clone();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(mut line)) = lines.next_line().await {
            if line.len() > MAX_LOG_LINE {
                let mut cut = MAX_LOG_LINE;
                while !line.is_char_boundary(cut) {
                    cut -= 1;
                }
                line.truncate(cut);
            }
            tracing::info!(target: "harness", "{name}: {line}");
        }
    });

    let max = cfg.max_frame;
    tokio::spawn(async move {
        let Some(why) = pump_lines(stdout, max, &in_tx).await else {
            return;
        };
        // Say how the harness ended, if it did, rather than just "end of stream".
        let reason = match tokio::time::timeout(Duration::from_millis(500), status_rx).await {
            Ok(Ok(status)) => status,
            _ => format!("the harness closed its stdout ({why})"),
        };
        let _ = in_tx.send(Incoming::Closed(reason)).await;
    });

    Ok(Link {
        tx: out_tx,
        rx: in_rx,
    })
}
