//! The hash chain end to end with `--no-daemon`: a task's records written through the real
//! binary, then tampered with on disk as someone bypassing the writer would. For each kind
//! of tampering, `verify` finds it (exit 1, naming the file), `check` fails, `status`,
//! `explain` and `tree` mark what follows the break, the conclusion no longer counts as
//! reviewed, and the writer appends nothing after the break (`chain_broken`), so no plan
//! can reuse it.

use crate::support::cli::Project;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::rc::Rc;

const SUBJECT: &str = "Keep the upload queue in SQLite";

/// The ids of one task's flow: assessment #1, plan #2, consultations #3 (alpha) and #4
/// (beta), conclusion #5 citing both, validation #6.
struct Flow {
    project: Rc<Project>,
    assessment: String,
    plan: String,
    conclusion: String,
}

fn catalogue() -> String {
    let mut text = String::from("advisors:\n");
    for id in ["alpha", "beta"] {
        text.push_str(&format!(
            "  - id: {id}\n    title: {id}\n    transport: process\n    adapter: process\n    \
             executable: {id}-bin\n    capabilities: [independent_reasoning]\n"
        ));
    }
    text
}

fn id_of(record: &Value) -> String {
    record["id"].as_str().expect("an id").to_string()
}

fn project() -> Rc<Project> {
    let project = Project::new();
    project.write(".advisord/advisors.yaml", &catalogue());
    project.trust_catalogue();
    project.install("alpha-bin");
    project.install("beta-bin");
    project
}

fn assessment() -> Value {
    json!({"kind": "assessment", "subject": SUBJECT, "materiality": "high",
        "hypothesis": "one writer is enough",
        "evidence": [{"kind": "file", "ref": "src/queue.rs", "showed": "one writer"}]})
}

fn consultation(plan: &str, advisor: &str) -> Value {
    json!({"kind": "consultation", "plan": plan, "advisor": advisor, "status": "completed",
        "conclusion": format!("{advisor} agrees"), "stance": "supports"})
}

/// Record the flow through the writer.
fn flow() -> Flow {
    let project = project();
    let assessment = id_of(&project.record(assessment()));
    let plan_record = project.record(json!({"kind": "plan", "assessment": assessment}));
    let plan = id_of(&plan_record);
    let selected: Vec<&str> = plan_record["selected"]
        .as_array()
        .expect("selected")
        .iter()
        .map(|s| s["advisor"].as_str().expect("an advisor"))
        .collect();
    assert_eq!(selected, ["alpha", "beta"], "{plan_record}");
    let alpha = id_of(&project.record_consultation(consultation(&plan, "alpha")));
    let beta = id_of(&project.record_consultation(consultation(&plan, "beta")));
    let conclusion = id_of(&project.record(json!({
        "kind": "conclusion", "assessment": assessment, "decision": "keep SQLite",
        "rationale": "both advisors agree", "consultations": [alpha, beta],
        "evidence": [{"kind": "test", "ref": "queue_bench"}],
        "validation_plan": "run the queue benchmark in CI"})));
    project.record(json!({"kind": "validation", "conclusion": conclusion,
        "check": "queue benchmark", "passed": true}));
    Flow {
        project,
        assessment,
        plan,
        conclusion,
    }
}

fn record_path(project: &Project, sequence: u64) -> PathBuf {
    project
        .state()
        .join("default")
        .join(format!("{sequence:010}.json"))
}

fn read_record(project: &Project, sequence: u64) -> Value {
    let text = std::fs::read_to_string(record_path(project, sequence)).expect("a record file");
    serde_json::from_str(&text).expect("a record")
}

fn write_record(project: &Project, sequence: u64, record: &Value) {
    let mut text = serde_json::to_string_pretty(record).expect("serialises");
    text.push('\n');
    std::fs::write(record_path(project, sequence), text).expect("written by hand");
}

