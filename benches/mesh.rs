//! The mesh, measured on a real `nats-server` over loopback (it fails, naming
//! `scripts/ci/install-nats.sh`, when no server is found):
//!
//! 1. **Exchange overhead**: one review asked of a peer through the `mesh` adapter and the
//!    contract, against the same answer given directly by a scripted adapter. Bound: the
//!    median added time ≤ 3 ms.
//! 2. **Discovery**: how long a new peer takes to appear in `advisors` (through the
//!    asker's socket), and a vanished one to leave, with a 1 s sweep. Bounds: within one
//!    sweep to appear, within two to leave (each plus the 250 ms a sweep collects; a
//!    vanished peer whose service left the bus is judged by a ping at the start of the
//!    second sweep it misses, so it leaves in about two sweeps, inside the bound).
//! 3. **Fan-out**: three relaying peers whose advisor answers after 500 ms, asked by one
//!    job through the asker's socket. Bound: wall time ≤ 1.1 × 500 ms (median).
//!
//! `cargo bench -p advisord --bench mesh`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon;
#[path = "../tests/integration/support/mesh.rs"]
mod mesh;

#[path = "support/stats.rs"]
mod stats;

use advisord::daemon::mesh::{Offer, FULL_SWEEP_WINDOW};
use advisord_adapters::contract::{self, AdvisorSpec, Io};
use advisord_adapters::mesh::{MeshAdapter, MeshLink};
use advisord_adapters::registry::Registry;
use advisord_fakes::nats::NatsServer;
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use daemon::{answer, Daemon, Place};
use mesh::*;
use stats::median;
use std::sync::Arc;
use std::time::{Duration, Instant};

const OVERHEAD_RUNS: usize = 300;
const OVERHEAD_BOUND_MS: f64 = 3.0;
const DISCOVERY_RUNS: usize = 4;
const DISCOVERY_SWEEP: Duration = Duration::from_secs(1);
const FANOUT_RUNS: usize = 5;
const DELAY: Duration = Duration::from_millis(500);
const FANOUT_BOUND: f64 = 1.1;

/// Median milliseconds of `consult` through `adapter` for `spec`.
async fn timed(adapter: &dyn advisord_adapters::contract::Adapter, spec: &AdvisorSpec) -> f64 {
    let mut samples = Vec::with_capacity(OVERHEAD_RUNS);
    for _ in 0..OVERHEAD_RUNS {
        let io = Io::with_timeout(Duration::from_secs(5));
        let started = Instant::now();
        let outcome = contract::consult(adapter, spec, "review this", &io).await;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(outcome.result.is_ok(), "{outcome:?}");
    }
    median(samples)
}

/// Answers `.0` at once.
struct Direct(&'static str);

impl advisord_adapters::contract::Adapter for Direct {
    fn exchange<'a>(
        &'a self,
        _advisor: &'a AdvisorSpec,
        _prompt: &'a str,
        _io: &'a Io,
    ) -> futures::future::BoxFuture<
        'a,
        Result<advisord_adapters::contract::Answer, advisord_adapters::contract::Failure>,
    > {
        Box::pin(async move {
            Ok(advisord_adapters::contract::Answer {
                text: self.0.to_string(),
                usage: None,
                source: None,
                vouched: true,
            })
        })
    }
}

async fn overhead(nats: &NatsServer) -> bool {
    let peer = FakePeer::start(&nats.url(), "bench-peer", Behaviour::Unasked(0)).await;
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let mesh = MeshAdapter::new(MeshLink {
        client,
        identity: advisord_adapters::mesh::identity::Identity::generate("bench-asker"),
        scrub: Arc::new(|t: &str| t.to_string()),
        on_gone: Arc::new(|_: &str| {}),
        present: Arc::new(|_: &str| true),
    });
    let mut settings = serde_json::Map::new();
    settings.insert("runtime".into(), peer.runtime.clone().into());
    settings.insert("key".into(), peer.identity.public_key().into());
    settings.insert("pinned".into(), true.into());
    let spec = |adapter: &str| AdvisorSpec {
        id: "bench".into(),
        adapter: adapter.into(),
        executable: None,
        credential: None,
        settings: settings.clone(),
    };
    // The same answer the fake peer gives, answered in-process at once (no timer: a
    // scripted zero delay still waits for a timer tick).
    let direct = Direct(
        r#"{"conclusion": "the fake peer agrees", "stance": "supports", "assumptions": [], "risks": [], "actions": [], "falsifiers": [], "confidence": 0.5}"#,
    );
    let direct_ms = timed(&direct, &spec("scripted")).await;
    let mesh_ms = timed(&mesh, &spec("mesh")).await;
    let added = mesh_ms - direct_ms;
    println!(
        "mesh exchange overhead: median {mesh_ms:.3} ms over loopback NATS vs {direct_ms:.3} ms \
         direct ({OVERHEAD_RUNS} runs): {added:.3} ms added; bound <= {OVERHEAD_BOUND_MS} ms"
    );
    added <= OVERHEAD_BOUND_MS
}

