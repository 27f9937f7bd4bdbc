//! The first hour of a user and of an agent: `--format json` gives the whole answer and
//! every error as one object with a `code`, `consult ID` is a verb, the record keeps what
//! was asked, availability tells the truth, and the catalogue says where it came from.

use crate::support::client as client_support;

use client_support::{Advisor, World};
use serde_json::Value;
use std::collections::BTreeSet;

fn two_quick() -> Vec<Advisor> {
    vec![
        Advisor::new("quick-agree", "supports", 100),
        Advisor::new("quick-oppose", "opposes", 100),
    ]
}

const ASK: &[&str] = &[
    "ask",
    "--subject",
    "Use SQLite for the job queue",
    "--materiality",
    "high",
    "--hypothesis",
    "WAL mode is enough",
    "--evidence",
    "file:src/queue.rs=>one writer at a time",
];

/// Every outcome of a job written out in full, and its disagreement with its positions.
fn assert_whole_answer(job: &Value) {
    assert_eq!(job["state"], "done", "{job}");
    let outcomes = job["consultations"].as_array().expect("consultations");
    assert_eq!(outcomes.len(), 2, "{job}");
    for outcome in outcomes {
        for key in [
            "advisor",
            "record",
            "status",
            "failure",
            "conclusion",
            "stance",
            "confidence",
            "assumptions",
            "risks",
            "falsifiers",
            "diagnostic",
            "usage",
        ] {
            assert!(outcome.get(key).is_some(), "`{key}` missing from {outcome}");
        }
        assert_eq!(outcome["status"], "completed", "{outcome}");
        assert!(outcome["conclusion"]
            .as_str()
            .is_some_and(|c| !c.is_empty()));
    }
    assert_eq!(outcomes[1]["stance"], "opposes");
    let disagreement = &job["disagreement_detail"];
    assert_eq!(disagreement["id"], job["disagreement"], "{job}");
    let advisors: Vec<&str> = disagreement["positions"]
        .as_array()
        .expect("positions")
        .iter()
        .map(|p| p["advisor"].as_str().expect("advisor"))
        .collect();
    assert!(advisors.contains(&"executor") && advisors.contains(&"quick-oppose"));
    assert!(disagreement["discriminating_question"]
        .as_str()
        .is_some_and(|q| !q.is_empty()));
}

