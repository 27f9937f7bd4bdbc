//! Plain text of `context`: one or two lines per item, every line within the width.

use super::text::Out;
use super::Render;
use crate::core::views::context::{ContextView, Section};

impl Render for ContextView {
    fn plain(&self) -> String {
        let mut out = Out::new();
        match &self.task {
            Some(task) => out.line(&format!(
                "context of task `{task}` (mode {})",
                self.mode.as_str()
            )),
            None => out.line(&format!(
                "no records in this task yet (mode {}): start with `record` or `ask`",
                self.mode.as_str()
            )),
        }
        if let Some(journal) = &self.journal {
            super::status::journal_plain(&mut out, journal);
        }
        section(
            &mut out,
            "standing conclusions",
            &self.standing,
            |out, c| {
                out.line(&format!("  {}  {}", c.conclusion, c.decision));
                let reviewed = if c.reviewed_by.is_empty() {
                    "decided locally".to_string()
                } else {
                    format!("reviewed by {}", c.reviewed_by.join(", "))
                };
                out.line(&format!(
                    "    {reviewed}; validation {}; on {}: {}",
                    c.validation, c.assessment, c.subject
                ));
            },
        );
        section(
            &mut out,
            "unresolved disagreements",
            &self.disputed,
            |out, d| {
                out.line(&format!("  {}  {}", d.assessment, d.subject));
                match (&d.disagreement, &d.discriminating_question) {
                    (Some(id), Some(question)) => out.line(&format!("    {id} asks: {question}")),
                    _ => out.line("    divergent answers, no disagreement recorded yet"),
                }
            },
        );
        section(&mut out, "open assessments", &self.open, |out, a| {
            out.line(&format!(
                "  {}  {}  {}  {}",
                a.assessment,
                a.state.as_str(),
                a.materiality.as_str(),
                a.subject
            ));
        });
        section(
            &mut out,
            "advisors cooling down",
            &self.cooling,
            |out, a| {
                let until = a
                    .until
                    .as_deref()
                    .map(|u| format!(" until {u}"))
                    .unwrap_or_default();
                out.line(&format!(
                    "  {}  {}{until}: {}",
                    a.advisor,
                    a.status.as_str(),
                    a.reason
                ));
            },
        );
        if !self.resting.is_empty() {
            section(
                &mut out,
                "resting on a superseded decision",
                &self.resting,
                |out, r| {
                    out.line(&format!("  {} {}", r.kind, r.id));
                    out.line(&format!(
                        "    rests on {}, replaced by {}",
                        r.superseded, r.superseded_by
                    ));
                },
            );
            out.para(
                2,
                2,
                "reaffirm one by citing the replacement as evidence (a conclusion on the \
                 assessment, or a record citing both), or supersede it",
            );
        }
        if !self.track.items.is_empty() {
            out.line("advisors' track records, from resolved disagreements:");
            for t in &self.track.items {
                let former = if t.in_catalogue {
                    ""
                } else {
                    " (not in the catalogue)"
                };
                let newest = t
                    .track_record
                    .recent
                    .first()
                    .map(|r| format!("; newest {}: {}", r.outcome.as_str(), r.subject))
                    .unwrap_or_default();
                out.line(&format!(
                    "  {}{former}  {}{newest}",
                    t.advisor,
                    t.track_record.summary()
                ));
            }
            if self.track.more > 0 {
                out.line(&format!(
                    "  ... and {} more (`advisor-consult advisors` lists them all)",
                    self.track.more
                ));
            }
            out.para(2, 2, super::track::note());
        }
        out.finish()
    }
}

fn section<T>(
    out: &mut Out,
    title: &str,
    section: &Section<T>,
    mut item: impl FnMut(&mut Out, &T),
) {
    if section.items.is_empty() {
        out.line(&format!("{title}: none"));
        return;
    }
    out.line(&format!("{title}:"));
    for each in &section.items {
        item(out, each);
    }
    if section.more > 0 {
        out.line(&format!(
            "  ... and {} more (`advisor-consult status` lists them all)",
            section.more
        ));
    }
}
