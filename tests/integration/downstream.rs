//! The records that rest on others, through the real binaries (issue 27, item 4): a
//! supersession flags what cited the superseded conclusion in `status` and `context` until
//! it is reaffirmed, `explain --downstream` lists what rests on a record in every format,
//! and `record --dry-run` previews a record and its impact without writing a byte, on the
//! daemon and with `--no-daemon` alike.

use crate::support::client::{Advisor, World};
use serde_json::{json, Value};
use std::path::Path;

/// Every file under `dir` with its bytes, sorted by path.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).expect("listed") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read");
                out.push((path.display().to_string(), bytes));
            }
        }
    }
    out.sort();
    out
}

fn id(record: &Value) -> String {
    record["id"].as_str().expect("an id").to_string()
}

fn low_assessment(world: &World, subject: &str, evidence: &[&str]) -> String {
    let evidence: Vec<Value> = evidence
        .iter()
        .map(|r| json!({"kind": "record", "ref": r}))
        .collect();
    id(&world.record(json!({
        "kind": "assessment", "subject": subject, "materiality": "low",
        "hypothesis": "it holds", "evidence": evidence
    })))
}

fn conclusion(on: &str, evidence: &[&str], supersedes: Option<&str>) -> Value {
    let evidence: Vec<Value> = evidence
        .iter()
        .map(|r| json!({"kind": "record", "ref": r}))
        .collect();
    let mut input = json!({
        "kind": "conclusion", "assessment": on, "decision": "keep the queue in SQLite",
        "rationale": "measured", "evidence": evidence
    });
    if let Some(old) = supersedes {
        input["supersedes"] = json!(old);
    }
    input
}

/// `record --dry-run` of `input` with `extra` flags: its output.
fn dry_run(world: &World, input: &Value, extra: &[&str]) -> crate::support::output::Output {
    let path = world.tmp().join("dry-run.json");
    std::fs::write(&path, input.to_string()).expect("write input");
    let mut args = vec![
        "record",
        "--dry-run",
        "--file",
        path.to_str().expect("utf-8"),
    ];
    args.extend(extra);
    world.run(&args)
}

/// The ids of `status --format json`'s assessment `id` that it rests on.
fn rests(status: &Value, id: &str) -> Value {
    let assessment = status["assessments"]
        .as_array()
        .expect("assessments")
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no assessment `{id}` in {status}"));
    assessment
        .get("rests_on_superseded")
        .cloned()
        .unwrap_or(json!([]))
}

