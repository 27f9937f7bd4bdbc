//! `advisor-consult mcp`: a stdio MCP server, so an agent host can consult advisors as
//! tools. It is a mapping onto the façade
//! ([`crate::facade::Api`]) and holds no verb logic: eight tools, one per verb (`advisors`,
//! `plan`, `record`, `consult`, `job`, `cancel`, `status`, `explain`), and read-only
//! resources under `advisord://`.
//!
//! - Standard output carries nothing but protocol; logs go to standard error.
//! - The root and task come from the working directory, the environment and the flags,
//!   as for every verb; a tool may name another `root` or `task`.
//! - A tool that waits for a consultation waits at most the cap ([`Config::wait_cap`],
//!   default 50 s, under the 60 s some hosts give a call), then answers with the outcomes
//!   so far; the job goes on and `job` with `wait` collects the rest.
//! - A line on standard input that is not JSON is answered with a JSON-RPC parse error
//!   (`-32700`) and the server keeps serving; JSON that is not a JSON-RPC message gets an
//!   invalid-request error (`-32600`).
//!
//! `docs/MCP.md` shows how each host registers the server and what its timeout does.

mod follow;
mod resources;
mod server;
mod tools;

pub use server::{Ensure, Server};
pub use tools::NAMES as TOOL_NAMES;

use crate::context::Locations;
use crate::facade::Api;
use rmcp::model::{ErrorData, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServiceExt};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// How long a tool waits for a consultation by default: under the 60 s the strictest
/// hosts give a tool call.
pub const DEFAULT_WAIT_CAP: Duration = Duration::from_secs(50);

/// The variable that sets the cap, in seconds (the flag `--wait-cap` wins).
pub const WAIT_CAP_VAR: &str = "ADVISORD_MCP_WAIT_CAP";

/// How long the server waits, once the host has gone, for cancellations it was asked for
/// to reach the daemon.
const CANCEL_FLUSH: Duration = Duration::from_secs(10);

/// The longest line read from the host (a record is at most 1 MiB; this leaves room).
const MAX_LINE: usize = 4 * 1024 * 1024;

/// How the server behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// How long `consult` and `job` (with `wait`) wait before answering with the outcomes
    /// so far.
    pub wait_cap: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            wait_cap: DEFAULT_WAIT_CAP,
        }
    }
}

/// Serve MCP on standard input and output until the host closes standard input.
///
/// `ensure` (when the verbs go to a daemon) makes sure the daemon answers, starting it if
/// allowed; it runs in the background from the start and before the first verb, so
/// `initialize` is answered at once.
pub async fn serve(
    api: Arc<dyn Api>,
    ensure: Option<Ensure>,
    locations: Locations,
    config: Config,
) -> anyhow::Result<()> {
    let server = Server::new(api, ensure, locations, config);
    {
        let server = server.clone();
        tokio::spawn(async move {
            if let Err(e) = server.ready().await {
                tracing::warn!("the daemon is not ready yet: {e}");
            }
        });
    }
    let cancelling = server.cancelling.clone();
    let transport = Stdio::new(tokio::io::stdin(), tokio::io::stdout());
    let running = server.serve(transport).await?;
    let _ = running.waiting().await;
    cancelling.close();
    if tokio::time::timeout(CANCEL_FLUSH, cancelling.wait())
        .await
        .is_err()
    {
        tracing::warn!("cancellations asked for did not reach the daemon in time");
    }
    Ok(())
}

/// Line-delimited JSON-RPC on a reader and a writer, as rmcp's own transport, except that
/// a line that is not JSON is answered with a parse error instead of being dropped
/// silently.
pub struct Stdio<W: tokio::io::AsyncWrite + Send + Unpin + 'static> {
    inner: AsyncRwTransport<RoleServer, tokio::io::DuplexStream, W>,
    bad_lines: mpsc::UnboundedReceiver<String>,
}

impl<W: tokio::io::AsyncWrite + Send + Unpin + 'static> Stdio<W> {
    /// Read messages from `reader`, write them to `writer`.
    pub fn new<R: tokio::io::AsyncRead + Send + Unpin + 'static>(reader: R, writer: W) -> Self {
        let (mut feed, lines) = tokio::io::duplex(64 * 1024);
        let (bad, bad_lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(reader);
            let mut line = Vec::new();
            loop {
                line.clear();
                match (&mut reader)
                    .take(MAX_LINE as u64)
                    .read_until(b'\n', &mut line)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                let text = text.strip_suffix(b"\r").unwrap_or(text);
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(text) {
                    let _ = bad.send(e.to_string());
                    // Skip the rest of an overlong line.
                    if !line.ends_with(b"\n") && line.len() >= MAX_LINE {
                        let mut rest = Vec::new();
                        let _ = reader.read_until(b'\n', &mut rest).await;
                    }
                    continue;
                }
                if feed.write_all(text).await.is_err() || feed.write_all(b"\n").await.is_err() {
                    break;
                }
            }
            let _ = feed.shutdown().await;
        });
        Stdio {
            inner: AsyncRwTransport::new(lines, writer),
            bad_lines,
        }
    }
}

impl<W: tokio::io::AsyncWrite + Send + Unpin + 'static> Transport<RoleServer> for Stdio<W> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            tokio::select! {
                biased;
                Some(problem) = self.bad_lines.recv() => {
                    let error = ErrorData::parse_error(
                        format!("the line is not JSON ({problem}); send one JSON-RPC message per line"),
                        None,
                    );
                    if let Err(e) = self.inner.send(JsonRpcMessage::error(error, None)).await {
                        tracing::warn!("a parse error could not be sent: {e}");
                    }
                }
                message = self.inner.receive() => return message,
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}