#[test]
fn ask_detach_json_gives_the_job_and_the_assessment_and_wait_the_whole_answer() {
    let mut world = World::new(&two_quick());
    world.start_daemon();
    let mut args = ASK.to_vec();
    args.extend(["--detach", "--format", "json"]);
    let detached = world.run(&args).expect_exit(0).json();
    let job = detached["id"].as_str().expect("the job id").to_string();
    let assessment = detached["assessment"].as_str().expect("the assessment id");
    world
        .run(&["explain", assessment, "--format", "json"])
        .expect_exit(0)
        .expect_stdout("Use SQLite for the job queue");
    let waited = world
        .run(&["wait", &job, "--timeout", "20", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(waited["assessment"], assessment);
    assert_whole_answer(&waited);
}

#[test]
fn ask_and_consult_and_assessment_print_the_whole_answer() {
    let mut world = World::new(&two_quick());
    world.start_daemon();
    let mut args = ASK.to_vec();
    args.extend(["--format", "json"]);
    let asked = world.run(&args).expect_exit(0).json();
    assert_whole_answer(&asked);
    let assessment = world.assessment();
    let by_flag = world
        .run(&["--assessment", &assessment, "--format", "json"])
        .expect_exit(0)
        .json();
    assert_whole_answer(&by_flag);
    let second = world.assessment();
    let by_verb = world
        .run(&["consult", &second, "--format", "json"])
        .expect_exit(0)
        .json();
    assert_whole_answer(&by_verb);
    assert_eq!(by_verb["assessment"], second.as_str());
    // The verb and the flag are one: the same keys, the same outcomes.
    let keys = |v: &Value| {
        v.as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&by_verb), keys(&by_flag));
    let detached = world
        .run(&["consult", &second, "--detach", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(detached["assessment"], second.as_str());
}

/// One JSON object with a `code` on standard output, and the exit status.
fn error_code(world: &World, args: &[&str], exit: i32) -> String {
    let out = world.run(args).expect_exit(exit);
    let json = out.json();
    let code = json["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no `code`: {json}"));
    assert!(
        json["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{json}"
    );
    code.to_string()
}

#[test]
fn with_format_json_every_error_is_one_object_with_a_code() {
    let world = World::new(&two_quick());
    // clap's own usage errors.
    for args in [
        &["--format", "json", "frobnicate"][..],
        &["status", "--bogus", "--format", "json"][..],
        &["plan", "--materiality", "huge", "--format=json"][..],
        &["--format", "json", "--detach"][..],
    ] {
        assert_eq!(error_code(&world, args, 2), "usage", "{args:?}");
    }
    // No daemon and no autostart.
    assert_eq!(
        error_code(&world, &["jobs", "--no-autostart", "--format", "json"], 4),
        "unreachable"
    );
    assert_eq!(
        error_code(&world, &["status", "--no-autostart", "--format", "json"], 4),
        "unreachable"
    );
    // A record that is not there, a job verb without the daemon.
    let missing = ["explain", "01J0000000000000000000000", "--no-daemon"];
    let mut args = missing.to_vec();
    args.extend(["--format", "json"]);
    assert_eq!(error_code(&world, &args, 2), "not_found");
    assert_eq!(
        error_code(&world, &["jobs", "--no-daemon", "--format", "json"], 2),
        "usage"
    );
    // A refusal keeps its fixed shape: its reason is its code.
    let path = world.tmp().join("bad.json");
    std::fs::write(
        &path,
        r#"{"kind": "assessment", "subject": "S", "materiality": "high", "hypothesis": "H"}"#,
    )
    .unwrap();
    let refused = world
        .run(&[
            "record",
            "--file",
            path.to_str().unwrap(),
            "--no-daemon",
            "--format",
            "json",
        ])
        .expect_exit(3)
        .json();
    assert_eq!(refused["reason"], "material_without_evidence");
    assert_eq!(refused["refused"], true);
    // Plain output is unchanged: nothing on standard output for an error.
    let plain = world.run(&["frobnicate"]).expect_exit(2);
    assert!(plain.stdout.is_empty(), "{}", plain.stdout);
}

/// The codes of a markdown table that follows `marker` in `text` (first column).
fn documented_codes(text: &str, marker: &str) -> BTreeSet<String> {
    let start = text.find(marker).expect("the marker in docs/cli.md");
    text[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1))
        .filter_map(|cell| {
            cell.trim()
                .strip_prefix('`')?
                .strip_suffix('`')
                .map(String::from)
        })
        .collect()
}

/// The string values of the constants of `pub mod codes` in `src/protocol.rs`.
fn codes_in_source(source: &str) -> BTreeSet<String> {
    let start = source.find("pub mod codes {").expect("the codes module");
    let body = &source[start..];
    let end = body.find("\n}").expect("its end");
    body[..end]
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| l.split('"').nth(1).map(String::from))
        .collect()
}

#[test]
fn docs_list_every_error_code() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let docs = std::fs::read_to_string(format!("{dir}/docs/cli.md")).expect("docs/cli.md");
    let source = std::fs::read_to_string(format!("{dir}/src/protocol.rs")).expect("protocol");
    let documented = documented_codes(&docs, "<!-- error-codes");
    let coded = codes_in_source(&source);
    assert!(
        coded.contains("job_finished") && coded.len() > 15,
        "{coded:?}"
    );
    assert_eq!(
        documented, coded,
        "docs/cli.md's error codes and `protocol::codes` differ"
    );
    // Every code a verb error can carry is one of them (a refusal's is a reason code).
    use advisord::error::Error;
    for err in [
        Error::Usage("u".into()),
        Error::InvalidRequest("r".into()),
        Error::InvalidRoot("r".into()),
        Error::NotFound("n".into()),
        Error::Internal("i".into()),
        Error::Protocol("p".into()),
        Error::ShuttingDown,
        Error::Unreachable {
            socket: "/s".into(),
            reason: "r".into(),
            hint: "h".into(),
        },
    ] {
        assert!(
            coded.contains(err.code()),
            "`{}` is not in `codes`",
            err.code()
        );
    }
}