#[test]
fn a_supersession_flags_what_cited_it_until_reaffirmed_and_a_dry_run_previews_it() {
    let world = World::new(&[Advisor::new("agrees", "supports", 50)]);
    let first = low_assessment(&world, "Where the job queue lives", &[]);
    let old = id(&world.record(conclusion(&first, &[], None)));
    let dependent = low_assessment(&world, "Retry policy of the job queue", &[&old]);
    let status = world
        .run(&["status", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(
        rests(&status, &dependent),
        json!([]),
        "nothing superseded yet"
    );

    // The dry run, on the daemon and without it: accepted, its impact, nothing written.
    let superseding = conclusion(&first, &[], Some(&old));
    let root = world.root();
    for extra in [&[][..], &["--no-daemon"][..]] {
        let before = snapshot(&root);
        let mut flags = vec!["--format", "json"];
        flags.extend(extra);
        let preview = dry_run(&world, &superseding, &flags).expect_exit(0).json();
        assert_eq!(preview["accepted"], true, "{preview}");
        assert_eq!(preview["written"], false, "{preview}");
        assert_eq!(preview["record"]["kind"], "conclusion", "{preview}");
        assert_eq!(preview["record"]["sequence"], 4, "{preview}");
        let impact: Vec<&str> = preview["impact"]
            .as_array()
            .expect("impact")
            .iter()
            .map(|d| d["id"].as_str().expect("id"))
            .collect();
        assert_eq!(impact, [dependent.as_str()], "{preview}");
        let plain = dry_run(&world, &superseding, extra).expect_exit(0);
        assert!(
            plain.stdout.contains("nothing was written"),
            "{}",
            plain.stdout
        );
        assert!(plain.stdout.contains(&dependent), "{}", plain.stdout);
        // A refusal is the writer's, with its reason code.
        dry_run(&world, &conclusion(&first, &[], None), extra)
            .expect_exit(3)
            .expect_stdout("supersedes_missing");
        assert_eq!(
            snapshot(&root),
            before,
            "a dry run writes nothing ({extra:?})"
        );
    }

    let new = id(&world.record(superseding));
    for extra in [&[][..], &["--no-daemon"][..]] {
        let mut args = vec!["status", "--format", "json"];
        args.extend(extra);
        let status = world.run(&args).expect_exit(0).json();
        assert_eq!(rests(&status, &dependent), json!([old]), "{status}");
        assert_eq!(status["resting_on_superseded"][0]["superseded_by"], new);
        let mut args = vec!["context", "--format", "json"];
        args.extend(extra);
        let context = world.run(&args).expect_exit(0).json();
        assert_eq!(context["resting"]["items"][0]["id"], dependent, "{context}");
    }
    world
        .run(&["status"])
        .expect_exit(0)
        .expect_stdout(&format!("RESTS ON SUPERSEDED conclusion {old}"));
    world
        .run(&["context"])
        .expect_exit(0)
        .expect_stdout("resting on a superseded decision:");

    // Reaffirmed: a conclusion on the dependent assessment citing the replacement.
    world.record(conclusion(&dependent, &[&new], None));
    let status = world
        .run(&["status", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(rests(&status, &dependent), json!([]), "{status}");
    assert!(status.get("resting_on_superseded").is_none(), "{status}");
    world
        .run(&["context"])
        .expect_exit(0)
        .expect_stdout("standing conclusions");
}

#[test]
fn explain_downstream_lists_what_rests_on_a_record_in_every_format() {
    let world = World::new(&[Advisor::new("agrees", "supports", 50)]);
    let first = low_assessment(&world, "Where the job queue lives", &[]);
    let old = id(&world.record(conclusion(&first, &[], None)));
    let dependent = low_assessment(&world, "Retry policy of the job queue", &[&old]);
    let on_dependent = id(&world.record(conclusion(&dependent, &[], None)));

    let view = world
        .run(&["explain", &old, "--downstream", "--format", "json"])
        .expect_exit(0)
        .json();
    let rows: Vec<(&str, &str, u64)> = view["downstream"]
        .as_array()
        .expect("downstream")
        .iter()
        .map(|d| {
            (
                d["id"].as_str().expect("id"),
                d["cites"].as_str().expect("cites"),
                d["depth"].as_u64().expect("depth"),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (dependent.as_str(), "evidence", 1),
            (on_dependent.as_str(), "assessment", 2)
        ],
        "{view}"
    );
    assert_eq!(view["if_superseded"][0]["id"], dependent, "{view}");
    let yaml = world
        .run(&[
            "explain",
            &old,
            "--downstream",
            "--format",
            "yaml",
            "--no-daemon",
        ])
        .expect_exit(0)
        .yaml();
    assert_eq!(yaml["downstream"][1]["id"], on_dependent.as_str());
    world
        .run(&["explain", &old, "--downstream", "--format", "table"])
        .expect_exit(0)
        .expect_stdout("DEPTH")
        .expect_stdout(&on_dependent);
    world
        .run(&["explain", &old, "--downstream"])
        .expect_exit(0)
        .expect_stdout(&format!("downstream of {old}: 2 records rest on it"))
        .expect_stdout(&format!("superseding {old} would leave 1 record"));
    // Without the flag, the view is what it was.
    let plain = world
        .run(&["explain", &old, "--format", "json"])
        .expect_exit(0)
        .json();
    assert!(plain.get("downstream").is_none(), "{plain}");
}
