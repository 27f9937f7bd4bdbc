//! The writer's rules, table-driven: every reason code through one `check`, and the
//! computed fields.

use super::*;
use crate::core::chain::{self, Trust};
use crate::core::records::{
    AdvisorAvailability, Assessment, Conclusion, Consultation, LeftOut, Materiality, Mode, Plan,
    Selected, Status,
};
use serde_json::json;
use time::macros::datetime;

const NOW: time::OffsetDateTime = datetime!(2026-03-01 12:00:00.250 UTC);

/// A task's records built up through the writer itself (plans are built directly: they
/// are the policy's to compute, and these tests are about the writer's rules).
struct Fixture {
    task: TaskName,
    records: Vec<Record>,
    /// What the chain vouches for, as the store would pass it; `None` vouches for all.
    trust: Option<Trust>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            task: TaskName::new("t").expect("valid task"),
            records: Vec::new(),
            trust: None,
        }
    }

    fn admit(&self, input: &Value) -> Result<Record, Refusal> {
        let env = WriteEnv {
            task: &self.task,
            now: NOW,
            id: format!("R{:03}", self.records.len() + 1),
            sequence: self.records.len() as u64 + 1,
            plan_env: None,
            prev: crate::core::chain::GENESIS.to_string(),
            trust: self.trust.as_ref(),
            secrets: &[],
            daemon: false,
            invariants: &[],
        };
        admit(&self.records, input, &env)
    }

    fn add(&mut self, input: Value) -> String {
        let record = self
            .admit(&input)
            .unwrap_or_else(|r| panic!("fixture {input} refused: {}", r.message));
        let id = record.id().to_string();
        self.records.push(record);
        id
    }

    fn plan(&mut self, assessment: &str, advisors: &[&str]) -> String {
        let id = format!("R{:03}", self.records.len() + 1);
        let selected = advisors
            .iter()
            .map(|a| Selected {
                advisor: a.to_string(),
                adapter: format!("{a}-adapter"),
                covers: vec!["independent_reasoning".into()],
                why: "covers the request".into(),
            })
            .collect();
        self.records.push(Record {
            envelope: Envelope {
                id: id.clone(),
                task: "t".into(),
                sequence: self.records.len() as u64 + 1,
                created_at: timestamp(NOW),
                schema: SCHEMA_VERSION,
                redacted: vec![],
                prev: None,
            },
            body: Body::Plan(Plan {
                assessment: assessment.into(),
                mode: Mode::Standard,
                budget: 2,
                capabilities: vec!["independent_reasoning".into()],
                selected,
                left_out: vec![LeftOut {
                    advisor: "gamma".into(),
                    reason: "over budget".into(),
                }],
                availability: vec![AdvisorAvailability {
                    advisor: "alpha".into(),
                    status: Status::Available,
                    reason: "present".into(),
                    recovering: false,
                    until: None,
                }],
                reuse: None,
                local_review: vec![],
                uncovered_capabilities: vec![],
                question: None,
                prior_opinion: None,
                prompt_bytes: None,
                prompt_sha256: None,
            }),
        });
        id
    }

    fn consult(&mut self, plan: &str, advisor: &str, stance: &str) -> String {
        self.add(
            json!({"kind": "consultation", "plan": plan, "advisor": advisor, "status": "completed",
                "conclusion": format!("{advisor} thinks so"), "stance": stance}),
        )
    }
}

fn evidence() -> Value {
    json!([{"kind": "file", "ref": "src/lib.rs:1-20", "showed": "the loop"}])
}

fn assessment(subject: &str, materiality: &str) -> Value {
    json!({"kind": "assessment", "subject": subject, "materiality": materiality,
        "hypothesis": "it holds", "evidence": evidence()})
}

/// The ids of a task holding one of each situation the rules distinguish.
struct World {
    f: Fixture,
    a_low: String,
    a_mat: String,
    p_mat: String,
    c_alpha: String,
    c_beta_failed: String,
    a_div: String,
    c_div_alpha: String,
    c_div_beta: String,
    d_div: String,
    a_quiet: String,
    a_res: String,
    c_res_alpha: String,
    d_res: String,
    k_low: String,
    a_new: String,
}

fn world() -> World {
    let mut f = Fixture::new();
    let a_low = f.add(
        json!({"kind": "assessment", "subject": "Which cache to use", "materiality": "low",
            "hypothesis": "the small one"}),
    );
    let a_mat = f.add(assessment("Retry policy for the uploader", "material"));
    let p_mat = f.plan(&a_mat, &["alpha", "beta"]);
    let c_alpha = f.consult(&p_mat, "alpha", "supports");
    let c_beta_failed = f.add(
        json!({"kind": "consultation", "plan": p_mat, "advisor": "beta", "status": "failed",
            "failure": "timeout", "diagnostic": "deadline passed"}),
    );
    let a_div = f.add(assessment("Lock strategy", "high"));
    let p_div = f.plan(&a_div, &["alpha", "beta"]);
    let c_div_alpha = f.consult(&p_div, "alpha", "opposes");
    let c_div_beta = f.consult(&p_div, "beta", "supports");
    let d_div = f.add(json!({"kind": "disagreement", "assessment": a_div,
        "positions": [{"source": "executor", "position": "flock"},
                      {"source": c_div_alpha, "position": "a lease"}],
        "discriminating_question": "does the lock survive a crash?"}));
    let a_quiet = f.add(assessment("Serialisation format", "material"));
    let p_quiet = f.plan(&a_quiet, &["alpha"]);
    f.consult(&p_quiet, "alpha", "alternative");
    let a_res = f.add(json!({"kind": "assessment", "subject": "Log format",
        "materiality": "low", "hypothesis": "lines"}));
    let p_res = f.plan(&a_res, &["alpha", "beta"]);
    let c_res_alpha = f.consult(&p_res, "alpha", "opposes");
    let d_res = f.add(json!({"kind": "disagreement", "assessment": a_res,
        "positions": [{"source": "executor", "position": "lines"},
                      {"source": c_res_alpha, "position": "json"}],
        "discriminating_question": "can the shipper parse lines?"}));
    f.add(
        json!({"kind": "resolution", "disagreement": d_res, "experiment": "ship both",
            "observed": "json parsed, lines did not", "favours": c_res_alpha,
            "evidence": [{"kind": "command", "ref": "shipper --dry-run"}]}),
    );
    let k_low = f.add(json!({"kind": "conclusion", "assessment": a_low,
        "decision": "the small one", "rationale": "enough"}));
    let a_new = f.add(
        json!({"kind": "assessment", "subject": "  which CACHE to   use ", "materiality": "low",
            "hypothesis": "the big one after all", "new_evidence": true}),
    );
    World {
        f,
        a_low,
        a_mat,
        p_mat,
        c_alpha,
        c_beta_failed,
        a_div,
        c_div_alpha,
        c_div_beta,
        d_div,
        a_quiet,
        a_res,
        c_res_alpha,
        d_res,
        k_low,
        a_new,
    }
}

/// Admit `input` into `fixture` and expect the refusal `expected`.
fn check(fixture: &Fixture, label: &str, input: Value, expected: ReasonCode) {
    match fixture.admit(&input) {
        Ok(record) => panic!("{label}: admitted {record:?}, expected {expected:?}"),
        Err(refusal) => {
            assert_eq!(
                refusal.reason, expected,
                "{label}: refused as {:?} ({}), expected {expected:?}",
                refusal.reason, refusal.message
            );
            let message = &refusal.message;
            assert!(
                !message.is_empty() && !message.contains('\n') && message.len() < 600,
                "{label}: the message is one plain sentence: {message}"
            );
            assert!(
                !message.contains("invalid type") && !message.contains("expected"),
                "{label}: the message is ours, not the parser's: {message}"
            );
        }
    }
}

