//! A job with its outcomes written out: the one typed shape of a consultation's result,
//! whichever surface shows it (`--assessment ID`, `ask` and `wait` with `--format json`,
//! the MCP tools `consult` and `job`).
//!
//! It is the job (every field of it, unchanged) with each consultation entry carrying the
//! recorded outcome (conclusion, stance, confidence, assumptions, risks, falsifiers,
//! failure, diagnostic, usage), the plan's mode, budget, left-out advisors and local
//! review, and the disagreement's positions and discriminating question. It is derived
//! from the job and the records of its task (those its event stream carried); nothing in
//! it is stored.

use crate::core::records::{
    Body, Consultation, Disagreement, Mode, Plan, Record, Stance, Usage, EXECUTOR,
};
use crate::protocol::{Job, JobConsultation, JobId, JobState, RecordId, Timestamp};
use serde::{Deserialize, Serialize};

/// A job with every outcome recorded so far written out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcomes {
    /// The job id.
    pub id: JobId,
    /// Where the job is in its life.
    pub state: JobState,
    /// The root it concerns.
    pub root: String,
    /// The task it records into.
    pub task: String,
    /// The assessment consulted on.
    pub assessment: RecordId,
    /// The plan record's id, once recorded.
    pub plan: Option<RecordId>,
    /// One entry per selected advisor, in plan order, with its outcome once recorded.
    pub consultations: Vec<Outcome>,
    /// The disagreement record's id, when a completed consultation diverged.
    pub disagreement: Option<RecordId>,
    /// When the job was accepted.
    pub created_at: Timestamp,
    /// When it ended.
    pub finished_at: Option<Timestamp>,
    /// Why it failed or was cancelled (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The plan's mode, budget, who was left out and why, and the local review.
    pub plan_detail: Option<PlanDetail>,
    /// The disagreement's positions and the question that would settle it.
    pub disagreement_detail: Option<DisagreementDetail>,
    /// When a disagreement was recorded: the resolution to fill in and record
    /// (`advisor-consult record --file F`) once its experiment has run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution_template: Option<serde_json::Value>,
    /// When this is the answer of a verb that failed all the same (`wait --timeout` ran
    /// out: `wait_timed_out`), its error code; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// The command that records a filled-in resolution template.
pub const RECORD_RESOLUTION: &str = "advisor-consult record --file resolution.json";

/// A resolution of disagreement `id` to fill in: every field a resolution takes, the
/// placeholders saying what goes there; `favours` lists what it accepts (each position's
/// advisor, its source, or `neither`).
pub fn resolution_template(id: &str, advisors: &[&str]) -> serde_json::Value {
    let mut accepted: Vec<&str> = advisors.to_vec();
    accepted.push("neither");
    serde_json::json!({
        "kind": "resolution",
        "disagreement": id,
        "experiment": "<the smallest experiment that answers the question>",
        "observed": "<what it showed>",
        "favours": format!("<one of: {}>", accepted.join(", ")),
        "evidence": [
            {"kind": "test", "ref": "<the test, command or file>", "showed": "<what it showed>"}
        ]
    })
}

/// One selected advisor: the job's entry, then its recorded outcome (empty until it is
/// recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The job's entry: `advisor`, `record`, `status`, `failure`.
    #[serde(flatten)]
    pub entry: JobConsultation,
    /// Its conclusion, when completed.
    pub conclusion: Option<String>,
    /// Its stance towards the executor's hypothesis.
    pub stance: Option<Stance>,
    /// Its confidence, 0 to 1.
    pub confidence: Option<f64>,
    /// The assumptions its answer rests on.
    pub assumptions: Vec<String>,
    /// The risks it named.
    pub risks: Vec<String>,
    /// The actions it suggested.
    pub actions: Vec<String>,
    /// What would prove it wrong.
    pub falsifiers: Vec<String>,
    /// Why it failed, in one line, when failed.
    pub diagnostic: Option<String>,
    /// Tokens used.
    pub usage: Option<Usage>,
    /// How long the exchange took.
    pub duration_ms: Option<u64>,
}

/// What the plan decided, beyond who it selected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanDetail {
    /// The policy mode.
    pub mode: Mode,
    /// How many advisors it could select.
    pub budget: u32,
    /// A standing conclusion it reuses (nobody is asked then).
    pub reuse: Option<String>,
    /// Every advisor not selected, and why.
    pub left_out: Vec<LeftOutDetail>,
    /// The steps of a local review, when nobody was selected for material doubt.
    pub local_review: Vec<String>,
    /// The requested capabilities no available advisor offers.
    #[serde(default)]
    pub uncovered_capabilities: Vec<String>,
}

/// An advisor the plan left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeftOutDetail {
    /// The advisor.
    pub advisor: String,
    /// Why.
    pub reason: String,
}

/// A recorded disagreement, its positions named by advisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DisagreementDetail {
    /// The disagreement record's id.
    pub id: RecordId,
    /// Each position: its source (`executor` or a consultation id), the advisor behind it
    /// (`executor` for the executor), and the position.
    pub positions: Vec<PositionDetail>,
    /// The assumptions the positions divide on.
    pub divergent_assumptions: Vec<String>,
    /// The question whose answer would settle it: run that experiment, record a
    /// resolution with evidence, then conclude.
    pub discriminating_question: String,
}

