//! A consultation followed on the connection that queued it: the client asks with
//! `Accept: application/x-ndjson`, and the daemon answers `202` with the job as accepted
//! on the first line and then the job's events, one per line, as
//! `GET /api/v1/consultations/{id}/events` gives them (docs/DAEMON.md, "Consultations").
//! One connection and one request instead of two. A daemon that answers the plain `202`
//! (an older one) is read as before, and the events are then followed on a second
//! connection.

use super::{Client, EventReader};
use crate::error::{Error, Result};
use crate::protocol::{ConsultRequest, Job, Verb, NDJSON};
use http_body_util::BodyExt;

impl Client {
    /// Queue `request` and take its events on the same connection: the job as accepted,
    /// and its events from the first when the daemon streams them (`None` otherwise).
    /// The bound is the wait for the job as accepted, not for the job's end.
    pub async fn consult_streamed(
        &self,
        request: &ConsultRequest,
    ) -> Result<(Job, Option<EventReader>)> {
        let call = request.call();
        let connected = self.first_connection().await?;
        let accepted = async {
            let response = self.send_accepting(&call, connected, Some(NDJSON)).await?;
            let status = response.status();
            let streamed = status.is_success()
                && response
                    .headers()
                    .get(hyper::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.contains(NDJSON));
            if !streamed {
                let bytes = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| self.lost(&e))?
                    .to_bytes();
                if !status.is_success() {
                    return Err(self.error_reply(status, &bytes));
                }
                let job = serde_json::from_slice(&bytes).map_err(|e| not_a_job(&e))?;
                return Ok((job, None));
            }
            let mut reader = EventReader::of(self.clone(), response.into_body());
            let line = reader.line().await?.ok_or_else(|| {
                Error::Protocol(
                    "`POST /api/v1/consultations` streamed nothing, not even the job as \
                     accepted"
                        .to_string(),
                )
            })?;
            let job = serde_json::from_slice(&line).map_err(|e| not_a_job(&e))?;
            Ok::<_, Error>((job, Some(reader)))
        };
        tokio::time::timeout(self.bound, accepted)
            .await
            .map_err(|_| self.stuck(&call))?
    }
}

fn not_a_job(e: &serde_json::Error) -> Error {
    Error::Protocol(format!(
        "`POST /api/v1/consultations` answered with something that is not the job as \
         accepted ({e})"
    ))
}
