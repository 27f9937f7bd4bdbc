//! A new advisor is a catalogue entry and nothing else: an advisor no code has heard of
//! flows through `advisors`, `plan` and a consultation by the real daemon, reached over
//! HTTP against the fake LLM server (issue 3, item 9; docs/ADAPTERS.md).

use crate::support::client as client_support;

use advisord_fakes::llm_server::{FakeLlmServer, Script};
use client_support::{read_all, wait_bounded, World, RUN_BOUND};
use serde_json::Value;

const KEY_VAR: &str = "ACME_REVIEW_KEY";
const KEY: &str = "acme-test-key-0123";

/// The answer the fake model gives: a JSON object the contract normalises.
const ANSWER: &str = r#"Here is my review.
```json
{"conclusion": "WAL mode is enough for one writer", "stance": "agree",
 "assumptions": ["one writer process"], "risks": ["lock contention under bursts"],
 "actions": ["measure p99 under 50 writers"], "falsifiers": ["SQLITE_BUSY under load"],
 "confidence": "80%"}
```"#;

fn catalogue(endpoint: &str) -> String {
    format!(
        "advisors:\n  - id: acme-review\n    title: Acme review service\n    transport: http\n    \
         adapter: openai\n    references: {{ provider: acme, vendor: acme, model: acme-1 }}\n    \
         credential: {KEY_VAR}\n    capabilities: [independent_reasoning, code_review]\n    \
         endpoint: {endpoint}/v1\n    model: acme-1\n"
    )
}

/// Run the client with the world's environment, plus the credential when `with_key`;
/// assert it exits 0 and return its standard output as JSON.
fn run(world: &World, with_key: bool, args: &[&str]) -> Value {
    let mut command = world.command(args);
    if with_key {
        command.env(KEY_VAR, KEY);
    }
    let mut child = command.spawn().expect("spawn advisor-consult");
    let stdout = read_all(child.stdout.take().expect("stdout"));
    let stderr = read_all(child.stderr.take().expect("stderr"));
    let code = wait_bounded(&mut child, RUN_BOUND, &format!("advisor-consult {args:?}"));
    let (stdout, stderr) = (
        stdout.join().expect("stdout"),
        stderr.join().expect("stderr"),
    );
    assert_eq!(
        code, 0,
        "advisor-consult {args:?} exited {code}\n{stdout}\n{stderr}"
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

fn advisor<'v>(view: &'v Value, id: &str) -> &'v Value {
    view["advisors"]
        .as_array()
        .expect("advisors list")
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("advisor {id} missing from {view}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalogue_only_advisor_is_listed_planned_and_consulted() {
    let server = FakeLlmServer::start(Script::answering(ANSWER).api_key(KEY)).await;
    let mut world = World::new(&[]);
    std::fs::write(
        world.root().join(".advisord/advisors.yaml"),
        catalogue(&server.base_url()),
    )
    .expect("catalogue");
    world.trust_catalogue();
    world.start_daemon();
    let world = std::sync::Arc::new(world);

    let w = world.clone();
    tokio::task::spawn_blocking(move || {
        // Without its credential it is a status, not a crash.
        let view = run(&w, false, &["advisors", "--format", "json"]);
        assert_eq!(advisor(&view, "acme-review")["status"], "not_configured");

        // With it, it is available and offers its capabilities.
        let view = run(&w, true, &["advisors", "--format", "json"]);
        let acme = advisor(&view, "acme-review");
        assert_eq!(acme["status"], "available", "{view}");
        assert_eq!(view["capacity"]["code_review"], 1, "{view}");

        // The policy selects it for a code review.
        let plan = run(
            &w,
            true,
            &[
                "plan",
                "--materiality",
                "high",
                "--capabilities",
                "code_review",
                "--format",
                "json",
            ],
        );
        assert_eq!(plan["selected"][0]["advisor"], "acme-review", "{plan}");
        assert_eq!(plan["selected"][0]["covers"][0], "code_review", "{plan}");

        // And a consultation through the daemon reaches it and records its answer.
        let input = w.tmp().join("assessment.json");
        std::fs::write(
            &input,
            serde_json::json!({
                "kind": "assessment", "subject": "Use SQLite for the job queue",
                "materiality": "high", "hypothesis": "WAL mode is enough",
                "evidence": [{"kind": "file", "ref": "src/queue.rs"}]
            })
            .to_string(),
        )
        .expect("input");
        let assessment = run(
            &w,
            true,
            &[
                "record",
                "--file",
                input.to_str().expect("utf-8"),
                "--format",
                "json",
            ],
        );
        let id = assessment["id"].as_str().expect("id").to_string();
        let job = run(
            &w,
            true,
            &["--assessment", &id, "--timeout", "20", "--format", "json"],
        );
        assert_eq!(job["state"], "done", "{job}");
        let consultation = &job["consultations"][0];
        assert_eq!(consultation["advisor"], "acme-review", "{job}");
        assert_eq!(consultation["status"], "completed", "{job}");

        let status = run(&w, true, &["status", "--format", "json"]);
        let line = &status["assessments"][0]["consultations"][0];
        assert_eq!(line["stance"], "supports", "{status}");
        assert_eq!(line["usage"]["input_tokens"], 120, "{status}");
        let record = consultation["record"]
            .as_str()
            .expect("the consultation's record id");
        let chain = run(&w, true, &["explain", record, "--format", "json"]).to_string();
        assert!(
            chain.contains("WAL mode is enough for one writer"),
            "{chain}"
        );
        assert!(!chain.contains(KEY), "the credential value leaked: {chain}");
    })
    .await
    .expect("the client steps");

    let requests = server.requests();
    assert_eq!(
        requests.len(),
        1,
        "exactly one exchange reached the fake model"
    );
}

/// Runs `advisor-consult --no-daemon advisors` against `yaml`; its exit code and stderr.
fn load(yaml: &str) -> (i32, String) {
    let world = World::new(&[]);
    std::fs::write(world.root().join(".advisord/advisors.yaml"), yaml).expect("catalogue");
    world.trust_catalogue();
    let output = world
        .command(&["--no-daemon", "advisors"])
        .output()
        .expect("run advisor-consult");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_catalogue_entry_the_adapters_refuse_is_an_error_naming_advisor_and_field() {
    let base = catalogue("http://127.0.0.1:9");
    let check = |yaml: String, fragments: &[&str]| {
        let (code, stderr) = load(&yaml);
        assert_eq!(code, 2, "{stderr}");
        for fragment in fragments {
            assert!(stderr.contains(fragment), "{fragment:?} not in: {stderr}");
        }
    };
    // An adapter nobody registered.
    check(
        base.replace("adapter: openai", "adapter: acmewire"),
        &["acme-review", "adapter", "acmewire", "openai"],
    );
    // An HTTP entry without its endpoint.
    check(
        base.replace("    endpoint: http://127.0.0.1:9/v1\n", ""),
        &["acme-review", "endpoint"],
    );
    // A key no adapter knows.
    check(
        base.replace("model: acme-1\n", "model: acme-1\n    temprature: 0.2\n"),
        &["acme-review", "temprature"],
    );
}
