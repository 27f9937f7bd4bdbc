//! Plain and table text of `status`.

use super::text::{Out, Table};
use super::Render;
use crate::core::chain::ChainState;
use crate::core::cost::{Cost, Money};
use crate::core::records::ConsultationStatus;
use crate::core::views::status::{
    AssessmentStatus, ConsultationLine, JournalState, StatusView, TaskSpend, TokenTotals,
};
use crate::core::views::ValidationState;

impl Render for StatusView {
    fn plain(&self) -> String {
        // About two lines of timeline per record, and as much again for the assessments.
        let mut out = Out::with_capacity(self.records * 240);
        let Some(task) = &self.task else {
            out.line("no records in this task yet: record an assessment with `record --file`");
            if let Some(journal) = &self.journal {
                journal_plain(&mut out, journal);
            }
            return out.finish();
        };
        out.line(&format!(
            "task {task}: {} assessment{}, {} record{}",
            self.assessments.len(),
            plural(self.assessments.len()),
            self.records,
            plural(self.records),
        ));
        if let Some(journal) = &self.journal {
            journal_plain(&mut out, journal);
        }
        if let Some(chain) = &self.chain {
            chain_plain(&mut out, chain);
        }
        trust_plain(&mut out, self.foreign.as_deref(), self.unattested);
        for assessment in &self.assessments {
            out.blank();
            assessment_plain(&mut out, assessment);
        }
        if !self.track_records.is_empty() {
            out.blank();
            super::track::section(
                &mut out,
                "track records in this task",
                self.track_records.iter().map(|(a, t)| (a.as_str(), t)),
                false,
            );
        }
        out.blank();
        out.line("timeline");
        for entry in &self.timeline {
            out.line_fmt(format_args!(
                "  #{:<4} {}  {:<12}  {}",
                entry.sequence,
                entry.created_at,
                entry.kind.as_str(),
                entry.id
            ));
            if entry.unverified {
                out.para_fmt(8, 0, format_args!("UNVERIFIED: {}", entry.summary));
            } else {
                out.para(8, 0, &entry.summary);
            }
        }
        out.blank();
        tokens_plain(&mut out, &self.tokens);
        if let Some(spend) = self.spend.as_ref().filter(|s| s.total.consultations > 0) {
            spend_plain(&mut out, spend);
        }
        out.finish()
    }

    fn table(&self) -> String {
        let mut assessments = Table::new(&["id", "state", "materiality", "subject"]);
        for a in &self.assessments {
            let state = if a.rests_on_superseded.is_empty() {
                a.state.as_str().to_string()
            } else {
                format!("{} (rests on superseded)", a.state.as_str())
            };
            assessments.row(&[
                a.id.as_str(),
                state.as_str(),
                a.materiality.as_str(),
                &a.subject,
            ]);
        }
        let mut timeline = Table::new(&["seq", "created_at", "kind", "id", "summary"]);
        for e in &self.timeline {
            timeline.row(&[
                e.sequence.to_string(),
                e.created_at.clone(),
                e.kind.to_string(),
                e.id.clone(),
                e.summary.clone(),
            ]);
        }
        let mut tokens = Table::new(&["advisor", "consultations", "input", "output", "cost"]);
        let cost_of = |advisor: &str| {
            let spend = self.spend.as_ref()?;
            if advisor == "total" {
                return Some(spend.total.display());
            }
            spend.advisors.get(advisor).map(|s| s.display())
        };
        let total = ("total".to_string(), &self.tokens.total);
        for (advisor, t) in self
            .tokens
            .advisors
            .iter()
            .map(|(a, t)| (a.clone(), t))
            .chain([total])
        {
            let cost = cost_of(&advisor).unwrap_or_else(|| "unknown".to_string());
            tokens.row(&[
                advisor,
                t.consultations.to_string(),
                t.input_tokens.to_string(),
                t.output_tokens.to_string(),
                cost,
            ]);
        }
        let mut tables = vec![assessments.render(), timeline.render(), tokens.render()];
        if !self.track_records.is_empty() {
            let mut track = Table::new(&["advisor", "track record in this task"]);
            for (advisor, t) in &self.track_records {
                track.row(&[advisor.clone(), super::track::cell(t)]);
            }
            tables.push(format!("{}{}\n", track.render(), super::track::note()));
        }
        tables.join("\n")
    }
}