#[test]
fn every_reason_code() {
    use ReasonCode::*;
    let w = world();
    let long = |n: usize| "x".repeat(n);
    let many = |n: usize| Value::from(vec!["item"; n]);
    let conclusion = |extra: Value| {
        let mut base = json!({"kind": "conclusion", "decision": "d", "rationale": "r",
            "evidence": evidence(), "validation_plan": "run the suite"});
        for (k, v) in extra.as_object().expect("object").iter() {
            base[k] = v.clone();
        }
        base
    };
    let cases: Vec<(&str, Value, ReasonCode)> = vec![
        // The object and its kind.
        ("not an object", json!(["kind", "assessment"]), InvalidField),
        ("a string", json!("assessment"), InvalidField),
        ("kind missing", json!({"subject": "s"}), InvalidField),
        ("kind unknown", json!({"kind": "opinion"}), InvalidField),
        ("kind not a string", json!({"kind": 3}), InvalidField),
        // Envelope and computed fields.
        (
            "id supplied",
            json!({"kind": "attempt", "id": "X"}),
            ComputedFieldSupplied,
        ),
        (
            "task supplied",
            json!({"kind": "assessment", "task": "t"}),
            ComputedFieldSupplied,
        ),
        (
            "sequence supplied",
            json!({"kind": "attempt", "sequence": 9}),
            ComputedFieldSupplied,
        ),
        (
            "created_at supplied",
            json!({"kind": "attempt", "created_at": "x"}),
            ComputedFieldSupplied,
        ),
        (
            "prev supplied",
            json!({"kind": "attempt", "prev": crate::core::chain::GENESIS}),
            ComputedFieldSupplied,
        ),
        (
            "schema supplied",
            json!({"kind": "attempt", "schema": 1}),
            ComputedFieldSupplied,
        ),
        (
            "redacted supplied",
            json!({"kind": "attempt", "redacted": []}),
            ComputedFieldSupplied,
        ),
        (
            "a caller's source",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "gamma",
                "status": "completed", "conclusion": "c", "stance": "supports",
                "source": "another/model"}),
            ComputedFieldSupplied,
        ),
        (
            "attestation supplied",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "gamma",
                "status": "completed", "conclusion": "c", "stance": "supports",
                "attestation": {"job": "J", "key": "k", "counts": true, "mac": "m"}}),
            ComputedFieldSupplied,
        ),
        (
            "reviewed_by supplied",
            conclusion(json!({"assessment": w.a_low, "reviewed_by": ["alpha"]})),
            ComputedFieldSupplied,
        ),
        (
            "review count supplied",
            conclusion(json!({"assessment": w.a_low, "independent_review_count": 2})),
            ComputedFieldSupplied,
        ),
        (
            "finished_at supplied",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "alpha",
                "status": "completed", "conclusion": "c", "finished_at": "2026-01-01T00:00:00Z"}),
            ComputedFieldSupplied,
        ),
        (
            "envelope on a plan",
            json!({"kind": "plan", "assessment": w.a_mat, "id": "X"}),
            ComputedFieldSupplied,
        ),
        // Plans are computed.
        (
            "plan with mode",
            json!({"kind": "plan", "assessment": w.a_mat, "mode": "strict"}),
            PlanIsComputed,
        ),
        (
            "plan with selected",
            json!({"kind": "plan", "assessment": w.a_mat, "selected": []}),
            PlanIsComputed,
        ),
        (
            "plan without a policy env",
            json!({"kind": "plan", "assessment": w.a_mat}),
            PlanIsComputed,
        ),
        (
            "plan of no assessment",
            json!({"kind": "plan", "assessment": "NOPE"}),
            UnknownReference,
        ),
        (
            "plan of a plan",
            json!({"kind": "plan", "assessment": w.p_mat}),
            UnknownReference,
        ),
        (
            "plan without assessment",
            json!({"kind": "plan"}),
            InvalidField,
        ),
        // Fields: unknown, missing, types, enums, sizes.
        (
            "unknown field",
            json!({"kind": "assessment", "subject": "s", "materiality": "low", "hypothesis": "h",
                "subjet": "x"}),
            InvalidField,
        ),
        (
            "missing subject",
            json!({"kind": "assessment", "materiality": "low", "hypothesis": "h"}),
            InvalidField,
        ),
        (
            "bad materiality",
            json!({"kind": "assessment", "subject": "s", "materiality": "huge", "hypothesis": "h"}),
            InvalidField,
        ),
        (
            "bad confidence",
            json!({"kind": "assessment", "subject": "s", "materiality": "low",
                "confidence": "total", "hypothesis": "h"}),
            InvalidField,
        ),
        (
            "hypothesis a number",
            json!({"kind": "assessment", "subject": "s", "materiality": "low", "hypothesis": 4}),
            InvalidField,
        ),
        (
            "empty subject",
            json!({"kind": "assessment", "subject": "  ", "materiality": "low", "hypothesis": "h"}),
            InvalidField,
        ),
        (
            "multi-line subject",
            json!({"kind": "assessment", "subject": "a\nb", "materiality": "low",
                "hypothesis": "h"}),
            InvalidField,
        ),
        (
            "carriage return subject",
            json!({"kind": "assessment", "subject": "a\rb", "materiality": "low",
                "hypothesis": "h"}),
            InvalidField,
        ),
        (
            "subject too long",
            json!({"kind": "assessment", "subject": long(201), "materiality": "low",
                "hypothesis": "h"}),
            InvalidField,
        ),
        (
            "hypothesis too long",
            json!({"kind": "assessment", "subject": "s", "materiality": "low",
                "hypothesis": long(4001)}),
            InvalidField,
        ),
        (
            "too many facts",
            json!({"kind": "assessment", "subject": "s", "materiality": "low", "hypothesis": "h",
                "facts": many(101)}),
            InvalidField,
        ),
        (
            "facts not a list",
            json!({"kind": "assessment", "subject": "s", "materiality": "low", "hypothesis": "h",
                "facts": "one"}),
            InvalidField,
        ),
        (
            "a fact not a string",
            json!({"kind": "assessment", "subject": "s", "materiality": "low", "hypothesis": "h",
                "facts": [1]}),
            InvalidField,
        ),
        (
            "new_evidence a string",
            json!({"kind": "assessment", "subject": "s", "materiality": "low", "hypothesis": "h",
                "new_evidence": "yes"}),
            InvalidField,
        ),
        (
            "capability typo",
            json!({"kind": "assessment", "subject": "s", "materiality": "low", "hypothesis": "h",
                "capabilities": ["code_reveiw"]}),
            InvalidField,
        ),
        (
            "showed too long",
            json!({"kind": "assessment", "subject": "s", "materiality": "low", "hypothesis": "h",
                "evidence": [{"kind": "file", "ref": "a", "showed": long(501)}]}),
            InvalidField,
        ),
        (
            "bad evidence kind",
            json!({"kind": "assessment", "subject": "s", "materiality": "low", "hypothesis": "h",
                "evidence": [{"kind": "rumour", "ref": "a"}]}),
            InvalidField,
        ),
        (
            "evidence without ref",
            json!({"kind": "assessment", "subject": "s", "materiality": "low", "hypothesis": "h",
                "evidence": [{"kind": "file"}]}),
            InvalidField,
        ),
        (
            "evidence with a copy",
            json!({"kind": "assessment", "subject": "s", "materiality": "low", "hypothesis": "h",
                "evidence": [{"kind": "file", "ref": "a", "content": "..."}]}),
            InvalidField,
        ),
        (
            "validation output too long",
            json!({"kind": "validation", "conclusion": w.k_low, "check": "c", "passed": true,
                "output": long(2001)}),
            InvalidField,
        ),
        (
            "passed not a bool",
            json!({"kind": "validation", "conclusion": w.k_low, "check": "c", "passed": "yes"}),
            InvalidField,
        ),
        (
            "confidence above 1",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "gamma",
                "status": "completed", "conclusion": "c", "confidence": 1.5}),
            InvalidField,
        ),
        (
            "bad stance",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "gamma",
                "status": "completed", "conclusion": "c", "stance": "maybe"}),
            InvalidField,
        ),
        (
            "bad status",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "gamma", "status": "done"}),
            InvalidField,
        ),
        (
            "negative duration",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "gamma",
                "status": "completed", "conclusion": "c", "duration_ms": -1}),
            InvalidField,
        ),
        (
            "usage with a stray key",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "gamma",
                "status": "completed", "conclusion": "c",
                "usage": {"input_tokens": 1, "output_tokens": 2, "cost": 3}}),
            InvalidField,
        ),
        (
            "diagnostic too long",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "gamma", "status": "failed",
                "failure": "error", "diagnostic": long(301)}),
            InvalidField,
        ),
        // Assessments.
        (
            "material without evidence",
            json!({"kind": "assessment", "subject": "s", "materiality": "material",
                "hypothesis": "h"}),
            MaterialWithoutEvidence,
        ),
        (
            "critical with no evidence",
            json!({"kind": "assessment", "subject": "s", "materiality": "critical",
                "hypothesis": "h", "evidence": []}),
            MaterialWithoutEvidence,
        ),
        (
            "high with null evidence",
            json!({"kind": "assessment", "subject": "s", "materiality": "high", "hypothesis": "h",
                "evidence": null}),
            MaterialWithoutEvidence,
        ),
        // Consultations.
        (
            "plan unknown",
            json!({"kind": "consultation", "plan": "NOPE", "advisor": "alpha",
                "status": "completed", "conclusion": "c"}),
            UnknownReference,
        ),
        (
            "plan is an assessment",
            json!({"kind": "consultation", "plan": w.a_mat, "advisor": "alpha",
                "status": "completed", "conclusion": "c"}),
            UnknownReference,
        ),
        (
            "advisor not selected",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "gamma",
                "status": "completed", "conclusion": "c"}),
            AdvisorNotSelected,
        ),
        (
            "second consultation",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "alpha",
                "status": "completed", "conclusion": "c"}),
            DuplicateConsultation,
        ),
        (
            "second, failed this time",
            json!({"kind": "consultation", "plan": w.p_mat, "advisor": "beta", "status": "failed",
                "failure": "error"}),
            DuplicateConsultation,
        ),
        (
            "completed without conclusion",
            completed_on_fresh_plan(&w, json!({})),
            CompletedWithoutConclusion,
        ),
        (
            "completed with a blank conclusion",
            completed_on_fresh_plan(&w, json!({"conclusion": " "})),
            CompletedWithoutConclusion,
        ),
        (
            "completed with a failure",
            completed_on_fresh_plan(&w, json!({"conclusion": "c", "failure": "error"})),
            InvalidField,
        ),
        (
            "failed with conclusion",
            failed_on_fresh_plan(&w, json!({"failure": "error", "conclusion": "c"})),
            FailedWithConclusion,
        ),
        (
            "failed without failure",
            failed_on_fresh_plan(&w, json!({})),
            InvalidField,
        ),
        // Disagreements.
        (
            "one position",
            json!({"kind": "disagreement", "assessment": w.a_mat,
                "positions": [{"source": "executor", "position": "p"}],
                "discriminating_question": "q"}),
            TooFewPositions,
        ),
        (
            "no positions",
            json!({"kind": "disagreement", "assessment": w.a_mat, "positions": [],
                "discriminating_question": "q"}),
            TooFewPositions,
        ),
        (
            "a failed consultation's position",
            json!({"kind": "disagreement", "assessment": w.a_mat,
                "positions": [{"source": "executor", "position": "p"},
                    {"source": w.c_beta_failed, "position": "none"}],
                "discriminating_question": "q"}),
            PositionNotCompleted,
        ),
        (
            "a position from nowhere",
            json!({"kind": "disagreement", "assessment": w.a_mat,
                "positions": [{"source": "executor", "position": "p"},
                    {"source": "NOPE", "position": "x"}],
                "discriminating_question": "q"}),
            UnknownReference,
        ),
        (
            "a position of another assessment",
            json!({"kind": "disagreement", "assessment": w.a_mat,
                "positions": [{"source": "executor", "position": "p"},
                    {"source": w.c_div_alpha, "position": "x"}],
                "discriminating_question": "q"}),
            UnknownReference,
        ),
        (
            "the same source twice",
            json!({"kind": "disagreement", "assessment": w.a_mat,
                "positions": [{"source": "executor", "position": "p"},
                    {"source": "executor", "position": "q"}],
                "discriminating_question": "q"}),
            InvalidField,
        ),
        (
            "a position without text",
            json!({"kind": "disagreement", "assessment": w.a_mat,
                "positions": [{"source": "executor"}, {"source": w.c_alpha, "position": "q"}],
                "discriminating_question": "q"}),
            InvalidField,
        ),
        (
            "disagreement on no assessment",
            json!({"kind": "disagreement", "assessment": "NOPE", "positions": [],
                "discriminating_question": "q"}),
            UnknownReference,
        ),
        // Resolutions.
        (
            "resolution with empty evidence",
            json!({"kind": "resolution", "disagreement": w.d_div, "experiment": "e",
                "observed": "o", "favours": "executor", "evidence": []}),
            ResolutionWithoutEvidence,
        ),
        (
            "resolution with no evidence field",
            json!({"kind": "resolution", "disagreement": w.d_div, "experiment": "e",
                "observed": "o", "favours": "neither"}),
            ResolutionWithoutEvidence,
        ),
        (
            "favours a stranger",
            json!({"kind": "resolution", "disagreement": w.d_div, "experiment": "e",
                "observed": "o", "favours": w.c_alpha, "evidence": evidence()}),
            UnknownReference,
        ),
        (
            "favours a position of another disagreement",
            json!({"kind": "resolution", "disagreement": w.d_res, "experiment": "e",
                "observed": "o", "favours": w.c_div_alpha, "evidence": evidence()}),
            UnknownReference,
        ),
        (
            "resolves an assessment",
            json!({"kind": "resolution", "disagreement": w.a_div, "experiment": "e",
                "observed": "o", "favours": "neither", "evidence": evidence()}),
            UnknownReference,
        ),
        // Conclusions.
        (
            "conclusion on no assessment",
            conclusion(json!({"assessment": "NOPE"})),
            UnknownReference,
        ),
        (
            "cites no consultation",
            conclusion(json!({"assessment": w.a_mat, "consultations": ["NOPE"]})),
            UnknownReference,
        ),
        (
            "cites a plan",
            conclusion(json!({"assessment": w.a_mat, "consultations": [w.p_mat]})),
            UnknownReference,
        ),
        (
            "cites another assessment's",
            conclusion(json!({"assessment": w.a_mat, "consultations": [w.c_alpha, w.c_div_alpha]})),
            UnknownReference,
        ),
        (
            "cites twice",
            conclusion(json!({"assessment": w.a_mat, "consultations": [w.c_alpha, w.c_alpha]})),
            InvalidField,
        ),
        (
            "supersedes an assessment",
            conclusion(json!({"assessment": w.a_low, "supersedes": w.a_low})),
            UnknownReference,
        ),
        (
            "material conclusion without evidence",
            json!({"kind": "conclusion", "assessment": w.a_mat, "decision": "d", "rationale": "r",
                "consultations": [w.c_alpha], "validation_plan": "v"}),
            MaterialWithoutEvidence,
        ),
        (
            "material conclusion without validation plan",
            json!({"kind": "conclusion", "assessment": w.a_mat, "decision": "d", "rationale": "r",
                "consultations": [w.c_alpha], "evidence": evidence()}),
            MaterialWithoutValidationPlan,
        ),
        (
            "material conclusion with a blank validation plan",
            conclusion(json!({"assessment": w.a_mat, "consultations": [w.c_alpha],
                    "validation_plan": "  "})),
            MaterialWithoutValidationPlan,
        ),
        (
            "answer not weighed",
            conclusion(json!({"assessment": w.a_mat})),
            AnswerNotWeighed,
        ),
        (
            "only the failed one weighed",
            conclusion(json!({"assessment": w.a_mat, "consultations": [w.c_beta_failed]})),
            AnswerNotWeighed,
        ),
        (
            "open disagreement",
            conclusion(json!({"assessment": w.a_div, "consultations": [w.c_div_alpha]})),
            UnresolvedDisagreement,
        ),
        (
            "divergence never recorded as a disagreement",
            conclusion(json!({"assessment": w.a_quiet})),
            UnresolvedDisagreement,
        ),
        // Supersession (the standing conclusion on the same subject is `k_low`).
        (
            "new evidence, nothing superseded",
            conclusion(json!({"assessment": w.a_new})),
            SupersedesMissing,
        ),
        (
            "new evidence, a stranger superseded",
            conclusion(json!({"assessment": w.a_new, "supersedes": "NOPE"})),
            UnknownReference,
        ),
        (
            "a second conclusion beside the standing one",
            conclusion(json!({"assessment": w.a_low})),
            SupersedesMissing,
        ),
        // Validations and attempts.
        (
            "validation of an assessment",
            json!({"kind": "validation", "conclusion": w.a_low, "check": "c", "passed": true}),
            UnknownReference,
        ),
        (
            "attempt of nothing",
            json!({"kind": "attempt", "assessment": "NOPE", "tried": "t", "failure_observed": "f"}),
            UnknownReference,
        ),
        (
            "attempt missing what failed",
            json!({"kind": "attempt", "assessment": w.a_low, "tried": "t"}),
            InvalidField,
        ),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (label, input, expected) in cases {
        check(&w.f, label, input, expected);
        seen.insert(expected.as_str());
    }
    // A task whose chain is broken takes nothing more, however good the record.
    let broken = Fixture {
        task: w.f.task.clone(),
        records: w.f.records.clone(),
        trust: Some(broken_trust(&w.f)),
    };
    check(
        &broken,
        "a task whose chain is broken",
        json!({"kind": "attempt", "assessment": w.a_low, "tried": "t", "failure_observed": "f"}),
        ChainBroken,
    );
    seen.insert(ChainBroken.as_str());
    // Every surface of `record` asks this before the writer: consultations are the
    // daemon's to write.
    let by_hand = json!({"kind": "consultation", "plan": w.p_mat, "advisor": "alpha",
        "status": "completed", "conclusion": "c", "stance": "supports"});
    let refused = refuse_consultation_by_caller(&by_hand).expect_err("refused");
    assert_eq!(refused.reason, ConsultationByDaemonOnly);
    for names in ["consultation job", "mesh answer", "inbox review"] {
        assert!(refused.message.contains(names), "{}", refused.message);
    }
    assert!(refuse_consultation_by_caller(&json!({"kind": "assessment"})).is_ok());
    seen.insert(refused.reason.as_str());
    // With a task-scope invariant in force, a material conclusion accounts for it.
    let mut kept = Fixture {
        task: w.f.task.clone(),
        records: w.f.records.clone(),
        trust: None,
    };
    kept.add(
        json!({"kind": "invariant", "name": "no-core-io", "action": "add",
        "description": "the core reads no file"}),
    );
    let on_mat = |invariants: Value| {
        conclusion(json!({"assessment": w.a_mat, "consultations": [w.c_alpha],
            "invariants": invariants}))
    };
    for (label, input, expected) in [
        (
            "an invariant left out",
            on_mat(json!([])),
            InvariantUnaddressed,
        ),
        (
            "an invariant without evidence",
            on_mat(json!([{"name": "no-core-io", "holds": true}])),
            InvariantUnaddressed,
        ),
        (
            "an invariant broken",
            on_mat(json!([{"name": "no-core-io", "holds": false, "evidence": evidence()}])),
            InvariantViolated,
        ),
        (
            "an invariant named twice",
            on_mat(
                json!([{"name": "no-core-io", "holds": true, "evidence": evidence()},
                          {"name": "no-core-io", "holds": true, "evidence": evidence()}]),
            ),
            InvalidField,
        ),
        (
            "narrowed without its text",
            on_mat(json!([{"name": "no-core-io", "holds": false, "change": "narrow"}])),
            InvalidField,
        ),
        (
            "an invariant record removing what the task did not add",
            json!({"kind": "invariant", "name": "from-elsewhere", "action": "remove"}),
            UnknownReference,
        ),
        (
            "an invariant added twice",
            json!({"kind": "invariant", "name": "no-core-io", "action": "add",
                "description": "again"}),
            InvalidField,
        ),
        (
            "an invariant name with capitals",
            json!({"kind": "invariant", "name": "NoCoreIO", "action": "add",
                "description": "d"}),
            InvalidField,
        ),
    ] {
        check(&kept, label, input, expected);
        seen.insert(expected.as_str());
    }
    kept.admit(&on_mat(
        json!([{"name": "no-core-io", "holds": true, "evidence": evidence()}]),
    ))
    .expect("an invariant accounted for is admitted");
    kept.admit(&on_mat(
        json!([{"name": "no-core-io", "holds": false, "evidence": evidence(),
        "change": "narrow", "description": "the core reads no file but its own"}]),
    ))
    .expect("a broken invariant narrowed by the decision is admitted");
    // `invalid_task` is the only code the writer cannot give: a `TaskName` is valid by
    // construction, and the edges that build one (CLI, daemon) refuse bad names.
    let missing: Vec<&str> = ReasonCode::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !seen.contains(c) && *c != "invalid_task")
        .collect();
    assert!(
        missing.is_empty(),
        "reason codes without a case: {missing:?}"
    );
}

