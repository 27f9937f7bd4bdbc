//! The daemon on a mesh: joining the bus, finding peers that offer reviews, and offering
//! reviews itself. See docs/MESH.md.
//!
//! Without a mesh URL none of this runs. With one, the daemon connects to NATS in the
//! background (reconnecting on its own; a lost or refused bus is a status shown by
//! `health` and `advisors`, never a crash), registers the `mesh` adapter with its link,
//! sweeps for peers on a timer and before each plan ([`Mesh::sweep`]), and, when asked
//! to, offers reviews ([`offer`]) by relaying to its own advisors ([`relay`]) or through
//! a review inbox a person or an agent session answers ([`inbox`]).

pub mod inbox;
pub mod offer;
mod relay;
pub mod reviews;
pub mod roster;

use crate::core::catalogue::AdvisorEntry;
use crate::core::views::advisors::MeshStatus;
use crate::protocol::RequestContext;
use advisord_adapters::mesh::identity::{self, Identity};
use advisord_adapters::mesh::{wire, MeshLink};
use futures::StreamExt;
use roster::{Peer, Roster};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The variable naming the bus (`nats://`, `tls://`; several separated by commas).
pub const ENV_URL: &str = "ADVISORD_MESH_URL";
/// The variable naming a NATS credentials file, or holding a token.
pub const ENV_CREDS: &str = "ADVISORD_MESH_CREDS";
/// The variable choosing how this daemon offers reviews: `relay` or `inbox`.
pub const ENV_OFFER: &str = "ADVISORD_MESH_OFFER";
/// The variable naming this runtime (else the host's name): its runtime id is the name
/// followed by its key's fingerprint.
pub const ENV_RUNTIME: &str = "ADVISORD_MESH_RUNTIME";

/// Where, in the data directory, the runtime's key pair is kept (a directory `0700`
/// holding the seed in `key`, `0600`).
pub const KEY_DIR: &str = "mesh";

/// How often peers are swept for, by default.
pub const DEFAULT_SWEEP: Duration = Duration::from_secs(3);

/// How long a full sweep (the timer's) collects replies.
pub const FULL_SWEEP_WINDOW: Duration = Duration::from_millis(250);

/// How long sending an answer waits for a bus that is not connected yet.
const SEND_WAIT: Duration = Duration::from_secs(5);

/// How long a quick sweep (before a plan) waits for a first reply when no peer is known.
const QUICK_SWEEP_QUIET: Duration = Duration::from_millis(15);

/// How a daemon offers reviews.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Offer {
    /// Ask its own available advisors through its job machinery; answer with the first
    /// completed answer.
    Relay,
    /// Keep the request in a review inbox until `advisor-consult reviews answer` answers.
    Inbox,
}

impl Offer {
    /// `relay` or `inbox`.
    pub fn as_str(self) -> &'static str {
        match self {
            Offer::Relay => "relay",
            Offer::Inbox => "inbox",
        }
    }

    /// Read `relay` or `inbox`.
    pub fn parse(text: &str) -> Result<Offer, String> {
        match text.trim() {
            "relay" => Ok(Offer::Relay),
            "inbox" => Ok(Offer::Inbox),
            other => Err(format!(
                "`{ENV_OFFER}` is `{}`: it takes `relay` or `inbox`; fix or unset it",
                other.escape_debug()
            )),
        }
    }
}

/// How the daemon joins the mesh.
#[derive(Clone)]
pub struct MeshConfig {
    /// The bus's URL(s).
    pub url: String,
    /// A credentials file, or a token (never printed).
    pub creds: Option<String>,
    /// How this daemon offers reviews, if it does.
    pub offer: Option<Offer>,
    /// This runtime's name (else the host's): its runtime id is
    /// `<name>-<its key's fingerprint>`.
    pub runtime: Option<String>,
    /// The user's pinned peers (`peers.yaml` in the user's config directory); `None`
    /// pins nobody.
    pub peers_file: Option<PathBuf>,
    /// How often peers are swept for.
    pub sweep_every: Duration,
    /// The context a relay's jobs run in (root, catalogue, `PATH`, credentials). Default:
    /// the daemon's own environment over `<data-dir>/relay`, task `mesh-relay`.
    pub relay_context: Option<RequestContext>,
    /// The capabilities an inbox offers.
    pub inbox_capabilities: Vec<String>,
}

