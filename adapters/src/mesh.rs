//! The `mesh` transport: a review asked of a peer daemon over NATS.
//!
//! A peer offering reviews registers the NATS service [`wire::SERVICE_NAME`] with a review
//! endpoint on `advisord.reviews.<its runtime id>`. The asking daemon discovers peers (its
//! own business, not this module's) and lists each as an advisor `mesh:<runtime id>` whose
//! `runtime` setting names the peer. One exchange here is one request on that subject:
//!
//! - every message is sealed by its sender's key ([`identity`]): the request and the
//!   cancel notice by this daemon's, and a reply is believed only when it is sealed by the
//!   key the peer announced (the advisor's `key` setting, to which its runtime id is
//!   bound). A reply sealed by anyone else is `malformed` ("refused"): nobody answers for
//!   a runtime whose key it does not hold;
//! - the answer's `source` is the peer's verified identity (the advisor's `identity`
//!   setting: its pinned owner, else its key), and it is vouched for only when the peer is
//!   pinned (`pinned` setting); an unpinned peer's answer is recorded, never counted;
//! - a rate limit's `retry_after_s` is cut to [`wire::MAX_RETRY_AFTER_S`];
//! - the request carries the question (scrubbed of secret shapes by [`MeshLink::scrub`]),
//!   the capabilities the plan selected the peer for ([`ASKED_CAPABILITIES`], not the
//!   peer's whole offer), the remaining deadline and a fresh request id; the remaining
//!   deadline is also how long the exchange waits;
//! - the reply is read strictly: a reply naming another request id is ignored (at most
//!   [`MAX_IGNORED`] of them, then the peer is `malformed`), one that does not parse is
//!   `malformed`, a peer's typed failure passes through, a completed answer is handed to
//!   the contract as JSON (which normalises it again) with the source the peer named;
//! - no responders is `unavailable` (and [`MeshLink::on_gone`] is told, so discovery drops
//!   the peer at once); so is a peer discovery no longer knows ([`MeshLink::present`],
//!   checked every [`WATCH_EVERY`]), and a bus down for [`BUS_DOWN_GRACE`]: an exchange
//!   with a peer known to be gone never waits out its deadline; the deadline is `timeout`;
//! - a cancellation, or the contract dropping the exchange at the deadline, sends a cancel
//!   notice to `advisord.cancel.<runtime id>` so a relaying peer cancels its own job.

pub mod identity;
pub mod wire;

use crate::contract::{Adapter, AdvisorSpec, Answer, Failure, FailureKind, Io};
use async_nats::StatusCode;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::StreamExt;
use identity::{Identity, Kind, Unsealed};
use std::sync::Arc;
use tokio::time::Instant;
use wire::{CancelNotice, ReplyOutcome, ReviewReply, ReviewRequest, PROTOCOL};

/// The registry name of the transport (and the catalogue `adapter` of every peer).
pub const ADAPTER: &str = "mesh";

/// The prefix of a mesh advisor's id: `mesh:<runtime id>`.
pub const ID_PREFIX: &str = "mesh:";

/// Replies for other requests a peer may send before it is judged `malformed`.
pub const MAX_IGNORED: usize = 32;

/// Removes secret shapes from a text before it crosses the bus.
pub type Scrub = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Told the runtime id of a peer that answered "no responders": it is gone.
pub type OnGone = Arc<dyn Fn(&str) + Send + Sync>;

/// Whether discovery still knows the peer of this runtime id.
pub type Present = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// How often an exchange checks that its peer is still known and the bus up.
pub const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// How long the bus may be down during an exchange before it ends `unavailable` (a
/// server restart or a fail-over to another node of a cluster is shorter).
pub const BUS_DOWN_GRACE: std::time::Duration = std::time::Duration::from_millis(1500);

/// What the transport needs from the daemon that joined the mesh.
#[derive(Clone)]
pub struct MeshLink {
    /// The connection (it reconnects by itself).
    pub client: async_nats::Client,
    /// This daemon's key pair and runtime id: it seals requests and cancel notices.
    pub identity: Identity,
    /// Applied to the question before it is sent.
    pub scrub: Scrub,
    /// Called when a peer has no responders.
    pub on_gone: OnGone,
    /// Whether discovery still knows a peer (it left after missing its sweeps).
    pub present: Present,
}

