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
            Body::Invariant(i) => {
                out.field(2, i.action.as_str(), &i.name);
                out.field(2, "description", i.description.as_deref().unwrap_or(""));
            }
        }
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::core::chain::Trust;
    use crate::core::views::testing::Task;
    use crate::core::views::{explain::explain, status::status, tree::tree};
    use crate::render::{render, Format, Render, WIDTH};

    fn fits(text: &str) {
        for line in text.lines() {
            assert!(
                line.chars().count() <= WIDTH,
                "over {WIDTH} columns: {line:?}"
            );
        }
    }

    #[test]
    fn every_kind_prints_what_was_recorded() {
        let mut t = Task::new();
        let a = t.assessment(&"a long subject ".repeat(10));
        let p = t.plan(&a, &["x"]);
        let c = t.completed(&p, "x", "opposes");
        t.failed(&p, "y", "timeout");
        let d = t.disagreement(&a, &c);
        t.resolution(&d);
        let k = t.conclusion(&a, &[&c], None);
        t.validation(&k, false);
        t.add(
            "attempt",
            serde_json::json!({"assessment": a, "tried": "t", "failure_observed": "f"}),
        );
        for record in &t.records {
            let text = record.plain();
            let first = text.lines().next().unwrap();
            assert_eq!(
                first,
                format!(
                    "recorded {} {} (sequence {})",
                    record.kind(),
                    record.id(),
                    record.envelope.sequence
                )
            );
            assert!(text.lines().count() > 1, "key fields follow: {text}");
            fits(&text);
            let json: serde_json::Value =
                serde_json::from_str(&render(record, Format::Json)).unwrap();
            assert_eq!(json["id"], record.id(), "json is the stored record");
        }
    }

    #[test]
    fn empty_tasks_say_so() {
        let plain = status(&[], &Trust::default()).plain();
        assert!(plain.starts_with("no records in this task yet"), "{plain}");
        let plain = tree(&[], None, false, &Trust::default()).plain();
        assert!(plain.starts_with("no records in this task yet"), "{plain}");
    }

    #[test]
    fn long_text_stays_within_80_columns() {
        let mut t = Task::new();
        let a = t.assessment(&"word ".repeat(100));
        let p = t.plan(
            &a,
            &["an-advisor-with-a-rather-long-identifier-for-testing-widths"],
        );
        t.completed(
            &p,
            "an-advisor-with-a-rather-long-identifier-for-testing-widths",
            "supports",
        );
        fits(&status(&t.records, &Trust::default()).plain());
        fits(&tree(&t.records, None, true, &Trust::default()).plain());
        fits(&explain(&t.records, &p, &Trust::default()).unwrap().plain());
    }
}
