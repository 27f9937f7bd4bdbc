//! Golden outputs of the views: a fixed task (fixed ids and times) covering a whole flow
//! (assessment → plan → two consultations, one opposing → disagreement → resolution →
//! conclusion → validation, an attempt, then new evidence whose conclusion supersedes the
//! first), rendered as plain, table and json, compared with the files in `tests/golden/`.
//!
//! After an intended change of output, regenerate them with
//! `ADVISORD_BLESS=1 cargo test -p advisord --test integration golden::` and review the
//! diff.

use advisord::check::{CheckReport, Finding, Rule};
use advisord::core::catalogue::Catalogue;
use advisord::core::chain::Trust;
use advisord::core::records::{AdvisorAvailability, Mode, Record, Status};
use advisord::core::views::advisors::AdvisorsView;
use advisord::core::views::{explain::explain, status::status, tree::tree};
use advisord::core::writer::{ReasonCode, Refusal};
use advisord::render::{render, Format, RefusalView, Render, WIDTH};
use serde_json::{json, Value};
use std::path::PathBuf;

const A1: &str = "01JGQ0V3A0000000000000A001";
const P1: &str = "01JGQ0V3A0000000000000P001";
const C1: &str = "01JGQ0V3A0000000000000C001";
const C2: &str = "01JGQ0V3A0000000000000C002";
const D1: &str = "01JGQ0V3A0000000000000D001";
const R1: &str = "01JGQ0V3A0000000000000R001";
const K1: &str = "01JGQ0V3A0000000000000K001";
const V1: &str = "01JGQ0V3A0000000000000V001";
const T1: &str = "01JGQ0V3A0000000000000T001";
const A2: &str = "01JGQ0V3A0000000000000A002";
const P2: &str = "01JGQ0V3A0000000000000P002";
const K2: &str = "01JGQ0V3A0000000000000K002";

fn record(sequence: u64, id: &str, kind: &str, fields: Value) -> Record {
    let mut value = json!({
        "id": id, "task": "golden", "sequence": sequence,
        "created_at": format!("2026-03-02T10:{:02}:00Z", sequence * 3),
        "schema": 1, "redacted": [], "kind": kind,
    });
    let object = value.as_object_mut().unwrap();
    for (k, v) in fields.as_object().unwrap() {
        object.insert(k.clone(), v.clone());
    }
    serde_json::from_value(value).expect("a valid record")
}

fn availability(status: &str, reason: &str) -> Value {
    json!({"advisor": "", "status": status, "reason": reason})
}

fn snapshot(entries: &[(&str, Value)]) -> Value {
    Value::Array(
        entries
            .iter()
            .map(|(advisor, v)| {
                let mut v = v.clone();
                v["advisor"] = json!(advisor);
                v
            })
            .collect(),
    )
}

