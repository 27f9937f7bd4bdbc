//! The records the large-task benches fill their tasks with: whole flows of an assessment,
//! its plan, a completed consultation and a conclusion citing it.

use advisord::core::chain;
use advisord::core::records::{
    Assessment, Body, Conclusion, Confidence, Consultation, ConsultationStatus, Envelope,
    Materiality, Mode, Plan, Record, Selected, SCHEMA_VERSION,
};

/// When every filled record was written.
pub const CREATED: &str = "2026-03-01T12:00:00.000Z";

/// The `i`th flow's records: assessment (on `subject`), plan, consultation, conclusion;
/// `id(n)` names the task's record `n`, and the conclusion counts the consultation as a
/// review when `reviewed`.
pub fn flow(i: usize, id: impl Fn(usize) -> String, subject: String, reviewed: bool) -> [Body; 4] {
    let (a, p) = (id(4 * i + 1), id(4 * i + 2));
    [
        Body::Assessment(Assessment {
            subject,
            materiality: Materiality::Low,
            confidence: Confidence::Medium,
            hypothesis: "the simple option holds".into(),
            facts: vec!["one fact".into()],
            assumptions: vec![],
            questions: vec![],
            evidence: vec![],
            capabilities: vec![],
            new_evidence: false,
        }),
        Body::Plan(Plan {
            assessment: a.clone(),
            mode: Mode::Standard,
            budget: 1,
            capabilities: vec!["independent_reasoning".into()],
            selected: vec![Selected {
                advisor: "alpha".into(),
                adapter: "process".into(),
                covers: vec!["independent_reasoning".into()],
                why: "covers the request".into(),
            }],
            left_out: vec![],
            availability: vec![],
            reuse: None,
            local_review: vec![],
            uncovered_capabilities: vec![],
            question: None,
            prior_opinion: None,
            prompt_bytes: None,
            prompt_sha256: None,
        }),
        Body::Consultation(Consultation {
            plan: p,
            advisor: "alpha".into(),
            status: ConsultationStatus::Completed,
            failure: None,
            diagnostic: None,
            conclusion: Some("it holds".into()),
            stance: None,
            assumptions: vec![],
            risks: vec![],
            actions: vec![],
            falsifiers: vec![],
            confidence: None,
            duration_ms: None,
            usage: None,
            retry_after_s: None,
            invariants: Vec::new(),
            source: None,
            attestation: None,
            finished_at: CREATED.into(),
        }),
        Body::Conclusion(Conclusion {
            assessment: a,
            decision: "keep it".into(),
            rationale: "alpha agrees".into(),
            evidence: vec![],
            consultations: vec![id(4 * i + 3)],
            rejected_alternatives: vec![],
            risks: vec![],
            validation_plan: None,
            supersedes: None,
            invariants: Vec::new(),
            reviewed_by: if reviewed {
                vec!["alpha".into()]
            } else {
                vec![]
            },
            independent_review_count: u32::from(reviewed),
        }),
    ]
}

/// Record `sequence` of `task` (named `id`, holding `body`) chained on `prev` as the writer
/// chains it, and the bytes of its file; `prev` becomes the digest of those bytes.
pub fn chained(
    task: &str,
    id: String,
    sequence: usize,
    prev: &mut String,
    body: Body,
) -> (Record, Vec<u8>) {
    let record = Record {
        envelope: Envelope {
            id,
            task: task.to_string(),
            sequence: sequence as u64,
            created_at: CREATED.into(),
            schema: SCHEMA_VERSION,
            redacted: vec![],
            prev: Some(prev.clone()),
        },
        body,
    };
    let mut bytes = serde_json::to_vec_pretty(&record).expect("serialises");
    bytes.push(b'\n');
    *prev = chain::digest(&bytes);
    (record, bytes)
}
