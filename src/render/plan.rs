//! Plain and table text of a plan (a preview, or the body of a plan record).

use super::text::{Out, Table};
use super::Render;
use crate::core::records::Plan;

impl Render for Plan {
    fn plain(&self) -> String {
        let mut out = Out::new();
        if self.assessment.is_empty() {
            out.line("plan preview (not recorded)");
        } else {
            out.line(&format!("plan for assessment {}", self.assessment));
        }
        plan_body(&mut out, 0, self, false);
        out.finish()
    }

    fn table(&self) -> String {
        let mut selected = Table::new(&["selected", "adapter", "covers", "why"]);
        for s in &self.selected {
            selected.row(&[
                s.advisor.clone(),
                s.adapter.clone(),
                s.covers.join(","),
                s.why.clone(),
            ]);
        }
        let mut left_out = Table::new(&["left_out", "reason"]);
        for l in &self.left_out {
            left_out.row(&[l.advisor.as_str(), l.reason.as_str()]);
        }
        let mut head = format!(
            "mode {}, budget {}, capabilities {}\n",
            self.mode.as_str(),
            self.budget,
            self.capabilities.join(", ")
        );
        if let Some(reuse) = &self.reuse {
            head.push_str(&format!("reuses conclusion {reuse}\n"));
        }
        if let Some(text) = uncovered_text(self) {
            head.push_str(&format!("{text}\n"));
        }
        let review: String = self
            .local_review
            .iter()
            .enumerate()
            .map(|(i, step)| format!("local review {}: {step}\n", i + 1))
            .collect();
        let selected = if self.selected.is_empty() {
            "selected: nobody\n".to_string()
        } else {
            selected.render()
        };
        let left_out = if self.left_out.is_empty() {
            "left out: nobody\n".to_string()
        } else {
            left_out.render()
        };
        let review = if review.is_empty() {
            review
        } else {
            format!("\n{review}")
        };
        format!("{head}\n{selected}\n{left_out}{review}")
    }
}

/// The sentence saying which requested capabilities no available advisor offers (`None`
/// when every one is offered).
pub(super) fn uncovered_text(plan: &Plan) -> Option<String> {
    if plan.uncovered_capabilities.is_empty() {
        return None;
    }
    Some(format!(
        "uncovered: no available advisor offers {}; make an advisor that offers it          available (`advisor-consult advisors` says why each is not) or review that part          locally",
        plan.uncovered_capabilities.join(", ")
    ))
}

/// The question and prompt a job recorded with the plan, one line each (empty when none).
pub(super) fn asked_lines(plan: &Plan) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(question) = &plan.question {
        lines.push(format!("question: {question}"));
    }
    if let Some(prior) = &plan.prior_opinion {
        lines.push(format!("prior opinion: {prior}"));
    }
    if let (Some(bytes), Some(sha256)) = (plan.prompt_bytes, &plan.prompt_sha256) {
        lines.push(format!("prompt: {bytes} bytes, sha256 {sha256}"));
    }
    lines
}

/// The fields of a plan under `indent`; the availability snapshot only when asked (explain
/// shows it, a preview's `left out` already says why).
pub(super) fn plan_body(out: &mut Out, indent: usize, plan: &Plan, with_availability: bool) {
    let pad = " ".repeat(indent);
    out.para(
        indent,
        2,
        &format!(
            "mode {}, budget {}, capabilities {}",
            plan.mode.as_str(),
            plan.budget,
            plan.capabilities.join(", ")
        ),
    );
    if let Some(reuse) = &plan.reuse {
        out.para(
            indent,
            2,
            &format!("reuses conclusion {reuse}: it already answers this subject"),
        );
    }
    for line in asked_lines(plan) {
        out.para(indent, 2, &line);
    }
    if let Some(text) = uncovered_text(plan) {
        out.para(indent, 2, &text);
    }
    if plan.selected.is_empty() {
        out.line(&format!("{pad}selected: nobody"));
    } else {
        out.line(&format!("{pad}selected:"));
        for (i, s) in plan.selected.iter().enumerate() {
            out.para(
                indent + 2,
                3,
                &format!(
                    "{}. {} via {} (covers {}): {}",
                    i + 1,
                    s.advisor,
                    s.adapter,
                    s.covers.join(", "),
                    s.why
                ),
            );
        }
    }
    let left_out: Vec<String> = plan
        .left_out
        .iter()
        .map(|l| format!("{}: {}", l.advisor, l.reason))
        .collect();
    out.list(indent, "left out", &left_out);
    if with_availability {
        let availability: Vec<String> = plan
            .availability
            .iter()
            .map(|a| {
                let mut line = format!("{}: {}", a.advisor, a.status.as_str());
                if a.recovering {
                    line.push_str(", recovering");
                }
                if let Some(until) = &a.until {
                    line.push_str(&format!(" until {until}"));
                }
                format!("{line} ({})", a.reason)
            })
            .collect();
        out.list(indent, "availability", &availability);
    }
    if !plan.local_review.is_empty() {
        out.line(&format!(
            "{pad}local review (nobody selected for this doubt, which is material or above):"
        ));
        for (i, step) in plan.local_review.iter().enumerate() {
            out.para(indent + 2, 3, &format!("{}. {step}", i + 1));
        }
    }
}
