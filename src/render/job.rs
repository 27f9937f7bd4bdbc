//! A consultation job as the job verbs print it: the report of a job followed to its end
//! (the plan and each outcome), one job (`cancel`, a timed-out `wait`), and the job list.

use super::outcomes::Outcomes;
use super::text::{Out, Table};
use super::Render;
use crate::core::records::{Body, ConsultationStatus, FailureKind, Record, EXECUTOR};
use crate::protocol::{Event, ExchangeStatus, Job, JobList, JobState};
use serde::Serialize;

/// `ms` as a person reads it: `850 ms`, `1.5 s`.
pub fn duration_text(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// An outcome in a few words: `completed, supports, 1.5 s` or `failed: timeout, 90.0 s`.
pub fn outcome_text(
    status: ConsultationStatus,
    stance: Option<&str>,
    failure: Option<FailureKind>,
    duration_ms: Option<u64>,
) -> String {
    let mut text = match status {
        ConsultationStatus::Completed => "completed".to_string(),
        ConsultationStatus::Failed => {
            format!("failed: {}", failure.map_or("error", FailureKind::as_str))
        }
    };
    if let Some(stance) = stance {
        text.push_str(&format!(", {stance}"));
    }
    if let Some(ms) = duration_ms {
        text.push_str(&format!(", {}", duration_text(ms)));
    }
    text
}

/// The records a job's stream carried, gathered while following it, for its report.
#[derive(Debug, Default)]
pub struct Seen {
    plan: Option<Record>,
    consultations: Vec<Record>,
    disagreement: Option<Record>,
}

impl Seen {
    /// Keep what `event` carries; the final job once it is `done`.
    pub fn absorb(&mut self, event: Event) -> Option<Job> {
        match event {
            Event::Plan { record, .. } => self.plan = Some(*record),
            Event::Recorded { record, .. } => self.consultations.push(*record),
            Event::Disagreement { record, .. } => self.disagreement = Some(*record),
            Event::Started { .. } | Event::Finished { .. } => {}
            Event::Done { result, .. } => return Some(*result),
        }
        None
    }

    /// The report of `job` with the records seen.
    pub fn report(self, job: Job) -> JobReport {
        JobReport {
            job,
            plan: self.plan,
            consultations: self.consultations,
            disagreement: self.disagreement,
        }
    }
}

/// A job with the records its stream carried: the typed shape is the job with its
/// outcomes written out ([`Outcomes`]); the plain text shows the plan and each outcome.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// The job.
    pub job: Job,
    /// The plan record, when the stream carried it.
    pub plan: Option<Record>,
    /// The consultation records, in plan order.
    pub consultations: Vec<Record>,
    /// The disagreement record, when one was recorded.
    pub disagreement: Option<Record>,
}

impl Serialize for JobReport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.outcomes().serialize(serializer)
    }
}

impl JobReport {
    /// The job with every outcome seen written out: its typed shape.
    pub fn outcomes(&self) -> Outcomes {
        let records = self
            .plan
            .iter()
            .chain(&self.consultations)
            .chain(&self.disagreement);
        Outcomes::new(&self.job, records)
    }

    /// The exit status: 1 when the plan selected someone and no consultation completed,
    /// or the job did not end `done`; 0 otherwise.
    pub fn exit_code(&self) -> i32 {
        if self.job.state == JobState::Done && !self.job.none_completed() {
            0
        } else {
            1
        }
    }

    fn consultation(&self, id: Option<&str>) -> Option<&crate::core::records::Consultation> {
        let id = id?;
        self.consultations
            .iter()
            .find(|r| r.id() == id)
            .and_then(|r| match &r.body {
                Body::Consultation(c) => Some(c),
                _ => None,
            })
    }

    /// The advisor behind a position's source (`executor` or a consultation id).
    fn source_name(&self, source: &str) -> String {
        if source == EXECUTOR {
            return "the executor (you)".to_string();
        }
        match self
            .job
            .consultations
            .iter()
            .find(|c| c.record.as_deref() == Some(source))
        {
            Some(c) => c.advisor.clone(),
            None => source.to_string(),
        }
    }

    fn head(&self) -> String {
        let job = &self.job;
        let total = job.consultations.len();
        let completed = job
            .consultations
            .iter()
            .filter(|c| c.status == ExchangeStatus::Completed)
            .count();
        let mut head = format!("job {} {}", job.id, job.state.as_str());
        if total > 0 {
            head.push_str(&format!(": {completed} of {total} advisors completed"));
        }
        if let Some(reason) = &job.reason {
            head.push_str(&format!(" ({reason})"));
        }
        head
    }