#[test]
fn reason_codes_serialise_as_their_names() {
    for code in ReasonCode::ALL {
        assert_eq!(
            serde_json::to_value(code).expect("serialises"),
            json!(code.as_str())
        );
    }
}

#[test]
fn a_plan_is_computed_by_the_policy() {
    use crate::core::catalogue::Catalogue;
    use crate::core::policy::PlanEnv;
    let w = world();
    let catalogue = Catalogue::embedded();
    let availability = catalogue
        .advisors
        .iter()
        .map(|a| AdvisorAvailability {
            advisor: a.id.clone(),
            status: Status::Available,
            reason: "present".into(),
            recovering: false,
            until: None,
        })
        .collect();
    let plan_env = PlanEnv {
        catalogue: &catalogue,
        mode: Mode::Standard,
        availability,
        budget_exhausted: None,
        asker: None,
    };
    let env = WriteEnv {
        task: &w.f.task,
        now: NOW,
        id: "PLAN".into(),
        sequence: 99,
        plan_env: Some(&plan_env),
        prev: crate::core::chain::GENESIS.to_string(),
        trust: None,
        secrets: &[],
        daemon: false,
        invariants: &[],
    };
    let record = admit(
        &w.f.records,
        &json!({"kind": "plan", "assessment": w.a_div}),
        &env,
    )
    .expect("a plan is computed");
    let Body::Plan(plan) = &record.body else {
        panic!("a plan")
    };
    assert_eq!(plan.assessment, w.a_div);
    assert_eq!(plan.mode, Mode::Standard);
    // High doubt in standard mode: two advisors, everyone else left out with a reason.
    assert_eq!(plan.budget, 2);
    assert_eq!(plan.selected.len(), 2);
    assert_eq!(
        plan.selected.len() + plan.left_out.len(),
        catalogue.advisors.len()
    );
    assert_eq!(record.envelope.id, "PLAN");
    assert_eq!(record.envelope.sequence, 99);
    assert_eq!(plan.question, None);
    assert_eq!(plan.prompt_bytes, None);

    // What was asked is kept with the plan: the question and prior opinion as given
    // (scrubbed), the prompt only as its size and SHA-256.
    let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ";
    let prompt = "Subject: queue\nIs WAL enough? é";
    let record = admit(
        &w.f.records,
        &json!({"kind": "plan", "assessment": w.a_div, "question": "What breaks under load?",
            "prior_opinion": format!("a colleague said yes {key}"), "prompt": prompt}),
        &env,
    )
    .expect("a plan with what was asked");
    let Body::Plan(plan) = &record.body else {
        panic!("a plan")
    };
    assert_eq!(plan.question.as_deref(), Some("What breaks under load?"));
    let prior = plan.prior_opinion.as_deref().expect("the prior opinion");
    assert!(
        prior.starts_with("a colleague said yes") && !prior.contains(key),
        "{prior}"
    );
    assert!(!record.envelope.redacted.is_empty());
    assert_eq!(plan.prompt_bytes, Some(prompt.len() as u64));
    let expected = crate::core::chain::digest(prompt.as_bytes());
    assert_eq!(
        plan.prompt_sha256.as_deref(),
        Some(expected.trim_start_matches("sha256:"))
    );
    let stored = serde_json::to_string(&record).expect("serialises");
    assert!(
        !stored.contains("Is WAL enough"),
        "the prompt is not kept: {stored}"
    );

    // The size and hash are the writer's to compute; other plan fields stay computed.
    for (input, reason) in [
        (
            json!({"kind": "plan", "assessment": w.a_div, "prompt_bytes": 3}),
            ReasonCode::ComputedFieldSupplied,
        ),
        (
            json!({"kind": "plan", "assessment": w.a_div, "prompt_sha256": "00"}),
            ReasonCode::ComputedFieldSupplied,
        ),
        (
            json!({"kind": "plan", "assessment": w.a_div, "question": "q", "budget": 1}),
            ReasonCode::PlanIsComputed,
        ),
        (
            json!({"kind": "plan", "assessment": w.a_div, "question": 3}),
            ReasonCode::InvalidField,
        ),
    ] {
        let refusal = admit(&w.f.records, &input, &env).expect_err("refused");
        assert_eq!(refusal.reason, reason, "{input}: {}", refusal.message);
    }
}

