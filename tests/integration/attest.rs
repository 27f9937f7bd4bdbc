//! A review is recorded, never claimed. Held against the session being reviewed (which can
//! only use the documented verbs: `record` refuses consultations on every surface), against
//! a hand-written consultation (it carries no valid attestation of the daemon's key, so it
//! never counts), and against a cloned or rewritten repository (this machine anchored none
//! of its heads, so the task is `foreign` until the user adopts it).

use crate::support::cli::Project;
use crate::support::client::{Advisor as DemoAdvisor, World};
use crate::support::daemon::{self as daemon_helper, answer, catalogue, Advisor, Daemon, TASK};
use advisord_adapters::registry::Registry;
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

const SUBJECT: &str = "Keep the upload queue in SQLite";

fn id_of(record: &Value) -> String {
    record["id"].as_str().expect("an id").to_string()
}

/// The consultation a session under pressure to "get a review" writes by hand.
fn minted(plan: &str, advisor: &str) -> Value {
    json!({"kind": "consultation", "plan": plan, "advisor": advisor, "status": "completed",
        "conclusion": format!("{advisor} agrees"), "stance": "supports", "confidence": 0.9})
}

fn assessment() -> Value {
    json!({"kind": "assessment", "subject": SUBJECT, "materiality": "high",
        "hypothesis": "one writer is enough",
        "evidence": [{"kind": "file", "ref": "src/queue.rs", "showed": "one writer"}]})
}

/// A `--no-daemon` project whose catalogue holds two process advisors, both present.
pub(crate) fn project() -> Rc<Project> {
    let project = Project::new();
    let mut text = String::from("advisors:\n");
    for id in ["adv1", "adv2"] {
        text.push_str(&format!(
            "  - id: {id}\n    title: {id}\n    transport: process\n    adapter: process\n    \
             executable: {id}-bin\n    capabilities: [independent_reasoning]\n"
        ));
        project.install(&format!("{id}-bin"));
    }
    project.write(".advisord/advisors.yaml", &text);
    project.trust_catalogue();
    project
}

fn json_of(project: &Rc<Project>, args: &[&str], exit: i32) -> Value {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--format", "json"]);
    project.cli().args(all).run().expect_exit(exit).json()
}

/// An assessment and its plan in `project`; their ids.
fn planned(project: &Rc<Project>) -> (String, String) {
    let assessment = id_of(&project.record(assessment()));
    let plan = project.record(json!({"kind": "plan", "assessment": assessment}));
    let selected: Vec<&str> = plan["selected"]
        .as_array()
        .expect("selected")
        .iter()
        .filter_map(|s| s["advisor"].as_str())
        .collect();
    assert_eq!(selected, ["adv1", "adv2"], "{plan}");
    (assessment, id_of(&plan))
}

/// The whole flow a daemon's job would leave: assessment, plan, two attested
/// consultations, a conclusion citing both and a passed validation; the conclusion's id.
fn reviewed_flow(project: &Rc<Project>) -> String {
    let (assessment, plan) = planned(project);
    let c1 = id_of(&project.record_consultation(minted(&plan, "adv1")));
    let c2 = id_of(&project.record_consultation(minted(&plan, "adv2")));
    let conclusion = project.record(json!({
        "kind": "conclusion", "assessment": assessment, "decision": "keep SQLite",
        "rationale": "both advisors agree", "consultations": [c1, c2],
        "evidence": [{"kind": "test", "ref": "queue_bench"}],
        "validation_plan": "run the queue benchmark in CI"}));
    assert_eq!(
        conclusion["reviewed_by"],
        json!(["adv1", "adv2"]),
        "{conclusion}"
    );
    assert_eq!(conclusion["independent_review_count"], 2);
    project.record(
        json!({"kind": "validation", "conclusion": id_of(&conclusion),
        "check": "queue benchmark", "passed": true}),
    );
    id_of(&conclusion)
}

/// A new assessment on the same subject, and its plan's `reuse`.
fn reuse_of_a_new_plan(project: &Rc<Project>) -> Value {
    let again = id_of(&project.record(assessment()));
    project.record(json!({"kind": "plan", "assessment": again}))["reuse"].clone()
}

