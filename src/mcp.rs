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
//! - Every line on standard input a host could wait on is answered ([`Stdio`]): a line
//!   that is not JSON with a parse error (`-32700`), JSON that is not a JSON-RPC message
//!   with an invalid-request error (`-32600`), a line over [`MAX_LINE`] with an error
//!   naming the limit; errors whose request id cannot be read carry `"id": null`.
//!
//! `docs/MCP.md` shows how each host registers the server and what its timeout does.

mod asker;
mod follow;
mod resources;
mod server;
mod tools;

pub use server::{Ensure, Server};
pub use tools::NAMES as TOOL_NAMES;

use crate::context::Locations;
use crate::facade::Api;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServiceExt};
use serde_json::Value;
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

/// The longest line read from the host (a record is at most 1 MiB; this leaves room for
/// JSON escapes); a longer line is answered with an error naming this limit.
pub const MAX_LINE: usize = 4 * 1024 * 1024;

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

/// Line-delimited JSON-RPC on a reader and a writer, answering every line a peer could
/// be waiting on:
///
/// - a line that is not JSON (including a number no `f64` holds, such as `1e400`, and an
///   escaped lone surrogate such as `"\ud800"`) gets a parse error (`-32700`) with
///   `"id": null`;
/// - JSON that is not a JSON-RPC message gets an invalid-request error (`-32600`), with
///   the message's `id` when one can be read, else `"id": null`; a request of a known
///   method whose `params` do not fit gets an invalid-params error (`-32602`);
/// - a line longer than [`MAX_LINE`] gets an invalid-request error naming the limit;
/// - a notification nobody knows is dropped (a notification is never answered).
pub struct Stdio {
    writer: Writer,
    messages: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
}

type Writer = Arc<tokio::sync::Mutex<Box<dyn tokio::io::AsyncWrite + Send + Unpin>>>;

/// One line written, flushed, under the writer's lock (answers never interleave).
async fn write_line(writer: &Writer, line: Vec<u8>) -> std::io::Result<()> {
    let mut writer = writer.lock().await;
    writer.write_all(&line).await?;
    writer.write_all(b"\n").await?;
    writer.flush().await
}

/// A JSON-RPC error to `id` (`null` when the id could not be read).
fn error_line(id: Value, code: i32, message: String) -> Vec<u8> {
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message},
    });
    error.to_string().into_bytes()
}

/// What one line from the host is: a message for the service, an error to answer, or
/// nothing (a blank line, a notification nobody knows).
fn classify(line: &[u8]) -> Result<Option<RxJsonRpcMessage<RoleServer>>, Vec<u8>> {
    const PARSE_ERROR: i32 = -32700;
    const INVALID_REQUEST: i32 = -32600;
    const INVALID_PARAMS: i32 = -32602;
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        error_line(
            Value::Null,
            PARSE_ERROR,
            format!("the line is not JSON ({e}); send one JSON-RPC message per line"),
        )
    })?;
    let Value::Object(fields) = &value else {
        let what = if value.is_array() {
            "a batch (an array); send one JSON-RPC message per line, batches are not supported"
        } else {
            "not a JSON-RPC message; send an object with `jsonrpc`, `method` and `id`"
        };
        return Err(error_line(
            Value::Null,
            INVALID_REQUEST,
            format!("the line is {what}"),
        ));
    };
    // JSON-RPC ids are strings or numbers; any other id cannot be echoed.
    let id = match fields.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id.clone()),
        _ => None,
    };
    let method = fields.get("method").and_then(Value::as_str);
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value.clone()) {
        Ok(message) => Ok(Some(message)),
        // A notification is never answered, even one that is wrong.
        Err(_) if method.is_some() && !fields.contains_key("id") => Ok(None),
        Err(e) => {
            let (code, message) = match (method, &id) {
                (Some(method), Some(_)) => (
                    INVALID_PARAMS,
                    format!("the params of `{method}` are not valid: {e}"),
                ),
                _ => (
                    INVALID_REQUEST,
                    format!(
                        "not a JSON-RPC message ({e}); a request has `jsonrpc: \"2.0\"`, a \
                         string or number `id`, `method` and `params`"
                    ),
                ),
            };
            Err(error_line(id.unwrap_or(Value::Null), code, message))
        }
    }
}

