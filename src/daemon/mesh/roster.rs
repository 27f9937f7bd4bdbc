//! Who offers reviews on the mesh right now: peers found by scatter-gather on the
//! services API (`$SRV.INFO.advisord-reviews`), each listed as an advisor
//! `mesh:<runtime id>` until it misses two sweeps or answers a request with no
//! responders.
//!
//! Reading a reply is strict: a peer is believed only when its runtime id is bound to the
//! public key it announces (`key`), so nobody can list itself under another runtime's id;
//! and only for the subject it can be reached on, so a reply whose review endpoint is not `advisord.reviews.<its runtime id>` is
//! dropped (a peer cannot list itself under another runtime's id and have requests for
//! it delivered elsewhere; subject permissions on a shared server make the endpoint
//! itself unforgeable, see docs/MESH.md).

use crate::core::catalogue::{AdvisorEntry, Limits, References, Transport, CAPABILITIES};
use crate::pins::{key_source, Pin};
use advisord_adapters::mesh::{identity, wire, ADAPTER, ID_PREFIX};
use std::collections::BTreeMap;

/// Sweeps a peer may miss in a row before it is gone.
pub const MISSED_SWEEPS: u32 = 2;

/// The most peers one sweep takes in (a flood of replies is cut here).
pub const MAX_PEERS: usize = 256;

/// How many exchanges at once an asking daemon sends one peer.
pub const PEER_MAX_CONCURRENT: u32 = 4;

/// One peer offering reviews, as its service's metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its runtime id (bound to `key`).
    pub runtime: String,
    /// Its public key: every reply it sends is sealed by it.
    pub key: String,
    /// The host it runs on.
    pub host: String,
    /// The user it runs as.
    pub user: String,
    /// The capabilities it offers (known ones only).
    pub capabilities: Vec<String>,
    /// What would answer there.
    pub sources: Vec<String>,
    /// `relay` or `inbox`.
    pub offer: String,
    /// Its NATS service id (one subject token), for a ping aimed at it alone; empty when
    /// the reply named none that can be used.
    pub service: String,
}

impl Peer {
    /// Its advisor id, `mesh:<runtime id>`.
    pub fn advisor_id(&self) -> String {
        format!("{ID_PREFIX}{}", self.runtime)
    }

    /// The peer as a catalogue entry: transport and adapter `mesh`, not local, its
    /// runtime id and key as the adapter's `runtime` and `key` settings, and how its
    /// answers are credited: `identity` (the source they count as: its pinned owner, else
    /// its key) and `pinned` (only a pinned peer's answers count as reviews). Its title
    /// says where it runs.
    pub fn entry(&self, pin: Option<&Pin>) -> AdvisorEntry {
        let mut settings = serde_json::Map::new();
        settings.insert("runtime".into(), self.runtime.clone().into());
        settings.insert("key".into(), self.key.clone().into());
        settings.insert("pinned".into(), pin.is_some().into());
        settings.insert(
            "identity".into(),
            pin.map_or_else(|| key_source(&self.key), Pin::source)
                .into(),
        );
        if let Some(owner) = pin.and_then(|p| p.owner.clone()) {
            settings.insert("owner".into(), owner.into());
        }
        settings.insert("capabilities".into(), self.capabilities.clone().into());
        settings.insert("sources".into(), self.sources.clone().into());
        settings.insert("host".into(), self.host.clone().into());
        settings.insert("user".into(), self.user.clone().into());
        settings.insert("offer".into(), self.offer.clone().into());
        let sources = if self.sources.is_empty() {
            String::new()
        } else {
            format!(": {}", self.sources.join(", "))
        };
        AdvisorEntry {
            id: self.advisor_id(),
            title: format!(
                "mesh peer {} on {}@{} ({}{sources})",
                self.runtime, self.user, self.host, self.offer
            ),
            transport: Transport::Mesh,
            adapter: ADAPTER.to_string(),
            references: References {
                provider: Some(format!("{ID_PREFIX}{}", self.runtime)),
                vendor: None,
                model: None,
            },
            executable: None,
            credential: None,
            capabilities: self.capabilities.clone(),
            local: false,
            // A peer publishes no price: its consultations' cost is unknown.
            price: None,
            budget: Limits::default(),
            max_concurrent: PEER_MAX_CONCURRENT,
            settings,
        }
    }
}