/// One kind of tampering: its name, what it does to the flow's files, the problem `verify`
/// reports and in which file.
struct Tampering {
    name: &'static str,
    tamper: fn(&Flow),
    problem: &'static str,
    file: u64,
}

fn cases() -> Vec<Tampering> {
    vec![
        Tampering {
            name: "an edited field",
            tamper: |f| {
                let mut alpha = read_record(&f.project, 3);
                alpha["conclusion"] = json!("alpha agrees, strongly");
                write_record(&f.project, 3, &alpha);
            },
            // The edited file is named, not the one after it whose link no longer holds.
            problem: "changed",
            file: 3,
        },
        Tampering {
            // As an agent bypassing the writer would write it: plausible, without `prev`.
            name: "a hand-written consultation",
            tamper: |f| {
                let mut alpha = read_record(&f.project, 3);
                alpha.as_object_mut().expect("an object").remove("prev");
                write_record(&f.project, 3, &alpha);
            },
            problem: "unchained",
            file: 3,
        },
        Tampering {
            name: "a deleted record",
            tamper: |f| std::fs::remove_file(record_path(&f.project, 4)).expect("removed"),
            problem: "sequence_gap",
            file: 5,
        },
        Tampering {
            name: "a swapped pair",
            tamper: |f| {
                let (mut three, mut four) =
                    (read_record(&f.project, 3), read_record(&f.project, 4));
                three["sequence"] = json!(4);
                four["sequence"] = json!(3);
                write_record(&f.project, 3, &four);
                write_record(&f.project, 4, &three);
            },
            problem: "changed",
            file: 3,
        },
        Tampering {
            name: "a re-sequenced file",
            tamper: |f| {
                let mut four = read_record(&f.project, 4);
                four["sequence"] = json!(7);
                write_record(&f.project, 7, &four);
                std::fs::remove_file(record_path(&f.project, 4)).expect("moved");
            },
            problem: "sequence_gap",
            file: 5,
        },
        Tampering {
            name: "a forged reviewed_by",
            tamper: |f| {
                let mut conclusion = read_record(&f.project, 5);
                conclusion["reviewed_by"] = json!(["alpha", "beta", "gamma"]);
                conclusion["independent_review_count"] = json!(3);
                write_record(&f.project, 5, &conclusion);
            },
            problem: "computed",
            file: 5,
        },
    ]
}

fn json_of(project: &Rc<Project>, args: &[&str], exit: i32) -> Value {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--format", "json"]);
    project.cli().args(all).run().expect_exit(exit).json()
}

/// The conclusion's line in `status`.
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

/// A new assessment on the same subject, and its plan's `reuse`.
fn reuse_of_a_new_plan(project: &Rc<Project>) -> Value {
    let again = id_of(&project.record(assessment()));
    project.record(json!({"kind": "plan", "assessment": again}))["reuse"].clone()
}

/// The writer's answer to a new record in the task: refused as `chain_broken`, naming the
/// next step.
fn refused_as_chain_broken(project: &Rc<Project>) -> Value {
    project
        .cli()
        .args(["record", "--file", "-", "--format", "json"])
        .stdin(&assessment().to_string())
        .run()
        .expect_exit(3)
        .expect_json("/reason", "chain_broken")
        .json()
}

