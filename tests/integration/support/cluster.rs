//! A real three-node `nats-server` JetStream cluster, formed: the tests and the journal's
//! bench start one the same way.

use advisord_fakes::nats::NatsServer;
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