    /// The disagreement part of the plain text: its positions and question.
    fn write_disagreement(&self, out: &mut Out) {
        let disagreement = self.disagreement.as_ref().and_then(|r| match &r.body {
            Body::Disagreement(d) => Some((r.id(), d)),
            _ => None,
        });
        match (disagreement, &self.job.disagreement) {
            (Some((id, d)), _) => {
                out.para(
                    0,
                    2,
                    &format!(
                        "disagreement {id}: settle it with an experiment (a resolution with \
                         evidence) before you conclude"
                    ),
                );
                for p in &d.positions {
                    out.para(
                        2,
                        2,
                        &format!("{}: {}", self.source_name(&p.source), p.position),
                    );
                }
                out.field(2, "question", &d.discriminating_question);
                let advisors: Vec<String> = d
                    .positions
                    .iter()
                    .map(|p| match p.source.as_str() {
                        EXECUTOR => EXECUTOR.to_string(),
                        source => self.source_name(source),
                    })
                    .collect();
                let advisors: Vec<&str> = advisors.iter().map(String::as_str).collect();
                let template = super::outcomes::resolution_template(id, &advisors);
                out.para(
                    2,
                    2,
                    &format!(
                        "to settle it: run the experiment, fill this in, save it as \
                         resolution.json and run `{}`:",
                        super::outcomes::RECORD_RESOLUTION
                    ),
                );
                // Whole lines, never cut: the template is meant to be copied.
                let text = serde_json::to_string_pretty(&template).unwrap_or_default();
                for line in text.lines() {
                    out.verbatim(&format!("  {line}"));
                }
            }
            (None, Some(id)) => out.line(&format!(
                "disagreement {id}: settle it with an experiment before you conclude"
            )),
            (None, None) => {}
        }
    }

    /// The disagreement part of the plain text alone (empty when none).
    pub fn disagreement_text(&self) -> String {
        let mut out = Out::new();
        self.write_disagreement(&mut out);
        out.finish()
    }
}

impl Render for JobReport {
    fn plain(&self) -> String {
        let mut out = Out::new();
        let job = &self.job;
        out.para(0, 2, &self.head());
        let plan = self.plan.as_ref().and_then(|r| match &r.body {
            Body::Plan(p) => Some((r.id(), p)),
            _ => None,
        });
        match (plan, &job.plan) {
            (Some((id, plan)), _) => {
                out.line(&format!(
                    "plan {id}: mode {}, budget {}",
                    plan.mode.as_str(),
                    plan.budget
                ));
                if let Some(reuse) = &plan.reuse {
                    out.para(
                        2,
                        2,
                        &format!("reuses conclusion {reuse}: it already answers this subject"),
                    );
                }
                if let Some(text) = super::plan::uncovered_text(plan) {
                    out.para(2, 2, &text);
                }
                if plan.selected.is_empty() {
                    out.line("  nobody selected: decide locally");
                    for (i, step) in plan.local_review.iter().enumerate() {
                        out.para(2, 3, &format!("{}. {step}", i + 1));
                    }
                }
                for left in &plan.left_out {
                    out.para(2, 2, &format!("left out {}: {}", left.advisor, left.reason));
                }
            }
            (None, Some(id)) => out.line(&format!("plan {id}")),
            (None, None) => {}
        }
        for (i, c) in job.consultations.iter().enumerate() {
            let record = self.consultation(c.record.as_deref());
            let outcome = match (record, c.status) {
                (Some(r), _) => outcome_text(
                    r.status,
                    r.stance.map(|s| s.as_str()),
                    r.failure,
                    r.duration_ms,
                ),
                (None, ExchangeStatus::Completed) => "completed".to_string(),
                (None, ExchangeStatus::Failed) => {
                    outcome_text(ConsultationStatus::Failed, None, c.failure, None)
                }
                (None, ExchangeStatus::Pending) => "not asked".to_string(),
                (None, ExchangeStatus::Running) => "not recorded".to_string(),
            };
            let outcome = match &c.cost {
                Some(cost) => format!("{outcome}, cost {}", cost.display()),
                None => outcome,
            };
            out.para(2, 3, &format!("{}. {}: {outcome}", i + 1, c.advisor));
            if let Some(r) = record {
                out.field(5, "conclusion", r.conclusion.as_deref().unwrap_or(""));
                out.field(5, "diagnostic", r.diagnostic.as_deref().unwrap_or(""));
            }
            if let Some(id) = &c.record {
                out.line(&format!("     consultation {id}"));
            }
        }
        self.write_disagreement(&mut out);
        out.finish()
    }