fn assessment_plain(out: &mut Out, a: &AssessmentStatus) {
    out.line(&format!(
        "{} assessment {} (#{})",
        a.state.as_str(),
        a.id,
        a.sequence
    ));
    out.para(
        2,
        2,
        &format!(
            "[{}, confidence {}] {}",
            a.materiality.as_str(),
            a.confidence.as_str(),
            a.subject
        ),
    );
    if let Some(by) = &a.superseded_by {
        out.line(&format!("  superseded by conclusion {by}"));
    }
    for old in &a.rests_on_superseded {
        out.para(
            2,
            4,
            &format!("RESTS ON SUPERSEDED conclusion {old}: reaffirm or revisit"),
        );
    }
    for plan in &a.plans {
        let who = match (&plan.reuse, plan.selected.is_empty(), plan.local_review) {
            (Some(reuse), _, _) => format!("reuses conclusion {reuse}"),
            (None, true, true) => "nobody selected: local review".to_string(),
            (None, true, false) => "nobody selected".to_string(),
            (None, false, _) => plan.selected.join(", "),
        };
        out.para(
            2,
            4,
            &format!(
                "plan {} (#{}): {}, budget {}: {who}",
                plan.id,
                plan.sequence,
                plan.mode.as_str(),
                plan.budget
            ),
        );
    }
    let mut line = String::new();
    for c in &a.consultations {
        consultation_line(&mut line, c);
        out.para(4, 4, &line);
    }
    for d in &a.disagreements {
        let verdict = match d.resolutions.last() {
            Some(r) => format!("resolved (#{}), favours {}", r.sequence, r.favours),
            None => "not resolved".to_string(),
        };
        out.para(
            2,
            4,
            &format!(
                "disagreement {} (#{}), {}: {verdict}",
                d.id,
                d.sequence,
                d.positions.join(" vs ")
            ),
        );
        out.field(4, "question", &d.discriminating_question);
    }
    for c in &a.conclusions {
        out.para(
            2,
            4,
            &format!("conclusion {} (#{}): {}", c.id, c.sequence, c.decision),
        );
        let reviewers = if c.unverified {
            "UNVERIFIED (after a break in the record chain): reviews nothing".to_string()
        } else if c.reviewed_by.is_empty() {
            "decided locally".to_string()
        } else {
            // Who answered, and how many independent reviews (distinct sources) that is.
            format!(
                "reviewed by {} ({} independent)",
                c.reviewed_by.join(", "),
                c.independent_review_count
            )
        };
        let validation = match c.validation {
            ValidationState::NotValidated => "not validated yet".to_string(),
            state => format!(
                "newest of {} validation{} {}",
                c.validations,
                plural(c.validations),
                state.as_str()
            ),
        };
        out.para(4, 2, &format!("{reviewers}; {validation}"));
        if let Some(old) = &c.supersedes {
            out.line(&format!("    supersedes {old}"));
        }
        if let Some(by) = &c.superseded_by {
            out.line(&format!("    superseded by {by}"));
        }
        for old in &c.rests_on_superseded {
            out.para(
                4,
                4,
                &format!("RESTS ON SUPERSEDED conclusion {old}: reaffirm or supersede"),
            );
        }
    }
    for attempt in &a.attempts {
        out.para(
            2,
            4,
            &format!(
                "attempt {} (#{}): {}",
                attempt.id, attempt.sequence, attempt.tried
            ),
        );
    }
}

/// The hash chain in a few lines: where it starts, whether it holds, and its head (the
/// hash a team keeps to notice a rewritten chain).
pub(super) fn chain_plain(out: &mut Out, chain: &ChainState) {
    let verdict = match (chain.broken_at, chain.chained_from) {
        (Some(at), _) => format!(
            "chain: BROKEN at #{at}: {} record{} unverified; `advisor-consult verify` says why",
            chain.unverified,
            plural(chain.unverified)
        ),
        (None, Some(1)) => "chain: intact".to_string(),
        (None, Some(from)) => {
            format!("chain: intact from #{from} (records before it predate the chain)")
        }
        (None, None) => "chain: not started (the records predate it)".to_string(),
    };
    out.para(0, 2, &verdict);
    if let Some(head) = &chain.head {
        out.line(&format!("  head #{}", head.sequence));
        out.line(&format!("  {}", head.hash));
    }
    for stray in &chain.strays {
        out.line(&format!(
            "  stray file {stray}: not a record file, never read; move it out"
        ));
    }
}