/// The fixed task.
fn records() -> Vec<Record> {
    let subject = "Keep queued consultation jobs in a write-ahead journal";
    vec![
        record(
            1,
            A1,
            "assessment",
            json!({
                "subject": subject,
                "materiality": "high", "confidence": "medium",
                "hypothesis": "A journal of accepted jobs, fsynced before the reply, survives a \
                               crash without losing or repeating a consultation.",
                "facts": ["The daemon answers a queue request before consulting anyone."],
                "assumptions": ["fsync on the journal directory is durable on ext4 and APFS."],
                "questions": ["Does a job resumed after a crash consult an advisor twice?"],
                "evidence": [
                    {"kind": "file", "ref": "src/daemon/journal.rs:40-88",
                     "showed": "the reply is sent after the journal entry is synced"},
                    {"kind": "test", "ref": "daemon_restart_resumes_jobs"}
                ],
                "capabilities": ["independent_reasoning", "architecture"]
            }),
        ),
        record(
            2,
            P1,
            "plan",
            json!({
                "assessment": A1, "mode": "standard", "budget": 2,
                "capabilities": ["independent_reasoning", "architecture"],
                "selected": [
                    {"advisor": "alpha-cli", "adapter": "process",
                     "covers": ["independent_reasoning", "architecture"],
                     "why": "covers both requested capabilities and comes first in the catalogue"},
                    {"advisor": "beta-api", "adapter": "http", "covers": ["independent_reasoning"],
                     "why": "covers independent_reasoning through an adapter not yet used"}
                ],
                "left_out": [
                    {"advisor": "gamma-local", "reason": "the budget of 2 is spent"},
                    {"advisor": "delta-api",
                     "reason": "not_configured: its credential variable `DELTA_KEY` is unset"}
                ],
                "availability": snapshot(&[
                    ("alpha-cli", availability("available", "its executable is on PATH")),
                    ("beta-api", availability("available", "its credential variable is set")),
                    ("gamma-local", availability("available", "its executable is on PATH")),
                    ("delta-api", availability("not_configured",
                                               "its credential variable `DELTA_KEY` is unset")),
                ]),
                "local_review": []
            }),
        ),
        record(
            3,
            C1,
            "consultation",
            json!({
                "plan": P1, "advisor": "alpha-cli", "status": "completed",
                "conclusion": "The journal is sound if the directory is synced after the rename.",
                "stance": "supports",
                "assumptions": ["Jobs are idempotent per advisor and plan."],
                "risks": ["A torn journal entry on power loss."],
                "actions": ["Checksum each entry."],
                "falsifiers": ["A killed daemon that loses an accepted job."],
                "confidence": 0.8, "duration_ms": 8200,
                "usage": {"input_tokens": 1830, "output_tokens": 412},
                "finished_at": "2026-03-02T10:09:30Z"
            }),
        ),
        record(
            4,
            C2,
            "consultation",
            json!({
                "plan": P1, "advisor": "beta-api", "status": "completed",
                "conclusion": "Use the records themselves as the journal; a second log can \
                               disagree with them.",
                "stance": "opposes",
                "assumptions": ["Records are written before the job ends."],
                "risks": ["Two sources of truth drift apart."],
                "actions": [],
                "falsifiers": ["A restart that consults an advisor whose record exists."],
                "confidence": 0.6, "duration_ms": 650,
                "usage": {"input_tokens": 1790, "output_tokens": 388},
                "finished_at": "2026-03-02T10:12:10Z"
            }),
        ),
        record(
            5,
            D1,
            "disagreement",
            json!({
                "assessment": A1,
                "positions": [
                    {"source": "executor", "position": "Keep a separate journal of accepted jobs."},
                    {"source": C2, "position": "Derive the queue from the records alone."}
                ],
                "divergent_assumptions": ["Records exist for a job before it is consulted."],
                "discriminating_question": "After a kill between accept and the first record, \
                                            does a records-only queue still know the job?"
            }),
        ),
        record(
            6,
            R1,
            "resolution",
            json!({
                "disagreement": D1,
                "experiment": "Kill the daemon after it accepts a job and before any record.",
                "observed": "With records alone the job was lost; with the journal it resumed.",
                "favours": "executor",
                "evidence": [{"kind": "test", "ref": "daemon_kill_after_accept",
                              "showed": "1 job resumed, 0 lost"}]
            }),
        ),
        record(
            7,
            K1,
            "conclusion",
            json!({
                "assessment": A1,
                "decision": "Keep the write-ahead journal; skip advisors already recorded.",
                "rationale": "Only the journal knows a job between its acceptance and its first \
                              record; the records decide what is left to consult.",
                "evidence": [{"kind": "test", "ref": "daemon_kill_after_accept"}],
                "consultations": [C1, C2],
                "rejected_alternatives": ["Derive the queue from the records alone."],
                "risks": ["The journal grows without compaction."],
                "validation_plan": "Run the kill-in-a-loop test for 200 iterations.",
                "reviewed_by": ["alpha-cli", "beta-api"], "independent_review_count": 2
            }),
        ),
        record(
            8,
            V1,
            "validation",
            json!({
                "conclusion": K1, "check": "200 kills, no job lost or repeated",
                "command": "cargo test --test daemon_restart -- --ignored kill_loop",
                "passed": true, "output": "test kill_loop ... ok"
            }),
        ),
        record(
            9,
            T1,
            "attempt",
            json!({
                "assessment": A1, "tried": "fsync the journal file without its directory",
                "failure_observed": "the entry vanished after a power cut in the VM",
                "invalidated_assumption": "a file fsync makes its name durable",
                "updated_hypothesis": "sync the directory after the rename"
            }),
        ),
        record(
            10,
            A2,
            "assessment",
            json!({
                "subject": subject,
                "materiality": "high", "confidence": "high",
                "hypothesis": "The journal needs compaction once it passes 10,000 entries.",
                "evidence": [{"kind": "observation", "ref": "journal size after a week",
                              "showed": "48 MiB, 210,000 entries"}],
                "new_evidence": true
            }),
        ),
        record(
            11,
            P2,
            "plan",
            json!({
                "assessment": A2, "mode": "standard", "budget": 1,
                "capabilities": ["independent_reasoning"],
                "selected": [],
                "left_out": [
                    {"advisor": "alpha-cli", "reason": "rate_limited until 2026-03-02T11:00:00Z"},
                    {"advisor": "beta-api", "reason": "temporarily_failed: two transient failures"}
                ],
                "availability": snapshot(&[
                    ("alpha-cli", json!({"status": "rate_limited", "reason": "rate limited",
                                         "until": "2026-03-02T11:00:00Z"})),
                    ("beta-api", availability("temporarily_failed", "two transient failures")),
                ]),
                "local_review": [
                    "State the hypothesis and its strongest alternative.",
                    "List each assumption with its evidence.",
                    "Name what would falsify it.",
                    "Run the smallest discriminating experiment.",
                    "Record the conclusion."
                ]
            }),
        ),
        record(
            12,
            K2,
            "conclusion",
            json!({
                "assessment": A2,
                "decision": "Compact the journal at 10,000 entries; keep it otherwise.",
                "rationale": "The local review found growth is the only cost of the journal.",
                "evidence": [{"kind": "observation", "ref": "journal size after a week"}],
                "validation_plan": "A week-long soak keeps the journal under 2 MiB.",
                "supersedes": K1,
                "reviewed_by": [], "independent_review_count": 0
            }),
        ),
    ]
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Compare `actual` with the golden file `name`, or write it under `ADVISORD_BLESS=1`.
fn check(name: &str, actual: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("ADVISORD_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read golden `{}` ({e}); create it with `ADVISORD_BLESS=1`",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "`{name}` differs from its golden file; review, then bless with \
             `ADVISORD_BLESS=1`\n--- expected\n{expected}\n--- actual\n{actual}"
        );
    }
}