#[test]
fn an_untouched_flow_verifies_and_counts_its_review() {
    let f = flow();
    let verify = json_of(&f.project, &["verify"], 0);
    let task = &verify["tasks"][0];
    assert_eq!(task["task"], "default");
    assert_eq!(task["records"], 6);
    assert_eq!(task["chained_from"], 1);
    assert_eq!(task["findings"], json!([]));
    let head = task["head"]["hash"].as_str().expect("a head hash");
    assert!(head.starts_with("sha256:") && head.len() == 71, "{head}");

    let status = json_of(&f.project, &["status"], 0);
    assert_eq!(
        status["chain"]["head"]["hash"], head,
        "status prints the head"
    );
    assert_eq!(status["chain"]["head"]["sequence"], 6);
    assert!(status["chain"].get("broken_at").is_none(), "{status}");
    let line = conclusion_line(&status, &f.conclusion);
    assert_eq!(line["reviewed_by"], json!(["alpha", "beta"]));
    assert_eq!(line["independent_review_count"], 2);
    assert_eq!(status["assessments"][0]["state"], "validated");
    let plain = f.project.cli().args(["status"]).run().expect_exit(0);
    assert!(
        plain.stdout.contains("chain: intact") && plain.stdout.contains(head),
        "{}",
        plain.stdout
    );

    f.project.cli().args(["check"]).run().expect_exit(0);
    assert_eq!(reuse_of_a_new_plan(&f.project), json!(f.conclusion));
    // What the writer stored after the plan still chains on.
    json_of(&f.project, &["verify", "--all"], 0);
}

#[test]
fn every_kind_of_tampering_is_found_marked_and_not_counted() {
    for case in cases() {
        let f = flow();
        (case.tamper)(&f);
        let name = case.name;

        // `verify` finds it, names the file, and exits 1; plain output names the file too.
        let verify = json_of(&f.project, &["verify"], 1);
        let findings = verify["tasks"][0]["findings"].as_array().expect("findings");
        let file = format!("{:010}.json", case.file);
        assert!(
            findings
                .iter()
                .any(|x| x["problem"] == case.problem && x["file"] == file.as_str()),
            "{name}: expected `{}` in {file}: {findings:#?}",
            case.problem
        );
        let plain = f.project.cli().args(["verify"]).run().expect_exit(1);
        assert!(plain.stdout.contains(&file), "{name}: {}", plain.stdout);
        f.project
            .cli()
            .args(["verify", "--all"])
            .run()
            .expect_exit(1);
        for format in ["table", "yaml"] {
            f.project
                .cli()
                .args(["verify", "--format", format])
                .run()
                .expect_exit(1)
                .expect_stdout(case.problem);
        }

        // A CI gate fails.
        let check = json_of(&f.project, &["check"], 1);
        assert!(
            check["findings"]
                .as_array()
                .expect("findings")
                .iter()
                .any(|x| x["rule"] == "record_chain"),
            "{name}: {check}"
        );

        // The views mark what follows the break; the conclusion reviews nothing.
        let status = json_of(&f.project, &["status"], 0);
        assert!(
            status["chain"]["broken_at"].is_u64(),
            "{name}: {}",
            status["chain"]
        );
        let line = conclusion_line(&status, &f.conclusion);
        assert_eq!(line["unverified"], true, "{name}: {line}");
        assert_eq!(line["reviewed_by"], json!([]), "{name}");
        assert_eq!(line["independent_review_count"], 0, "{name}");
        assert_ne!(status["assessments"][0]["state"], "validated", "{name}");
        let marked = status["timeline"]
            .as_array()
            .expect("timeline")
            .iter()
            .find(|e| e["id"] == f.conclusion)
            .expect("the conclusion in the timeline");
        assert_eq!(marked["unverified"], true, "{name}");
        assert!(
            status["timeline"][0].get("unverified").is_none(),
            "{name}: the assessment before the break stands"
        );
        let plain = f.project.cli().args(["status"]).run().expect_exit(0);
        assert!(
            plain.stdout.contains("chain: BROKEN"),
            "{name}: {}",
            plain.stdout
        );

        let explain = json_of(&f.project, &["explain", &f.conclusion], 0);
        let item = &explain["conclusions"][0];
        assert_eq!(item["unverified"], true, "{name}: {item}");
        assert_eq!(item["reviewed_by"], json!([]), "{name}");
        assert_eq!(item["independent_review_count"], 0, "{name}");
        assert!(explain["assessment"].get("unverified").is_none(), "{name}");

        let tree = json_of(&f.project, &["tree"], 0);
        let conclusion_node = tree["nodes"][0]["children"]
            .as_array()
            .expect("children")
            .iter()
            .find(|n| n["id"] == f.conclusion)
            .unwrap_or_else(|| panic!("{name}: the conclusion in {tree}"));
        assert_eq!(conclusion_node["unverified"], true, "{name}");
        let plain = f.project.cli().args(["tree"]).run().expect_exit(0);
        assert!(
            plain.stdout.contains("[UNVERIFIED]"),
            "{name}: {}",
            plain.stdout
        );

        // The writer builds nothing on the break, so no plan can reuse what follows it;
        // the refusal names what `verify` finds and the next step.
        let refusal = refused_as_chain_broken(&f.project);
        let message = refusal["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("advisor-consult verify") && message.contains(".json"),
            "{name}: {message}"
        );
        let _ = (&f.assessment, &f.plan);
    }
}

