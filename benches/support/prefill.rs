//! Large tasks for the benches, written straight to files in the store's layout and
//! chained as the writer chains them: a bench that needs a task of ten thousand records is
//! about using it, not about how it grew (`benches/writer.rs` measures the writes).

// Each bench includes this file as a module of its own and uses a part of it.
#![allow(dead_code)]

use advisord::core::chain;
use advisord::core::records::{
    Assessment, Body, Confidence, Consultation, ConsultationStatus, Envelope, FailureKind,
    Materiality, Record, Stance, SCHEMA_VERSION,
};
use advisord::store::file_name;
use std::path::Path;

/// Fill `task` under `state` with `count` stored records, the `i`-th holding `body(i)`.
pub fn records(state: &Path, task: &str, count: usize, body: impl Fn(usize) -> Body) {
    let dir = state.join(task);
    std::fs::create_dir_all(&dir).expect("the task directory");
    let mut prev = chain::GENESIS.to_string();
    for i in 0..count {
        let record = Record {
            envelope: Envelope {
                id: ulid::Ulid::new().to_string(),
                task: task.to_string(),
                sequence: i as u64 + 1,
                created_at: "2026-03-01T12:00:00.000Z".into(),
                schema: SCHEMA_VERSION,
                redacted: vec![],
                prev: Some(prev.clone()),
            },
            body: body(i),
        };
        let mut bytes = serde_json::to_vec_pretty(&record).expect("serialises");
        bytes.push(b'\n');
        prev = chain::digest(&bytes);
        std::fs::write(dir.join(file_name(&record)), bytes).expect("a record file");
    }
}

/// Fill `task` under `state` with `count` stored assessments.
pub fn assessments(state: &Path, task: &str, count: usize) {
    records(state, task, count, |i| {
        Body::Assessment(Assessment {
            subject: format!("stored decision {i}"),
            materiality: Materiality::Low,
            confidence: Confidence::Medium,
            hypothesis: "the simple option holds".into(),
            facts: vec!["one fact".into()],
            assumptions: vec![],
            questions: vec![],
            evidence: vec![],
            capabilities: vec![],
            new_evidence: false,
        })
    });
}

/// Consultation `i` of a run: `advisors` in turn, one in seven a timeout, the rest
/// completed, a second apart.
pub fn consultation(i: usize, advisors: &[&str]) -> Body {
    let failed = i % 7 == 3;
    Body::Consultation(Consultation {
        plan: "01JPLAN".into(),
        advisor: advisors[i % advisors.len()].into(),
        status: if failed {
            ConsultationStatus::Failed
        } else {
            ConsultationStatus::Completed
        },
        failure: failed.then_some(FailureKind::Timeout),
        diagnostic: failed.then(|| "no answer within the deadline".into()),
        conclusion: (!failed).then(|| "the simple option holds for now".into()),
        stance: (!failed).then_some(Stance::Supports),
        assumptions: vec!["the load stays small".into()],
        risks: vec!["it may not scale".into()],
        actions: vec![],
        falsifiers: vec!["measure it".into()],
        confidence: Some(0.7),
        duration_ms: Some(1200),
        usage: None,
        retry_after_s: None,
        invariants: Vec::new(),
        source: None,
        finished_at: format!(
            "2026-03-01T{:02}:{:02}:{:02}.000Z",
            i / 3600 % 24,
            i / 60 % 60,
            i % 60
        ),
        attestation: None,
    })
}