/// Check a view in plain and json (and table when asked), and the invariants every view
/// keeps: plain fits 80 columns, yaml reads back as the json.
fn check_view(name: &str, view: &impl Render, with_table: bool) {
    let plain = render(view, Format::Plain);
    for line in plain.lines() {
        assert!(
            line.chars().count() <= WIDTH,
            "{name}: over {WIDTH} columns: {line:?}"
        );
    }
    check(&format!("{name}.txt"), &plain);
    let json = render(view, Format::Json);
    check(&format!("{name}.json"), &json);
    if with_table {
        check(&format!("{name}.table.txt"), &render(view, Format::Table));
    }
    let from_json: Value = serde_json::from_str(&json).unwrap();
    let from_yaml: Value = serde_yaml_ng::from_str(&render(view, Format::Yaml)).unwrap();
    assert_eq!(
        from_yaml, from_json,
        "{name}: yaml and json carry the same shape"
    );
}

/// The daemon sends views as json and the client renders them: a view must read back as
/// itself, or `--no-daemon` and the daemon would print different things.
fn round_trip<T>(view: &T)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let json = serde_json::to_string(view).unwrap();
    let back: T = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(&back, view);
}

#[test]
fn explain_a_validation_shows_the_whole_chain() {
    let view = explain(&records(), V1, &Trust::default()).unwrap();
    check_view("explain_validation", &view, false);
    round_trip(&view);
}