#[test]
fn a_naive_swap_is_found_though_the_views_refuse_the_task() {
    // Swapping two files without touching what they hold: the store refuses to read a file
    // under another sequence's name (views exit 1 naming it); `verify` reports it.
    let f = flow();
    let (three, four) = (record_path(&f.project, 3), record_path(&f.project, 4));
    let held = std::fs::read(&three).expect("read");
    std::fs::copy(&four, &three).expect("swap");
    std::fs::write(&four, held).expect("swap");
    let verify = json_of(&f.project, &["verify"], 1);
    let findings = verify["tasks"][0]["findings"].as_array().expect("findings");
    assert!(
        findings
            .iter()
            .any(|x| x["problem"] == "misplaced" && x["file"] == "0000000003.json"),
        "{findings:#?}"
    );
    f.project
        .cli()
        .args(["status"])
        .run()
        .expect_exit(1)
        .expect_stderr("0000000003.json");
}

#[test]
fn records_written_before_the_chain_still_read_and_the_chain_starts_after_them() {
    // A task whose first records predate the chain (schema 1, no `prev`): it reads, the
    // writer chains the next record to the last old one, and `verify` says where the chain
    // starts.
    // Records that old carry no attestation either, and this machine anchored none of
    // them: the user adopts the task, and its consultations still say they are unattested.
    let f = flow();
    for sequence in 1..=6 {
        let mut record = read_record(&f.project, sequence);
        let object = record.as_object_mut().expect("an object");
        object.remove("prev");
        object.remove("attestation");
        object.insert("schema".into(), json!(1));
        write_record(&f.project, sequence, &record);
    }
    let status = json_of(&f.project, &["status"], 0);
    assert_eq!(status["trust"], "foreign", "{status}");
    f.project
        .cli()
        .args(["adopt", "--task", "default"])
        .run()
        .expect_exit(0);
    let status = json_of(&f.project, &["status"], 0);
    assert_eq!(status["trust"], "local", "{status}");
    assert!(status["chain"].get("chained_from").is_none(), "{status}");
    assert_eq!(status["unattested"], 2, "{status}");
    let line = conclusion_line(&status, &f.conclusion);
    assert_eq!(line["reviewed_by"], json!([]), "{status}");
    f.project
        .record(json!({"kind": "attempt", "assessment": f.assessment,
        "tried": "a second writer", "failure_observed": "lock contention"}));
    // The chain holds from #7; the two old consultations are the only findings.
    let verify = json_of(&f.project, &["verify"], 1);
    assert_eq!(verify["tasks"][0]["chained_from"], 7);
    assert_eq!(verify["tasks"][0]["trust"], "local");
    let problems: Vec<&Value> = verify["tasks"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| &f["problem"])
        .collect();
    assert_eq!(problems, [&json!("unattested"), &json!("unattested")]);
    let plain = f.project.cli().args(["verify"]).run().expect_exit(1);
    assert!(plain.stdout.contains("intact from #7"), "{}", plain.stdout);
    // An old record edited before the chain's first link is caught through that link.
    let mut six = read_record(&f.project, 6);
    six["check"] = json!("queue benchmark, edited");
    write_record(&f.project, 6, &six);
    json_of(&f.project, &["verify"], 1);
}

