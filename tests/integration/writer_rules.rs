//! The one writer's rules and the store's files, end to end with `--no-daemon`: the writer
//! never builds on a broken chain, never stores what `verify` refuses, and the store's
//! files follow one naming rule and never follow a link.

use crate::support::cli::Project;
use advisord::core::chain;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

fn id_of(record: &Value) -> String {
    record["id"].as_str().expect("an id").to_string()
}

/// A project whose catalogue holds `alpha` and `beta`.
fn project() -> Rc<Project> {
    let project = Project::new();
    let mut text = String::from("advisors:\n");
    for id in ["alpha", "beta"] {
        text.push_str(&format!(
            "  - id: {id}\n    title: {id}\n    transport: process\n    adapter: process\n    \
             executable: {id}-bin\n    capabilities: [independent_reasoning]\n"
        ));
    }
    project.write(".advisord/advisors.yaml", &text);
    project.trust_catalogue();
    project.install("alpha-bin");
    project.install("beta-bin");
    project
}

fn record_path(project: &Project, sequence: u64) -> PathBuf {
    project
        .state()
        .join("default")
        .join(chain::record_file(sequence))
}

fn json_of(project: &Rc<Project>, args: &[&str], exit: i32) -> Value {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--format", "json"]);
    project.cli().args(all).run().expect_exit(exit).json()
}

/// Record `input` and expect the writer to refuse it with `reason`; the refusal.
fn refused(project: &Rc<Project>, input: &Value, reason: &str) -> Value {
    project
        .cli()
        .args(["record", "--file", "-", "--format", "json"])
        .stdin(&input.to_string())
        .run()
        .expect_exit(3)
        .expect_json("/reason", reason)
        .json()
}

fn attempt(assessment: &str, tried: &str) -> Value {
    json!({"kind": "attempt", "assessment": assessment, "tried": tried,
        "failure_observed": "it failed"})
}

/// A task of an assessment and `attempts` attempts; the assessment's id.
fn attempts(project: &Rc<Project>, attempts: usize) -> String {
    let assessment = id_of(&project.record(json!({"kind": "assessment",
        "subject": "Which lock", "materiality": "low", "hypothesis": "flock"})));
    for i in 0..attempts {
        project.record(attempt(&assessment, &format!("try {i}")));
    }
    assessment
}

