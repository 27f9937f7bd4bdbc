//! The deadline is the deadline: an answer that arrives before the caller's deadline is
//! kept, however close to it, and one that arrives after it is `timeout`, for the HTTP
//! adapter (the fake LLM server) and the process adapter (`fake-advisor`), each
//! answering at a wall-clock instant placed against the deadline. Every case runs at once, under one long deadline, so that the margins in
//! milliseconds stay wide next to the time a process takes to start.

use crate::process_cases::fake_advisor;
use crate::{advisor, ANSWER, PROMPT, USAGE};
use advisord_adapters::contract::{
    consult, env_from_map, AdvisorSpec, FailureKind, Io, STOP_GRACE,
};
use advisord_adapters::registry::Registry;
use advisord_fakes::llm_server::{FakeLlmServer, Reply, Script};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The deadline every case runs under.
const DEADLINE: Duration = Duration::from_secs(8);

/// When the answer arrives, in thousandths of the deadline, and whether it is kept.
const TABLE: [(u64, bool); 4] = [(900, true), (970, true), (995, true), (1010, false)];

fn delay_ms(permille: u64) -> u64 {
    DEADLINE.as_millis() as u64 * permille / 1000
}

/// The wall clock, as time since the Unix epoch.
fn unix_now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
}

/// The io of one case. The HTTP client is made beforehand and shared: making one loads
/// the system's certificates, which on a loaded machine takes longer than the 40 ms
/// margin of the 99.5 % case, and would count against the deadline.
fn io(
    env: BTreeMap<String, String>,
    http: reqwest::Client,
    deadline: Option<tokio::time::Instant>,
) -> Io {
    Io {
        deadline: deadline.unwrap_or_else(|| tokio::time::Instant::now() + DEADLINE),
        cancel: CancellationToken::new(),
        env: env_from_map(env),
        http,
    }
}

async fn run(
    adapter: &str,
    spec: AdvisorSpec,
    env: BTreeMap<String, String>,
    http: reqwest::Client,
    deadline: Option<tokio::time::Instant>,
) -> (bool, u64) {
    let adapter = Registry::builtin().get(adapter).expect("a builtin adapter");
    let io = io(env, http, deadline);
    // Time from the deadline's own start, which may come a little before this task runs.
    let clock = io.deadline - DEADLINE;
    let outcome = consult(adapter.as_ref(), &spec, PROMPT, &io).await;
    let took_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
    let kept = match &outcome.result {
        Ok(normalised) => {
            assert!(!normalised.conclusion.is_empty(), "{outcome:?}");
            true
        }
        Err(failure) => {
            assert_eq!(failure.kind, FailureKind::Timeout, "{outcome:?}");
            false
        }
    };
    (kept, took_ms)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_up_to_the_deadline_are_kept_and_later_ones_are_not() {
    // The fake server answers at a wall-clock instant taken with the HTTP cases'
    // deadline, not after a delay counted from the request's arrival: on a loaded machine
    // sending the request can take longer than the 99.5 % case's 40 ms margin, which
    // would move the answer past the deadline and fail a correct adapter.
    let http_deadline = tokio::time::Instant::now() + DEADLINE;
    let started = unix_now();
    let mut script = Script::new();
    for (permille, _) in TABLE {
        let at = started + Duration::from_millis(delay_ms(permille));
        script = script.model(
            &format!("model-{permille}"),
            Reply::ok(ANSWER, USAGE.input_tokens, USAGE.output_tokens)
                .at_unix_ms(u64::try_from(at.as_millis()).expect("a time in milliseconds")),
        );
    }
    let server = FakeLlmServer::start(script).await;
    let http = reqwest::Client::new();
    let mut cases = Vec::new();
    for (permille, expect) in TABLE {
        let spec = advisor(
            &format!("http-{permille}"),
            "ollama",
            serde_json::json!({"endpoint": server.base_url(), "model": format!("model-{permille}")}),
        );
        cases.push((
            "http",
            permille,
            expect,
            tokio::spawn(run(
                "ollama",
                spec,
                BTreeMap::new(),
                http.clone(),
                Some(http_deadline),
            )),
        ));
        // The fake answers at a wall-clock instant taken with the deadline, not after a
        // delay counted from its own start: starting a process can take longer than the
        // 99.5 % case's 40 ms margin.
        fake_advisor();
        let deadline = tokio::time::Instant::now() + DEADLINE;
        let at = unix_now() + Duration::from_millis(delay_ms(permille));
        let spec = AdvisorSpec {
            executable: Some(fake_advisor().display().to_string()),
            ..advisor(
                &format!("process-{permille}"),
                "process",
                serde_json::json!({"args": [
                    "--answer-at-unix-ms", at.as_millis().to_string(), "--stance", "supports"
                ]}),
            )
        };
        let env = BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]);
        cases.push((
            "process",
            permille,
            expect,
            tokio::spawn(run("process", spec, env, http.clone(), Some(deadline))),
        ));
    }
    for (transport, permille, expect, case) in cases {
        let (kept, took_ms) = case.await.expect("the case ran");
        let at = permille as f64 / 10.0;
        assert_eq!(
            kept,
            expect,
            "{transport}: an answer at {at} % of the deadline was {} (outcome after {took_ms} ms)",
            if kept { "kept" } else { "not kept" }
        );
        if !kept {
            // Stopped at the deadline, reported within the grace.
            let bound = DEADLINE + STOP_GRACE + Duration::from_millis(20);
            assert!(
                Duration::from_millis(took_ms) >= DEADLINE
                    && Duration::from_millis(took_ms) <= bound,
                "{transport}: a timeout after {took_ms} ms"
            );
        }
    }
    server.shutdown().await;
}
