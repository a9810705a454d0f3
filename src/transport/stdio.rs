//! `stdio:` harness: a child process speaking newline-delimited JSON on its stdin/stdout;
//! its stderr goes to our log.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, oneshot};

use super::{pump_lines, ConnectError, Incoming, Link, LinkConfig, Outgoing, CHANNEL_DEPTH};

/// How long a harness may take to exit after its stdin closes.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// The longest stderr line of the harness we log whole.
const MAX_LOG_LINE: usize = 8 * 1024;

/// Starts the harness `argv` and links to it over its stdin and stdout.
#[allow(
    clippy::expect_used,
    reason = "the harness was spawned with its three standard streams piped"
)]
pub(super) fn connect(argv: &[String], cfg: &LinkConfig) -> Result<Link, ConnectError> {
    let mut child = spawn(argv)?;
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    let (out_tx, out_rx) = mpsc::channel::<Outgoing>(CHANNEL_DEPTH);
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_DEPTH);
    let (closed_tx, closed_rx) = oneshot::channel::<()>();
    let (status_tx, status_rx) = oneshot::channel::<String>();
    tokio::spawn(write_lines(stdin, out_rx, closed_tx));
    tokio::spawn(keep(child, closed_rx, status_tx));
    tokio::spawn(log_stderr(argv[0].clone(), stderr));
    tokio::spawn(read_lines(stdout, cfg.max_frame, in_tx, status_rx));
    Ok(Link {
        tx: out_tx,
        rx: in_rx,
    })
}

/// Spawns the harness with piped stdio, in its own process group, known to the wrapper as
/// its own.
fn spawn(argv: &[String]) -> Result<Child, ConnectError> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: a Ctrl-C meant for the agent must not kill the harness.
        .process_group(0)
        .kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|e| ConnectError(format!("cannot start harness {:?}: {e}", argv[0])))?;
    if let Some(pid) = child.id() {
        // Not part of the agent's tree: the wrapper's orphan reaper must leave it alone.
        crate::child::tree::register_own(pid as i32);
    }
    Ok(child)
}

/// Writes each outgoing message as one line to the harness's stdin; when the link is
/// dropped (or the pipe breaks), closes stdin and says so on `closed`.
async fn write_lines(
    mut stdin: ChildStdin,
    mut out_rx: mpsc::Receiver<Outgoing>,
    closed: oneshot::Sender<()>,
) {
    while let Some(msg) = out_rx.recv().await {
        let mut line = msg.text.into_bytes();
        line.push(b'\n');
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
    // Dropping stdin closes the pipe: a well-behaved harness exits on EOF.
    drop(stdin);
    let _ = closed.send(());
}

/// The child's keeper: reports how it ended on `status`, and kills it if it outlives its
/// stdin by more than [`EXIT_GRACE`].
async fn keep(mut child: Child, closed: oneshot::Receiver<()>, status_tx: oneshot::Sender<String>) {
    let status = tokio::select! {
        st = child.wait() => st,
        _ = closed => match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
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
}

/// Logs the harness's stderr, line by line, each cut to [`MAX_LOG_LINE`] bytes.
async fn log_stderr(name: String, stderr: ChildStderr) {
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
}

/// Reads the harness's stdout into `in_tx`; when it ends, sends why (how the harness ended,
/// if it did within half a second).
async fn read_lines(
    stdout: ChildStdout,
    max: usize,
    in_tx: mpsc::Sender<Incoming>,
    status_rx: oneshot::Receiver<String>,
) {
    let Some(why) = pump_lines(stdout, max, &in_tx).await else {
        return;
    };
    // Say how the harness ended, if it did, rather than just "end of stream".
    let reason = match tokio::time::timeout(Duration::from_millis(500), status_rx).await {
        Ok(Ok(status)) => status,
        _ => format!("the harness closed its stdout ({why})"),
    };
    let _ = in_tx.send(Incoming::Closed(reason)).await;
}