/// The mesh adapter: with a link, asks peers; without one (a daemon not on a mesh, or
/// the CLI), every exchange is `unavailable`.
#[derive(Clone, Default)]
pub struct MeshAdapter {
    link: Option<MeshLink>,
}

impl MeshAdapter {
    /// The adapter of a daemon that joined the mesh through `link`.
    pub fn new(link: MeshLink) -> MeshAdapter {
        MeshAdapter { link: Some(link) }
    }
}

/// The transport's registry line, without a link: the daemon replaces it with
/// [`MeshAdapter::new`] once it joins a mesh.
pub fn adapters() -> Vec<(&'static str, Arc<dyn Adapter>)> {
    vec![(ADAPTER, Arc::new(MeshAdapter::default()))]
}

impl Adapter for MeshAdapter {
    fn exchange<'a>(
        &'a self,
        advisor: &'a AdvisorSpec,
        prompt: &'a str,
        io: &'a Io,
    ) -> BoxFuture<'a, Result<Answer, Failure>> {
        Box::pin(async move {
            let Some(link) = &self.link else {
                return Err(Failure::new(
                    FailureKind::Unavailable,
                    "this daemon is not on a mesh; start `advisord` with `--mesh URL` or \
                     `ADVISORD_MESH_URL`",
                ));
            };
            ask(link, advisor, prompt, io).await
        })
    }

    fn validate(&self, advisor: &AdvisorSpec) -> Result<(), (String, String)> {
        Err((
            "adapter".to_string(),
            format!(
                "advisor `{}`: mesh advisors are discovered at run time, never listed in a \
                 catalogue; remove the entry and start the peer's daemon with \
                 `--offer-reviews relay|inbox`",
                advisor.id
            ),
        ))
    }
}

/// The peer's runtime id from the advisor's `runtime` setting.
fn runtime_of(advisor: &AdvisorSpec) -> Result<&str, Failure> {
    advisor
        .settings
        .get("runtime")
        .and_then(|v| v.as_str())
        .filter(|r| wire::valid_runtime_id(r))
        .ok_or_else(|| {
            Failure::new(
                FailureKind::Error,
                &format!(
                    "mesh advisor `{}` has no valid `runtime` setting; peers are discovered, \
                     never listed",
                    advisor.id
                ),
            )
        })
}

/// The key the peer announced (its runtime id is bound to it).
fn key_of<'a>(advisor: &'a AdvisorSpec, runtime: &str) -> Result<&'a str, Failure> {
    advisor
        .settings
        .get("key")
        .and_then(|v| v.as_str())
        .filter(|key| identity::bound(runtime, key))
        .ok_or_else(|| {
            Failure::new(
                FailureKind::Error,
                &format!(
                    "mesh advisor `{}` has no key its runtime id is bound to; peers are \
                     discovered, never listed",
                    advisor.id
                ),
            )
        })
}

/// How the peer's answer is credited: its verified identity as the source, and whether
/// it is pinned (vouched for).
fn credit_of(advisor: &AdvisorSpec, key: &str) -> (String, bool) {
    let identity = advisor
        .settings
        .get("identity")
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| format!("peer-key:{}", identity::fingerprint(key)));
    let pinned = advisor
        .settings
        .get("pinned")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    (identity, pinned)
}

/// The setting the asking daemon sets on a peer for one exchange: the capabilities its
/// plan selected the peer for. The request carries those, never the peer's whole offer
/// (its `capabilities` setting), so a relay asks its own advisors for what was wanted.
pub const ASKED_CAPABILITIES: &str = "asked_capabilities";

/// The capabilities to ask the peer for: [`ASKED_CAPABILITIES`], none when unset.
fn capabilities_of(advisor: &AdvisorSpec) -> Vec<String> {
    advisor
        .settings
        .get(ASKED_CAPABILITIES)
        .and_then(|v| v.as_array())
        .map(|list| {
            list.iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Sends a cancel notice for the request when dropped while armed: the exchange was
/// cancelled, or the contract dropped it at the deadline.
struct CancelGuard {
    client: async_nats::Client,
    subject: String,
    notice: Option<Bytes>,
}

impl CancelGuard {
    fn disarm(&mut self) {
        self.notice = None;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        let Some(notice) = self.notice.take() else {
            return;
        };
        let (client, subject) = (self.client.clone(), std::mem::take(&mut self.subject));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = client.publish(subject, notice).await;
                let _ = client.flush().await;
            });
        }
    }
}