#[test]
fn explain_a_superseding_conclusion_links_back() {
    let view = explain(&records(), K2, &Trust::default()).unwrap();
    check_view("explain_superseding", &view, false);
    round_trip(&view);
}

#[test]
fn tree_hides_superseded_conclusions() {
    let view = tree(&records(), None, false, &Trust::default());
    check_view("tree", &view, true);
    round_trip(&view);
}

#[test]
fn tree_shows_superseded_when_asked() {
    let view = tree(&records(), Some(0), true, &Trust::default());
    check_view("tree_superseded", &view, false);
    round_trip(&view);
}

#[test]
fn tree_depth_two() {
    let view = tree(&records(), Some(2), false, &Trust::default());
    check_view("tree_depth2", &view, false);
    round_trip(&view);
}

#[test]
fn status_of_the_flow() {
    // Cost is derived at the catalogue's prices: one advisor on a subscription, one priced.
    let catalogue: Catalogue = serde_json::from_value(json!({"advisors": [
        {"id": "alpha-cli", "title": "Alpha CLI", "transport": "process", "adapter": "process",
         "executable": "alpha", "capabilities": ["independent_reasoning"],
         "price": {"basis": "flat_rate"}},
        {"id": "beta-api", "title": "Beta API", "transport": "http", "adapter": "openai",
         "capabilities": ["independent_reasoning"],
         "price": {"basis": "metered", "currency": "USD", "input_per_million": 3.0,
                   "output_per_million": 15.0, "as_of": "2026-03-01"}},
    ]}))
    .unwrap();
    let mut view = status(&records(), &Trust::default());
    advisord::core::views::priced::price_status(&mut view, &catalogue);
    check_view("status", &view, true);
    round_trip(&view);
}

#[test]
fn record_and_plan_preview() {
    let records = records();
    check_view("record_conclusion", &records[6], false);
    let advisord::core::records::Body::Plan(mut plan) = records[10].body.clone() else {
        panic!("record 11 is a plan");
    };
    plan.assessment = String::new();
    check_view("plan_preview", &plan, true);
    round_trip(&plan);
    round_trip(&records[6]);
}

#[test]
fn refusal() {
    let refusal = Refusal {
        reason: ReasonCode::AnswerNotWeighed,
        message: format!(
            "the conclusion does not cite completed consultation `{C2}` of its assessment; \
             list every completed consultation in `consultations`"
        ),
    };
    check_view("refusal", &RefusalView::from(&refusal), false);
}

#[test]
fn advisors_and_capacity() {
    let catalogue: Catalogue = serde_json::from_value(json!({"advisors": [
        {"id": "alpha-cli", "title": "Alpha CLI", "transport": "process", "adapter": "process",
         "executable": "alpha", "capabilities": ["independent_reasoning", "architecture"]},
        {"id": "beta-api", "title": "Beta API", "transport": "http", "adapter": "openai",
         "credential": "BETA_KEY", "capabilities": ["independent_reasoning", "code_review"]},
        {"id": "gamma-local", "title": "Gamma on this machine", "transport": "http",
         "adapter": "ollama", "executable": "gamma", "capabilities": ["independent_reasoning"],
         "local": true},
    ]}))
    .unwrap();
    let seen =
        |advisor: &str, status: Status, reason: &str, until: Option<&str>| AdvisorAvailability {
            advisor: advisor.into(),
            status,
            reason: reason.into(),
            recovering: false,
            until: until.map(Into::into),
        };
    let view = AdvisorsView::new(
        Mode::Standard,
        &catalogue,
        &[
            seen(
                "alpha-cli",
                Status::Available,
                "its executable `alpha` is on PATH",
                None,
            ),
            seen(
                "beta-api",
                Status::RateLimited,
                "its newest counted outcome was a rate limit",
                Some("2026-03-02T11:00:00Z"),
            ),
            seen(
                "gamma-local",
                Status::Unavailable,
                "`gamma` is not on PATH",
                None,
            ),
        ],
    )
    // The fixed task's resolution, and an advisor since removed from the catalogue.
    .with_track_records({
        let mut track = advisord::core::track::derive([(&records()[..], &Trust::default())]);
        track.insert(
            "delta-retired".into(),
            advisord::core::track::TrackRecord {
                resolutions: 3,
                favoured: 2,
                disfavoured: 0,
                recent: Vec::new(),
            },
        );
        track
    });
    check_view("advisors", &view, true);
    round_trip(&view);
}

