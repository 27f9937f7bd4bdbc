//! The real `advisord` binary: SIGKILL and restart, SIGTERM with its grace, one daemon per
//! socket, `--detach`, `--version`. Advisors are shell scripts run by the process adapter.

use crate::support::daemon as daemon_helper;

use daemon_helper::{call, call_json, catalogue, wait_for, Advisor, Binary, Place, TASK};
use nix::sys::signal::Signal;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// A script answering `stance` after `seconds`, unless the file `fast` exists (then at
/// once); it appends a line to `calls` each time it runs.
fn advisor_script(place: &Place, id: &str, seconds: f64) -> std::path::PathBuf {
    let answer = json!({"conclusion": format!("{id} concludes"), "stance": "supports"});
    place.script(
        &format!("{id}.sh"),
        &format!(
            "echo {id} >> {calls}\ncat > /dev/null\n[ -e {fast} ] || sleep {seconds}\necho '{answer}'",
            calls = place.path().join("calls").display(),
            fast = place.path().join("fast").display(),
        ),
    )
}

fn calls(place: &Place) -> Vec<String> {
    std::fs::read_to_string(place.path().join("calls"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

async fn record_assessment(place: &Place) -> String {
    let body = json!({"context": place.context(), "record": {
        "kind": "assessment", "subject": "keep one daemon per user", "materiality": "critical",
        "hypothesis": "one daemon is enough", "evidence": [{"kind": "file", "ref": "src/daemon"}],
    }});
    let reply = call_json(&place.socket(), "POST", "/api/v1/reasoning/records", &body).await;
    reply.expect(201)["id"].as_str().unwrap().to_string()
}

async fn consult(place: &Place, assessment: &str) -> String {
    let body = json!({"context": place.context(), "assessment": assessment, "timeout_s": 60});
    let reply = call_json(&place.socket(), "POST", "/api/v1/consultations", &body).await;
    reply.expect(202)["id"].as_str().unwrap().to_string()
}

async fn wait_done(socket: &Path, job: &str) -> Value {
    let events = daemon_helper::events(socket, job).await;
    let last = events.last().expect("events");
    assert_eq!(last["event"], "done", "{events:?}");
    last["result"].clone()
}

fn advisors_recorded(place: &Place) -> Vec<String> {
    place
        .records_of(TASK, "consultation")
        .iter()
        .map(|r| r["advisor"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_a_restart_records_every_advisor_exactly_once() {
    let place = Place::new("advisors: []\n");
    let advisors = [
        Advisor::process("a", &advisor_script(&place, "a", 0.0)),
        Advisor::process("b", &advisor_script(&place, "b", 2.0)),
        Advisor::process("c", &advisor_script(&place, "c", 0.0)),
    ];
    place.set_catalogue(&catalogue(&advisors));
    let mut daemon = Binary::start(&place, &[]);
    let assessment = record_assessment(&place).await;
    let job = consult(&place, &assessment).await;
    wait_for("a recorded and b asked", || {
        advisors_recorded(&place) == ["a"] && calls(&place).contains(&"b".to_string())
    });
    daemon.signal_and_wait(Signal::SIGKILL);
    // c answered at once but waits behind b in plan order: only a is recorded.
    assert_eq!(advisors_recorded(&place), ["a"]);

    std::fs::write(place.path().join("fast"), "").unwrap();
    let _daemon = Binary::start(&place, &[]);
    let done = wait_done(&place.socket(), &job).await;
    assert_eq!(done["state"], "done");
    assert_eq!(advisors_recorded(&place), ["a", "b", "c"]);
    assert_eq!(place.records_of(TASK, "plan").len(), 1);
    let asked = calls(&place);
    assert_eq!(
        asked.iter().filter(|c| *c == "a").count(),
        1,
        "a is not asked again: {asked:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_gives_the_grace_then_leaves_the_rest_to_resume() {
    let place = Place::new("advisors: []\n");
    let advisors = [
        Advisor::process("quick", &advisor_script(&place, "quick", 0.5)),
        Advisor::process("slow", &advisor_script(&place, "slow", 30.0)),
    ];
    place.set_catalogue(&catalogue(&advisors));
    let mut daemon = Binary::start(&place, &["--grace", "2"]);
    let assessment = record_assessment(&place).await;
    let job = consult(&place, &assessment).await;
    wait_for("both advisors asked", || calls(&place).len() == 2);

    let status = daemon.signal_and_wait(Signal::SIGTERM);
    assert!(status.success(), "a clean stop: {status:?}");
    assert_eq!(
        advisors_recorded(&place),
        ["quick"],
        "quick finished within the grace"
    );
    assert!(!place.socket().exists(), "the socket is removed");
    assert!(
        !place.data().join("advisord.pid").exists(),
        "the pid file is removed"
    );
    let journaled = place.data().join("jobs").join(format!("{job}.json"));
    let entry: Value = serde_json::from_slice(&std::fs::read(&journaled).unwrap()).unwrap();
    assert_eq!(entry["job"]["state"], "running", "left journaled to resume");
    assert!(entry["context"]["credentials"]
        .as_object()
        .unwrap()
        .is_empty());

    std::fs::write(place.path().join("fast"), "").unwrap();
    let _daemon = Binary::start(&place, &[]);
    let done = wait_done(&place.socket(), &job).await;
    assert_eq!(done["state"], "done");
    assert_eq!(advisors_recorded(&place), ["quick", "slow"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_on_a_live_socket_refuses_to_start() {
    let place = Place::new(&catalogue(&[]));
    let _first = Binary::start(&place, &[]);
    let other_data = place.path().join("other-data");
    let second = Command::new(env!("CARGO_BIN_EXE_advisord"))
        .arg("--socket")
        .arg(place.socket())
        .arg("--data-dir")
        .arg(&other_data)
        .output()
        .expect("run a second advisord");
    assert_eq!(second.status.code(), Some(4), "{second:?}");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("another `advisord` already serves"),
        "{stderr}"
    );
    call(&place.socket(), "GET", "/api/v1/health", None)
        .await
        .expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_starts_a_daemon_in_the_background_and_returns() {
    let place = Place::new(&catalogue(&[]));
    let out = Command::new(env!("CARGO_BIN_EXE_advisord"))
        .arg("--detach")
        .arg("--socket")
        .arg(place.socket())
        .arg("--data-dir")
        .arg(place.data())
        .output()
        .expect("run advisord --detach");
    assert!(out.status.success(), "{out:?}");
    let pid: i32 = std::fs::read_to_string(place.data().join("advisord.pid"))
        .expect("a pid file")
        .trim()
        .parse()
        .expect("a pid");
    let health = call(&place.socket(), "GET", "/api/v1/health", None)
        .await
        .expect(200);
    assert_eq!(health["pid"], pid);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&pid.to_string()));
    assert!(place.data().join("advisord.log").exists());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGTERM).unwrap();
    wait_for("the detached daemon to stop", || {
        daemon_helper::process_gone(pid)
    });
    assert!(!place.socket().exists());
}

#[test]
fn version_and_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_advisord"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("advisord {}", env!("CARGO_PKG_VERSION"))
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_advisord"))
        .args(["--grace", "soon"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("seconds"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_resumed_after_sigkill_consults_credentialed_http_advisors_with_the_daemons_keys() {
    use advisord_fakes::llm_server::{FakeLlmServer, Reply, Script};
    // Two credentialed HTTP advisors behind fakes that check their key. The first
    // request to each hangs (the daemon is killed meanwhile); the next answers at once.
    let slow = || Some(Reply::ok("late", 1, 1).after(60_000));
    let server_a = FakeLlmServer::start(Script::new().api_key("key-a-0123456789").model_queue(
        "ma",
        slow(),
        None,
    ))
    .await;
    let server_b = FakeLlmServer::start(Script::new().api_key("key-b-0123456789").model_queue(
        "mb",
        slow(),
        None,
    ))
    .await;
    let place = Place::new("advisors: []\n");
    let http = |id: &str, model: &str, key: &str, server: &FakeLlmServer| {
        Advisor {
            id: id.to_string(),
            adapter: "openai".to_string(),
            transport: "http".to_string(),
            max_concurrent: 2,
            extra: Vec::new(),
        }
        .with(&format!("endpoint: {}/v1", server.base_url()))
        .with(&format!("model: {model}"))
        .with(&format!("credential: {key}"))
    };
    place.set_catalogue(&catalogue(&[
        http("a", "ma", "ADV_KEY_A", &server_a),
        http("b", "mb", "ADV_KEY_B", &server_b),
    ]));
    let keys = [
        ("ADV_KEY_A", "key-a-0123456789"),
        ("ADV_KEY_B", "key-b-0123456789"),
    ];
    let mut daemon = Binary::start_with_env(&place, &[], &keys);
    let assessment = record_assessment(&place).await;
    let mut context = place.context();
    context["credentials"] = json!({"ADV_KEY_A": keys[0].1, "ADV_KEY_B": keys[1].1});
    let body = json!({"context": context, "assessment": assessment, "timeout_s": 60});
    let reply = call_json(&place.socket(), "POST", "/api/v1/consultations", &body).await;
    let job = reply.expect(202)["id"].as_str().unwrap().to_string();
    wait_for("both advisors asked", || {
        server_a.requests().len() == 1 && server_b.requests().len() == 1
    });
    daemon.signal_and_wait(Signal::SIGKILL);

    let _daemon = Binary::start_with_env(&place, &[], &keys);
    let done = wait_done(&place.socket(), &job).await;
    assert_eq!(done["state"], "done", "{done}");
    let statuses: Vec<(String, String)> = done["consultations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["advisor"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("a".to_string(), "completed".to_string()),
            ("b".to_string(), "completed".to_string())
        ],
        "{done}"
    );
    assert_eq!(advisors_recorded(&place), ["a", "b"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requests_own_credential_values_are_never_recorded_whatever_their_shape() {
    use advisord_fakes::llm_server::{FakeLlmServer, Reply, Script};
    // Values of no shape the scrubber knows.
    let (key_a, key_b, key_c) = (
        "zq.Fancy-Value:7781/pw-a",
        "zq.Fancy-Value:7781/pw-b",
        "zq.Fancy-Value:7781/pw-c",
    );
    let echo = |text: String| {
        Reply::ok(
            &json!({"conclusion": text, "stance": "supports"}).to_string(),
            1,
            1,
        )
    };
    let server = FakeLlmServer::start(
        Script::new()
            // The key echoed in the conclusion, and in an assumption.
            .model(
                "echo",
                Reply::ok(
                    &json!({"conclusion": format!("you sent {key_a} as your key"),
                            "stance": "supports", "assumptions": [format!("key={key_a}")]})
                    .to_string(),
                    1,
                    1,
                ),
            )
            // The key in a 401 body: the diagnostic.
            .model(
                "refuse",
                Reply::Status {
                    status: 401,
                    message: Some(format!("invalid api key {key_b}")),
                },
            )
            // The key split across lines.
            .model(
                "split",
                echo(format!(
                    "your key is {}\n{} and it works",
                    &key_c[..10],
                    &key_c[10..]
                )),
            ),
    )
    .await;
    let place = Place::new("advisors: []\n");
    let http = |id: &str, model: &str, key: &str| {
        Advisor {
            id: id.to_string(),
            adapter: "openai".to_string(),
            transport: "http".to_string(),
            max_concurrent: 2,
            extra: Vec::new(),
        }
        .with(&format!("endpoint: {}/v1", server.base_url()))
        .with(&format!("model: {model}"))
        .with(&format!("credential: {key}"))
    };
    place.set_catalogue(&catalogue(&[
        http("a", "echo", "KEY_A"),
        http("b", "refuse", "KEY_B"),
        http("c", "split", "KEY_C"),
    ]));
    let _daemon = Binary::start(&place, &[]);
    let assessment = record_assessment(&place).await;
    let mut context = place.context();
    context["credentials"] = json!({"KEY_A": key_a, "KEY_B": key_b, "KEY_C": key_c});
    let body = json!({"context": context, "assessment": assessment, "timeout_s": 30});
    let reply = call_json(&place.socket(), "POST", "/api/v1/consultations", &body).await;
    let job = reply.expect(202)["id"].as_str().unwrap().to_string();
    let events = daemon_helper::events(&place.socket(), &job).await;
    assert_eq!(events.last().unwrap()["event"], "done", "{events:?}");

    let consultations = place.records_of(TASK, "consultation");
    assert_eq!(consultations.len(), 3, "{consultations:?}");
    for record in &consultations {
        let shown = record.to_string();
        for key in [key_a, key_b, key_c] {
            assert!(!shown.contains(&key[10..]), "{key} recorded: {shown}");
        }
        assert_eq!(record["redacted"], json!(["credential_value"]), "{shown}");
    }
    let by = |id: &str| {
        consultations
            .iter()
            .find(|r| r["advisor"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(
        by("a")["conclusion"],
        "you sent [redacted:credential_value] as your key"
    );
    assert_eq!(by("b")["failure"], "auth_failed");
    assert!(by("b")["diagnostic"]
        .as_str()
        .unwrap()
        .contains("[redacted:credential_value]"));
    assert_eq!(
        by("c")["conclusion"],
        "your key is [redacted:credential_value] and it works"
    );
    // Nor in the events a client is shown.
    let streamed = serde_json::to_string(&events).unwrap();
    for key in [key_a, key_b, key_c] {
        assert!(!streamed.contains(&key[10..]), "{key} streamed");
    }
}
