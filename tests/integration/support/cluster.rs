//! A real three-node `nats-server` JetStream cluster, formed, and the `advisord --journal`
//! machines on it: the tests and the journal's bench start them the same way.

use super::client::{daemon_exe, Advisor, World};
use advisord_fakes::nats::NatsServer;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the cluster's meta group may take to place a stream of three replicas.
const FORM_BOUND: Duration = Duration::from_secs(60);

/// A JetStream cluster of three nodes whose meta group has a leader and places three
/// replicas (polled with a probe stream, bounded). Call it outside any async runtime.
pub fn formed_cluster() -> Vec<NatsServer> {
    let cluster = NatsServer::jetstream_cluster(3);
    let urls: Vec<String> = cluster.iter().map(NatsServer::url).collect();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let client = async_nats::connect(urls).await.expect("connect");
        let js = async_nats::jetstream::new(client);
        let started = Instant::now();
        loop {
            let probe = async_nats::jetstream::stream::Config {
                name: "PROBE".into(),
                subjects: vec!["probe".into()],
                num_replicas: 3,
                ..Default::default()
            };
            let made = tokio::time::timeout(Duration::from_secs(2), js.create_stream(probe));
            if let Ok(Ok(_)) = made.await {
                let _ = js.delete_stream("PROBE").await;
                return;
            }
            assert!(
                started.elapsed() < FORM_BOUND,
                "the JetStream cluster did not form within {FORM_BOUND:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    cluster
}

/// A repository with one advisor whose `.advisord/project.yaml` names journal `journal`.
pub fn journal_world(journal: &str) -> World {
    let world = World::new(&[Advisor::new("adv1", "supports", 0)]);
    std::fs::write(
        world.root().join(".advisord/project.yaml"),
        format!("journal: {journal}\n"),
    )
    .expect("project file");
    world
}

/// The cluster's client URLs, comma separated, as `ADVISORD_MESH_URL` takes them.
pub fn urls(cluster: &[NatsServer]) -> String {
    cluster
        .iter()
        .map(NatsServer::url)
        .collect::<Vec<_>>()
        .join(",")
}

/// Start `advisord --journal` for `world` as mesh runtime `runtime` on `urls`, its output
/// in `log` (and `RUST_LOG` set to `rust_log` when given); returns once its socket answers.
pub fn start_journal_daemon(
    world: &World,
    runtime: &str,
    urls: &str,
    rust_log: Option<&str>,
    log: &Path,
) -> Child {
    let log = std::fs::File::create(log).expect("log");
    let mut command = Command::new(daemon_exe());
    command
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", world.root().parent().expect("parent").join("home"))
        .env("TMPDIR", world.tmp())
        .env("ADVISORD_DATA_DIR", world.data())
        .env("ADVISORD_MESH_URL", urls)
        .env("ADVISORD_MESH_RUNTIME", runtime);
    if let Some(rust_log) = rust_log {
        command.env("RUST_LOG", rust_log);
    }
    let child = command
        .arg("--socket")
        .arg(world.socket())
        .arg("--data-dir")
        .arg(world.data())
        .arg("--grace")
        .arg("0.5")
        .arg("--journal")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("spawn advisord");
    world.wait_for_socket();
    child
}
