//! Offering reviews: the NATS service `advisord-reviews` with a review endpoint on
//! `advisord.reviews.<runtime id>` and a cancel endpoint on `advisord.cancel.<runtime
//! id>`, its metadata saying who runs it (runtime id, host, user), what it offers
//! (capabilities) and what would answer (sources).
//!
//! A request is read strictly (size, its seal by the asker's key, protocol, fields), its
//! question scrubbed of secret shapes again, and answered by the mode chosen: a relay asks its own advisors through
//! its job machinery ([`super::relay`]); an inbox keeps it for `reviews answer`. At most
//! [`MAX_IN_FLIGHT`] reviews are worked on at once; past that a request is answered
//! `rate_limited`, so a flooding asker is bounded. Every reply, failures included, is
//! sealed by this runtime's key. A request id already being worked on or waiting in the
//! inbox is refused: a review belongs to the asker that sent it first, and nobody can
//! replace it (and so redirect its answer). A cancel notice counts only when it is sealed
//! by that same asker.

use super::inbox::InboxItem;
use super::{relay, Mesh, Offer};
use crate::core::redact;
use crate::daemon::jobs::Jobs;
use advisord_adapters::contract::FailureKind;
use advisord_adapters::mesh::identity::{self, Kind};
use advisord_adapters::mesh::wire::{
    self, CancelNotice, ReplyOutcome, ReviewReply, ReviewRequest, PROTOCOL,
};
use async_nats::service::ServiceExt;
use futures::StreamExt;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Reviews worked on at once.
pub const MAX_IN_FLIGHT: usize = 32;

/// How long a busy peer asks the asker to wait.
const BUSY_RETRY_S: u64 = 5;

/// The longest deadline a request may ask for (a day).
const MAX_DEADLINE_MS: u64 = 86_400_000;

/// What this daemon offers: the capabilities and the sources behind them.
pub(crate) fn offered(
    mesh: &Mesh,
    registry: &advisord_adapters::registry::Registry,
) -> (Vec<String>, Vec<String>) {
    match mesh.offer {
        Some(Offer::Inbox) | None => (mesh.inbox_capabilities.clone(), vec![mesh.inbox_source()]),
        Some(Offer::Relay) => relay::offered(&mesh.relay_context, registry),
    }
}

