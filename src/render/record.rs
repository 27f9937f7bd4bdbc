//! Plain text of a stored record: what `record` prints.

use super::plan::plan_body;
use super::status::duration;
use super::text::Out;
use super::Render;
use crate::core::records::{Body, ConsultationStatus, Record};

impl Render for Record {
    fn plain(&self) -> String {
        let mut out = Out::new();
        let e = &self.envelope;
        out.line(&format!(
            "recorded {} {} (sequence {})",
            self.kind(),
            e.id,
            e.sequence
        ));
        if !e.redacted.is_empty() {
            out.field(
                2,
                "redacted (secret shapes removed)",
                &e.redacted.join(", "),
            );
        }
        match &self.body {
            Body::Assessment(a) => {
                out.field(2, "subject", &a.subject);
                out.line(&format!(
                    "  materiality {}, confidence {}, {} evidence reference{}",
                    a.materiality.as_str(),
                    a.confidence.as_str(),
                    a.evidence.len(),
                    if a.evidence.len() == 1 { "" } else { "s" }
                ));
            }
            Body::Plan(p) => {
                out.field(2, "assessment", &p.assessment);
                plan_body(&mut out, 2, p, false);
            }
            Body::Consultation(c) => {
                out.field(2, "plan", &c.plan);
                let mut line = format!("{}: ", c.advisor);
                match c.status {
                    ConsultationStatus::Completed => line.push_str("completed"),
                    ConsultationStatus::Failed => line.push_str("failed"),
                }
                if let Some(stance) = c.stance {
                    line.push_str(&format!(", {}", stance.as_str()));
                }
                if let Some(failure) = c.failure {
                    line.push_str(&format!(", {}", failure.as_str()));
                }
                if let Some(ms) = c.duration_ms {
                    line.push_str(&format!(", {}", duration(ms)));
                }
                out.para(2, 2, &line);
                out.field(2, "conclusion", c.conclusion.as_deref().unwrap_or(""));
                out.field(2, "diagnostic", c.diagnostic.as_deref().unwrap_or(""));
            }
            Body::Disagreement(d) => {
                out.field(2, "assessment", &d.assessment);
                let sources: Vec<&str> = d.positions.iter().map(|p| p.source.as_str()).collect();
                out.field(2, "positions", &sources.join(", "));
                out.field(2, "discriminating question", &d.discriminating_question);
            }
            Body::Resolution(r) => {
                out.field(2, "disagreement", &r.disagreement);
                out.field(2, "favours", &r.favours);
                out.field(2, "observed", &r.observed);
            }
            Body::Conclusion(c) => {
                out.field(2, "assessment", &c.assessment);
                out.field(2, "decision", &c.decision);
                let review = if c.reviewed_by.is_empty() {
                    "nobody (decided locally)".to_string()
                } else {
                    format!(
                        "{} independent ({})",
                        c.independent_review_count,
                        c.reviewed_by.join(", ")
                    )
                };
                out.field(2, "reviewed by", &review);
                out.field(2, "supersedes", c.supersedes.as_deref().unwrap_or(""));
            }
            Body::Validation(v) => {
                out.field(2, "conclusion", &v.conclusion);
                let verdict = if v.passed { "passed" } else { "failed" };
                out.field(2, verdict, &v.check);
            }
            Body::Attempt(a) => {
                out.field(2, "assessment", &a.assessment);
                out.field(2, "tried", &a.tried);
                out.field(2, "failure observed", &a.failure_observed);
            }
        }
        out.finish()
    }
}