/// Split a comma list, trimmed, empty items dropped.
pub fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A `$SRV.INFO` reply read as a peer, or `None` when it is not a review service of this
/// protocol, is this daemon itself (`own`), or claims an endpoint it cannot be reached on.
pub fn read_info(payload: &[u8], own: &str) -> Option<Peer> {
    if payload.len() > wire::MAX_MESSAGE_BYTES {
        return None;
    }
    let info: async_nats::service::Info = serde_json::from_slice(payload).ok()?;
    if info.name != wire::SERVICE_NAME {
        return None;
    }
    let field = |key: &str| info.metadata.get(key).map(String::as_str).unwrap_or("");
    let runtime = field(wire::keys::RUNTIME);
    let key = field(wire::keys::KEY);
    if !wire::valid_runtime_id(runtime)
        || !identity::bound(runtime, key)
        || runtime == own
        || field(wire::keys::PROTOCOL) != wire::PROTOCOL.to_string()
    {
        return None;
    }
    let subject = wire::review_subject(runtime);
    if !info.endpoints.iter().any(|e| e.subject == subject) {
        return None;
    }
    let short = |text: &str| text.chars().take(100).collect::<String>();
    Some(Peer {
        runtime: runtime.to_string(),
        key: key.to_string(),
        host: short(field(wire::keys::HOST)),
        user: short(field(wire::keys::USER)),
        capabilities: list(field(wire::keys::CAPABILITIES))
            .into_iter()
            .filter(|c| CAPABILITIES.contains(&c.as_str()))
            .collect(),
        sources: list(field(wire::keys::SOURCES))
            .into_iter()
            .map(|s| short(&s))
            .take(32)
            .collect(),
        offer: match field(wire::keys::OFFER) {
            "inbox" => "inbox".to_string(),
            _ => "relay".to_string(),
        },
        service: if wire::valid_runtime_id(&info.id) {
            info.id.clone()
        } else {
            String::new()
        },
    })
}

/// The peers known, with how many sweeps in a row each has missed.
#[derive(Debug, Default)]
pub struct Roster {
    peers: BTreeMap<String, (Peer, u32)>,
}

impl Roster {
    /// Take in the peers one sweep found. A `full` sweep (the timer's) also counts a miss
    /// for every known peer it did not find, and drops those at [`MISSED_SWEEPS`]; a
    /// quick sweep (before a plan) only adds and refreshes.
    pub fn sweep(&mut self, found: Vec<Peer>, full: bool) {
        let mut seen = std::collections::BTreeSet::new();
        for peer in found.into_iter().take(MAX_PEERS) {
            seen.insert(peer.runtime.clone());
            self.peers.insert(peer.runtime.clone(), (peer, 0));
        }
        if full {
            self.peers.retain(|runtime, (_, missed)| {
                if !seen.contains(runtime) {
                    *missed += 1;
                }
                *missed < MISSED_SWEEPS
            });
        }
    }