/// A completed consultation of `alpha` on a plan that has none yet, with `extra` fields.
fn completed_on_fresh_plan(w: &World, extra: Value) -> Value {
    consultation_on_free_plan(w, "completed", extra)
}

fn failed_on_fresh_plan(w: &World, extra: Value) -> Value {
    consultation_on_free_plan(w, "failed", extra)
}

fn consultation_on_free_plan(w: &World, status: &str, extra: Value) -> Value {
    // `p_mat` already has both advisors; the world's plan for `a_res` still has `beta` free.
    let plan =
        w.f.records
            .iter()
            .find(|r| matches!(&r.body, Body::Plan(p) if p.assessment == w.a_res))
            .map(|r| r.id().to_string())
            .expect("the plan of a_res");
    let mut input =
        json!({"kind": "consultation", "plan": plan, "advisor": "beta", "status": status});
    for (k, v) in extra.as_object().expect("object") {
        input[k] = v.clone();
    }
    input
}

#[test]
fn supersession_is_required_for_new_evidence() {
    let mut w = world();
    let a_new = w.a_new.clone();
    let base = json!({"kind": "conclusion", "assessment": a_new, "decision": "big",
        "rationale": "measured"});
    check(
        &w.f,
        "names nothing",
        base.clone(),
        ReasonCode::SupersedesMissing,
    );
    let mut wrong = base.clone();
    let other = w.f.add(
        json!({"kind": "conclusion", "assessment": w.a_res, "decision": "json",
            "rationale": "the experiment", "consultations": [w.c_res_alpha]}),
    );
    wrong["supersedes"] = json!(other);
    check(&w.f, "names another", wrong, ReasonCode::SupersedesMissing);
    let mut right = base;
    right["supersedes"] = json!(w.k_low);
    let record =
        w.f.admit(&right)
            .expect("naming the standing conclusion is accepted");
    let Body::Conclusion(c) = record.body else {
        panic!("a conclusion")
    };
    assert_eq!(c.supersedes.as_deref(), Some(w.k_low.as_str()));
}