fn conclusion_line(status: &Value, id: &str) -> Value {
    status["assessments"]
        .as_array()
        .expect("assessments")
        .iter()
        .flat_map(|a| a["conclusions"].as_array().expect("conclusions"))
        .find(|c| c["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("conclusion {id} in {status}"))
}

fn record_path(project: &Project, sequence: u64) -> PathBuf {
    project
        .state()
        .join("default")
        .join(format!("{sequence:010}.json"))
}

fn read_record(project: &Project, sequence: u64) -> Value {
    serde_json::from_slice(&std::fs::read(record_path(project, sequence)).expect("a record"))
        .expect("json")
}

fn write_record(project: &Project, sequence: u64, record: &Value) {
    let mut text = serde_json::to_string_pretty(record).expect("serialises");
    text.push('\n');
    std::fs::write(record_path(project, sequence), text).expect("written by hand");
}

fn digest_of(path: &Path) -> String {
    advisord::core::chain::digest(&std::fs::read(path).expect("a record"))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

// ── A session cannot mint reviews through `record` ─────────────────────────────────

#[test]
fn a_session_minting_two_reviews_is_refused_without_the_daemon() {
    let project = project();
    let (_, plan) = planned(&project);
    let files = project.files();
    for advisor in ["adv1", "adv2"] {
        project
            .cli()
            .args(["record", "--file", "-"])
            .stdin(&minted(&plan, advisor).to_string())
            .run()
            .expect_exit(3)
            .expect_stdout("refused (consultation_by_daemon_only)")
            .expect_stdout("consultation job");
    }
    assert_eq!(project.files(), files, "nothing was written");
}

#[test]
fn a_session_minting_two_reviews_is_refused_through_the_daemon() {
    let world = World::new(&[
        DemoAdvisor::new("adv1", "supports", 10),
        DemoAdvisor::new("adv2", "supports", 10),
    ]);
    let mut world = world;
    world.start_daemon();
    let assessment = world.assessment();
    let plan = world.record(json!({"kind": "plan", "assessment": assessment}));
    let input = world.root().parent().expect("a parent").join("minted.json");
    for advisor in ["adv1", "adv2"] {
        std::fs::write(&input, minted(&id_of(&plan), advisor).to_string()).expect("input");
        let refused = world
            .run(&[
                "record",
                "--file",
                input.to_str().expect("utf-8"),
                "--format",
                "json",
            ])
            .expect_exit(3);
        assert!(
            refused.stderr.contains("consultation_by_daemon_only")
                || refused.stdout.contains("consultation_by_daemon_only"),
            "{} {}",
            refused.stdout,
            refused.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_minting_two_reviews_is_refused_over_http() {
    let (registry, _) = scripted(&["adv1", "adv2"]);
    let daemon = Daemon::start(
        &catalogue(&[Advisor::scripted("adv1"), Advisor::scripted("adv2")]),
        registry,
    )
    .await;
    let assessment = daemon.assessment().await;
    let plan = daemon
        .record(json!({"kind": "plan", "assessment": assessment}))
        .await;
    for advisor in ["adv1", "adv2"] {
        let body = json!({"context": daemon.place.context(),
            "record": minted(&id_of(&plan), advisor)});
        let refused = daemon
            .call("POST", "/api/v1/reasoning/records", Some(body))
            .await
            .expect(422);
        assert_eq!(
            refused["reason"], "consultation_by_daemon_only",
            "{refused}"
        );
        let message = refused["message"].as_str().expect("a message");
        assert!(message.contains("mesh answer"), "{message}");
    }
    assert!(daemon.place.records_of(TASK, "consultation").is_empty());
    daemon.stop().await;
}

#[test]
fn a_session_minting_two_reviews_is_refused_by_the_mcp_record_tool() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
    use rmcp::ServiceExt;
    let project = project();
    let (_, plan) = planned(&project);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let transport = TokioChildProcess::new(
            tokio::process::Command::new(env!("CARGO_BIN_EXE_advisor-consult")).configure(|cmd| {
                cmd.env_clear()
                    .env("PATH", project.bin())
                    .env("HOME", project.outside().join("home"))
                    .arg("--no-daemon")
                    .arg("--root")
                    .arg(project.root())
                    .arg("--state-dir")
                    .arg(project.state())
                    .arg("mcp")
                    .current_dir(project.root());
            }),
        )
        .expect("start the server");
        let client = ().serve(transport).await.expect("initialize");
        for advisor in ["adv1", "adv2"] {
            let arguments = json!({"record": minted(&plan, advisor)});
            let result = client
                .call_tool(
                    CallToolRequestParams::new("record".to_string())
                        .with_arguments(arguments.as_object().cloned().unwrap_or_default()),
                )
                .await
                .expect("a tool result");
            assert_eq!(result.is_error, Some(true));
            // An error result carries its refusal as JSON in its second text (no structured
            // content, which would fail the tool's output schema in some hosts).
            let structured: serde_json::Value =
                serde_json::from_str(&result.content[1].as_text().expect("a text").text)
                    .expect("the refusal as JSON");
            assert_eq!(
                structured["reason"], "consultation_by_daemon_only",
                "{structured}"
            );
        }
        client.cancel().await.expect("close");
    });
    assert!(!record_path(&project, 3).exists(), "nothing was written");
}

// ── The daemon attests what its jobs write ──────────────────────────────────────────

fn scripted(ids: &[&str]) -> (Registry, Vec<Arc<ScriptedAdapter>>) {
    let mut registry = Registry::builtin();
    let mut fakes = Vec::new();
    for id in ids {
        let fake = Arc::new(ScriptedAdapter::new(vec![Script::answer(&answer(
            id, "supports",
        ))]));
        registry.insert(&format!("scripted-{id}"), fake.clone());
        fakes.push(fake);
    }
    (registry, fakes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_attests_each_consultation_and_verify_checks_it() {
    let (registry, fakes) = scripted(&["adv1", "adv2"]);
    let daemon = Daemon::start(
        &catalogue(&[Advisor::scripted("adv1"), Advisor::scripted("adv2")]),
        registry,
    )
    .await;
    let assessment = daemon.assessment().await;
    let job = daemon.consult(&assessment, 30.0).await;
    let job_id = job["id"].as_str().expect("a job id").to_string();
    let done = daemon.wait(&job_id).await;
    assert_eq!(done["state"], "done", "{done}");
    fakes.iter().for_each(|f| f.assert_exhausted());
    // The key: 32 bytes, private, in the daemon's data directory.
    let data = daemon.place.data();
    let key = data.join("attest.key");
    assert_eq!(std::fs::metadata(&key).expect("the key").len(), 32);
    assert_eq!(mode(&key), 0o600);
    let key_id = advisord::machine::attest::Key::load(&data)
        .expect("readable")
        .expect("made")
        .id()
        .to_string();
    let consultations = daemon.place.records_of(TASK, "consultation");
    assert_eq!(consultations.len(), 2);
    for c in &consultations {
        assert_eq!(c["status"], "completed", "{c}");
        let a = &c["attestation"];
        assert_eq!(a["job"], job_id.as_str(), "{c}");
        assert_eq!(a["key"], key_id.as_str(), "{c}");
        assert_eq!(a["counts"], true, "{c}");
        assert!(
            a["mac"]
                .as_str()
                .expect("a mac")
                .starts_with("hmac-sha256:"),
            "{c}"
        );
    }
    // Their conclusion is reviewed by both; `verify` finds nothing.
    let status = daemon_helper::call_json(
        &daemon.socket(),
        "GET",
        "/api/v1/reasoning",
        &json!({"context": daemon.place.context()}),
    )
    .await
    .expect(200);
    assert_eq!(status["trust"], "local", "{status}");
    assert!(status.get("unattested").is_none(), "{status}");
    let ids: Vec<String> = consultations.iter().map(id_of).collect();
    let conclusion = daemon
        .record(json!({"kind": "conclusion", "assessment": assessment,
            "decision": "one writer", "rationale": "both agree", "consultations": ids,
            "evidence": [{"kind": "test", "ref": "t"}], "validation_plan": "run it"}))
        .await;
    assert_eq!(
        conclusion["reviewed_by"],
        json!(["adv1", "adv2"]),
        "{conclusion}"
    );
    let context = json!({"context": daemon.place.context()});
    let verified = daemon_helper::call_json(
        &daemon.socket(),
        "GET",
        "/api/v1/reasoning/verify",
        &context,
    )
    .await
    .expect(200);
    assert_eq!(verified["tasks"][0]["findings"], json!([]), "{verified}");
    assert_eq!(verified["tasks"][0]["trust"], "local", "{verified}");
    // One consultation edited on disk, its link mended: its MAC no longer matches.
    let dir = daemon.place.state().join(TASK);
    let file = dir.join("0000000003.json");
    let mut edited: Value =
        serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("json");
    edited["conclusion"] = json!("adv1 agrees, strongly");
    std::fs::write(&file, serde_json::to_vec_pretty(&edited).expect("json")).expect("write");
    let verified = daemon_helper::call_json(
        &daemon.socket(),
        "GET",
        "/api/v1/reasoning/verify",
        &context,
    )
    .await
    .expect(200);
    let findings = verified["tasks"][0]["findings"]
        .as_array()
        .expect("findings");
    assert!(
        findings.iter().any(|f| f["problem"] == "unattested"
            && f["file"] == "0000000003.json"
            && f["message"]
                .as_str()
                .unwrap_or("")
                .contains("does not match")),
        "{findings:#?}"
    );
    daemon.stop().await;
}

// ── A hand-written consultation never counts ───────────────────────────────────────

#[test]
fn a_hand_written_consultation_with_a_correct_prev_is_unattested_and_never_counts() {
    let project = project();
    let (assessment, plan) = planned(&project);
    let c1 = id_of(&project.record_consultation(minted(&plan, "adv1")));
    // adv2's consultation written by hand, chained correctly to the record before it, and
    // carrying adv1's attestation copied over.
    let attestation = read_record(&project, 3)["attestation"].clone();
    let forged = json!({
        "id": "01KJPX986GBVPG00000000FAKE", "task": "default", "sequence": 4,
        "created_at": "2026-03-02T09:15:19.120Z", "schema": 2, "redacted": [],
        "prev": digest_of(&record_path(&project, 3)),
        "kind": "consultation", "plan": plan, "advisor": "adv2", "status": "completed",
        "conclusion": "adv2 agrees", "stance": "supports",
        "finished_at": "2026-03-02T09:15:19.120Z", "attestation": attestation
    });
    write_record(&project, 4, &forged);
    let conclusion = project.record(json!({
        "kind": "conclusion", "assessment": assessment, "decision": "keep SQLite",
        "rationale": "both advisors agree", "consultations": [c1, id_of(&forged)],
        "evidence": [{"kind": "test", "ref": "queue_bench"}],
        "validation_plan": "run the queue benchmark in CI"}));
    // The stored record carries no false claim.
    assert_eq!(conclusion["reviewed_by"], json!(["adv1"]), "{conclusion}");
    assert_eq!(conclusion["independent_review_count"], 1);
    let status = json_of(&project, &["status"], 0);
    assert_eq!(status["unattested"], 1, "{status}");
    let line = conclusion_line(&status, &id_of(&conclusion));
    assert_eq!(line["reviewed_by"], json!(["adv1"]), "{line}");
    let forged_line = status["assessments"][0]["consultations"]
        .as_array()
        .expect("consultations")
        .iter()
        .find(|c| c["advisor"] == "adv2")
        .cloned()
        .expect("adv2's line");
    assert_eq!(forged_line["unattested"], true, "{forged_line}");
    let plain = project.cli().args(["status"]).run().expect_exit(0);
    assert!(plain.stdout.contains("UNATTESTED adv2"), "{}", plain.stdout);
    // The chain holds; `verify` names the one consultation it cannot vouch for.
    let verify = json_of(&project, &["verify"], 1);
    let task = &verify["tasks"][0];
    assert!(task.get("broken_at").is_none(), "{task}");
    let findings = task["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0]["problem"], "unattested");
    assert_eq!(findings[0]["file"], "0000000004.json");
}

#[test]
fn an_answer_its_transport_did_not_vouch_for_is_recorded_but_never_counted() {
    let project = project();
    let (assessment, plan) = planned(&project);
    let c1 = id_of(&project.record_consultation(minted(&plan, "adv1")));
    let store = advisord::store::Store::open(&project.state());
    let task = advisord::core::records::TaskName::new("default").expect("a task");
    let unvouched = store
        .write_consultation(
            &task,
            &minted(&plan, "adv2"),
            &advisord::store::Provenance {
                job: "01JTESTJOB0000000000000000",
                source: Some("mesh:unpinned"),
                counts: false,
                secrets: &[],
            },
        )
        .expect("written");
    let conclusion = project.record(json!({
        "kind": "conclusion", "assessment": assessment, "decision": "keep SQLite",
        "rationale": "weighed both", "consultations": [c1, unvouched.id()],
        "evidence": [{"kind": "test", "ref": "queue_bench"}],
        "validation_plan": "run the queue benchmark in CI"}));
    assert_eq!(conclusion["reviewed_by"], json!(["adv1"]), "{conclusion}");
    assert_eq!(conclusion["independent_review_count"], 1);
    // Valid, so not a finding; its source is the store's, from the job.
    json_of(&project, &["verify"], 0);
    assert_eq!(read_record(&project, 4)["source"], "mesh:unpinned");
}

#[test]
fn without_the_key_verify_says_every_consultation_is_unattested() {
    let project = project();
    reviewed_flow(&project);
    std::fs::remove_file(project.data().join("attest.key")).expect("remove the key");
    let verify = json_of(&project, &["verify"], 1);
    let findings = verify["tasks"][0]["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 2, "{findings:#?}");
    for finding in findings {
        assert_eq!(finding["problem"], "unattested");
        let message = finding["message"].as_str().expect("a message");
        assert!(message.contains("no attestation key"), "{message}");
    }
    let status = json_of(&project, &["status"], 0);
    assert_eq!(
        status["assessments"][0]["conclusions"][0]["reviewed_by"],
        json!([])
    );
}

// ── Heads anchored outside the repository ──────────────────────────────────────────

/// Copy `from`'s state directory into `to`'s, as cloning a repository would.
fn plant(from: &Project, to: &Project) {
    let (src, dst) = (from.state().join("default"), to.state().join("default"));
    std::fs::create_dir_all(&dst).expect("the planted task");
    for entry in std::fs::read_dir(&src).expect("the task") {
        let entry = entry.expect("an entry");
        let name = entry.file_name();
        if name.to_string_lossy().ends_with(".json") {
            std::fs::copy(entry.path(), dst.join(name)).expect("copy");
        }
    }
}

#[test]
fn a_cloned_repositorys_planted_task_is_foreign_until_adopted() {
    let original = project();
    let conclusion = reviewed_flow(&original);
    // The control: where it was written, a new plan on the subject reuses the conclusion.
    assert_eq!(reuse_of_a_new_plan(&original), json!(conclusion));

    let clone = project();
    plant(&original, &clone);
    let status = json_of(&clone, &["status"], 0);
    assert_eq!(status["trust"], "foreign", "{status}");
    let why = status["foreign"].as_str().expect("why");
    assert!(
        why.contains("never wrote") && why.contains("adopt"),
        "{why}"
    );
    assert_eq!(
        conclusion_line(&status, &conclusion)["reviewed_by"],
        json!([])
    );
    let plain = clone.cli().args(["status"]).run().expect_exit(0);
    assert!(plain.stdout.contains("trust: FOREIGN"), "{}", plain.stdout);
    let verify = json_of(&clone, &["verify"], 1);
    assert_eq!(verify["tasks"][0]["trust"], "foreign", "{verify}");
    // A plan asks the advisors instead of reusing the planted conclusion.
    assert_eq!(reuse_of_a_new_plan(&clone), Value::Null);

    // Adopting says what it accepts, and then the conclusion may be reused; the planted
    // consultations were attested by another machine's key and still never count.
    let adopted = clone
        .cli()
        .args(["adopt", "--task", "default"])
        .run()
        .expect_exit(0);
    assert!(adopted.stdout.contains("was foreign"), "{}", adopted.stdout);
    assert!(
        adopted.stdout.contains("still never count"),
        "{}",
        adopted.stdout
    );
    let status = json_of(&clone, &["status"], 0);
    assert_eq!(status["trust"], "local", "{status}");
    assert_eq!(
        conclusion_line(&status, &conclusion)["reviewed_by"],
        json!([])
    );
    assert_eq!(reuse_of_a_new_plan(&clone), json!(conclusion));
}

#[test]
fn adopt_names_a_task_or_all_of_them() {
    let project = project();
    project
        .cli()
        .args(["adopt"])
        .run()
        .expect_exit(2)
        .expect_stderr("--task NAME");
    project.record(assessment());
    let all = json_of(&project, &["adopt", "--all"], 0);
    assert_eq!(all["adopted"][0]["task"], "default", "{all}");
    assert_eq!(all["adopted"][0]["was"], "local", "{all}");
}

/// A file in a task's directory that is not a record (a stray) is never adopted as the
/// head nor counted as a record: adopt, status and verify take the task's highest record
/// alike.
#[test]
fn adopt_passes_over_a_file_that_is_not_a_record() {
    let project = project();
    let task = project.state().join("default");
    std::fs::create_dir_all(&task).expect("the task's directory");
    std::fs::write(task.join("notes.json"), b"{}").expect("a stray");
    // Only a stray: nothing to adopt, nothing anchored, and the task is nobody's to doubt.
    let refused = project
        .cli()
        .args(["adopt", "--task", "default"])
        .run()
        .expect_exit(2);
    assert!(
        refused.stderr.contains("has no records")
            && refused.stderr.contains("1 file there is not a record"),
        "{}",
        refused.stderr
    );
    let anchors = advisord::machine::anchor::Anchors::new(&project.data(), &project.state());
    let name = advisord::core::records::TaskName::new("default").expect("a task");
    assert_eq!(anchors.head(&name), None, "a stray is never anchored");
    assert_eq!(json_of(&project, &["status"], 0)["trust"], "local");
    let none = json_of(&project, &["adopt", "--all"], 0);
    assert_eq!(none["adopted"], json!([]), "{none}");

    // Records beside the stray: the head is the highest record, and only records count.
    project.record(assessment());
    project.record(assessment());
    let all = json_of(&project, &["adopt", "--all"], 0);
    let adopted = &all["adopted"][0];
    assert_eq!(adopted["records"], 2, "{all}");
    assert_eq!(adopted["head"]["sequence"], 2, "{all}");
    assert_eq!(
        adopted["head"]["hash"],
        json!(digest_of(&record_path(&project, 2))),
        "{all}"
    );
    assert_eq!(adopted["was"], "local", "{all}");
}

#[test]
fn a_consistent_rewrite_of_a_task_written_here_is_detected() {
    let project = project();
    let conclusion = reviewed_flow(&project);
    // Rewrite the assessment and mend every link after it: the chain alone holds.
    let mut first = read_record(&project, 1);
    first["hypothesis"] = json!("two writers are fine");
    write_record(&project, 1, &first);
    for sequence in 2..=6 {
        let mut record = read_record(&project, sequence);
        record["prev"] = json!(digest_of(&record_path(&project, sequence - 1)));
        write_record(&project, sequence, &record);
    }
    let verify = json_of(&project, &["verify"], 1);
    let task = &verify["tasks"][0];
    assert!(
        task.get("broken_at").is_none(),
        "the chain alone holds: {task}"
    );
    assert_eq!(task["trust"], "foreign", "{task}");
    assert!(
        task["foreign"].as_str().unwrap_or("").contains("rewritten"),
        "{task}"
    );
    let plain = project.cli().args(["verify"]).run().expect_exit(1);
    assert!(plain.stdout.contains("FOREIGN"), "{}", plain.stdout);
    assert_eq!(reuse_of_a_new_plan(&project), Value::Null);
    let status = json_of(&project, &["status"], 0);
    assert_eq!(
        conclusion_line(&status, &conclusion)["reviewed_by"],
        json!([])
    );
}

#[test]
fn a_crash_between_a_record_and_its_anchor_leaves_the_task_local() {
    let project = project();
    for subject in ["one", "two", "three"] {
        let mut a = assessment();
        a["subject"] = json!(subject);
        project.record(a);
    }
    let anchors = advisord::machine::anchor::Anchors::new(&project.data(), &project.state());
    let task = advisord::core::records::TaskName::new("default").expect("a task");
    let file = anchors.file(&task).expect("the anchor file");
    assert_eq!(mode(&file), 0o600);
    let head = |sequence: u64| advisord::core::chain::Head {
        sequence,
        hash: digest_of(&record_path(&project, sequence)),
    };
    assert_eq!(anchors.head(&task), Some(head(3)));
    // Record 3 stored, its anchor lost: one record past the anchor is the crash window.
    anchors.set(&task, &head(2)).expect("set back");
    assert_eq!(json_of(&project, &["status"], 0)["trust"], "local");
    // The next write anchors its own head again.
    project.record(
        json!({"kind": "attempt", "assessment": id_of(&read_record(&project, 1)),
        "tried": "t", "failure_observed": "f"}),
    );
    assert_eq!(anchors.head(&task), Some(head(4)));
    // Two records past the anchor are not a crash: they were copied in.
    anchors.set(&task, &head(2)).expect("set back");
    let status = json_of(&project, &["status"], 0);
    assert_eq!(status["trust"], "foreign", "{status}");
    // And a foreign task's write leaves its anchor where it was.
    project.record(
        json!({"kind": "attempt", "assessment": id_of(&read_record(&project, 1)),
        "tried": "t", "failure_observed": "f"}),
    );
    assert_eq!(anchors.head(&task), Some(head(2)));
}
