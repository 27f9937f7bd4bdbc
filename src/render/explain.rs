//! Plain text of `explain`: the chain from the assessment down, the record asked for
//! marked `<- asked`.

use super::plan::plan_body;
use super::status::duration;
use super::text::Out;
use super::Render;
use crate::core::records::{Body, Consultation, Evidence, Kind};
use crate::core::views::explain::{ExplainView, Item};
use crate::core::views::Link;
use std::collections::HashMap;

/// The marker on the record asked for.
const ASKED: &str = "  <- asked";

impl Render for ExplainView {
    fn plain(&self) -> String {
        let mut out = Out::new();
        out.line(&format!(
            "explain {} {} (#{}) in task {}",
            self.asked.kind, self.asked.id, self.asked.sequence, self.task
        ));
        let path: Vec<String> = self
            .path
            .iter()
            .map(|l| format!("{} #{}", l.kind, l.sequence))
            .collect();
        out.para(0, 2, &format!("path: {}", path.join(" > ")));
        if let Some(missing) = &self.missing {
            out.para(
                0,
                2,
                &format!("the chain breaks: `{missing}` is not a record of this task"),
            );
        }
        // Position sources and `favours` name consultations: show their advisors.
        let advisors: HashMap<&str, &str> = self
            .plans
            .iter()
            .flat_map(|p| &p.consultations)
            .map(|c| (c.id.as_str(), c.fields.advisor.as_str()))
            .collect();
        let source = |s: &str| match advisors.get(s) {
            Some(advisor) => format!("{advisor} ({s})"),
            None => s.to_string(),
        };
        if let Some(a) = &self.assessment {
            out.blank();
            header(&mut out, 0, Kind::Assessment, a);
            let f = &a.fields;
            out.field(2, "subject", &f.subject);
            out.line(&format!(
                "  materiality {}, confidence {}{}",
                f.materiality.as_str(),
                f.confidence.as_str(),
                if f.new_evidence { ", new evidence" } else { "" }
            ));
            out.field(2, "hypothesis", &f.hypothesis);
            out.list(2, "facts", &f.facts);
            out.list(2, "assumptions", &f.assumptions);
            out.list(2, "questions", &f.questions);
            evidence(&mut out, 2, &f.evidence);
            out.field(2, "capabilities", &f.capabilities.join(", "));
        }
        for chain in &self.plans {
            out.blank();
            header(&mut out, 0, Kind::Plan, &chain.plan);
            plan_body(&mut out, 2, &chain.plan.fields, true);
            for (i, c) in chain.consultations.iter().enumerate() {
                header(&mut out, 2, Kind::Consultation, c);
                consultation_body(&mut out, 4, &c.fields);
                if let Some(cost) = chain.costs.get(i) {
                    out.line(&format!("    cost: {}", cost.display()));
                }
            }
        }
        for chain in &self.disagreements {
            out.blank();
            header(&mut out, 0, Kind::Disagreement, &chain.disagreement);
            let f = &chain.disagreement.fields;
            out.line("  positions:");
            for p in &f.positions {
                out.para(4, 2, &format!("- {}: {}", source(&p.source), p.position));
            }
            out.list(2, "divergent assumptions", &f.divergent_assumptions);
            out.field(2, "discriminating question", &f.discriminating_question);
            for r in &chain.resolutions {
                header(&mut out, 2, Kind::Resolution, r);
                let f = &r.fields;
                out.field(4, "favours", &source(&f.favours));
                out.field(4, "experiment", &f.experiment);
                out.field(4, "observed", &f.observed);
                evidence(&mut out, 4, &f.evidence);
            }
        }
        for chain in &self.conclusions {
            out.blank();
            header(&mut out, 0, Kind::Conclusion, &chain.conclusion);
            let f = &chain.conclusion.fields;
            out.field(2, "decision", &f.decision);
            out.field(2, "rationale", &f.rationale);
            evidence(&mut out, 2, &f.evidence);
            let weighed: Vec<String> = f.consultations.iter().map(|c| source(c)).collect();
            out.list(2, "consultations weighed", &weighed);
            let review = if f.reviewed_by.is_empty() {
                "nobody (decided locally)".to_string()
            } else {
                format!(
                    "{} independent ({})",
                    f.independent_review_count,
                    f.reviewed_by.join(", ")
                )
            };
            out.field(2, "reviewed by", &review);
            out.list(2, "rejected alternatives", &f.rejected_alternatives);
            out.list(2, "risks", &f.risks);
            out.field(2, "validation plan", opt(&f.validation_plan));
            if let Some(old) = &chain.replaces {
                out.field(2, "supersedes", &link(old));
            } else if let Some(old) = &f.supersedes {
                out.field(2, "supersedes", old);
            }
            if let Some(by) = &chain.superseded_by {
                out.field(2, "superseded by", &link(by));
            }
            out.field(2, "validation", chain.validation.as_str());
            for v in &chain.validations {
                header(&mut out, 2, Kind::Validation, v);
                let f = &v.fields;
                let verdict = if f.passed { "passed" } else { "failed" };
                out.field(4, verdict, &f.check);
                out.field(4, "command", opt(&f.command));
                out.field(4, "output", opt(&f.output));
            }
        }
        for attempt in &self.attempts {
            out.blank();
            header(&mut out, 0, Kind::Attempt, attempt);
            let f = &attempt.fields;
            out.field(2, "tried", &f.tried);
            out.field(2, "failure observed", &f.failure_observed);
            out.field(2, "invalidated assumption", opt(&f.invalidated_assumption));
            out.field(2, "updated hypothesis", opt(&f.updated_hypothesis));
        }
        for item in &self.detached {
            out.blank();
            header(&mut out, 0, item.fields.kind(), item);
            detached_body(&mut out, &item.fields);
        }
        if let Some(downstream) = &self.downstream {
            super::downstream::plain(&mut out, &self.asked.id, downstream, &self.if_superseded);
        }
        out.finish()
    }