#[test]
fn a_second_conclusion_on_one_assessment_must_supersede_the_standing_one() {
    let mut w = world();
    // As seen in use: the resolution favoured alpha's position, a conclusion adopted it,
    // and then a conclusion adopting the opposite was offered without `supersedes`.
    let first = w.f.add(json!({"kind": "conclusion", "assessment": w.a_res,
        "decision": "json logs", "rationale": "the experiment", "consultations": [w.c_res_alpha]}));
    let opposite = json!({"kind": "conclusion", "assessment": w.a_res, "decision": "line logs",
        "rationale": "simpler", "consultations": [w.c_res_alpha]});
    check(
        &w.f,
        "the opposite without supersedes",
        opposite.clone(),
        ReasonCode::SupersedesMissing,
    );
    let refusal = w.f.admit(&opposite).expect_err("refused");
    assert!(
        refusal.message.contains(&first) && refusal.message.contains("`supersedes`"),
        "the refusal names the standing conclusion: {}",
        refusal.message
    );
    let mut wrong = opposite.clone();
    wrong["supersedes"] = json!(w.k_low);
    check(
        &w.f,
        "naming another conclusion",
        wrong,
        ReasonCode::SupersedesMissing,
    );
    let mut right = opposite;
    right["supersedes"] = json!(first);
    let second = w.f.add(right.clone());
    // Now `second` stands: a third must name it, not the superseded `first`.
    check(
        &w.f,
        "naming the superseded one",
        right,
        ReasonCode::SupersedesMissing,
    );
    let third = json!({"kind": "conclusion", "assessment": w.a_res, "decision": "both",
        "rationale": "r", "consultations": [w.c_res_alpha], "supersedes": second});
    assert!(
        w.f.admit(&third).is_ok(),
        "naming the standing conclusion is accepted"
    );
}