async fn ask(
    link: &MeshLink,
    advisor: &AdvisorSpec,
    prompt: &str,
    io: &Io,
) -> Result<Answer, Failure> {
    let runtime = runtime_of(advisor)?;
    let key = key_of(advisor, runtime)?;
    let remaining = io.deadline.saturating_duration_since(Instant::now());
    if remaining.is_zero() {
        return Err(Failure::new(
            FailureKind::Timeout,
            "the deadline passed before the review was sent",
        ));
    }
    let request_id = ulid::Ulid::new().to_string();
    let request = ReviewRequest {
        protocol: PROTOCOL,
        request_id: request_id.clone(),
        asker: link.identity.runtime().to_string(),
        question: (link.scrub)(prompt),
        capabilities: capabilities_of(advisor),
        deadline_ms: u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX),
    };
    let payload = serde_json::to_vec(&request)
        .map_err(|e| Failure::new(FailureKind::Error, &format!("encoding the request: {e}")))?;
    let payload = link.identity.seal(Kind::Request, &payload);
    let client = &link.client;
    let unreachable = |what: &str, e: &dyn std::fmt::Display| {
        Failure::new(
            FailureKind::Unavailable,
            &format!("{what} peer `{runtime}` over the mesh: {e}"),
        )
    };
    let inbox = client.new_inbox();
    let mut replies = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| unreachable("cannot listen for", &e))?;
    let notice = CancelNotice {
        protocol: PROTOCOL,
        request_id: request_id.clone(),
        asker: link.identity.runtime().to_string(),
    };
    let mut guard = CancelGuard {
        client: client.clone(),
        subject: wire::cancel_subject(runtime),
        notice: serde_json::to_vec(&notice)
            .ok()
            .map(|n| Bytes::from(link.identity.seal(Kind::Cancel, &n))),
    };
    client
        .publish_with_reply(wire::review_subject(runtime), inbox, payload.into())
        .await
        .map_err(|e| unreachable("cannot ask", &e))?;
    let mut ignored = 0usize;
    let mut watch = tokio::time::interval(WATCH_EVERY);
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut down_since: Option<Instant> = None;
    loop {
        let message = tokio::select! {
            biased;
            () = io.cancel.cancelled() => {
                return Err(Failure::new(
                    FailureKind::Cancelled,
                    &format!("the review was cancelled; peer `{runtime}` was told"),
                ));
            }
            () = tokio::time::sleep_until(io.deadline) => {
                return Err(Failure::new(
                    FailureKind::Timeout,
                    &format!("peer `{runtime}` gave no answer within the deadline"),
                ));
            }
            message = replies.next() => message,
            _ = watch.tick() => {
                if !(link.present)(runtime) {
                    return Err(Failure::new(
                        FailureKind::Unavailable,
                        &format!("peer `{runtime}` left the mesh during the review"),
                    ));
                }
                if client.connection_state() == async_nats::connection::State::Connected {
                    down_since = None;
                } else if down_since.get_or_insert_with(Instant::now).elapsed() >= BUS_DOWN_GRACE {
                    return Err(Failure::new(
                        FailureKind::Unavailable,
                        &format!(
                            "the mesh has been down for {} ms during the review of peer \
                             `{runtime}`",
                            BUS_DOWN_GRACE.as_millis()
                        ),
                    ));
                }
                continue;
            }
        };
        let Some(message) = message else {
            guard.disarm();
            return Err(Failure::new(
                FailureKind::Unavailable,
                "the mesh connection closed during the review",
            ));
        };
        if message.status == Some(StatusCode::NO_RESPONDERS) {
            guard.disarm();
            (link.on_gone)(runtime);
            return Err(Failure::new(
                FailureKind::Unavailable,
                &format!("no responders: peer `{runtime}` has left the mesh"),
            ));
        }
        match read_reply(&message.payload, &request_id, runtime, key) {
            Read::Other => {
                ignored += 1;
                if ignored > MAX_IGNORED {
                    guard.disarm();
                    return Err(Failure::new(
                        FailureKind::Malformed,
                        &format!(
                            "peer `{runtime}` sent more than {MAX_IGNORED} replies to requests \
                             it was not asked"
                        ),
                    ));
                }
            }
            Read::Garbage(why) => {
                guard.disarm();
                return Err(Failure::new(
                    FailureKind::Malformed,
                    &format!("peer `{runtime}` answered something unreadable: {why}"),
                ));
            }
            Read::Forged(why) => {
                guard.disarm();
                return Err(Failure::new(
                    FailureKind::Malformed,
                    &format!(
                        "refused a reply for peer `{runtime}` not sealed by its key ({why}): \
                         someone else answered in its name"
                    ),
                ));
            }
            Read::Reply(outcome) => {
                guard.disarm();
                let (source, vouched) = credit_of(advisor, key);
                return answer_of(outcome, &source, vouched);
            }
        }
    }
}