async fn discovery(nats: &NatsServer) -> bool {
    let place = Place::new(&one_advisor("local", "v", "m"));
    let mut config = mesh_config(&nats.url(), "bench-asker", None, &place);
    config.sweep_every = DISCOVERY_SWEEP;
    let mut registry = Registry::builtin();
    registry.insert("scripted-local", Arc::new(ScriptedAdapter::new(vec![])));
    let asker = Daemon::start_in(place, registry, Box::new(move |c| c.mesh = Some(config))).await;
    let context = asker.place.context();
    let listed = |view: &serde_json::Value, id: &str| ids(view).contains(&id.to_string());
    let (mut appear, mut leave) = (Vec::new(), Vec::new());
    for run in 0..DISCOVERY_RUNS {
        let runtime = format!("newcomer-{run}");
        let id = format!("mesh:{runtime}");
        // (`ids` names peers without their key's fingerprint.)
        let started = Instant::now();
        let peer = FakePeer::start(&nats.url(), &runtime, Behaviour::Silent).await;
        advisors_until(&asker, &context, "the peer to appear", |v| listed(v, &id)).await;
        appear.push(started.elapsed().as_secs_f64());
        let started = Instant::now();
        peer.kill().await;
        advisors_until(&asker, &context, "the peer to leave", |v| !listed(v, &id)).await;
        leave.push(started.elapsed().as_secs_f64());
    }
    asker.stop().await;
    let sweep = DISCOVERY_SWEEP.as_secs_f64();
    let window = FULL_SWEEP_WINDOW.as_secs_f64();
    let (appear_max, leave_max) = (
        appear.iter().copied().fold(0.0, f64::max),
        leave.iter().copied().fold(0.0, f64::max),
    );
    let (appear_bound, leave_bound) = (sweep + window, 2.0 * sweep + window);
    println!(
        "mesh discovery ({sweep} s sweep): a new peer appears in `advisors` in max \
         {appear_max:.3} s (runs {appear:.3?}), bound <= {appear_bound} s (one sweep); a \
         vanished one leaves in max {leave_max:.3} s (runs {leave:.3?}), bound <= \
         {leave_bound} s (two sweeps)"
    );
    appear_max <= appear_bound && leave_max <= leave_bound
}

async fn fanout(nats: &NatsServer) -> bool {
    let mut peers = Vec::new();
    for n in 0..3 {
        let place = Place::new(&one_advisor("house", &format!("v{n}"), &format!("m{n}")));
        let scripts = (0..FANOUT_RUNS)
            .map(|_| Script::answer(&answer("reviewed", "supports")).after(DELAY))
            .collect();
        let mut registry = Registry::builtin();
        registry.insert("scripted-house", Arc::new(ScriptedAdapter::new(scripts)));
        let runtime = format!("fan-{n}");
        peers.push(start_on_mesh(place, registry, &nats.url(), &runtime, Some(Offer::Relay)).await);
    }
    let place = Place::new(&one_advisor("local", "v", "m"));
    let mut registry = Registry::builtin();
    registry.insert("scripted-local", Arc::new(ScriptedAdapter::new(vec![])));
    let asker = start_on_mesh(place, registry, &nats.url(), "fan-asker", None).await;
    let context = asker_context(&asker.place, "local");
    advisors_until(&asker, &context, "three peers", |v| {
        ["mesh:fan-0", "mesh:fan-1", "mesh:fan-2"]
            .iter()
            .all(|id| ids(v).contains(&id.to_string()))
    })
    .await;
    let mut ratios = Vec::new();
    for _ in 0..FANOUT_RUNS {
        let assessment = code_review(&asker, &context, "critical").await;
        let started = Instant::now();
        let job = consult(&asker, &context, &assessment, 30.0).await;
        let done = asker.wait(&job).await;
        let wall = started.elapsed();
        assert_eq!(done["state"], "done");
        let completed = done["consultations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["status"] == "completed")
            .count();
        assert_eq!(completed, 3, "{done}");
        ratios.push(wall.as_secs_f64() / DELAY.as_secs_f64());
    }
    let ratio = median(ratios.clone());
    println!(
        "mesh fan-out: three peers of {} ms through the asker's socket: wall/500ms median \
         {ratio:.3} (runs {ratios:.3?}); bound <= {FANOUT_BOUND}",
        DELAY.as_millis()
    );
    asker.stop().await;
    for peer in peers {
        peer.stop().await;
    }
    ratio <= FANOUT_BOUND
}

#[tokio::main]
async fn main() {
    // `RUST_LOG=advisord=debug` shows where the time of a run goes (the daemons' logs,
    // with timestamps, on stderr).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let nats = NatsServer::start();
    let results = [
        ("overhead", overhead(&nats).await),
        ("discovery", discovery(&nats).await),
        ("fan-out", fanout(&nats).await),
    ];
    let broken: Vec<&str> = results
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(n, _)| *n)
        .collect();
    if !broken.is_empty() {
        eprintln!("mesh: bound broken: {}", broken.join(", "));
        std::process::exit(1);
    }
}