#[test]
fn favours_accepts_the_advisor_of_a_position() {
    let mut w = world();
    let resolution = |favours: &str| {
        json!({"kind": "resolution", "disagreement": w.d_div, "experiment": "kill -9",
            "observed": "the lease expired", "favours": favours,
            "evidence": [{"kind": "test", "ref": "store::kill_loop"}]})
    };
    // `alpha` holds one position of `d_div`: the record names its consultation exactly.
    let record =
        w.f.admit(&resolution("alpha"))
            .expect("an advisor id is accepted");
    let Body::Resolution(r) = &record.body else {
        panic!("a resolution")
    };
    assert_eq!(r.favours, w.c_div_alpha);
    // `beta` was consulted but holds no position; the refusal says whose each id is.
    check(
        &w.f,
        "an advisor with no position",
        resolution("beta"),
        ReasonCode::UnknownReference,
    );
    let refusal = w.f.admit(&resolution("beta")).expect_err("refused");
    let expected = format!("`{}` (advisor `alpha`)", w.c_div_alpha);
    assert!(
        refusal.message.contains(&expected) && refusal.message.contains("`executor`"),
        "{}",
        refusal.message
    );
    // An advisor holding two positions is ambiguous: name the consultation.
    let a = w.f.add(assessment("Two plans", "low"));
    let p1 = w.f.plan(&a, &["alpha"]);
    let c1 = w.f.consult(&p1, "alpha", "opposes");
    let p2 = w.f.plan(&a, &["alpha"]);
    let c2 = w.f.consult(&p2, "alpha", "alternative");
    let d = w.f.add(json!({"kind": "disagreement", "assessment": a,
        "positions": [{"source": c1, "position": "x"}, {"source": c2, "position": "y"}],
        "discriminating_question": "which?"}));
    let twice = json!({"kind": "resolution", "disagreement": d, "experiment": "e",
        "observed": "o", "favours": "alpha", "evidence": evidence()});
    check(
        &w.f,
        "an advisor with two positions",
        twice,
        ReasonCode::UnknownReference,
    );
}

#[test]
fn a_repeat_without_new_evidence_needs_no_supersedes() {
    let mut w = world();
    let again = w.f.add(
        json!({"kind": "assessment", "subject": "Which cache to use", "materiality": "low",
            "hypothesis": "still the small one"}),
    );
    let input = json!({"kind": "conclusion", "assessment": again, "decision": "small",
        "rationale": "nothing new"});
    assert!(w.f.admit(&input).is_ok());
}

fn conclusion_of(record: Record) -> Conclusion {
    match record.body {
        Body::Conclusion(c) => c,
        other => panic!("expected a conclusion, got {other:?}"),
    }
}

#[test]
fn review_is_computed_from_the_completed_consultations_cited() {
    let mut w = world();
    // A resolved disagreement lets the conclusion through; its cited answer is the review.
    let resolved =
        w.f.admit(&json!({"kind": "conclusion", "assessment": w.a_res,
        "decision": "json logs", "rationale": "the experiment", "consultations": [w.c_res_alpha]}));
    let c = conclusion_of(resolved.expect("resolved disagreement admits the conclusion"));
    assert_eq!(c.reviewed_by, ["alpha"]);
    assert_eq!(c.independent_review_count, 1);

    // A failed consultation cited is weighed but reviews nothing.
    let c = conclusion_of(
        w.f.admit(
            &json!({"kind": "conclusion", "assessment": w.a_mat, "decision": "d",
            "rationale": "r", "evidence": evidence(), "validation_plan": "v",
            "consultations": [w.c_beta_failed, w.c_alpha]}),
        )
        .expect("every answer weighed"),
    );
    assert_eq!(c.reviewed_by, ["alpha"]);
    assert_eq!(c.independent_review_count, 1);

    // Two advisors, in citation order.
    let a =
        w.f.add(json!({"kind": "assessment", "subject": "Two reviewers",
        "materiality": "low", "hypothesis": "h"}));
    let p = w.f.plan(&a, &["alpha", "beta"]);
    let ca = w.f.consult(&p, "alpha", "supports");
    let cb = w.f.consult(&p, "beta", "inconclusive");
    let c = conclusion_of(
        w.f.admit(
            &json!({"kind": "conclusion", "assessment": a, "decision": "d",
            "rationale": "r", "consultations": [cb, ca]}),
        )
        .expect("both weighed"),
    );
    assert_eq!(c.reviewed_by, ["beta", "alpha"]);
    assert_eq!(c.independent_review_count, 2);

    // Nothing cited, nothing reviewed.
    let quiet =
        w.f.add(json!({"kind": "assessment", "subject": "Nobody asked",
        "materiality": "low", "hypothesis": "h"}));
    let c = conclusion_of(
        w.f.admit(
            &json!({"kind": "conclusion", "assessment": quiet, "decision": "d",
            "rationale": "r"}),
        )
        .expect("a low conclusion needs no review"),
    );
    assert!(c.reviewed_by.is_empty());
    assert_eq!(c.independent_review_count, 0);
}

#[test]
fn a_resolved_disagreement_releases_the_conclusion() {
    let mut w = world();
    let input = json!({"kind": "conclusion", "assessment": w.a_div, "decision": "lease",
        "rationale": "crash test", "evidence": evidence(), "validation_plan": "kill loop",
        "consultations": [w.c_div_alpha, w.c_div_beta]});
    check(
        &w.f,
        "before the resolution",
        input.clone(),
        ReasonCode::UnresolvedDisagreement,
    );
    w.f.add(
        json!({"kind": "resolution", "disagreement": w.d_div, "experiment": "kill -9",
            "observed": "the lease expired", "favours": w.c_div_alpha,
            "evidence": [{"kind": "test", "ref": "store::kill_loop"}]}),
    );
    assert!(w.f.admit(&input).is_ok(), "resolved, every answer weighed");

    // A second, unresolved disagreement on the same assessment closes it again.
    w.f.add(json!({"kind": "disagreement", "assessment": w.a_div,
        "positions": [{"source": "executor", "position": "lease"},
                      {"source": w.c_div_alpha, "position": "fencing tokens too"}],
        "discriminating_question": "does a paused writer corrupt?"}));
    check(
        &w.f,
        "a second open disagreement",
        input,
        ReasonCode::UnresolvedDisagreement,
    );
}

#[test]
fn computed_fields_and_envelope() {
    let w = world();
    let input = json!({"kind": "consultation", "plan": consultation_plan_with_beta_free(&w),
        "advisor": "beta", "status": "completed", "conclusion": "fine", "stance": "supports",
        "confidence": 0.5, "duration_ms": 1200, "usage": {"input_tokens": 10, "output_tokens": 5}});
    let record = w.f.admit(&input).expect("admitted");
    assert_eq!(record.envelope.id, format!("R{:03}", w.f.records.len() + 1));
    assert_eq!(record.envelope.task, "t");
    assert_eq!(record.envelope.sequence, w.f.records.len() as u64 + 1);
    assert_eq!(record.envelope.created_at, "2026-03-01T12:00:00.250Z");
    assert_eq!(record.envelope.schema, SCHEMA_VERSION);
    assert!(record.envelope.redacted.is_empty());
    let Body::Consultation(Consultation { finished_at, .. }) = &record.body else {
        panic!("a consultation")
    };
    assert_eq!(finished_at, "2026-03-01T12:00:00.250Z");
    let json = serde_json::to_value(&record).expect("serialises");
    assert_eq!(json["kind"], "consultation");
    assert_eq!(json["finished_at"], "2026-03-01T12:00:00.250Z");
}

