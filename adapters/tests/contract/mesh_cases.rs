//! The `mesh` adapter through the table: a real `nats-server` on a loopback port (the
//! binary named by `ADVISORD_NATS_SERVER`, else the CI cache's; without one the rows fail,
//! naming `scripts/ci/install-nats.sh`) and a fake peer answering on its review subject in
//! the wire format of `advisord_adapters::mesh::wire`, sealed by its own key.
//!
//! `unavailable` is the bus's own no-responders (no peer listens on the subject);
//! `deadline` and `cancellation` are a peer that never answers, and the release checked
//! is the cancel notice the peer must receive for that very request.

use crate::{
    advisor, Rig, Scenario, Setup, ANSWER, MALFORMED_ANSWER, RETRY_AFTER_S, SLOW_DELAY, USAGE,
};
use advisord_adapters::contract::FailureKind;
use advisord_adapters::mesh::identity::{self, Identity, Kind};
use advisord_adapters::mesh::wire::{self, CancelNotice, ReplyOutcome, ReviewReply, ReviewRequest};
use advisord_adapters::mesh::{MeshAdapter, MeshLink};
use advisord_adapters::normalise::normalise;
use advisord_fakes::nats::NatsServer;
use futures::future::BoxFuture;
use futures::StreamExt;
use std::sync::{Arc, Mutex};

/// The fake peer's key pair (its runtime id is bound to it).
fn peer() -> &'static Identity {
    static PEER: std::sync::OnceLock<Identity> = std::sync::OnceLock::new();
    PEER.get_or_init(|| Identity::generate("contract-peer"))
}

/// A fake peer and the mesh adapter asking it, per scenario.
pub struct MeshRig;

/// What the fake peer saw: the request ids asked, and the ids of cancel notices.
#[derive(Default)]
struct Seen {
    asked: Vec<String>,
    cancelled: Vec<String>,
}

fn failed(kind: FailureKind, diagnostic: &str, retry_after_s: Option<u64>) -> ReplyOutcome {
    ReplyOutcome::Failed {
        failure: kind,
        diagnostic: diagnostic.to_string(),
        retry_after_s,
    }
}

/// The reply payload for `scenario` to `request_id`, or `None` for a peer that never answers.
fn reply(scenario: Scenario, request_id: &str) -> Option<Vec<u8>> {
    let outcome = match scenario {
        Scenario::Answer | Scenario::SlowAnswer => ReplyOutcome::Completed {
            answer: normalise(ANSWER).expect("the canonical answer reads"),
            source: "fake/model".to_string(),
            usage: Some(USAGE),
        },
        Scenario::Empty => failed(FailureKind::Empty, "the peer's advisor said nothing", None),
        // Not a reply at all: the peer passes on what its advisor wrote.
        Scenario::Malformed => return Some(MALFORMED_ANSWER.as_bytes().to_vec()),
        Scenario::RateLimited => failed(
            FailureKind::RateLimited,
            "429 slow down",
            Some(RETRY_AFTER_S),
        ),
        Scenario::AuthFailed => failed(FailureKind::AuthFailed, "401 bad key", None),
        Scenario::Error => failed(FailureKind::Error, "500 internal", None),
        Scenario::Unavailable | Scenario::Deadline | Scenario::Cancellation => return None,
    };
    let reply = ReviewReply {
        protocol: wire::PROTOCOL,
        request_id: request_id.to_string(),
        outcome,
    };
    let body = serde_json::to_vec(&reply).expect("a reply serialises");
    Some(peer().seal(Kind::Reply, &body))
}

/// Answer reviews on `PEER`'s subject as `scenario` says, and note cancel notices.
async fn serve(url: String, scenario: Scenario, seen: Arc<Mutex<Seen>>) -> async_nats::Client {
    let client = async_nats::connect(url)
        .await
        .expect("the fake peer connects");
    let mut reviews = client
        .subscribe(wire::review_subject(peer().runtime()))
        .await
        .expect("the review subject");
    let mut cancels = client
        .subscribe(wire::cancel_subject(peer().runtime()))
        .await
        .expect("the cancel subject");
    client.flush().await.expect("the subscriptions are made");
    let answering = client.clone();
    let noted = seen.clone();
    tokio::spawn(async move {
        while let Some(message) = reviews.next().await {
            let opened = identity::open(Kind::Request, &message.payload).expect("a sealed request");
            let asked: ReviewRequest =
                serde_json::from_str(&opened.body).expect("a review request");
            assert_eq!(asked.asker, opened.runtime, "sealed by its asker");
            assert_eq!(asked.protocol, wire::PROTOCOL);
            assert!(asked.deadline_ms > 0, "the request carries its deadline");
            noted.lock().unwrap().asked.push(asked.request_id.clone());
            let (Some(reply_to), Some(payload)) =
                (message.reply.clone(), reply(scenario, &asked.request_id))
            else {
                continue;
            };
            let client = answering.clone();
            tokio::spawn(async move {
                if scenario == Scenario::SlowAnswer {
                    tokio::time::sleep(SLOW_DELAY).await;
                }
                let _ = client.publish(reply_to, payload.into()).await;
                let _ = client.flush().await;
            });
        }
    });
    tokio::spawn(async move {
        while let Some(message) = cancels.next().await {
            let Ok(opened) = identity::open(Kind::Cancel, &message.payload) else {
                continue;
            };
            if let Ok(notice) = serde_json::from_str::<CancelNotice>(&opened.body) {
                seen.lock().unwrap().cancelled.push(notice.request_id);
            }
        }
    });
    client
}

impl Rig for MeshRig {
    fn prepare(&self, scenario: Scenario) -> BoxFuture<'_, Setup> {
        Box::pin(async move {
            let nats = NatsServer::start();
            let seen: Arc<Mutex<Seen>> = Arc::default();
            // No peer at all for `unavailable`: the bus answers no responders.
            let serving = match scenario {
                Scenario::Unavailable => None,
                _ => Some(serve(nats.url(), scenario, seen.clone()).await),
            };
            let client = async_nats::connect(nats.url())
                .await
                .expect("the asker connects");
            let gone: Arc<Mutex<Vec<String>>> = Arc::default();
            let told = gone.clone();
            let adapter = MeshAdapter::new(MeshLink {
                client,
                identity: Identity::generate("contract-asker"),
                scrub: Arc::new(|text: &str| text.to_string()),
                on_gone: Arc::new(move |runtime: &str| told.lock().unwrap().push(runtime.into())),
                present: Arc::new(|_: &str| true),
            });
            let setup = Setup::new(
                Arc::new(adapter),
                advisor(
                    &format!("mesh:{}", peer().runtime()),
                    "mesh",
                    serde_json::json!({"runtime": peer().runtime(), "key": peer().public_key(),
                                       "pinned": true, "identity": "peer:contract"}),
                ),
            )
            .keep(nats)
            .keep(serving);
            match scenario {
                // The peer was asked once, and told when the asker gave up on it.
                Scenario::Deadline | Scenario::Cancellation => setup.released(move || {
                    let seen = seen.lock().unwrap();
                    seen.asked.len() == 1 && seen.cancelled == seen.asked
                }),
                // Discovery is told the peer is gone.
                Scenario::Unavailable => {
                    setup.released(move || gone.lock().unwrap().as_slice() == [peer().runtime()])
                }
                // Asked exactly once, never told to cancel.
                _ => setup.released(move || {
                    let seen = seen.lock().unwrap();
                    seen.asked.len() == 1 && seen.cancelled.is_empty()
                }),
            }
        })
    }
}

contract_rig!(mesh, crate::mesh_cases::MeshRig);