impl std::fmt::Debug for MeshConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeshConfig")
            .field("url", &shown_url(&self.url))
            .field("creds", &self.creds.as_ref().map(|_| "(set)"))
            .field("offer", &self.offer)
            .field("runtime", &self.runtime)
            .field("peers_file", &self.peers_file)
            .field("sweep_every", &self.sweep_every)
            .finish_non_exhaustive()
    }
}

impl MeshConfig {
    /// A config for `url` with the defaults: no credentials, no offer.
    pub fn new(url: &str) -> MeshConfig {
        MeshConfig {
            url: url.to_string(),
            creds: None,
            offer: None,
            runtime: None,
            peers_file: None,
            sweep_every: DEFAULT_SWEEP,
            relay_context: None,
            inbox_capabilities: vec![
                "independent_reasoning".into(),
                "code_review".into(),
                "reviews".into(),
            ],
        }
    }

    /// The config from the flags (`--mesh`, `--offer-reviews`) and the environment; `None`
    /// without a URL (nothing about the mesh runs then). An offer without a URL, or a bad
    /// runtime id, is an error.
    pub fn from_env(
        url: Option<String>,
        offer: Option<Offer>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<MeshConfig>, String> {
        let non_empty = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
        let offer = match offer {
            Some(offer) => Some(offer),
            None => non_empty(env(ENV_OFFER))
                .map(|v| Offer::parse(&v))
                .transpose()?,
        };
        let Some(url) = non_empty(url).or_else(|| non_empty(env(ENV_URL))) else {
            if offer.is_some() {
                return Err(format!(
                    "reviews are offered over the mesh: name it with `--mesh URL` or \
                     `{ENV_URL}`, or drop `--offer-reviews`/`{ENV_OFFER}`"
                ));
            }
            return Ok(None);
        };
        let runtime = non_empty(env(ENV_RUNTIME));
        if let Some(name) = &runtime {
            if !identity::valid_name(name) {
                return Err(format!(
                    "`{ENV_RUNTIME}` is `{}`: a runtime's name is 1 to {} of A-Z a-z 0-9 _ - \
                     (its key's fingerprint is added to make its runtime id)",
                    name.escape_debug(),
                    identity::MAX_NAME_CHARS
                ));
            }
        }
        Ok(Some(MeshConfig {
            creds: non_empty(env(ENV_CREDS)),
            offer,
            runtime,
            peers_file: crate::trust::config_dir(env).map(|dir| crate::pins::file_in(&dir)),
            ..MeshConfig::new(url.trim())
        }))
    }
}

/// The URL with any `user:password@` removed, for messages.
pub fn shown_url(url: &str) -> String {
    url.split(',')
        .map(|one| {
            let one = one.trim();
            match (one.find("://"), one.rfind('@')) {
                (Some(scheme), Some(at)) if at > scheme => {
                    format!("{}{}", &one[..scheme + 3], &one[at + 1..])
                }
                (None, Some(at)) => one[at + 1..].to_string(),
                _ => one.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The link's state, as the client's events leave it.
#[derive(Debug, Clone)]
struct LinkState {
    /// The last problem seen, cleared on connecting.
    problem: Option<String>,
    /// The URL or the credentials cannot be used at all.
    failed: bool,
}

/// The daemon's place on the mesh.
pub struct Mesh {
    /// This daemon's runtime id (bound to its key).
    pub runtime: String,
    identity: Identity,
    peers_file: Option<PathBuf>,
    pins: Mutex<crate::pins::Cached>,
    host: String,
    user: String,
    url: String,
    client: Option<async_nats::Client>,
    link: Arc<Mutex<LinkState>>,
    roster: Mutex<Roster>,
    offer: Option<Offer>,
    sweep_every: Duration,
    sweep_turn: tokio::sync::Mutex<()>,
    relay_context: RequestContext,
    inbox_capabilities: Vec<String>,
    /// The review inbox, when this daemon offers reviews through one.
    pub inbox: Option<inbox::Inbox>,
    /// The capabilities and sources this daemon offers, once it offers.
    offered: Mutex<Option<(Vec<String>, Vec<String>)>>,
}

impl Mesh {
    /// Join the mesh of `config` (the connection is made in the background). Never fails:
    /// a bad URL or unreadable credentials become the status.
    pub async fn join(config: MeshConfig, data_dir: &Path) -> Arc<Mesh> {
        let name = config.runtime.clone().unwrap_or_else(host_token);
        let link = Arc::new(Mutex::new(LinkState {
            problem: None,
            failed: false,
        }));
        let (identity, client) = match load_identity(data_dir, &name) {
            Ok(identity) => {
                let client = connect(&config, identity.runtime(), &link).await;
                (identity, client)
            }
            Err(problem) => {
                tracing::warn!(%problem, "cannot join the mesh");
                let mut state = link.lock().unwrap_or_else(|p| p.into_inner());
                state.problem = Some(problem);
                state.failed = true;
                (Identity::generate(&name), None)
            }
        };
        let runtime = identity.runtime().to_string();
        let relay_context = config.relay_context.clone().unwrap_or_else(|| {
            let root = data_dir.join("relay");
            let _ = std::fs::create_dir_all(&root);
            RequestContext::for_root(root, Some(relay::TASK.to_string()), &|name| {
                std::env::var(name).ok()
            })
        });
        let inbox = (config.offer == Some(Offer::Inbox))
            .then(|| inbox::Inbox::open(&data_dir.join("inbox")));
        tracing::info!(url = %shown_url(&config.url), runtime = %runtime, offer = ?config.offer, "joining the mesh");
        Arc::new(Mesh {
            runtime,
            identity,
            peers_file: config.peers_file,
            pins: Mutex::new(crate::pins::Cached::default()),
            host: host_name(),
            user: user_name(),
            url: shown_url(&config.url),
            client,
            link,
            roster: Mutex::new(Roster::default()),
            offer: config.offer,
            sweep_every: config.sweep_every,
            sweep_turn: tokio::sync::Mutex::new(()),
            relay_context,
            inbox_capabilities: config.inbox_capabilities,
            inbox,
            offered: Mutex::new(None),
        })
    }

    /// The source an inbox answer names: the person or session on this machine.
    pub fn inbox_source(&self) -> String {
        format!("inbox:{}@{}", self.user, self.host)
    }

    /// Publish `payload` on `subject` and flush it, or say why it could not be sent. A
    /// bus still connecting (just after a start) is waited for a few seconds.
    pub async fn send(&self, subject: String, payload: Vec<u8>) -> Result<(), String> {
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| "this daemon has no connection to the mesh".to_string())?;
        let waited = Instant::now();
        while client.connection_state() != async_nats::connection::State::Connected {
            if waited.elapsed() > SEND_WAIT {
                return Err(format!("the mesh `{}` is not connected", self.url));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        client
            .publish(subject, payload.into())
            .await
            .map_err(|e| e.to_string())?;
        client.flush().await.map_err(|e| e.to_string())
    }

    /// Wait (at most `bound`) for the bus to be connected.
    pub async fn wait_connected(&self, bound: Duration) {
        let Some(client) = &self.client else { return };
        let started = Instant::now();
        while client.connection_state() != async_nats::connection::State::Connected
            && started.elapsed() < bound
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Leave the mesh at shutdown: the connection is drained and closed, so peers stop
    /// seeing this daemon at once.
    pub async fn leave(&self) {
        if let Some(client) = &self.client {
            let _ = tokio::time::timeout(Duration::from_secs(2), client.drain()).await;
        }
    }

    /// Whether this daemon offers reviews.
    pub fn offers(&self) -> bool {
        self.offer.is_some()
    }

    /// The link the `mesh` adapter asks peers through, when there is a connection.
    pub fn adapter_link(self: &Arc<Mesh>) -> Option<MeshLink> {
        let client = self.client.clone()?;
        let me = Arc::downgrade(self);
        let known = Arc::downgrade(self);
        Some(MeshLink {
            client,
            identity: self.identity.clone(),
            scrub: Arc::new(|text: &str| {
                crate::core::redact::scrub(text, &mut std::collections::BTreeSet::new())
            }),
            on_gone: Arc::new(move |runtime: &str| {
                if let Some(mesh) = me.upgrade() {
                    tracing::info!(peer = runtime, "peer has no responders: gone");
                    mesh.roster_mut().gone(runtime);
                }
            }),
            present: Arc::new(move |runtime: &str| {
                known
                    .upgrade()
                    .is_some_and(|mesh| mesh.roster_mut().contains(runtime))
            }),
        })
    }

    fn roster_mut(&self) -> std::sync::MutexGuard<'_, Roster> {
        self.roster.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The link's status, for `health` and `advisors`.
    pub fn status(&self) -> MeshStatus {
        let link = self.link.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let state = match &self.client {
            None => "failed",
            Some(_) if link.failed => "failed",
            Some(client) => match client.connection_state() {
                async_nats::connection::State::Connected => "connected",
                async_nats::connection::State::Pending => "connecting",
                async_nats::connection::State::Disconnected => "disconnected",
            },
        };
        let detail = match state {
            "connected" => None,
            "failed" => link.problem,
            _ => Some(match link.problem {
                Some(problem) => format!("{problem}; retrying on its own"),
                None => "retrying on its own".to_string(),
            }),
        };
        MeshStatus {
            url: self.url.clone(),
            runtime: self.runtime.clone(),
            state: state.to_string(),
            detail,
            offer: self.offer.map(|o| o.as_str().to_string()),
            peers: self.roster_mut().len(),
        }
    }

    /// This runtime's key pair: it seals what this daemon sends.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Every peer known now, as catalogue entries (the daemon adds them to the catalogue
    /// of every plan it makes), each marked pinned or not from the user's peers file.
    /// While the bus is down, no peer is offered: none could be reached.
    pub fn entries(&self) -> Vec<AdvisorEntry> {
        let connected = self
            .client
            .as_ref()
            .is_some_and(|c| c.connection_state() == async_nats::connection::State::Connected);
        if !connected {
            return Vec::new();
        }
        let peers = self.roster_mut().peers();
        let mut cached = self.pins.lock().unwrap_or_else(|p| p.into_inner());
        let (pins, _) = cached.get(self.peers_file.as_deref());
        peers.iter().map(|p| p.entry(pins.of_key(&p.key))).collect()
    }

    /// The `advisors` view completed for the mesh: its status, and each peer's reason
    /// saying whether its answers count as reviews (pinned) or are only recorded
    /// (unpinned, with the command that pins it).
    pub fn annotate(&self, view: &mut crate::core::views::advisors::AdvisorsView) {
        view.mesh = Some(self.status());
        let peers = self.roster_mut().peers();
        let mut cached = self.pins.lock().unwrap_or_else(|p| p.into_inner());
        let (pins, problem) = cached.get(self.peers_file.as_deref());
        for row in &mut view.advisors {
            let Some(peer) = peers.iter().find(|p| p.advisor_id() == row.id) else {
                continue;
            };
            let credit = match pins.of_key(&peer.key) {
                Some(pin) => format!(
                    "pinned: its answers count as reviews from source `{}`",
                    pin.source()
                ),
                None => format!(
                    "unpinned: its answers are recorded but never counted as reviews{}; \
                     once you know who runs it, pin it with `advisor-consult mesh pin {} \
                     --key {} --owner NAME`",
                    problem.map_or(String::new(), |p| format!(" ({p})")),
                    peer.runtime,
                    peer.key
                ),
            };
            row.reason = format!("{}; {credit}", row.reason);
        }
    }

    /// Sweep for peers: scatter a `$SRV.INFO` request to every review service and gather
    /// the replies. Each peer that replies is known at once. A `full` sweep collects for
    /// [`FULL_SWEEP_WINDOW`] and then counts misses (and first pings alone each peer that
    /// missed the last one: no responders, and it is gone at once); a quick one (before a
    /// plan) ends as soon as every known peer answered (with none known, after a short
    /// quiet moment). Does nothing while the bus is down (full sweeps then count misses).
    pub async fn sweep(&self, full: bool) {
        // Full sweeps take turns, so misses are counted once per sweep. A quick sweep
        // (before a plan) never waits for the timer's sweep to end its window: it only
        // adds and refreshes peers, which a full sweep in progress does as well.
        let _turn = match full {
            true => Some(self.sweep_turn.lock().await),
            false => None,
        };
        // A peer that missed the last full sweep is pinged alone as this one starts: no
        // responders (its service is gone from the bus) removes it at once, so a peer
        // that vanished leaves at the start of the second sweep it misses, not at the
        // end of that sweep's window. A peer the bus cannot tell about (a host that went
        // silent without closing its connection) still leaves when the window closes.
        let missing = match full {
            true => self.roster_mut().missing(),
            false => Vec::new(),
        };
        let (found, ()) = tokio::join!(self.gather(full), self.ping_missing(missing));
        let found = match found {
            Some(found) => found,
            None if full => Vec::new(),
            None => return,
        };
        let mut roster = self.roster_mut();
        let before = roster.len();
        roster.sweep(found, full);
        if roster.len() != before {
            tracing::info!(peers = roster.len(), "mesh peers changed");
        }
    }

    /// Ping each of `peers` on its own service's subject; one whose ping has no
    /// responders is gone at once. A reply or no word within the sweep's window changes
    /// nothing (the sweep itself judges those).
    async fn ping_missing(&self, peers: Vec<Peer>) {
        let Some(client) = self.client.as_ref() else {
            return;
        };
        if peers.is_empty() || client.connection_state() != async_nats::connection::State::Connected
        {
            return;
        }
        let pings = peers
            .into_iter()
            .filter(|peer| !peer.service.is_empty())
            .map(|peer| async move {
                let subject = format!("$SRV.PING.{}.{}", wire::SERVICE_NAME, peer.service);
                let asked = tokio::time::timeout(
                    FULL_SWEEP_WINDOW,
                    client.request(subject, bytes::Bytes::new()),
                )
                .await;
                if let Ok(Err(e)) = asked {
                    if e.kind() == async_nats::RequestErrorKind::NoResponders {
                        tracing::info!(peer = %peer.runtime, "peer missed a sweep and has no responders: gone");
                        self.roster_mut().gone(&peer.runtime);
                    }
                }
            });
        futures::future::join_all(pings).await;
    }

    async fn gather(&self, full: bool) -> Option<Vec<Peer>> {
        let client = self.client.as_ref()?;
        if client.connection_state() != async_nats::connection::State::Connected {
            return None;
        }
        let inbox = client.new_inbox();
        let mut replies = client.subscribe(inbox.clone()).await.ok()?;
        let subject = format!("$SRV.INFO.{}", wire::SERVICE_NAME);
        client
            .publish_with_reply(subject, inbox, bytes::Bytes::new())
            .await
            .ok()?;
        let start = Instant::now();
        let window_end = start + FULL_SWEEP_WINDOW;
        let mut last = start;
        let mut seen = BTreeSet::new();
        let mut found = Vec::new();
        loop {
            // A quick sweep ends as soon as every known peer answered (a plan does not
            // wait on peers it knows); with none known it gives newcomers a moment.
            let until = if full || !self.roster_mut().all_in(&seen) {
                window_end
            } else if seen.is_empty() {
                (start + QUICK_SWEEP_QUIET).min(window_end)
            } else {
                last
            };
            let message = tokio::select! {
                () = tokio::time::sleep_until(until) => break,
                message = replies.next() => message,
            };
            let Some(message) = message else { break };
            last = Instant::now();
            if let Some(peer) = roster::read_info(&message.payload, &self.runtime) {
                if seen.insert(peer.runtime.clone()) {
                    // A peer is known from its reply on: a new one does not wait for the
                    // end of the window (only misses are counted there).
                    let mut roster = self.roster_mut();
                    let before = roster.len();
                    roster.sweep(vec![peer.clone()], false);
                    if roster.len() != before {
                        tracing::info!(peers = roster.len(), "mesh peers changed");
                    }
                    drop(roster);
                    found.push(peer);
                }
            }
            if found.len() >= roster::MAX_PEERS {
                break;
            }
        }
        let _ = replies.unsubscribe().await;
        Some(found)
    }

    /// Sweep on the timer until `stop`.
    pub(crate) async fn sweeper(self: Arc<Mesh>, stop: tokio_util::sync::CancellationToken) {
        let mut ticks = tokio::time::interval(self.sweep_every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = ticks.tick() => self.sweep(true).await,
            }
        }
    }
}

/// Connect in the background; `None` (and a failed status) when the URL or the
/// credentials cannot be used at all.
async fn connect(
    config: &MeshConfig,
    runtime: &str,
    link: &Arc<Mutex<LinkState>>,
) -> Option<async_nats::Client> {
    let fail = |problem: String| {
        tracing::warn!(%problem, "cannot join the mesh");
        let mut state = link.lock().unwrap_or_else(|p| p.into_inner());
        state.problem = Some(problem);
        state.failed = true;
        None
    };
    let events = link.clone();
    // A TLS handshake refused shows as a bare I/O error: say what to check.
    let tls_hint = if config.url.contains("tls://") {
        "; the URL asks for TLS: check that the server offers it and that its certificate \
         is trusted"
    } else {
        ""
    };
    let mut options = async_nats::ConnectOptions::new()
        .name(format!("advisord {runtime}"))
        .retry_on_initial_connect()
        .connection_timeout(Duration::from_secs(3))
        .subscription_capacity(4096)
        .reconnect_delay_callback(|attempts| {
            Duration::from_millis((attempts as u64).saturating_mul(100).min(2000))
        })
        .event_callback(move |event| {
            let events = events.clone();
            async move {
                let mut state = events.lock().unwrap_or_else(|p| p.into_inner());
                match event {
                    async_nats::Event::Connected => state.problem = None,
                    async_nats::Event::Disconnected => {
                        state.problem = Some("the connection to the bus was lost".into())
                    }
                    async_nats::Event::ServerError(
                        async_nats::ServerError::AuthorizationViolation,
                    ) => {
                        state.problem = Some(format!(
                            "the bus refused the credentials (authorization violation); check \
                             `{ENV_CREDS}` or the URL's user and password"
                        ))
                    }
                    async_nats::Event::ClientError(error) => {
                        state.problem = Some(format!("cannot connect: {error}{tls_hint}"))
                    }
                    other => tracing::debug!(event = %other, "mesh event"),
                }
            }
        });
    if let Some(creds) = &config.creds {
        let as_file = PathBuf::from(creds);
        options = if as_file.is_file() {
            match options.credentials_file(&as_file).await {
                Ok(options) => options,
                Err(e) => {
                    return fail(format!(
                        "the credentials file `{}` named by `{ENV_CREDS}` cannot be used: {e}",
                        as_file.display()
                    ))
                }
            }
        } else {
            options.token(creds.clone())
        };
    }
    // A user and password (or a token) in the URL go to the options, never into the
    // addresses: the client logs its addresses at `debug`.
    let (url, in_url) = split_credentials(&config.url);
    match in_url {
        Some(UrlAuth::UserPassword(user, password)) => {
            options = options.user_and_password(user, password)
        }
        Some(UrlAuth::Token(token)) if config.creds.is_none() => options = options.token(token),
        _ => {}
    }
    let servers: Vec<&str> = url
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect();
    // The client takes the list: it connects to any node that answers (one down at start
    // is skipped) and learns the rest of a cluster from it.
    match options.connect(servers).await {
        Ok(client) => Some(client),
        Err(e) => fail(format!(
            "the mesh URL `{}` cannot be used: {e}; name a bus as `nats://host:4222` or \
             `tls://host:4222` in `--mesh` or `{ENV_URL}`",
            shown_url(&config.url)
        )),
    }
}

/// Whether a mesh URL carries a user and password, or a token (`nats://user:pw@host`).
pub fn url_has_credentials(url: &str) -> bool {
    split_credentials(url).1.is_some()
}

/// A user and password, or a token, taken out of a mesh URL.
#[derive(Debug, PartialEq, Eq)]
enum UrlAuth {
    UserPassword(String, String),
    Token(String),
}

/// The URL(s) without their `user:password@` (or `token@`), and the first such found.
fn split_credentials(url: &str) -> (String, Option<UrlAuth>) {
    let mut found = None;
    let bare = url
        .split(',')
        .map(|one| {
            let one = one.trim();
            let Some(scheme) = one.find("://") else {
                return one.to_string();
            };
            let rest = &one[scheme + 3..];
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let Some(at) = rest[..authority_end].rfind('@') else {
                return one.to_string();
            };
            let userinfo = &rest[..at];
            if found.is_none() && !userinfo.is_empty() {
                found = Some(match userinfo.split_once(':') {
                    Some((user, password)) => {
                        UrlAuth::UserPassword(percent_decoded(user), percent_decoded(password))
                    }
                    None => UrlAuth::Token(percent_decoded(userinfo)),
                });
            }
            format!("{}{}", &one[..scheme + 3], &rest[at + 1..])
        })
        .collect::<Vec<_>>()
        .join(",");
    (bare, found)
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// This runtime's key pair, kept in `<data-dir>/mesh/key` (the seed; the directory `0700`,
/// the file `0600`), made on first use. A key file that cannot be read is an error (a new
/// key would be a new runtime id, and peers that pinned this one would stop counting it).
fn load_identity(data_dir: &Path, name: &str) -> Result<Identity, String> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let dir = data_dir.join(KEY_DIR);
    let file = dir.join("key");
    let cannot = |what: &str, e: &dyn std::fmt::Display| {
        format!(
            "the runtime key `{}` cannot be {what}: {e}; fix its directory, or move the file \
             aside to make a new key (a new key is a new runtime id: peers must pin it again)",
            file.display()
        )
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| cannot("kept", &e))?;
    let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
    match std::fs::read_to_string(&file) {
        Ok(seed) => {
            let _ = std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600));
            Identity::from_seed(name, &seed).map_err(|e| cannot("read as a key", &e))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let identity = Identity::generate(name);
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&file)
                .map_err(|e| cannot("created", &e))?;
            out.write_all(format!("{}\n", identity.seed()).as_bytes())
                .and_then(|()| out.sync_all())
                .map_err(|e| cannot("written", &e))?;
            tracing::info!(runtime = %identity.runtime(), key = %identity.public_key(), "made this runtime's mesh key");
            Ok(identity)
        }
        Err(e) => Err(cannot("read", &e)),
    }
}

/// The host's name as a runtime's name: one subject token, at most
/// [`identity::MAX_NAME_CHARS`] long.
fn host_token() -> String {
    let host: String = host_name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(identity::MAX_NAME_CHARS)
        .collect();
    if host.is_empty() {
        "runtime".to_string()
    } else {
        host
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

fn user_name() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "unknown".to_string())
}

/// The jobs find their peers on the mesh: a plan's catalogue gets the peers known (after
/// a quick sweep), and an advisor of the mesh no longer found has left it.
impl crate::daemon::jobs::PeerSource for Mesh {
    fn peers(&self, sweep: bool) -> futures::future::BoxFuture<'_, Vec<AdvisorEntry>> {
        Box::pin(async move {
            if sweep {
                self.sweep(false).await;
            }
            self.entries()
        })
    }

    fn known(&self) -> Vec<AdvisorEntry> {
        self.entries()
    }

    fn settle(&self, bound: Duration) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(self.wait_connected(bound))
    }

    fn gone(&self, advisor: &str) -> Option<String> {
        advisor
            .starts_with(advisord_adapters::mesh::ID_PREFIX)
            .then(|| format!("peer `{advisor}` has left the mesh"))
    }

    fn asking(&self, spec: &mut advisord_adapters::contract::AdvisorSpec, capabilities: &[String]) {
        if spec.adapter == advisord_adapters::mesh::ADAPTER {
            spec.settings.insert(
                advisord_adapters::mesh::ASKED_CAPABILITIES.into(),
                capabilities.to_vec().into(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_leave_the_url_before_the_client_sees_it() {
        assert_eq!(
            split_credentials("nats://alice:p%40ss@h:4222, nats://h2:2"),
            (
                "nats://h:4222,nats://h2:2".to_string(),
                Some(UrlAuth::UserPassword("alice".into(), "p@ss".into()))
            )
        );
        assert_eq!(
            split_credentials("tls://tok@h:1"),
            ("tls://h:1".to_string(), Some(UrlAuth::Token("tok".into())))
        );
        assert_eq!(split_credentials("nats://h:1"), ("nats://h:1".into(), None));
        assert!(url_has_credentials("nats://a:b@h:1"));
        assert!(!url_has_credentials("nats://h:1,nats://h:2"));
    }

    #[test]
    fn urls_are_shown_without_credentials() {
        assert_eq!(shown_url("nats://a:b@h:4222"), "nats://h:4222");
        assert_eq!(
            shown_url("tls://tok@h:1, nats://h2:2"),
            "tls://h:1,nats://h2:2"
        );
        assert_eq!(shown_url("nats://h:4222"), "nats://h:4222");
    }

    #[test]
    fn the_config_comes_from_flags_then_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(MeshConfig::from_env(None, None, &env(&[]))
            .unwrap()
            .is_none());
        let config = MeshConfig::from_env(
            None,
            None,
            &env(&[
                (ENV_URL, "nats://h:1"),
                (ENV_OFFER, "inbox"),
                (ENV_CREDS, "tok"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(config.url, "nats://h:1");
        assert_eq!(config.offer, Some(Offer::Inbox));
        assert!(!format!("{config:?}").contains("tok"), "{config:?}");
        let flagged = MeshConfig::from_env(
            Some("nats://f:2".into()),
            Some(Offer::Relay),
            &env(&[(ENV_URL, "nats://h:1"), (ENV_OFFER, "inbox")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (flagged.url.as_str(), flagged.offer),
            ("nats://f:2", Some(Offer::Relay))
        );
        for bad in [
            &[(ENV_OFFER, "relay")][..],
            &[(ENV_URL, "nats://h:1"), (ENV_OFFER, "both")][..],
            &[(ENV_URL, "nats://h:1"), (ENV_RUNTIME, "a.b")][..],
        ] {
            let bad: &'static [(&'static str, &'static str)] = bad;
            assert!(
                MeshConfig::from_env(None, None, &env(bad)).is_err(),
                "{bad:?}"
            );
        }
    }
}