/// A consultation written by hand with a correct `prev` and the fields the writer would
/// compute, for an advisor the plan did not select: the views' walk of links finds nothing,
/// `verify` refuses it, and the writer appends nothing after it. Before, a conclusion
/// citing it was stored with `reviewed_by: [zulu]`.
#[test]
fn a_hand_written_consultation_with_a_correct_prev_stops_the_writer() {
    let project = project();
    let assessment = id_of(&project.record(json!({"kind": "assessment",
        "subject": "Keep the queue in SQLite", "materiality": "low",
        "hypothesis": "one writer is enough"})));
    let plan = id_of(&project.record(json!({"kind": "plan", "assessment": assessment})));
    let prev = chain::digest(&std::fs::read(record_path(&project, 2)).expect("record 2"));
    let forged = json!({
        "id": "01KJPX986GBVPG00000000ZULU", "task": "default", "sequence": 3,
        "created_at": "2026-03-02T09:15:19.120Z", "schema": 2, "redacted": [], "prev": prev,
        "kind": "consultation", "plan": plan, "advisor": "zulu", "status": "completed",
        "conclusion": "zulu agrees", "stance": "supports",
        "finished_at": "2026-03-02T09:15:19.120Z"
    });
    let mut text = serde_json::to_string_pretty(&forged).expect("serialises");
    text.push('\n');
    std::fs::write(record_path(&project, 3), text).expect("written by hand");

    let conclusion = json!({"kind": "conclusion", "assessment": assessment,
        "decision": "keep SQLite", "rationale": "zulu agrees",
        "consultations": [id_of(&forged)]});
    let refusal = refused(&project, &conclusion, "chain_broken");
    let message = refusal["message"].as_str().expect("a message");
    for part in [
        "`0000000003.json`",
        "zulu",
        "the files from `0000000003.json` on",
        "advisor-consult verify",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    assert!(!record_path(&project, 4).exists(), "nothing stored");
    let verify = json_of(&project, &["verify"], 1);
    let findings = &verify["tasks"][0]["findings"];
    assert_eq!(findings[0]["file"], "0000000003.json", "{findings}");
    assert_eq!(findings[0]["reason"], "advisor_not_selected", "{findings}");

    // Once the broken part is moved aside, the task takes records again.
    std::fs::remove_file(record_path(&project, 3)).expect("moved aside");
    json_of(&project, &["verify"], 0);
    project.record(attempt(&assessment, "after the repair"));
}

/// A required text made only of terminal control codes cleans to nothing: refused, naming
/// the field and why, and nothing is stored (before, it was stored and broke the chain).
#[test]
fn a_required_text_of_control_codes_only_is_refused() {
    let project = project();
    let input = json!({"kind": "assessment", "subject": "\u{1b}[0m", "materiality": "low",
        "hypothesis": "h"});
    let refusal = refused(&project, &input, "invalid_field");
    let message = refusal["message"].as_str().expect("a message");
    assert!(
        message.contains("`subject`") && message.contains("control characters"),
        "{message}"
    );
    let assessment = attempts(&project, 0);
    refused(
        &project,
        &attempt(&assessment, "\u{7}\u{1b}[2J"),
        "invalid_field",
    );
    let verify = json_of(&project, &["verify"], 0);
    assert_eq!(verify["tasks"][0]["records"], 1);
}

/// `verify` names the file that was edited, not the one after it whose link broke.
#[test]
fn verify_names_the_edited_file() {
    let project = project();
    attempts(&project, 3);
    let path = record_path(&project, 2);
    let text = std::fs::read_to_string(&path).expect("record 2");
    std::fs::write(&path, text.replace("try 0", "try zero")).expect("edited");
    let verify = json_of(&project, &["verify"], 1);
    let findings = verify["tasks"][0]["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0]["file"], "0000000002.json");
    assert_eq!(findings[0]["problem"], "changed");
    let message = findings[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("record 3"),
        "the link in 3 is named: {message}"
    );
    project
        .cli()
        .args(["verify"])
        .run()
        .expect_exit(1)
        .expect_stdout("0000000002.json");
}

/// One rule for record file names: an eleven-digit name is a stray, which `status` and
/// `verify` report alike (before, `status` said intact while `verify` reported three
/// findings).
#[test]
fn an_odd_name_is_a_stray_that_status_and_verify_report_alike() {
    let project = project();
    let assessment = attempts(&project, 2);
    std::fs::copy(
        record_path(&project, 3),
        project.state().join("default").join("00000000003.json"),
    )
    .expect("an eleven-digit name");
    let status = json_of(&project, &["status"], 0);
    assert_eq!(
        status["chain"]["strays"],
        json!(["00000000003.json"]),
        "{status}"
    );
    assert!(status["chain"].get("broken_at").is_none(), "{status}");
    project
        .cli()
        .args(["status"])
        .run()
        .expect_exit(0)
        .expect_stdout("stray file 00000000003.json");
    let verify = json_of(&project, &["verify"], 1);
    let findings = verify["tasks"][0]["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0]["file"], "00000000003.json");
    assert_eq!(findings[0]["problem"], "stray");
    assert_eq!(verify["tasks"][0]["strays"], status["chain"]["strays"]);
    // A stray is never a record: the writer appends after the records.
    let next = project.record(attempt(&assessment, "next"));
    assert_eq!(next["sequence"], 4);
}

/// A task whose directory holds no record, only a stray, is one this machine wrote nothing
/// in: `verify` judges its trust from its records, as the views do, not from the stray.
#[test]
fn a_task_of_only_a_stray_is_judged_alike_by_status_and_verify() {
    let project = project();
    let dir = project.state().join("default");
    std::fs::create_dir_all(&dir).expect("the task's directory");
    std::fs::write(dir.join("notes.txt"), b"by hand").expect("a stray");
    let status = json_of(&project, &["status"], 0);
    assert_eq!(status["chain"]["strays"], json!(["notes.txt"]), "{status}");
    let verify = json_of(&project, &["verify"], 1);
    assert_eq!(verify["tasks"][0]["strays"], status["chain"]["strays"]);
    assert_eq!(
        verify["tasks"][0]["trust"], status["trust"],
        "{verify} {status}"
    );
    assert_eq!(verify["tasks"][0]["trust"], "local", "{verify}");
}

/// A planted record file of the highest sequence is a finding, read at once: `status`
/// answers, `verify` reports the gap, and the writer appends nothing after it (before,
/// reading the task looked up ten billion names).
#[test]
fn a_planted_huge_sequence_is_a_finding_not_a_halt() {
    let project = project();
    let assessment = attempts(&project, 1);
    let mut planted: Value =
        serde_json::from_str(&std::fs::read_to_string(record_path(&project, 2)).unwrap())
            .expect("json");
    planted["sequence"] = json!(chain::MAX_SEQUENCE);
    planted["id"] = json!("01KJPX986GBVPG0000PLANTED0");
    std::fs::write(
        record_path(&project, chain::MAX_SEQUENCE),
        serde_json::to_string_pretty(&planted).unwrap(),
    )
    .expect("planted");
    let started = Instant::now();
    let status = json_of(&project, &["status"], 0);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "status answered at once"
    );
    assert_eq!(status["chain"]["broken_at"], json!(chain::MAX_SEQUENCE));
    let verify = json_of(&project, &["verify"], 1);
    let findings = verify["tasks"][0]["findings"].to_string();
    assert!(
        findings.contains("sequence_gap") && findings.contains("9999999999.json"),
        "{findings}"
    );
    refused(&project, &attempt(&assessment, "after"), "chain_broken");
    assert!(!record_path(&project, 3).exists());
}

/// A `.lock` that is a symbolic link is refused, naming it, and nothing is created where
/// it points.
#[test]
fn a_lock_that_is_a_link_is_refused_and_nothing_is_created_where_it_points() {
    let project = project();
    let assessment = attempts(&project, 0);
    let lock = project.state().join("default").join(".lock");
    let target = project.outside().join("planted-by-the-repository");
    std::fs::remove_file(&lock).expect("the lock");
    std::os::unix::fs::symlink(&target, &lock).expect("a link");
    project
        .cli()
        .args(["record", "--file", "-"])
        .stdin(&attempt(&assessment, "t").to_string())
        .run()
        .expect_exit(1)
        .expect_stderr(".lock")
        .expect_stderr("symbolic link");
    assert!(!target.exists(), "nothing created where the link points");
}

/// A state directory that names a regular file is the caller's mistake: a usage error
/// naming the path and what is accepted, not a store failure.
#[test]
fn a_state_dir_that_is_a_file_is_a_usage_error() {
    let project = project();
    let file = project.outside().join("a-file");
    std::fs::write(&file, "not a directory").expect("a file");
    for state_dir in [file.clone(), file.join("below")] {
        let state_dir = state_dir.display().to_string();
        project
            .cli()
            .without_state_dir()
            .args(["--state-dir", &state_dir, "status", "--format", "json"])
            .run()
            .expect_exit(2)
            .expect_json("/error", "usage");
        project
            .cli()
            .without_state_dir()
            .args(["--state-dir", &state_dir, "status"])
            .run()
            .expect_exit(2)
            .expect_stderr(&file.display().to_string())
            .expect_stderr("is not a directory");
    }
}
