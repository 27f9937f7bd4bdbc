//! Attestations travel (docs/JOURNAL.md, "Attestations"): a consultation a daemon's job
//! wrote on machine A, replicated to machine B through the journal on a real three-node
//! cluster, is signed by A's mesh runtime. On B it never counts until the user pins A's
//! runtime there; then B's views, `verify` and the conclusions written on B count it. A
//! record edited by hand in B's replica does not.

use super::journal::{assessment, conclusion, formed_cluster, Machine, CONVERGE, TASK};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The path of record `sequence` in `machine`'s replica of the shared task.
fn replica_file(machine: &Machine, sequence: u64) -> PathBuf {
    machine
        .world
        .root()
        .join(advisord::paths::DEFAULT_STATE_DIR)
        .join(TASK)
        .join(format!("{sequence:010}.json"))
}

/// The consultation lines of `status`.
fn consultations(status: &Value) -> Vec<Value> {
    status["assessments"]
        .as_array()
        .expect("assessments")
        .iter()
        .flat_map(|a| a["consultations"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// The line of conclusion `id` in `status`.
fn conclusion_line(status: &Value, id: &str) -> Value {
    status["assessments"]
        .as_array()
        .expect("assessments")
        .iter()
        .flat_map(|a| a["conclusions"].as_array().cloned().unwrap_or_default())
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("conclusion {id} in {status}"))
}

/// `verify`'s findings for the shared task, and its exit status.
fn findings(machine: &Machine) -> (i32, Vec<Value>) {
    let verify = machine.run(&["verify"]);
    let code = verify.code;
    let json = verify.json();
    let found = json["tasks"][0]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (code, found)
}

/// Poll `machine`'s `status` (bounded) until `holds` says it is as expected.
fn status_until(machine: &Machine, what: &str, holds: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let status = machine.status();
        if holds(&status) {
            return status;
        }
        assert!(
            started.elapsed() < CONVERGE,
            "{what}, not within {CONVERGE:?}: {status}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_review_run_on_one_machine_counts_on_another_only_once_its_runtime_is_pinned_there() {
    let cluster = formed_cluster();
    let a = Machine::new("m1", &cluster);
    let b = Machine::new("m2", &cluster);

    // A's daemon runs the consultation job; its consultation reaches B's replica.
    let asked = a.record(&assessment("queue")).expect_exit(0).json();
    let asked = asked["id"].as_str().expect("an id").to_string();
    a.run(&["consult", &asked]).expect_exit(0);
    let on_a = a.status();
    let lines = consultations(&on_a);
    assert_eq!(lines.len(), 1, "one consultation on A: {on_a}");
    let consultation = lines[0]["id"].as_str().expect("an id").to_string();
    assert!(lines[0].get("unattested").is_none(), "A's own: {on_a}");
    let records = on_a["records"].as_u64().expect("a count");
    let status = b.wait_for_records(records);
    let sequence = (1..=records)
        .find(|s| {
            std::fs::read_to_string(replica_file(&b, *s))
                .is_ok_and(|text| text.contains(&consultation))
        })
        .expect("the consultation in B's replica");
    let stored: Value =
        serde_json::from_slice(&std::fs::read(replica_file(&b, sequence)).expect("a record"))
            .expect("json");
    let attestation = &stored["attestation"];
    let runtime = attestation["runtime"]
        .as_str()
        .expect("signed by a runtime");
    let key = attestation["runtime_key"].as_str().expect("its public key");
    assert!(runtime.starts_with("m1-"), "{attestation}");
    assert!(
        attestation["signature"]
            .as_str()
            .is_some_and(|s| s.starts_with("ed25519:")),
        "{attestation}"
    );
    // Only the public key and the signature travel: never A's seed.
    let seed = std::fs::read_to_string(a.world.data().join("mesh/key")).expect("A's seed");
    let text = std::fs::read_to_string(replica_file(&b, sequence)).expect("a record");
    assert!(
        !seed.trim().is_empty() && !text.contains(seed.trim()),
        "no seed travels with the record: {text}"
    );

    // Before pinning: unattested on B, with the command that pins A's runtime.
    let line = consultations(&status)
        .into_iter()
        .find(|c| c["id"] == consultation.as_str())
        .expect("the consultation on B");
    assert_eq!(line["unattested"], true, "{status}");
    assert_eq!(status["unattested"], 1, "{status}");
    let (code, found) = findings(&b);
    assert_eq!(code, 1, "{found:#?}");
    let pin_command = format!("advisor-consult mesh pin {runtime} --key {key}");
    assert!(
        found.iter().any(|f| f["problem"] == "unattested"
            && f["sequence"] == sequence
            && f["message"]
                .as_str()
                .is_some_and(|m| m.contains(&pin_command))),
        "verify names the runtime and the command: {found:#?}"
    );
    let first = b
        .record(
            &json!({"kind": "conclusion", "assessment": asked, "decision": "one writer",
            "rationale": "measured", "consultations": [consultation],
            "evidence": [{"kind": "test", "ref": "queue_bench"}],
            "validation_plan": "run the queue benchmark"}),
        )
        .expect_exit(0)
        .json();
    assert_eq!(
        first["reviewed_by"],
        json!([]),
        "no review from it: {first}"
    );
    assert_eq!(first["independent_review_count"], 0, "{first}");
    let first = first["id"].as_str().expect("an id").to_string();

    // Pinned on B: it counts in B's views, `verify` and B's next conclusion.
    b.world
        .run(&["mesh", "pin", runtime, "--key", key])
        .expect_exit(0);
    let status = status_until(&b, "the pinned runtime's review counts on B", |s| {
        s.get("unattested").is_none()
    });
    assert_eq!(
        conclusion_line(&status, &first)["reviewed_by"],
        json!(["adv1"]),
        "{status}"
    );
    let (code, found) = findings(&b);
    assert_eq!(code, 0, "{found:#?}");
    assert!(
        !found.iter().any(|f| f["problem"] == "unattested"),
        "{found:#?}"
    );
    let mut again = conclusion(&asked, "one writer, reviewed");
    again["consultations"] = json!([consultation]);
    again["supersedes"] = json!(first);
    let second = b.record(&again).expect_exit(0).json();
    assert_eq!(second["reviewed_by"], json!(["adv1"]), "{second}");
    assert_eq!(second["independent_review_count"], 1, "{second}");
    let records = b.status()["records"].as_u64().expect("a count");
    a.wait_for_records(records);

    // Edited by hand in B's replica: its signature no longer holds.
    let mut edited = stored.clone();
    edited["conclusion"] = json!("a forged agreement");
    let mut bytes = serde_json::to_vec_pretty(&edited).expect("serialises");
    bytes.push(b'\n');
    std::fs::write(replica_file(&b, sequence), bytes).expect("edited by hand");
    let status = status_until(&b, "the edited consultation is unattested on B", |s| {
        s["unattested"] == 1
    });
    assert_eq!(
        conclusion_line(&status, second["id"].as_str().expect("an id"))["reviewed_by"],
        json!([]),
        "{status}"
    );
    let (code, found) = findings(&b);
    assert_eq!(code, 1, "{found:#?}");
    assert!(
        found.iter().any(|f| f["problem"] == "unattested"
            && f["sequence"] == sequence
            && f["message"]
                .as_str()
                .is_some_and(|m| m.contains("does not match its content"))),
        "{found:#?}"
    );
}