#[test]
fn check_report() {
    let report = CheckReport {
        declared: true,
        scope: None,
        files_scanned: 42,
        notes: Vec::new(),
        findings: vec![Finding {
            rule: Rule::CiCredential,
            file: ".github/workflows/ci.yml".into(),
            line: 12,
            word: "beta_key".into(),
            message: "a CI file names `beta_key` (the credential variable of advisor \
                      `beta-api`); advisors are optional, so a gate must pass without any \
                      advisor's credential: remove it and let the gate decide locally"
                .into(),
        }],
    };
    check_view("check", &report, true);
    round_trip(&report);
}

/// `context` of the flow with its resolution left out: the disagreement is open (with its
/// question), the second assessment's conclusion stands (with who reviewed it), and a
/// rate-limited advisor is cooling down; the plain text stays short.
#[test]
fn context_of_a_disputed_flow() {
    use advisord::core::views::context::context;
    let records: Vec<Record> = records().into_iter().filter(|r| r.id() != R1).collect();
    let status_view = status(&records, &Trust::default());
    let catalogue: Catalogue = serde_json::from_value(json!({"advisors": [
        {"id": "alpha-cli", "title": "Alpha CLI", "transport": "process", "adapter": "process",
         "executable": "alpha", "capabilities": ["independent_reasoning"]},
        {"id": "beta-api", "title": "Beta API", "transport": "http", "adapter": "openai",
         "credential": "BETA_KEY", "capabilities": ["independent_reasoning"]},
    ]}))
    .unwrap();
    let seen = |advisor: &str, status: Status, until: Option<&str>| AdvisorAvailability {
        advisor: advisor.into(),
        status,
        reason: "its newest counted outcome was a rate limit".into(),
        recovering: false,
        until: until.map(Into::into),
    };
    let advisors = AdvisorsView::new(
        Mode::Standard,
        &catalogue,
        &[
            seen("alpha-cli", Status::Available, None),
            seen(
                "beta-api",
                Status::RateLimited,
                Some("2026-03-02T11:00:00Z"),
            ),
        ],
    );
    let view = context(&status_view, &advisors);
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["disputed"]["items"][0]["assessment"], A1, "{json:#}");
    assert_eq!(json["disputed"]["items"][0]["disagreement"], D1);
    assert!(json["disputed"]["items"][0]["discriminating_question"]
        .as_str()
        .unwrap()
        .starts_with("After a kill between accept and the first record"));
    let standing = json["standing"]["items"].as_array().unwrap();
    let k2 = standing
        .iter()
        .find(|c| c["conclusion"] == K2)
        .expect("the second conclusion stands");
    assert_eq!(k2["assessment"], A2);
    assert!(k2["reviewed_by"].is_array());
    assert!(
        standing.iter().all(|c| c["conclusion"] != K1)
            || status_view.assessments[0].conclusions[0]
                .superseded_by
                .is_none(),
        "a superseded conclusion is not standing"
    );
    assert_eq!(json["cooling"]["items"][0]["advisor"], "beta-api");
    assert_eq!(json["cooling"]["items"][0]["until"], "2026-03-02T11:00:00Z");
    assert_eq!(json["open"]["items"].as_array().unwrap().len(), 0);
    let plain = render(&view, Format::Plain);
    assert!(plain.lines().count() <= 40, "{plain}");
    for fact in [A1, D1, K2, "beta-api", "rate_limited", "After a kill"] {
        assert!(plain.contains(fact), "`{fact}` missing:\n{plain}");
    }
    assert!(plain.lines().all(|l| l.chars().count() <= WIDTH), "{plain}");
    let back: advisord::core::views::context::ContextView = serde_json::from_value(json).unwrap();
    assert_eq!(back, view);
}