    /// The peers that missed the last full sweep (they are pinged at the next one: a peer
    /// whose ping has no responders is gone at once, without waiting for that sweep's
    /// window to close).
    pub fn missing(&self) -> Vec<Peer> {
        self.peers
            .values()
            .filter(|(_, missed)| *missed > 0)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The peer answered with no responders: gone at once.
    pub fn gone(&mut self, runtime: &str) {
        self.peers.remove(runtime);
    }

    /// The peers known, by runtime id.
    pub fn peers(&self) -> Vec<Peer> {
        self.peers.values().map(|(p, _)| p.clone()).collect()
    }

    /// Whether the peer `runtime` is known.
    pub fn contains(&self, runtime: &str) -> bool {
        self.peers.contains_key(runtime)
    }

    /// How many peers are known.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Whether no peer is known.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Whether every known peer is among `seen` runtime ids.
    pub fn all_in(&self, seen: &std::collections::BTreeSet<String>) -> bool {
        self.peers.keys().all(|k| seen.contains(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(runtime: &str, key: &str, subject: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "type": "io.nats.micro.v1.info_response",
            "name": wire::SERVICE_NAME, "id": "x", "description": "", "version": "1.0.0",
            "metadata": {"runtime": runtime, "key": key, "host": "h", "user": "u",
                         "capabilities": "code_review, made_up", "sources": "v/m",
                         "offer": "relay", "protocol": "1"},
            "endpoints": [{"name": "reviews", "subject": subject, "queue_group": "q",
                           "metadata": null}],
        }))
        .unwrap()
    }

    #[test]
    fn a_peer_is_believed_only_for_its_own_key_and_endpoint() {
        let r1 = identity::Identity::generate("r1");
        let (id, key) = (r1.runtime(), r1.public_key());
        let subject = wire::review_subject(id);
        let peer = read_info(&info(id, &key, &subject), "me").expect("a peer");
        assert_eq!(peer.capabilities, vec!["code_review"]);
        assert_eq!(peer.advisor_id(), format!("mesh:{id}"));
        let entry = peer.entry(None);
        assert_eq!(entry.transport, Transport::Mesh);
        assert_eq!(entry.adapter, "mesh");
        assert!(!entry.local);
        assert_eq!(entry.settings["pinned"], false);
        assert_eq!(entry.settings["identity"], key_source(&key));
        let pin = Pin::new(id, &key, Some("Bob")).unwrap();
        assert_eq!(peer.entry(Some(&pin)).settings["identity"], "peer:bob");
        assert_eq!(peer.entry(Some(&pin)).settings["pinned"], true);
        // Claiming another runtime's id with an endpoint of its own: dropped.
        assert!(read_info(&info(id, &key, "advisord.reviews.r2"), "me").is_none());
        // Claiming another runtime's id with one's own key: dropped.
        let thief = identity::Identity::generate("r1");
        assert!(read_info(&info(id, &thief.public_key(), &subject), "me").is_none());
        assert!(read_info(&info("r1", &key, "advisord.reviews.r1"), "me").is_none());
        // Itself, garbage, an invalid id: dropped.
        assert!(read_info(&info(id, &key, &subject), id).is_none());
        assert!(read_info(b"garbage", "me").is_none());
        assert!(read_info(&info("a.b", &key, "advisord.reviews.a.b"), "me").is_none());
    }

    fn peer(runtime: &str) -> Peer {
        Peer {
            runtime: runtime.into(),
            key: String::new(),
            host: "h".into(),
            user: "u".into(),
            capabilities: vec![],
            sources: vec![],
            offer: "relay".into(),
            service: format!("svc-{runtime}"),
        }
    }

    #[test]
    fn a_peer_missing_two_full_sweeps_is_gone_and_no_responders_is_gone_at_once() {
        let mut roster = Roster::default();
        roster.sweep(vec![peer("a"), peer("b")], true);
        assert_eq!(roster.len(), 2);
        assert!(roster.missing().is_empty());
        roster.sweep(vec![peer("a")], true);
        assert_eq!(roster.len(), 2, "one miss is not enough");
        assert_eq!(
            roster.missing(),
            vec![peer("b")],
            "b is pinged at the next sweep"
        );
        roster.sweep(vec![], false);
        assert_eq!(roster.len(), 2, "a quick sweep counts no miss");
        roster.sweep(vec![peer("a")], true);
        assert_eq!(
            roster
                .peers()
                .iter()
                .map(|p| p.runtime.as_str())
                .collect::<Vec<_>>(),
            vec!["a"]
        );
        roster.gone("a");
        assert!(roster.is_empty());
    }
}