/// One message on the reply inbox, read.
enum Read {
    /// The reply to this request.
    Reply(ReplyOutcome),
    /// A well-formed reply to another request: ignored.
    Other,
    /// Not a reply at all.
    Garbage(String),
    /// A reply not sealed by the peer's key.
    Forged(String),
}

/// Read one message on the reply inbox of a request to `runtime`, whose key is `key`.
fn read_reply(payload: &[u8], request_id: &str, runtime: &str, key: &str) -> Read {
    if payload.len() > wire::MAX_MESSAGE_BYTES {
        return Read::Garbage(format!(
            "{} bytes, over the bound of {}",
            payload.len(),
            wire::MAX_MESSAGE_BYTES
        ));
    }
    let opened = match identity::open(Kind::Reply, payload) {
        Ok(opened) => opened,
        Err(Unsealed::Garbage(why)) => return Read::Garbage(why),
        Err(Unsealed::Forged(why)) => return Read::Forged(why),
    };
    if opened.runtime != runtime || opened.key != key {
        return Read::Forged(format!(
            "it is sealed by `{}`, not by the key peer `{runtime}` announced",
            opened.runtime
        ));
    }
    match serde_json::from_str::<ReviewReply>(&opened.body) {
        Ok(reply) if reply.protocol != PROTOCOL => Read::Garbage(format!(
            "protocol {} (this daemon speaks {PROTOCOL})",
            reply.protocol
        )),
        Ok(reply) if reply.request_id != request_id => Read::Other,
        Ok(reply) => Read::Reply(reply.outcome),
        Err(e) => Read::Garbage(e.to_string()),
    }
}