/// The line of a task shared through a journal: its name, and, when the bus is not
/// reachable, how far behind this machine's replica (what the view shows) may be.
pub(super) fn journal_plain(out: &mut Out, journal: &JournalState) {
    let name = &journal.name;
    let at = match (&journal.current_at, journal.current_s_ago) {
        (Some(at), Some(ago)) => format!(
            "last known current at {at} ({ago} s ago, stream sequence {})",
            journal.stream_sequence
        ),
        _ => "not yet current with the journal".to_string(),
    };
    let line = if !journal.reachable {
        format!(
            "journal: shared through `{name}`, whose bus is UNREACHABLE: this view is this \
             machine's replica, {at}, and may be behind; writes to the task are refused until \
             the bus is back"
        )
    } else if journal.current_s_ago == Some(0) {
        format!(
            "journal: shared through `{name}` (bus reachable; replica current at stream \
             sequence {})",
            journal.stream_sequence
        )
    } else {
        format!("journal: shared through `{name}` (bus reachable; replica catching up, {at})")
    };
    out.para(0, 2, &line);
}

/// Whether this machine vouches for the task (`FOREIGN` and why) and how many of its
/// consultations are unattested; nothing for a local task whose consultations all are.
pub(super) fn trust_plain(out: &mut Out, foreign: Option<&str>, unattested: usize) {
    if let Some(why) = foreign {
        out.para(0, 2, &format!("trust: FOREIGN: {why}"));
    }
    if unattested > 0 {
        out.para(
            0,
            2,
            &format!(
                "attestation: {unattested} consultation{} UNATTESTED (written by no daemon this \
                 machine vouches for: not its own, nor a pinned runtime's): shown, never counted \
                 as a review; `advisor-consult verify` says why and how to pin",
                plural(unattested)
            ),
        );
    }
}

/// One consultation's line, written into `line` (cleared first): a task has thousands.
fn consultation_line(line: &mut String, c: &ConsultationLine) {
    use std::fmt::Write as _;
    line.clear();
    let mark = match (c.unverified, c.unattested) {
        (true, _) => "UNVERIFIED ",
        (false, true) => "UNATTESTED ",
        (false, false) => "",
    };
    // Writing to a `String` never fails.
    let _ = write!(line, "{mark}{} (#{}) ", c.advisor, c.sequence);
    match c.status {
        ConsultationStatus::Completed => {
            line.push_str("completed");
            if let Some(stance) = c.stance {
                line.push_str(", ");
                line.push_str(stance.as_str());
            }
        }
        ConsultationStatus::Failed => {
            line.push_str("failed");
            if let Some(failure) = c.failure {
                line.push_str(": ");
                line.push_str(failure.as_str());
            }
        }
    }
    if let Some(ms) = c.duration_ms {
        if ms < 1000 {
            let _ = write!(line, ", {ms} ms");
        } else {
            let _ = write!(line, ", {:.1} s", ms as f64 / 1000.0);
        }
    }
    if let Some(u) = c.usage {
        let _ = write!(
            line,
            ", {} in / {} out tokens",
            u.input_tokens, u.output_tokens
        );
    }
    match &c.cost {
        // As `Cost::display` says it, without a string of its own.
        Some(Cost::Metered { amount, currency }) => {
            let _ = write!(line, ", cost {} {currency}", Money(*amount));
        }
        Some(Cost::FlatRate) => line.push_str(", cost flat rate"),
        Some(Cost::Unknown { reason }) => {
            let _ = write!(line, ", cost unknown ({reason})");
        }
        None => {}
    }
    if let Some(d) = &c.diagnostic {
        let _ = write!(line, " ({d})");
    }
}

fn spend_plain(out: &mut Out, spend: &TaskSpend) {
    out.line("cost");
    for (advisor, s) in &spend.advisors {
        out.line(&format!("  {advisor}: {}", s.display()));
    }
    out.line(&format!("  total: {}", spend.total.display()));
}

fn tokens_plain(out: &mut Out, tokens: &TokenTotals) {
    out.line("tokens");
    if tokens.advisors.is_empty() {
        out.line("  no advisor was consulted");
        return;
    }
    for (advisor, t) in &tokens.advisors {
        out.line(&format!(
            "  {advisor}: {} consultation{}, {} in, {} out",
            t.consultations,
            plural(t.consultations as usize),
            t.input_tokens,
            t.output_tokens
        ));
    }
    let t = &tokens.total;
    out.line(&format!(
        "  total: {} consultation{}, {} in, {} out",
        t.consultations,
        plural(t.consultations as usize),
        t.input_tokens,
        t.output_tokens
    ));
}

/// Milliseconds as a reader says them.
pub(super) fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// `s` unless there is exactly one.
pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
