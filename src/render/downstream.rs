//! Text of what rests on a record (`explain --downstream`) and of the writer's dry run
//! (`record --dry-run`).

use super::text::{Out, Table};
use super::Render;
use crate::core::records::{Body, Record};
use crate::core::views::downstream::Dependent;
use crate::core::views::Link;
use serde::Serialize;
use std::collections::HashMap;

/// The plain lines of `downstream` (what rests on `id`) and `if_superseded`.
pub(super) fn plain(
    out: &mut Out,
    id: &str,
    downstream: &[Dependent],
    if_superseded: &[Dependent],
) {
    out.blank();
    if downstream.is_empty() {
        out.line(&format!("downstream of {id}: nothing rests on it"));
    } else {
        out.line(&format!(
            "downstream of {id}: {} record{} rest{} on it",
            downstream.len(),
            super::status::plural(downstream.len()),
            if downstream.len() == 1 { "s" } else { "" }
        ));
        for d in downstream {
            out.para(
                2,
                4,
                &format!(
                    "{}{} {} (#{}) cites {} by {}",
                    "  ".repeat(d.depth.saturating_sub(1).min(8) as usize),
                    d.kind,
                    d.id,
                    d.sequence,
                    d.of,
                    d.cites.as_str()
                ),
            );
        }
    }
    impact(out, id, if_superseded);
}

/// What superseding `id` would leave resting on a superseded decision.
fn impact(out: &mut Out, id: &str, if_superseded: &[Dependent]) {
    if if_superseded.is_empty() {
        return;
    }
    out.para(
        0,
        2,
        &format!(
            "superseding {id} would leave {} record{} resting on a superseded decision:",
            if_superseded.len(),
            super::status::plural(if_superseded.len())
        ),
    );
    for d in if_superseded {
        out.line(&format!("  {} {} (#{})", d.kind, d.id, d.sequence));
    }
}

/// The table of `downstream` and `if_superseded` (what each cites by its sequence, so a
/// row fits the width), `asked` the record they rest on.
pub(super) fn table(asked: &Link, downstream: &[Dependent], if_superseded: &[Dependent]) -> String {
    let sequence_of: HashMap<&str, u64> = downstream
        .iter()
        .map(|d| (d.id.as_str(), d.sequence))
        .chain([(asked.id.as_str(), asked.sequence)])
        .collect();
    let mut rows = Table::new(&["depth", "kind", "id", "seq", "cites", "of seq"]);
    for d in downstream {
        let of = sequence_of
            .get(d.of.as_str())
            .map_or_else(|| d.of.clone(), |s| s.to_string());
        rows.row(&[
            d.depth.to_string(),
            d.kind.to_string(),
            d.id.clone(),
            d.sequence.to_string(),
            d.cites.as_str().to_string(),
            of,
        ]);
    }
    let mut text = rows.render();
    if !if_superseded.is_empty() {
        let mut impact = Table::new(&["would rest on a superseded decision", "kind", "seq"]);
        for d in if_superseded {
            impact.row(&[d.id.clone(), d.kind.to_string(), d.sequence.to_string()]);
        }
        text.push('\n');
        text.push_str(&impact.render());
    }
    text
}

/// `record --dry-run`: the writer accepted the record and nothing was written.
#[derive(Debug, Clone, Serialize)]
pub struct DryRun {
    /// Always `true`: a refusal is reported as the writer's refusal, with its reason code.
    pub accepted: bool,
    /// Always `false`: nothing was written.
    pub written: bool,
    /// The record as the writer would store it now (id, sequence and `prev` included).
    pub record: Record,
    /// For a conclusion that supersedes another: the assessments and conclusions that
    /// would then rest on a superseded decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impact: Option<Vec<Dependent>>,
}

impl DryRun {
    /// The dry run of `record`, with the impact of the conclusion it supersedes, if any.
    pub fn new(record: Record, impact: Option<Vec<Dependent>>) -> DryRun {
        DryRun {
            accepted: true,
            written: false,
            record,
            impact,
        }
    }

    /// The conclusion `record` supersedes, if it is a conclusion that supersedes one.
    pub fn supersedes(record: &Record) -> Option<&str> {
        match &record.body {
            Body::Conclusion(c) => c.supersedes.as_deref(),
            _ => None,
        }
    }
}

impl Render for DryRun {
    fn plain(&self) -> String {
        let mut out = Out::new();
        out.para(
            0,
            2,
            &format!(
                "the writer would accept this {} as #{} ({}); nothing was written",
                self.record.kind(),
                self.record.envelope.sequence,
                self.record.id()
            ),
        );
        if let (Some(old), Some(impact)) = (DryRun::supersedes(&self.record), &self.impact) {
            if impact.is_empty() {
                out.para(
                    0,
                    2,
                    &format!("superseding {old} leaves nothing resting on a superseded decision"),
                );
            } else {
                impact_lines(&mut out, old, impact);
            }
        }
        out.finish()
    }
}

fn impact_lines(out: &mut Out, old: &str, impact: &[Dependent]) {
    self::impact(out, old, impact);
    out.para(
        2,
        2,
        "each is shown as resting on a superseded decision by `status` and `context` until it \
         is reaffirmed (cited again beside the new conclusion) or superseded",
    );
}