/// Serve reviews until `stop` (shutdown begins): then the service is withdrawn and the
/// reviews in flight get until `cancel` (the grace is over) to be answered.
pub(crate) async fn serve(
    jobs: Arc<Jobs>,
    mesh: Arc<Mesh>,
    stop: CancellationToken,
    cancel: CancellationToken,
) {
    let Some(client) = mesh.client.clone() else {
        return;
    };
    let (mesh_for_offer, registry) = (mesh.clone(), jobs.registry().clone());
    let (capabilities, sources) =
        match tokio::task::spawn_blocking(move || offered(&mesh_for_offer, &registry)).await {
            Ok(offered) => offered,
            Err(_) => return,
        };
    *mesh.offered.lock().unwrap_or_else(|p| p.into_inner()) =
        Some((capabilities.clone(), sources.clone()));
    let metadata: HashMap<String, String> = [
        (wire::keys::RUNTIME, mesh.runtime.clone()),
        (wire::keys::KEY, mesh.identity.public_key()),
        (wire::keys::HOST, mesh.host.clone()),
        (wire::keys::USER, mesh.user.clone()),
        (wire::keys::CAPABILITIES, capabilities.join(",")),
        (wire::keys::SOURCES, sources.join(",")),
        (
            wire::keys::OFFER,
            mesh.offer.map_or("relay", Offer::as_str).to_string(),
        ),
        (wire::keys::PROTOCOL, PROTOCOL.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let service = loop {
        let started = client
            .service_builder()
            .description("advisord reviews")
            .metadata(metadata.clone())
            .start(wire::SERVICE_NAME, wire::SERVICE_VERSION)
            .await;
        match started {
            Ok(service) => break service,
            Err(e) => {
                tracing::warn!(error = %e, "cannot register the review service yet; retrying");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    };
    let endpoints = async {
        let reviews = service
            .endpoint_builder()
            .name("reviews")
            .add(wire::review_subject(&mesh.runtime))
            .await?;
        let cancels = service
            .endpoint_builder()
            .name("cancel")
            .add(wire::cancel_subject(&mesh.runtime))
            .await?;
        Ok::<_, async_nats::Error>((reviews, cancels))
    };
    let (mut reviews, mut cancels) = match endpoints.await {
        Ok(endpoints) => endpoints,
        Err(e) => {
            tracing::error!(error = %e, "cannot add the review endpoints; not offering reviews");
            return;
        }
    };
    tracing::info!(runtime = %mesh.runtime, capabilities = ?capabilities, "offering reviews");
    let working: Arc<Mutex<HashMap<String, (String, CancellationToken)>>> = Arc::default();
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            request = reviews.next() => {
                let Some(request) = request else { break };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    let id = lenient_id(&request.message.payload);
                    respond(&mesh, &request, &id, busy()).await;
                    continue;
                };
                let (jobs, mesh, working, cancel) =
                    (jobs.clone(), mesh.clone(), working.clone(), cancel.clone());
                tasks.spawn(async move {
                    handle(&jobs, &mesh, &working, request, cancel).await;
                    drop(slot);
                });
            }
            notice = cancels.next() => {
                let Some(notice) = notice else { break };
                cancel_review(&mesh, &working, &notice.message.payload);
                let _ = notice.respond(Ok(bytes::Bytes::new())).await;
            }
        }
    }
    let _ = service.stop().await;
    drop((reviews, cancels));
    tokio::select! {
        () = cancel.cancelled() => {}
        () = async { while tasks.join_next().await.is_some() {} } => {}
    }
    tasks.shutdown().await;
}

fn busy() -> ReplyOutcome {
    ReplyOutcome::Failed {
        failure: FailureKind::RateLimited,
        diagnostic: format!(
            "the peer is working on {MAX_IN_FLIGHT} reviews already; ask again later"
        ),
        retry_after_s: Some(BUSY_RETRY_S),
    }
}

/// The `request_id` of a request that did not parse, if it has one (inside its
/// envelope, or bare).
fn lenient_id(payload: &[u8]) -> String {
    let value = serde_json::from_slice::<serde_json::Value>(payload).ok();
    let body = value
        .as_ref()
        .and_then(|v| v.get("body")?.as_str())
        .and_then(|body| serde_json::from_str::<serde_json::Value>(body).ok());
    body.or(value)
        .and_then(|v| v.get("request_id")?.as_str().map(str::to_string))
        .filter(|id| wire::valid_runtime_id(id))
        .unwrap_or_default()
}

async fn respond(
    mesh: &Mesh,
    request: &async_nats::service::Request,
    id: &str,
    outcome: ReplyOutcome,
) {
    match sealed_reply(mesh, id, outcome) {
        Ok(bytes) => {
            if let Err(e) = request.respond(Ok(bytes.into())).await {
                tracing::warn!(error = %e, "could not send a review reply");
            }
        }
        Err(e) => tracing::error!(error = %e, "could not encode a review reply"),
    }
}

/// The reply to request `id`, scrubbed of secret shapes and sealed by this runtime's key.
pub(crate) fn sealed_reply(
    mesh: &Mesh,
    id: &str,
    outcome: ReplyOutcome,
) -> Result<Vec<u8>, serde_json::Error> {
    let reply = ReviewReply {
        protocol: PROTOCOL,
        request_id: id.to_string(),
        outcome: scrubbed(outcome),
    };
    let body = serde_json::to_vec(&reply)?;
    Ok(mesh.identity.seal(Kind::Reply, &body))
}

/// Every text of a reply with secret shapes removed.
pub(crate) fn scrubbed(outcome: ReplyOutcome) -> ReplyOutcome {
    let scrub = |text: &str| redact::scrub(text, &mut BTreeSet::new());
    let scrub_all = |list: Vec<String>| list.iter().map(|t| scrub(t)).collect();
    match outcome {
        ReplyOutcome::Completed {
            mut answer,
            source,
            usage,
        } => {
            answer.conclusion = scrub(&answer.conclusion);
            answer.assumptions = scrub_all(answer.assumptions);
            answer.risks = scrub_all(answer.risks);
            answer.actions = scrub_all(answer.actions);
            answer.falsifiers = scrub_all(answer.falsifiers);
            ReplyOutcome::Completed {
                answer,
                source: scrub(&source),
                usage,
            }
        }
        ReplyOutcome::Failed {
            failure,
            diagnostic,
            retry_after_s,
        } => ReplyOutcome::Failed {
            failure,
            diagnostic: scrub(&diagnostic),
            retry_after_s,
        },
    }
}

/// A request read strictly, or the failure to answer it with. It must be sealed by its
/// asker: the envelope's runtime id is the request's `asker`.
fn read_request(payload: &[u8]) -> Result<ReviewRequest, String> {
    if payload.len() > wire::MAX_MESSAGE_BYTES {
        return Err(format!(
            "the request is {} bytes, over the bound of {}",
            payload.len(),
            wire::MAX_MESSAGE_BYTES
        ));
    }
    let opened = identity::open(Kind::Request, payload).map_err(|e| {
        format!("the request is not sealed by its asker's key ({e:?}); it was not read")
    })?;
    let request: ReviewRequest = serde_json::from_str(&opened.body)
        .map_err(|e| format!("the request is unreadable: {e}"))?;
    if request.asker != opened.runtime {
        return Err(format!(
            "the request names asker `{}` but is sealed by `{}`",
            request.asker.escape_debug(),
            opened.runtime
        ));
    }
    if request.protocol != PROTOCOL {
        return Err(format!(
            "the request speaks protocol {}; this peer speaks {PROTOCOL}",
            request.protocol
        ));
    }
    if !wire::valid_runtime_id(&request.request_id) || !wire::valid_runtime_id(&request.asker) {
        return Err("the request's `request_id` or `asker` is not one subject token".into());
    }
    if request.question.trim().is_empty() {
        return Err("the request has no question".into());
    }
    Ok(request)
}

async fn handle(
    jobs: &Arc<Jobs>,
    mesh: &Arc<Mesh>,
    working: &Mutex<HashMap<String, (String, CancellationToken)>>,
    request: async_nats::service::Request,
    stop: CancellationToken,
) {
    let asked = match read_request(&request.message.payload) {
        Ok(asked) => asked,
        Err(why) => {
            let id = lenient_id(&request.message.payload);
            let outcome = ReplyOutcome::Failed {
                failure: FailureKind::Error,
                diagnostic: why,
                retry_after_s: None,
            };
            return respond(mesh, &request, &id, outcome).await;
        }
    };
    let question = redact::scrub(&asked.question, &mut BTreeSet::new());
    let deadline_ms = asked.deadline_ms.min(MAX_DEADLINE_MS);
    tracing::info!(request = %asked.request_id, asker = %asked.asker, mode = ?mesh.offer, "review asked");
    match mesh.offer {
        Some(Offer::Inbox) => {
            let Some(inbox) = &mesh.inbox else { return };
            let Some(reply_to) = request.message.reply.clone() else {
                return;
            };
            if inbox.list().len() >= super::inbox::MAX_WAITING {
                return respond(mesh, &request, &asked.request_id, busy()).await;
            }
            let now = time::OffsetDateTime::now_utc();
            let deadline = now + time::Duration::milliseconds(deadline_ms as i64);
            let rfc = |t: time::OffsetDateTime| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default()
            };
            let item = InboxItem {
                id: asked.request_id.clone(),
                asker: asked.asker.clone(),
                question,
                capabilities: asked.capabilities.clone(),
                received_at: rfc(now),
                deadline_at: rfc(deadline),
                reply_to: reply_to.to_string(),
            };
            let inbox = inbox.clone();
            let kept = tokio::task::spawn_blocking(move || inbox.add(&item)).await;
            let diagnostic = match kept {
                Ok(Ok(())) => None,
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::AlreadyExists => Some(format!(
                    "a review `{}` is already waiting in this inbox; it belongs to the asker \
                     that sent it and is not replaced",
                    asked.request_id
                )),
                _ => Some("the peer could not keep the review in its inbox".to_string()),
            };
            if let Some(diagnostic) = diagnostic {
                tracing::warn!(request = %asked.request_id, asker = %asked.asker, %diagnostic, "review refused");
                let outcome = ReplyOutcome::Failed {
                    failure: FailureKind::Error,
                    diagnostic,
                    retry_after_s: None,
                };
                respond(mesh, &request, &asked.request_id, outcome).await;
            }
            // Answered later by `reviews answer`, straight to the reply subject.
        }
        _ => {
            let token = stop.child_token();
            let taken = {
                let mut working = working.lock().unwrap_or_else(|p| p.into_inner());
                let taken = working.contains_key(&asked.request_id);
                if !taken {
                    working.insert(
                        asked.request_id.clone(),
                        (asked.asker.clone(), token.clone()),
                    );
                }
                taken
            };
            if taken {
                {
                    let outcome = ReplyOutcome::Failed {
                        failure: FailureKind::Error,
                        diagnostic: format!(
                            "a review `{}` is already being relayed; it belongs to the asker \
                             that sent it",
                            asked.request_id
                        ),
                        retry_after_s: None,
                    };
                    return respond(mesh, &request, &asked.request_id, outcome).await;
                }
            }
            let outcome = relay::review(
                jobs,
                mesh,
                &asked,
                &question,
                Duration::from_millis(deadline_ms),
                token,
            )
            .await;
            working
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&asked.request_id);
            respond(mesh, &request, &asked.request_id, outcome).await;
        }
    }
}