fn consultation_plan_with_beta_free(w: &World) -> String {
    consultation_on_free_plan(w, "completed", json!({}))["plan"]
        .as_str()
        .expect("plan id")
        .to_string()
}

#[test]
fn timestamps_are_utc_with_milliseconds() {
    let offset = datetime!(2026-03-01 13:00:00 +01:00);
    assert_eq!(timestamp(offset), "2026-03-01T12:00:00.000Z");
    assert_eq!(
        timestamp(datetime!(2026-12-31 23:59:59.999999 UTC)),
        "2026-12-31T23:59:59.999Z"
    );
}

#[test]
fn strings_are_scrubbed_and_shapes_named() {
    let f = Fixture::new();
    let input = json!({"kind": "assessment",
        "subject": "Token \u{1b}[31mleak\u{1b}[0m in logs",
        "materiality": "material",
        "hypothesis": "the header Authorization: Bearer abcDEF123456ghiJKL789 is logged",
        "facts": ["found sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD", "and AKIAIOSFODNN7EXAMPLE"],
        "evidence": [{"kind": "observation", "ref": "log line 3",
            "showed": "key AKIAIOSFODNN7EXAMPLE\u{7}"}]});
    let record = f.admit(&input).expect("admitted");
    assert_eq!(
        record.envelope.redacted,
        ["api_key_sk", "bearer_token", "cloud_access_key"]
    );
    let Body::Assessment(Assessment {
        subject,
        hypothesis,
        facts,
        evidence,
        ..
    }) = &record.body
    else {
        panic!("an assessment")
    };
    assert_eq!(subject, "Token leak in logs");
    assert_eq!(
        hypothesis,
        "the header Authorization: Bearer [redacted:bearer_token] is logged"
    );
    assert_eq!(
        facts,
        &[
            "found [redacted:api_key_sk]",
            "and [redacted:cloud_access_key]"
        ]
    );
    assert_eq!(
        evidence[0].showed.as_deref(),
        Some("key [redacted:cloud_access_key]")
    );
    let text = serde_json::to_string(&record).expect("serialises");
    assert!(!text.contains("AKIA") && !text.contains('\u{1b}'), "{text}");
}

#[test]
fn every_accepted_value_reads() {
    let mut f = Fixture::new();
    for materiality in Materiality::ALL {
        let input = assessment(&format!("m {}", materiality.as_str()), materiality.as_str());
        assert!(f.admit(&input).is_ok(), "{}", materiality.as_str());
    }
    let a = f.add(assessment("stances", "low"));
    let advisors: Vec<String> = (0..13).map(|i| format!("adv{i}")).collect();
    let names: Vec<&str> = advisors.iter().map(String::as_str).collect();
    let p = f.plan(&a, &names);
    for (i, stance) in ["supports", "opposes", "alternative", "inconclusive"]
        .iter()
        .enumerate()
    {
        let input = json!({"kind": "consultation", "plan": p, "advisor": names[i],
            "status": "completed", "conclusion": "c", "stance": stance});
        assert!(f.admit(&input).is_ok(), "{stance}");
    }
    for (i, failure) in crate::core::records::FailureKind::ALL.iter().enumerate() {
        let input = json!({"kind": "consultation", "plan": p, "advisor": names[4 + i],
            "status": "failed", "failure": failure.as_str(), "retry_after_s": 30});
        assert!(f.admit(&input).is_ok(), "{}", failure.as_str());
    }
    for confidence in ["low", "medium", "high"] {
        let mut input = assessment("c", "low");
        input["confidence"] = json!(confidence);
        assert!(f.admit(&input).is_ok(), "{confidence}");
    }
    for kind in [
        "file",
        "test",
        "adr",
        "rule",
        "commit",
        "command",
        "observation",
        "record",
    ] {
        let mut input = assessment("e", "low");
        input["evidence"] = json!([{"kind": kind, "ref": "x"}]);
        assert!(f.admit(&input).is_ok(), "{kind}");
    }
    let mut input = assessment("caps", "low");
    input["capabilities"] = json!(crate::core::catalogue::CAPABILITIES);
    assert!(f.admit(&input).is_ok());
}

#[test]
fn optional_nulls_read_as_absent() {
    let w = world();
    let input = json!({"kind": "attempt", "assessment": w.a_low, "tried": "t",
        "failure_observed": "f", "invalidated_assumption": null, "updated_hypothesis": null});
    let record =
        w.f.admit(&input)
            .expect("nulls accepted for optional fields");
    let json = serde_json::to_value(&record).expect("serialises");
    assert!(json.get("invalidated_assumption").is_none());
}

#[test]
fn a_refusal_names_the_field_and_what_is_accepted() {
    let f = Fixture::new();
    let refusal = f
        .admit(
            &json!({"kind": "assessment", "subject": "s", "materiality": "huge",
            "hypothesis": "h"}),
        )
        .expect_err("refused");
    assert!(
        refusal.message.contains("`materiality`"),
        "{}",
        refusal.message
    );
    assert!(
        refusal.message.contains("`critical`"),
        "{}",
        refusal.message
    );
    assert!(refusal.message.contains("huge"), "{}", refusal.message);
    let refusal = f
        .admit(&json!({"kind": "assessment", "subjet": "s"}))
        .expect_err("refused");
    assert!(refusal.message.contains("`subjet`"), "{}", refusal.message);
    assert!(
        refusal.message.contains("did you mean `subject`"),
        "{}",
        refusal.message
    );
    let refusal = f.admit(&json!({"kind": "opinion"})).expect_err("refused");
    assert!(refusal.message.contains("`attempt`"), "{}", refusal.message);
}

#[test]
fn plan_fields_other_than_assessment_are_named() {
    let f = Fixture::new();
    let refusal = f
        .admit(&json!({"kind": "plan", "assessment": "A", "budget": 3, "mode": "fast"}))
        .expect_err("refused");
    assert_eq!(refusal.reason, ReasonCode::PlanIsComputed);
    assert!(
        refusal.message.contains("`budget`, `mode`"),
        "{}",
        refusal.message
    );
}

/// What a walk over `f`'s records finds when record 3's stored bytes changed after record
/// 4 was written: records 3 on are unverified.
fn broken_trust(f: &Fixture) -> Trust {
    let bytes: Vec<Vec<u8>> = f
        .records
        .iter()
        .map(|r| serde_json::to_vec_pretty(r).expect("serialises"))
        .collect();
    let mut digests: Vec<String> = bytes.iter().map(|b| chain::digest(b)).collect();
    let mut records = f.records.clone();
    for (i, record) in records.iter_mut().enumerate() {
        record.envelope.prev = Some(if i == 0 {
            chain::GENESIS.to_string()
        } else {
            digests[i - 1].clone()
        });
        digests[i] = chain::digest(&serde_json::to_vec_pretty(record).expect("serialises"));
    }
    digests[2] = chain::digest(b"edited");
    let entries: Vec<chain::Entry> = records
        .iter()
        .zip(&digests)
        .map(|(r, d)| chain::Entry {
            file: None,
            sequence: r.envelope.sequence,
            digest: d,
            record: Ok(r),
        })
        .collect();
    let trust = Trust::of(&f.task, &entries);
    assert_eq!(trust.state.as_ref().and_then(|s| s.broken_at), Some(3));
    trust
}