    fn table(&self) -> String {
        match &self.downstream {
            Some(downstream) => {
                super::downstream::table(&self.asked, downstream, &self.if_superseded)
            }
            None => self.plain(),
        }
    }
}

fn header<T>(out: &mut Out, indent: usize, kind: Kind, item: &Item<T>) {
    out.line(&format!(
        "{}{kind} {} (#{}) {}{}",
        " ".repeat(indent),
        item.id,
        item.sequence,
        item.created_at,
        if item.asked { ASKED } else { "" }
    ));
    if item.unverified {
        out.para(
            indent + 2,
            2,
            "UNVERIFIED: after a break in the record chain; not believed (`advisor-consult \
             verify` says why)",
        );
    }
    if item.unattested && !item.unverified {
        out.para(
            indent + 2,
            2,
            "UNATTESTED: written by no daemon this machine vouches for (not its own, nor a \
             pinned runtime's); never counted as a review (`advisor-consult verify` says why)",
        );
    }
    if !item.redacted.is_empty() {
        out.field(indent + 2, "redacted", &item.redacted.join(", "));
    }
}

fn consultation_body(out: &mut Out, indent: usize, c: &Consultation) {
    let mut head = format!("{}: {}", c.advisor, status_word(c));
    if let Some(stance) = c.stance {
        head.push_str(&format!(", {}", stance.as_str()));
    }
    if let Some(failure) = c.failure {
        head.push_str(&format!(", {}", failure.as_str()));
    }
    if let Some(confidence) = c.confidence {
        head.push_str(&format!(", confidence {confidence:.2}"));
    }
    if let Some(ms) = c.duration_ms {
        head.push_str(&format!(", {}", duration(ms)));
    }
    if let Some(u) = c.usage {
        head.push_str(&format!(
            ", {} in / {} out tokens",
            u.input_tokens, u.output_tokens
        ));
    }
    out.para(indent, 2, &head);
    out.field(indent, "diagnostic", opt(&c.diagnostic));
    if let Some(s) = c.retry_after_s {
        out.field(indent, "retry after", &format!("{s} s"));
    }
    out.field(indent, "conclusion", opt(&c.conclusion));
    out.list(indent, "assumptions", &c.assumptions);
    out.list(indent, "risks", &c.risks);
    out.list(indent, "actions", &c.actions);
    out.list(indent, "falsifiers", &c.falsifiers);
}

fn detached_body(out: &mut Out, body: &Body) {
    // Only reached for a store whose references were broken by hand: show the fields as
    // they are rather than guess at the missing parts.
    let json = serde_json::to_value(body).unwrap_or_default();
    if let Some(map) = json.as_object() {
        for (key, value) in map.iter().filter(|(k, _)| k.as_str() != "kind") {
            let text = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.field(2, key, &text);
        }
    }
}

fn status_word(c: &Consultation) -> &'static str {
    match c.status {
        crate::core::records::ConsultationStatus::Completed => "completed",
        crate::core::records::ConsultationStatus::Failed => "failed",
    }
}

fn evidence(out: &mut Out, indent: usize, evidence: &[Evidence]) {
    let items: Vec<String> = evidence
        .iter()
        .map(|e| match &e.showed {
            Some(showed) => format!("{} {}: {showed}", e.kind.as_str(), e.reference),
            None => format!("{} {}", e.kind.as_str(), e.reference),
        })
        .collect();
    out.list(indent, "evidence", &items);
}

fn link(l: &Link) -> String {
    format!("{} {} (#{}): {}", l.kind, l.id, l.sequence, l.summary)
}

fn opt(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("")
}
