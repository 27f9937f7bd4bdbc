//! Waiting for `verify`: the client asks for its progress (`Accept: application/x-ndjson`,
//! see `daemon::verify_progress`) and gives up only when no line comes within its bound,
//! however long the whole walk takes; each line of progress is shown on standard error
//! when that is a terminal. A daemon that answers plain JSON (an older one) is read as
//! before, within the bound.

use super::Client;
use crate::daemon::verify_progress::Line;
use crate::error::{Error, Result};
use crate::protocol::{HttpCall, NDJSON};
use crate::service::VerifyProgress;
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;
use std::io::IsTerminal;

impl Client {
    /// Send `call` (a verify) and read its progress and its report, calling `seen` with
    /// each line of progress.
    pub async fn verify_with_progress<R: DeserializeOwned>(
        &self,
        call: &HttpCall,
        seen: &mut (dyn FnMut(&VerifyProgress) + Send),
    ) -> Result<R> {
        // The first request of a client makes sure of a daemon, as every other does.
        let connected = self.first_connection().await?;
        let response = tokio::time::timeout(
            self.bound,
            self.send_accepting(call, connected, Some(NDJSON)),
        )
        .await
        .map_err(|_| self.stuck(call))??;
        let status = response.status();
        let streamed = response
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains(NDJSON));
        let mut body = response.into_body();
        let mut buffer: Vec<u8> = Vec::new();
        let protocol = |what: String| Error::Protocol(format!("`verify` answered {what}"));
        loop {
            if streamed {
                while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=end).collect();
                    if line.trim_ascii().is_empty() {
                        continue;
                    }
                    let line: Line = serde_json::from_slice(&line).map_err(|e| {
                        protocol(format!("a line that is not progress nor a report ({e})"))
                    })?;
                    match line {
                        Line::Progress(p) => seen(&p),
                        Line::Report(report) => {
                            return serde_json::to_value(report)
                                .and_then(serde_json::from_value)
                                .map_err(|e| {
                                    protocol(format!("a report that does not read ({e})"))
                                });
                        }
                        Line::Error(failed) => {
                            let bytes = serde_json::to_vec(&failed.body).unwrap_or_default();
                            let status = hyper::StatusCode::from_u16(failed.status)
                                .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
                            return Err(self.error_reply(status, &bytes));
                        }
                    }
                }
            }
            // The bound is the wait for the next bytes, not for the whole walk.
            let frame = tokio::time::timeout(self.bound, body.frame())
                .await
                .map_err(|_| self.stuck(call))?;
            match frame {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        buffer.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => return Err(self.lost(&e)),
                None => break,
            }
        }
        if !status.is_success() {
            return Err(self.error_reply(status, &buffer));
        }
        if streamed {
            return Err(protocol("no report before its stream ended".to_string()));
        }
        serde_json::from_slice(&buffer)
            .map_err(|e| protocol(format!("{status} with a body that is not the report ({e})")))
    }

    /// [`Client::verify_with_progress`], showing the progress on standard error when it is
    /// a terminal.
    pub(super) async fn verify_waiting<R: DeserializeOwned>(&self, call: &HttpCall) -> Result<R> {
        let terminal = std::io::stderr().is_terminal();
        let mut shown = false;
        let mut show = |p: &VerifyProgress| {
            if terminal && p.records > 0 {
                eprint!(
                    "\rverify: task `{}`: {} of {} records walked",
                    p.task, p.walked, p.records
                );
                shown = true;
            }
        };
        let answer = self.verify_with_progress(call, &mut show).await;
        if shown {
            eprintln!();
        }
        answer
    }
}