#[test]
fn a_write_into_a_broken_chain_names_what_verify_finds_and_the_next_step() {
    let w = world();
    let broken = Fixture {
        task: w.f.task.clone(),
        records: w.f.records.clone(),
        trust: Some(broken_trust(&w.f)),
    };
    let refusal = broken
        .admit(&assessment("anything", "low"))
        .expect_err("refused");
    assert_eq!(refusal.reason, ReasonCode::ChainBroken);
    for part in [
        "`0000000003.json`",
        "(changed)",
        "the files from `0000000003.json` on",
        "out of the task's directory",
        "`advisor-consult verify`",
    ] {
        assert!(
            refusal.message.contains(part),
            "{part}: {}",
            refusal.message
        );
    }
}

/// A conclusion's review counts the consultations the chain vouches for, and only those
/// (the one place deciding it is `rules::Task::counts_as_review`).
#[test]
fn the_review_counts_only_consultations_the_chain_vouches_for() {
    let w = world();
    let conclusion = |trust: Option<&Trust>| {
        let input = json!({"kind": "conclusion", "assessment": w.a_mat, "decision": "d",
            "rationale": "r", "evidence": evidence(), "validation_plan": "run it",
            "consultations": [w.c_alpha, w.c_beta_failed]});
        let mut body: Body = serde_json::from_value({
            let mut v = input.clone();
            v["reviewed_by"] = json!([]);
            v["independent_review_count"] = json!(0);
            v
        })
        .expect("a conclusion body");
        rules::check(
            &rules::Task::new(&w.f.records, &w.f.task, trust),
            &mut body,
            &[],
        )
        .expect("admitted");
        let Body::Conclusion(c) = body else {
            panic!("a conclusion")
        };
        (c.reviewed_by, c.independent_review_count)
    };
    assert_eq!(conclusion(None), (vec!["alpha".to_string()], 1));
    // `c_alpha` is record 4: after the break at record 3, it vouches for nothing.
    let trust = broken_trust(&w.f);
    assert!(!trust.is_verified(&w.c_alpha));
    assert_eq!(conclusion(Some(&trust)), (vec![], 0));
}

/// Text is cleaned before it is judged: a required text made only of control characters
/// or escape sequences is empty, and refused naming the field and why.
#[test]
fn required_text_that_cleans_to_nothing_is_refused() {
    let w = world();
    let cases: Vec<(Kind, &str, Value)> = vec![
        (Kind::Assessment, "subject", assessment("s", "low")),
        (Kind::Assessment, "hypothesis", assessment("s", "low")),
        (
            Kind::Conclusion,
            "decision",
            json!({"kind": "conclusion", "assessment": w.a_res, "decision": "d",
                "rationale": "r", "consultations": [w.c_res_alpha]}),
        ),
        (
            Kind::Conclusion,
            "rationale",
            json!({"kind": "conclusion", "assessment": w.a_res, "decision": "d",
                "rationale": "r", "consultations": [w.c_res_alpha]}),
        ),
        (
            Kind::Disagreement,
            "discriminating_question",
            json!({"kind": "disagreement", "assessment": w.a_mat,
                "positions": [{"source": "executor", "position": "p"},
                    {"source": w.c_alpha, "position": "q"}],
                "discriminating_question": "q"}),
        ),
        (
            Kind::Resolution,
            "experiment",
            json!({"kind": "resolution", "disagreement": w.d_div, "experiment": "e",
                "observed": "o", "favours": "neither",
                "evidence": [{"kind": "command", "ref": "x"}]}),
        ),
        (
            Kind::Resolution,
            "observed",
            json!({"kind": "resolution", "disagreement": w.d_div, "experiment": "e",
                "observed": "o", "favours": "neither",
                "evidence": [{"kind": "command", "ref": "x"}]}),
        ),
        (
            Kind::Validation,
            "check",
            json!({"kind": "validation", "conclusion": w.k_low, "check": "c", "passed": true}),
        ),
        (
            Kind::Attempt,
            "tried",
            json!({"kind": "attempt", "assessment": w.a_low, "tried": "t",
                "failure_observed": "f"}),
        ),
        (
            Kind::Attempt,
            "failure_observed",
            json!({"kind": "attempt", "assessment": w.a_low, "tried": "t",
                "failure_observed": "f"}),
        ),
    ];
    assert_eq!(cases.len(), 10);
    for (kind, field, input) in cases {
        w.f.admit(&input)
            .unwrap_or_else(|r| panic!("{kind} as given: {}", r.message));
        for blank in ["\u{1b}[0m", "\u{7}\u{1b}]0;title\u{7}", " \u{9b}31m \u{0}"] {
            let mut input = input.clone();
            input[field] = json!(blank);
            let refusal = w.f.admit(&input).expect_err("refused");
            assert_eq!(refusal.reason, ReasonCode::InvalidField, "{kind}.{field}");
            for part in [
                &format!("`{field}`"),
                "must not be empty",
                "control characters",
            ] {
                assert!(
                    refusal.message.contains(part),
                    "{part}: {}",
                    refusal.message
                );
            }
        }
    }
    // Nested required text too: an evidence reference.
    let mut input = assessment("s", "material");
    input["evidence"] = json!([{"kind": "file", "ref": "\u{1b}[2J"}]);
    let refusal = w.f.admit(&input).expect_err("refused");
    assert!(
        refusal.message.contains("`evidence[0].ref`"),
        "{}",
        refusal.message
    );
}

/// Sizes are judged on the stored text: a redaction that lengthens text past the limit is
/// refused rather than stored oversize, and control characters, which are not stored, do
/// not count.
#[test]
fn sizes_are_judged_on_the_cleaned_text() {
    let f = Fixture::new();
    let secrets = ["abcdefgh".to_string()];
    let env = WriteEnv {
        task: &f.task,
        now: NOW,
        id: "R001".into(),
        sequence: 1,
        plan_env: None,
        prev: chain::GENESIS.to_string(),
        trust: None,
        secrets: &secrets,
        daemon: false,
        invariants: &[],
    };
    let mut input = assessment("s", "low");
    // 198 characters as given; each value becomes `[redacted:credential_value]`.
    input["subject"] = json!("abcdefgh ".repeat(22).trim_end());
    let refusal = admit(&[], &input, &env).expect_err("refused");
    assert_eq!(refusal.reason, ReasonCode::InvalidField);
    assert!(refusal.message.contains("`subject`"), "{}", refusal.message);
    let mut input = assessment("s", "low");
    input["subject"] = json!(format!("{}{}", "x".repeat(MAX_SUBJECT_CHARS), "\u{1b}[0m"));
    f.admit(&input).expect("admitted: the escape is not stored");
}

#[test]
fn token_counts_are_bounded() {
    let w = world();
    let plan = consultation_plan_with_beta_free(&w);
    for (tokens, admitted) in [
        (json!(MAX_TOKENS), true),
        (json!(MAX_TOKENS + 1), false),
        (json!(u64::MAX), false),
        (json!(-1), false),
        (json!(1.5), false),
    ] {
        let input = json!({"kind": "consultation", "plan": plan, "advisor": "beta",
            "status": "completed", "conclusion": "c",
            "usage": {"input_tokens": tokens, "output_tokens": 2}});
        match w.f.admit(&input) {
            Ok(_) => assert!(admitted, "{tokens} admitted"),
            Err(refusal) => {
                assert!(!admitted, "{tokens}: {}", refusal.message);
                assert_eq!(refusal.reason, ReasonCode::InvalidField);
                assert!(
                    refusal.message.contains("`usage.input_tokens`")
                        && refusal.message.contains(&MAX_TOKENS.to_string()),
                    "{}",
                    refusal.message
                );
            }
        }
    }
}