/// A cancel notice: the relay's job for that request is cancelled, or the inbox item
/// dropped, when the notice is sealed by the runtime that asked.
fn cancel_review(
    mesh: &Mesh,
    working: &Mutex<HashMap<String, (String, CancellationToken)>>,
    payload: &[u8],
) {
    let Ok(opened) = identity::open(Kind::Cancel, payload) else {
        return;
    };
    let Ok(notice) = serde_json::from_str::<CancelNotice>(&opened.body) else {
        return;
    };
    if notice.asker != opened.runtime {
        return;
    }
    if let Some((asker, token)) = working
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&notice.request_id)
    {
        if *asker == notice.asker {
            tracing::info!(request = %notice.request_id, "review cancelled by its asker");
            token.cancel();
        }
        return;
    }
    if let Some(inbox) = &mesh.inbox {
        if inbox
            .get(&notice.request_id)
            .is_some_and(|item| item.asker == notice.asker)
        {
            inbox.remove(&notice.request_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_strictly() {
        let asker = identity::Identity::generate("a");
        let a = asker.runtime();
        let seal = |v: &serde_json::Value| asker.seal(Kind::Request, v.to_string().as_bytes());
        let good = serde_json::json!({"protocol": 1, "request_id": "R1", "asker": a,
            "question": "why?", "capabilities": [], "deadline_ms": 10});
        assert!(read_request(&seal(&good)).is_ok());
        // Unsealed, or sealed by someone other than the asker it names: refused.
        assert!(read_request(good.to_string().as_bytes()).is_err());
        let other = identity::Identity::generate("a");
        assert!(read_request(&other.seal(Kind::Request, good.to_string().as_bytes())).is_err());
        assert!(read_request(&asker.seal(Kind::Cancel, good.to_string().as_bytes())).is_err());
        for bad in [
            serde_json::json!({"protocol": 2, "request_id": "R1", "asker": a,
                "question": "why?", "capabilities": [], "deadline_ms": 10}),
            serde_json::json!({"protocol": 1, "request_id": "R.1", "asker": a,
                "question": "why?", "capabilities": [], "deadline_ms": 10}),
            serde_json::json!({"protocol": 1, "request_id": "R1", "asker": a,
                "question": " ", "capabilities": [], "deadline_ms": 10}),
            serde_json::json!({"protocol": 1, "request_id": "R1", "asker": a,
                "question": "q", "capabilities": [], "deadline_ms": 10, "records": []}),
        ] {
            assert!(read_request(&seal(&bad)).is_err(), "{bad}");
        }
        assert_eq!(lenient_id(br#"{"request_id": "R9", "x": 1}"#), "R9");
        assert_eq!(lenient_id(&seal(&good)), "R1");
        assert_eq!(lenient_id(b"garbage"), "");
    }

    #[test]
    fn replies_leave_scrubbed() {
        let key = format!("sk-ant-api03-{}", "a".repeat(40));
        let outcome = scrubbed(ReplyOutcome::Failed {
            failure: FailureKind::Error,
            diagnostic: format!("bad key {key}"),
            retry_after_s: None,
        });
        let ReplyOutcome::Failed { diagnostic, .. } = outcome else {
            panic!("a failure")
        };
        assert!(!diagnostic.contains(&key), "{diagnostic}");
    }
}