/// Read one line of at most [`MAX_LINE`] bytes into `line` (without its newline):
/// `Ok(Some(true))` a line, `Ok(Some(false))` a line over the limit (read to its end and
/// dropped), `Ok(None)` the end of the input.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    line.clear();
    let read = (&mut *reader)
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', line)
        .await?;
    if read == 0 {
        return Ok(None);
    }
    if line.ends_with(b"\n") {
        line.pop();
        if line.ends_with(b"\r") {
            line.pop();
        }
        return Ok(Some(line.len() <= MAX_LINE));
    }
    if line.len() <= MAX_LINE {
        // The last line, without a newline.
        return Ok(Some(true));
    }
    // Over the limit: skip to the end of the line without holding it.
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            break;
        }
        match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => {
                reader.consume(at + 1);
                break;
            }
            None => {
                let n = buffer.len();
                reader.consume(n);
            }
        }
    }
    line.clear();
    Ok(Some(false))
}

impl Stdio {
    /// Read messages from `reader`, write them to `writer`.
    pub fn new<R, W>(reader: R, writer: W) -> Stdio
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let writer: Writer = Arc::new(tokio::sync::Mutex::new(Box::new(writer)));
        let (tx, messages) = mpsc::channel(64);
        let answers = Arc::clone(&writer);
        tokio::spawn(async move {
            let mut reader = BufReader::new(reader);
            let mut line = Vec::new();
            loop {
                let answer = match read_line(&mut reader, &mut line).await {
                    Ok(None) | Err(_) => break,
                    Ok(Some(false)) => error_line(
                        Value::Null,
                        -32600,
                        format!(
                            "the line is longer than {MAX_LINE} bytes ({} MiB), the limit of \
                             one message; a record is at most {} bytes, so send less (cite \
                             large evidence by `ref` instead of inlining it)",
                            MAX_LINE / (1024 * 1024),
                            crate::protocol::MAX_BODY_BYTES
                        ),
                    ),
                    Ok(Some(true)) => match classify(&line) {
                        Ok(Some(message)) => {
                            if tx.send(message).await.is_err() {
                                break;
                            }
                            continue;
                        }
                        Ok(None) => continue,
                        Err(answer) => answer,
                    },
                };
                if let Err(e) = write_line(&answers, answer).await {
                    tracing::warn!("an error answer could not be sent: {e}");
                    break;
                }
            }
        });
        Stdio { writer, messages }
    }
}

impl Transport<RoleServer> for Stdio {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        async move {
            let line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            write_line(&writer, line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.messages.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.messages.close();
        let mut writer = self.writer.lock().await;
        writer.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Value {
        let bytes = classify(line.as_bytes()).expect_err("an error answer");
        serde_json::from_slice(&bytes).expect("json")
    }

    #[test]
    fn every_line_a_peer_waits_on_is_answered_with_the_id_json_rpc_asks_for() {
        for (line, code) in [
            ("not json", -32700),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":1e400}}"#,
                -32700,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\ud800"}}"#,
                -32700,
            ),
            ("[1,2]", -32600),
            ("42", -32600),
            (r#"{"jsonrpc":"2.0","id":{"a":1},"nothing":1}"#, -32600),
        ] {
            let error = answer(line);
            assert_eq!(error["error"]["code"], code, "{line}: {error}");
            assert!(
                error.as_object().unwrap().contains_key("id") && error["id"].is_null(),
                "{line}: {error}"
            );
        }
        let error = answer(r#"{"jsonrpc":"2.0","id":"x","nothing":1}"#);
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (Value::from("x"), Value::from(-32600))
        );
        // A notification is never answered; a blank line is nothing.
        for notification in [
            r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}"#,
        ] {
            assert!(classify(notification.as_bytes()).is_ok(), "{notification}");
        }
        assert!(matches!(classify(b"  "), Ok(None)));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Some(_))
        ));
    }
}