/// The first object under `value` whose `id` is `id`.
fn find_id<'v>(value: &'v Value, id: &str) -> Option<&'v Value> {
    match value {
        Value::Object(map) if map.get("id").and_then(Value::as_str) == Some(id) => Some(value),
        Value::Object(map) => map.values().find_map(|v| find_id(v, id)),
        Value::Array(items) => items.iter().find_map(|v| find_id(v, id)),
        _ => None,
    }
}

/// The daemon keeps a task's records between requests and its views trust a record file
/// whose identity (`stat`) is unchanged. A file edited in place after the daemon cached the
/// task, to the same size and with its modification time put back, still shows in every
/// view: its change time moved, which no program can set back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_views_see_a_file_edited_after_it_cached_the_task() {
    use crate::support::daemon::{Daemon, TASK};
    use advisord::store::{FileId, RACY_WINDOW};
    use std::os::unix::fs::MetadataExt;
    use std::time::{Duration, Instant, SystemTime};

    let daemon = Daemon::start(
        "advisors: []\n",
        advisord_adapters::registry::Registry::builtin(),
    )
    .await;
    let assessment = daemon.assessment().await;
    let mut ids = Vec::new();
    for tried in ["one writer", "two writers"] {
        let attempt = daemon
            .record(
                json!({"kind": "attempt", "assessment": assessment, "tried": tried,
                "failure_observed": "lock contention"}),
            )
            .await;
        ids.push(id_of(&attempt));
    }
    let place = &daemon.place;
    let view = |route: &'static str| {
        let path = format!("/api/v1/reasoning{route}");
        let (daemon, context) = (&daemon, place.context());
        async move {
            daemon
                .call("GET", &path, Some(json!({ "context": context })))
                .await
                .expect(200)
        }
    };
    let status = view("").await;
    assert!(status["chain"].get("broken_at").is_none(), "{status}");

    // Once the file's change time is old enough, the daemon vouches for it by `stat` alone.
    let path = place.state().join(TASK).join("0000000002.json");
    let started = Instant::now();
    while FileId::of(&std::fs::metadata(&path).expect("stat"), SystemTime::now()).is_none() {
        assert!(
            started.elapsed() < RACY_WINDOW * 5,
            "the change time never settled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = view("").await;
    assert!(status["chain"].get("broken_at").is_none(), "{status}");

    let before = std::fs::metadata(&path).expect("stat");
    let text = std::fs::read_to_string(&path).expect("the record");
    let edited = text.replace("\"one writer\"", "\"One writer\"");
    assert!(edited != text && edited.len() == text.len());
    std::fs::write(&path, &edited).expect("edited in place");
    std::fs::File::options()
        .write(true)
        .open(&path)
        .and_then(|f| {
            f.set_times(std::fs::FileTimes::new().set_modified(before.modified().expect("mtime")))
        })
        .expect("modification time put back");
    let after = std::fs::metadata(&path).expect("stat");
    assert_eq!(
        (after.ino(), after.size(), after.mtime(), after.mtime_nsec()),
        (
            before.ino(),
            before.size(),
            before.mtime(),
            before.mtime_nsec()
        ),
        "only the change time tells"
    );

    let status = view("").await;
    assert!(status["chain"]["broken_at"].is_u64(), "{}", status["chain"]);
    let last = find_id(&status["timeline"], &ids[1]).expect("the last attempt");
    assert_eq!(last["unverified"], true, "{last}");
    let tree = view("/tree").await;
    let node = find_id(&tree["nodes"], &ids[1]).expect("the last attempt in the tree");
    assert_eq!(node["unverified"], true, "{node}");
    let verify = view("/verify").await;
    assert_ne!(verify["tasks"][0]["findings"], json!([]), "{verify}");
}