/// One position of a disagreement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PositionDetail {
    /// `executor` or a consultation id.
    pub source: String,
    /// The advisor behind it, or `executor`.
    pub advisor: String,
    /// The position.
    pub position: String,
}

impl Outcomes {
    /// The job `job` with the outcomes found among `records` (the records of its task
    /// that its stream carried: its plan, consultations and disagreement; others are
    /// ignored).
    pub fn new<'a>(job: &Job, records: impl IntoIterator<Item = &'a Record>) -> Outcomes {
        let mut plan: Option<&Plan> = None;
        let mut consultations: Vec<(&str, &Consultation)> = Vec::new();
        let mut disagreement: Option<(&str, &Disagreement)> = None;
        for record in records {
            let id = record.id();
            match &record.body {
                Body::Plan(p) if job.plan.as_deref() == Some(id) => plan = Some(p),
                Body::Consultation(c) => consultations.push((id, c)),
                Body::Disagreement(d) if job.disagreement.as_deref() == Some(id) => {
                    disagreement = Some((id, d))
                }
                _ => {}
            }
        }
        let find = |id: Option<&str>| {
            let id = id?;
            consultations
                .iter()
                .find(|(cid, _)| *cid == id)
                .map(|(_, c)| *c)
        };
        let outcomes = job
            .consultations
            .iter()
            .map(|entry| Outcome::new(entry, find(entry.record.as_deref())))
            .collect();
        let advisor_of = |source: &str| {
            if source == EXECUTOR {
                return EXECUTOR.to_string();
            }
            job.consultations
                .iter()
                .find(|c| c.record.as_deref() == Some(source))
                .map(|c| c.advisor.clone())
                .unwrap_or_else(|| source.to_string())
        };
        let resolution = disagreement.map(|(id, d)| {
            let advisors: Vec<String> = d.positions.iter().map(|p| advisor_of(&p.source)).collect();
            let advisors: Vec<&str> = advisors.iter().map(String::as_str).collect();
            resolution_template(id, &advisors)
        });
        Outcomes {
            id: job.id.clone(),
            state: job.state,
            root: job.root.clone(),
            task: job.task.clone(),
            assessment: job.assessment.clone(),
            plan: job.plan.clone(),
            consultations: outcomes,
            disagreement: job.disagreement.clone(),
            created_at: job.created_at,
            finished_at: job.finished_at,
            reason: job.reason.clone(),
            plan_detail: plan.map(|p| PlanDetail {
                mode: p.mode,
                budget: p.budget,
                reuse: p.reuse.clone(),
                left_out: p
                    .left_out
                    .iter()
                    .map(|l| LeftOutDetail {
                        advisor: l.advisor.clone(),
                        reason: l.reason.clone(),
                    })
                    .collect(),
                local_review: p.local_review.clone(),
                uncovered_capabilities: p.uncovered_capabilities.clone(),
            }),
            disagreement_detail: disagreement.map(|(id, d)| DisagreementDetail {
                id: id.into(),
                positions: d
                    .positions
                    .iter()
                    .map(|p| PositionDetail {
                        source: p.source.clone(),
                        advisor: advisor_of(&p.source),
                        position: p.position.clone(),
                    })
                    .collect(),
                divergent_assumptions: d.divergent_assumptions.clone(),
                discriminating_question: d.discriminating_question.clone(),
            }),
            resolution_template: resolution,
            code: None,
        }
    }

    /// The job itself, as its fixed shape has it.
    pub fn job(&self) -> Job {
        Job {
            id: self.id.clone(),
            state: self.state,
            root: self.root.clone(),
            task: self.task.clone(),
            assessment: self.assessment.clone(),
            plan: self.plan.clone(),
            consultations: self.consultations.iter().map(|o| o.entry.clone()).collect(),
            disagreement: self.disagreement.clone(),
            created_at: self.created_at,
            finished_at: self.finished_at,
            reason: self.reason.clone(),
            timeout_s: None,
        }
    }
}

impl Outcome {
    fn new(entry: &JobConsultation, record: Option<&Consultation>) -> Outcome {
        Outcome {
            entry: entry.clone(),
            conclusion: record.and_then(|c| c.conclusion.clone()),
            stance: record.and_then(|c| c.stance),
            confidence: record.and_then(|c| c.confidence),
            assumptions: record.map(|c| c.assumptions.clone()).unwrap_or_default(),
            risks: record.map(|c| c.risks.clone()).unwrap_or_default(),
            actions: record.map(|c| c.actions.clone()).unwrap_or_default(),
            falsifiers: record.map(|c| c.falsifiers.clone()).unwrap_or_default(),
            diagnostic: record.and_then(|c| c.diagnostic.clone()),
            usage: record.and_then(|c| c.usage),
            duration_ms: record.and_then(|c| c.duration_ms),
        }
    }
}
