//! `verify` through the daemon reports its progress to a client that asks for it
//! (`Accept: application/x-ndjson`), line by line before the report, so a client waiting
//! for a long walk sees it go on; asked plainly, the route answers the report as before.

use crate::support::daemon::{Daemon, Place};
use advisord::client::Client;
use advisord::core::chain::{self, VerifyReport, VERIFY_STEP};
use advisord::core::records::{
    Assessment, Body, Confidence, Envelope, Materiality, Record, SCHEMA_VERSION,
};
use advisord::protocol::{RequestContext, Verb, VerifyRequest};
use advisord::service::VerifyProgress;
use advisord::store::file_name;
use advisord_adapters::registry::Registry;

/// Fill task `task` with `count` chained assessments, straight to files.
fn fill(place: &Place, task: &str, count: usize) {
    let dir = place.state().join(task);
    std::fs::create_dir_all(&dir).expect("the task directory");
    let mut prev = chain::GENESIS.to_string();
    for i in 0..count {
        let record = Record {
            envelope: Envelope {
                id: format!("01JVERIFY{:017}", i + 1),
                task: task.to_string(),
                sequence: i as u64 + 1,
                created_at: "2026-03-01T12:00:00.000Z".into(),
                schema: SCHEMA_VERSION,
                redacted: vec![],
                prev: Some(prev.clone()),
            },
            body: Body::Assessment(Assessment {
                subject: format!("decision {i}"),
                materiality: Materiality::Low,
                confidence: Confidence::Medium,
                hypothesis: "h".into(),
                facts: vec![],
                assumptions: vec![],
                questions: vec![],
                evidence: vec![],
                capabilities: vec![],
                new_evidence: false,
            }),
        };
        let mut bytes = serde_json::to_vec_pretty(&record).expect("serialises");
        bytes.push(b'\n');
        prev = chain::digest(&bytes);
        std::fs::write(dir.join(file_name(&record)), bytes).expect("a record file");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_progress_reaches_the_client_before_the_report() {
    let daemon = Daemon::start("advisors: []\n", Registry::empty()).await;
    let records = VERIFY_STEP * 2 + 7;
    fill(&daemon.place, "big", records);
    let context: RequestContext =
        serde_json::from_value(daemon.place.context_for("big")).expect("a context");
    let request = VerifyRequest {
        context,
        all: false,
    };
    let client = Client::new(daemon.socket());
    let mut seen: Vec<VerifyProgress> = Vec::new();
    let report: VerifyReport = client
        .verify_with_progress(&request.call(), &mut |p: &VerifyProgress| {
            seen.push(p.clone())
        })
        .await
        .expect("the report");
    assert_eq!(report.tasks.len(), 1);
    assert_eq!(report.tasks[0].state.records, records);
    assert!(!seen.is_empty(), "progress reached the client");
    assert!(seen.iter().all(|p| p.task == "big"), "{seen:?}");
    let last = seen.last().expect("a last line");
    assert_eq!((last.walked, last.records), (records, records), "{seen:?}");
    assert!(
        seen.windows(2).all(|w| w[0].walked <= w[1].walked),
        "progress only goes forward: {seen:?}"
    );
    // Asked plainly (as `curl` asks), the same report as JSON.
    let plain = daemon
        .call(
            "GET",
            &format!(
                "/api/v1/reasoning/verify?root={}&task=big&state_dir={}",
                daemon.place.root().display(),
                daemon.place.state().display()
            ),
            None,
        )
        .await
        .expect(200);
    assert_eq!(plain["tasks"][0]["records"], records);
    // The typed verb the CLI sends takes the same path and gives the same report.
    let again = advisord::protocol::Carrier::carry(&client, request)
        .await
        .expect("the report");
    assert_eq!(again.tasks[0].state, report.tasks[0].state);
    daemon.stop().await;
}