    fn table(&self) -> String {
        let mut table = Table::new(&["advisor", "status", "stance", "duration", "record"]);
        for c in &self.job.consultations {
            let record = self.consultation(c.record.as_deref());
            let status = match (record, c.failure) {
                (_, Some(kind)) => format!("failed: {}", kind.as_str()),
                _ => serde_json::to_value(c.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            };
            table.row(&[
                c.advisor.clone(),
                status,
                record
                    .and_then(|r| r.stance)
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_default(),
                record
                    .and_then(|r| r.duration_ms)
                    .map(duration_text)
                    .unwrap_or_default(),
                c.record.as_deref().unwrap_or_default().to_string(),
            ]);
        }
        let mut text = format!("{}\n", self.head());
        if !self.job.consultations.is_empty() {
            text.push('\n');
            text.push_str(&table.render());
        }
        if let Some(id) = &self.job.disagreement {
            text.push_str(&format!(
                "\ndisagreement {id}: settle it before you conclude\n"
            ));
        }
        text
    }
}

/// One job, as `cancel` and a timed-out `wait` print it.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct JobView(pub Job);

impl Render for JobView {
    fn plain(&self) -> String {
        let job = &self.0;
        let mut out = Out::new();
        let mut line = format!("job {} {}", job.id, job.state.as_str());
        if !job.state.is_finished() {
            line.push_str(" (still stopping: its exchanges are being stopped)");
        }
        if let Some(reason) = &job.reason {
            line.push_str(&format!(": {reason}"));
        }
        out.para(0, 2, &line);
        out.finish()
    }
}

/// The jobs of this root, as `jobs` prints them.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct JobListView(pub JobList);

fn answered(job: &Job) -> String {
    let completed = job
        .consultations
        .iter()
        .filter(|c| c.status == ExchangeStatus::Completed)
        .count();
    format!("{completed}/{}", job.consultations.len())
}

impl Render for JobListView {
    fn plain(&self) -> String {
        let mut out = Out::new();
        if self.0.jobs.is_empty() {
            out.line("no jobs for this root: `advisor-consult --assessment ID` queues one");
            return out.finish();
        }
        for job in &self.0.jobs {
            out.line(&format!(
                "{}  {:<9}  task {}  {} completed",
                job.id,
                job.state.as_str(),
                job.task,
                answered(job)
            ));
            out.line(&format!(
                "  assessment {}, queued {}",
                job.assessment, job.created_at
            ));
        }
        out.finish()
    }

    fn table(&self) -> String {
        let mut table = Table::new(&["id", "state", "task", "completed", "created_at"]);
        for job in &self.0.jobs {
            table.row(&[
                job.id.to_string(),
                job.state.as_str().to_string(),
                job.task.clone(),
                answered(job),
                job.created_at.to_string(),
            ]);
        }
        table.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{JobConsultation, Timestamp};

    fn job(state: JobState, statuses: &[ExchangeStatus]) -> Job {
        Job {
            id: "J".into(),
            state,
            root: "/r".into(),
            task: "t".into(),
            assessment: "A".into(),
            plan: Some("P".into()),
            consultations: statuses
                .iter()
                .enumerate()
                .map(|(i, s)| JobConsultation {
                    advisor: format!("a{i}"),
                    record: None,
                    status: *s,
                    failure: None,
                    cost: None,
                })
                .collect(),
            disagreement: None,
            created_at: Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
            finished_at: None,
            reason: None,
            timeout_s: None,
        }
    }

    fn check(state: JobState, statuses: &[ExchangeStatus], expected: i32) {
        let report = Seen::default().report(job(state, statuses));
        assert_eq!(report.exit_code(), expected, "{state:?} {statuses:?}");
    }

    #[test]
    fn exit_status_of_a_job() {
        use ExchangeStatus::*;
        check(JobState::Done, &[], 0);
        check(JobState::Done, &[Completed], 0);
        check(JobState::Done, &[Failed, Completed], 0);
        check(JobState::Done, &[Failed], 1);
        check(JobState::Done, &[Failed, Failed], 1);
        check(JobState::Failed, &[], 1);
        check(JobState::Cancelled, &[Completed, Pending], 1);
    }

    #[test]
    fn the_report_json_is_the_job_with_its_outcomes() {
        let report = Seen::default().report(job(JobState::Done, &[ExchangeStatus::Completed]));
        let value = serde_json::to_value(&report).unwrap();
        let job = serde_json::to_value(&report.job).unwrap();
        // Every field of the job's fixed shape is there, unchanged but for the
        // consultation entries, which gain their outcome.
        for (key, field) in job.as_object().unwrap() {
            if key != "consultations" {
                assert_eq!(&value[key], field, "{key}");
            }
        }
        for (i, entry) in job["consultations"].as_array().unwrap().iter().enumerate() {
            for (key, field) in entry.as_object().unwrap() {
                assert_eq!(&value["consultations"][i][key], field, "{key}");
            }
        }
        assert_eq!(value["disagreement_detail"], serde_json::Value::Null);
        assert_eq!(report.outcomes().job(), report.job);
    }
}