/// The contract's answer or failure of a verified reply; a completed answer is credited
/// to `source` (the peer's verified identity, not what it says produced the answer), and
/// `vouched` for only when the peer is pinned.
fn answer_of(outcome: ReplyOutcome, source: &str, vouched: bool) -> Result<Answer, Failure> {
    match outcome {
        ReplyOutcome::Completed { answer, usage, .. } => {
            let text = serde_json::to_string(&answer).map_err(|e| {
                Failure::new(FailureKind::Error, &format!("re-encoding the answer: {e}"))
            })?;
            Ok(Answer {
                text,
                usage,
                source: Some(source.chars().take(200).collect()),
                vouched,
            })
        }
        ReplyOutcome::Failed {
            failure,
            diagnostic,
            retry_after_s,
        } => Err(Failure {
            retry_after_s: retry_after_s
                .filter(|_| failure == FailureKind::RateLimited)
                .map(|s| s.min(wire::MAX_RETRY_AFTER_S)),
            ..Failure::new(failure, &diagnostic)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalise::{Normalised, Stance};

    #[test]
    fn a_request_asks_for_what_the_plan_wants_never_the_whole_offer() {
        let mut settings = serde_json::Map::new();
        settings.insert(
            "capabilities".into(),
            serde_json::json!(["code_review", "debugging", "reviews"]),
        );
        let mut advisor = AdvisorSpec {
            id: "mesh:peer".into(),
            adapter: ADAPTER.into(),
            executable: None,
            credential: None,
            settings,
        };
        assert!(capabilities_of(&advisor).is_empty(), "not the offer");
        advisor
            .settings
            .insert(ASKED_CAPABILITIES.into(), serde_json::json!(["debugging"]));
        assert_eq!(capabilities_of(&advisor), vec!["debugging"]);
    }

    fn normalised() -> Normalised {
        Normalised {
            conclusion: "keep the lock".into(),
            stance: Stance::Supports,
            assumptions: vec!["one writer".into()],
            risks: vec![],
            actions: vec![],
            falsifiers: vec!["two writers".into()],
            confidence: Some(0.5),
            invariants: vec![],
        }
    }

    fn reply(id: &str) -> Vec<u8> {
        serde_json::to_vec(&ReviewReply {
            protocol: PROTOCOL,
            request_id: id.into(),
            outcome: ReplyOutcome::Completed {
                answer: normalised(),
                source: "v/m".into(),
                usage: None,
            },
        })
        .unwrap()
    }

    #[test]
    fn replies_are_read_strictly() {
        let peer = Identity::generate("peer");
        let (runtime, key) = (peer.runtime(), peer.public_key());
        let sealed = |id: &str| peer.seal(Kind::Reply, &reply(id));
        let read = |payload: &[u8]| read_reply(payload, "q1", runtime, &key);
        assert!(matches!(read(&sealed("q1")), Read::Reply(_)));
        assert!(matches!(read(&sealed("q2")), Read::Other));
        assert!(matches!(read(b"not json"), Read::Garbage(_)));
        // A reply that is not sealed at all is not a reply.
        assert!(matches!(read(&reply("q1")), Read::Garbage(_)));
        assert!(matches!(
            read(&peer.seal(
                Kind::Reply,
                br#"{"protocol": 1, "request_id": "q1", "status": "bogus"}"#
            )),
            Read::Garbage(_)
        ));
        let huge = vec![b' '; wire::MAX_MESSAGE_BYTES + 1];
        assert!(matches!(read(&huge), Read::Garbage(_)));
    }

    #[test]
    fn a_reply_sealed_by_anyone_but_the_peer_is_forged() {
        let peer = Identity::generate("beta");
        let impostor = Identity::generate("beta");
        let forged = impostor.seal(Kind::Reply, &reply("q1"));
        assert!(matches!(
            read_reply(&forged, "q1", peer.runtime(), &peer.public_key()),
            Read::Forged(_)
        ));
        // Its own envelope, with the victim's runtime id: the seal does not hold.
        let mut envelope: identity::Sealed = serde_json::from_slice(&forged).unwrap();
        envelope.runtime = peer.runtime().to_string();
        envelope.key = peer.public_key();
        assert!(matches!(
            read_reply(
                &serde_json::to_vec(&envelope).unwrap(),
                "q1",
                peer.runtime(),
                &peer.public_key()
            ),
            Read::Forged(_)
        ));
        // A request or a cancel notice of the peer's is not a reply.
        assert!(matches!(
            read_reply(
                &peer.seal(Kind::Request, &reply("q1")),
                "q1",
                peer.runtime(),
                &peer.public_key()
            ),
            Read::Forged(_)
        ));
    }

    #[test]
    fn a_completed_reply_is_credited_to_the_verified_identity() {
        let answer = answer_of(
            ReplyOutcome::Completed {
                answer: normalised(),
                source: " whatever/it-claims ".into(),
                usage: None,
            },
            "peer:alice",
            false,
        )
        .unwrap();
        assert_eq!(answer.source.as_deref(), Some("peer:alice"));
        assert!(!answer.vouched, "an unpinned peer is not vouched for");
        assert_eq!(crate::contract::read_answer(&answer.text), Ok(normalised()));
        let failed = answer_of(
            ReplyOutcome::Failed {
                failure: FailureKind::AuthFailed,
                diagnostic: "not logged in\n".into(),
                retry_after_s: Some(3),
            },
            "peer:alice",
            true,
        )
        .unwrap_err();
        assert_eq!(failed.kind, FailureKind::AuthFailed);
        assert_eq!(failed.diagnostic, "not logged in");
        assert_eq!(failed.retry_after_s, None);
    }

    #[test]
    fn a_peers_retry_after_is_at_most_an_hour() {
        let failed = answer_of(
            ReplyOutcome::Failed {
                failure: FailureKind::RateLimited,
                diagnostic: "come back in 30000 years".into(),
                retry_after_s: Some(1_000_000_000_000),
            },
            "peer:x",
            true,
        )
        .unwrap_err();
        assert_eq!(failed.retry_after_s, Some(wire::MAX_RETRY_AFTER_S));
        assert_eq!(wire::MAX_RETRY_AFTER_S, 3600);
    }
}
