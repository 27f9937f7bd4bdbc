//! `explain ID`: the whole provenance chain of any record.
//!
//! From the record asked for, walk up the references to its assessment, then down from the
//! assessment to everything that hangs from it: attempts, plans (with their availability
//! snapshot, selection, reuse and local review) and their consultations, disagreements and
//! their resolutions, conclusions with their computed review, validations, and the
//! conclusions they supersede or were superseded by (which may belong to another
//! assessment). The record asked for carries `asked: true`.

use super::downstream::{Dependent, Graph};
use super::{credited_review, parent_id, Index, Link, ValidationState};
use crate::core::chain::{ChainState, Trust};
use crate::core::records::{
    Assessment, Attempt, Body, Conclusion, Consultation, Disagreement, Kind, Plan, Record,
    Resolution, Validation,
};
use serde::{Deserialize, Serialize};

/// No record with the id asked for exists in the task.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no record `{id}` in this task; `advisor-consult tree` lists the task's record ids")]
pub struct NotFound {
    /// The id asked for.
    pub id: String,
}

/// A record's envelope (what a reader needs of it) and its fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Item<T> {
    /// Its id.
    pub id: String,
    /// Its sequence.
    pub sequence: u64,
    /// When it was recorded.
    pub created_at: String,
    /// Secret shapes the writer removed from it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    /// Whether this is the record asked for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asked: bool,
    /// After a break in the hash chain: shown, not believed (a conclusion's review is then
    /// empty, and a consultation reviews nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unverified: bool,
    /// A consultation without a valid attestation of this machine's daemon: shown, never
    /// counted as a review.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unattested: bool,
    /// The fields of its kind.
    #[serde(flatten)]
    pub fields: T,
}

/// The provenance chain of one record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExplainView {
    /// The record asked for.
    pub asked: Link,
    /// The task.
    pub task: String,
    /// The hash chain of the task; absent when it was not walked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainState>,
    /// From the assessment (or the highest record found) down to the record asked for.
    pub path: Vec<Link>,
    /// The assessment at the root of the chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assessment: Option<Item<Assessment>>,
    /// Plans of the assessment, each with its consultations.
    pub plans: Vec<PlanChain>,
    /// Disagreements on the assessment, each with its resolutions.
    pub disagreements: Vec<DisagreementChain>,
    /// Conclusions on the assessment, each with its validations and supersession.
    pub conclusions: Vec<ConclusionChain>,
    /// Attempts recorded under the assessment.
    pub attempts: Vec<Item<Attempt>>,
    /// When a reference on the way up names no record of the task: the id it names, and
    /// below it in `detached` the records of the path that hang from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    /// The records of the path when the chain does not reach an assessment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub detached: Vec<Item<Body>>,
    /// Asked for (`--downstream`): every record that rests on the one asked for,
    /// transitively, nearest first, each with how it cites the record before it (see
    /// `core::views::downstream`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downstream: Option<Vec<Dependent>>,
    /// Asked for, and the record is a standing conclusion: the assessments and conclusions
    /// that would rest on a superseded decision if it were superseded now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub if_superseded: Vec<Dependent>,
}

impl ExplainView {
    /// Add what rests on the record asked for, from the task's downstream graph.
    pub fn add_downstream(&mut self, graph: &Graph, trust: &Trust) {
        self.downstream = Some(graph.downstream(&self.asked.id, trust).unwrap_or_default());
        self.if_superseded = graph.impact_of_superseding(&self.asked.id, trust);
    }
}

/// A plan and its consultations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanChain {
    /// The plan.
    #[serde(flatten)]
    pub plan: Item<Plan>,
    /// Its consultations, in sequence (plan) order.
    pub consultations: Vec<Item<Consultation>>,
    /// Each consultation's cost, in the same order (derived by
    /// [`crate::core::views::priced::price_explain`]; empty until then).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub costs: Vec<crate::core::cost::Cost>,
}

/// A disagreement and its resolutions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DisagreementChain {
    /// The disagreement.
    #[serde(flatten)]
    pub disagreement: Item<Disagreement>,
    /// Its resolutions, in sequence order.
    pub resolutions: Vec<Item<Resolution>>,
}

/// A conclusion, its validations and its place in supersession.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConclusionChain {
    /// The conclusion (with its computed `reviewed_by` and `independent_review_count`).
    #[serde(flatten)]
    pub conclusion: Item<Conclusion>,
    /// The conclusion named in `supersedes`, as a link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<Link>,
    /// The conclusion that names this one in `supersedes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<Link>,
    /// How its newest validation went.
    pub validation: ValidationState,
    /// Its validations, in sequence order.
    pub validations: Vec<Item<Validation>>,
}

/// [`explain`] of `id` over a task's `records` (in sequence order) whose downstream `graph`
/// is caught up: only the records the answer reads are looked at
/// ([`Graph::neighbourhood`]), so it costs the same in a task of a hundred thousand records
/// as in one of a hundred. Gives what [`explain`] over every record gives.
pub fn explain_in(
    records: &[Record],
    graph: &super::downstream::Graph,
    id: &str,
    trust: &Trust,
) -> Result<ExplainView, NotFound> {
    // The graph holds each id once: a task repeating an id (a copied record) is read whole.
    let Some(sequences) = graph
        .neighbourhood(id)
        .filter(|_| graph.len() == records.len())
    else {
        return explain(records, id, trust);
    };
    let near: Vec<Record> = sequences
        .iter()
        .filter_map(|s| {
            records
                .binary_search_by_key(s, |r| r.envelope.sequence)
                .ok()
                .map(|at| records[at].clone())
        })
        .collect();
    explain(&near, id, trust)
}

/// The provenance chain of record `id` among the task's `records`; what the hash chain
/// does not vouch for (`trust`) is marked, and a conclusion's review is computed from the
/// consultations it vouches for.
pub fn explain(records: &[Record], id: &str, trust: &Trust) -> Result<ExplainView, NotFound> {
    let index = Index::new(records);
    let asked = *index
        .by_id
        .get(id)
        .ok_or_else(|| NotFound { id: id.to_string() })?;
    let mut path = vec![asked];
    let mut missing = None;
    while let Some(parent) = parent_id(path[path.len() - 1]) {
        match index.by_id.get(parent) {
            // A cycle is impossible between well-formed records (a child is always newer);
            // stop anyway rather than loop on a hand-edited store.
            Some(&record) if !path.iter().any(|r| r.id() == record.id()) => path.push(record),
            Some(_) => break,
            None => {
                missing = Some(parent.to_string());
                break;
            }
        }
    }
    path.reverse();
    let item = |record: &Record| Item {
        id: record.id().to_string(),
        sequence: record.envelope.sequence,
        created_at: record.envelope.created_at.clone(),
        redacted: record.envelope.redacted.clone(),
        asked: record.id() == asked.id(),
        unverified: !trust.is_verified(record.id()),
        unattested: trust.unattested(record.id()).is_some(),
        fields: (),
    };
    let mut view = ExplainView {
        asked: index.link(asked),
        task: asked.envelope.task.clone(),
        chain: trust.state.clone(),
        path: path.iter().map(|r| index.link(r)).collect(),
        assessment: None,
        plans: Vec::new(),
        disagreements: Vec::new(),
        conclusions: Vec::new(),
        attempts: Vec::new(),
        missing,
        detached: Vec::new(),
        downstream: None,
        if_superseded: Vec::new(),
    };
    let root = path[0];
    let Body::Assessment(assessment) = &root.body else {
        view.detached = path.iter().map(|r| with(item(r), r.body.clone())).collect();
        return Ok(view);
    };
    view.assessment = Some(with(item(root), assessment.clone()));
    for &child in index.children_of(root.id()) {
        match &child.body {
            Body::Attempt(a) => view.attempts.push(with(item(child), a.clone())),
            Body::Plan(p) => view.plans.push(PlanChain {
                plan: with(item(child), p.clone()),
                consultations: index
                    .children_of(child.id())
                    .iter()
                    .filter_map(|r| match &r.body {
                        Body::Consultation(c) => Some(with(item(r), c.clone())),
                        _ => None,
                    })
                    .collect(),
                costs: Vec::new(),
            }),
            Body::Disagreement(d) => view.disagreements.push(DisagreementChain {
                disagreement: with(item(child), d.clone()),
                resolutions: index
                    .children_of(child.id())
                    .iter()
                    .filter_map(|r| match &r.body {
                        Body::Resolution(res) => Some(with(item(r), res.clone())),
                        _ => None,
                    })
                    .collect(),
            }),
            Body::Conclusion(c) => view.conclusions.push(ConclusionChain {
                conclusion: with(item(child), {
                    let mut c = c.clone();
                    let review = credited_review(child, trust, |id| index.by_id.get(id).copied());
                    c.reviewed_by = review.reviewed_by;
                    c.independent_review_count = review.independent_review_count;
                    c
                }),
                replaces: c
                    .supersedes
                    .as_deref()
                    .and_then(|old| index.by_id.get(old))
                    .map(|r| index.link(r)),
                superseded_by: index.superseded_by.get(child.id()).map(|r| index.link(r)),
                validation: index.validation_state(child.id()),
                validations: index
                    .children_of_kind(child.id(), Kind::Validation)
                    .filter_map(|r| match &r.body {
                        Body::Validation(v) => Some(with(item(r), v.clone())),
                        _ => None,
                    })
                    .collect(),
            }),
            _ => {}
        }
    }
    Ok(view)
}

fn with<T>(item: Item<()>, fields: T) -> Item<T> {
    Item {
        id: item.id,
        sequence: item.sequence,
        created_at: item.created_at,
        redacted: item.redacted,
        asked: item.asked,
        unverified: item.unverified,
        unattested: item.unattested,
        fields,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Task;
    use super::*;

    fn flow() -> (Task, Vec<String>) {
        let mut t = Task::new();
        let a = t.assessment("subject");
        let p = t.plan(&a, &["x", "y"]);
        let cx = t.completed(&p, "x", "supports");
        let cy = t.completed(&p, "y", "opposes");
        let d = t.disagreement(&a, &cy);
        let r = t.resolution(&d);
        let c = t.conclusion(&a, &[&cx, &cy], None);
        let v = t.validation(&c, true);
        let a2 = t.assessment("subject");
        let c2 = t.conclusion(&a2, &[], Some(&c));
        let ids = vec![a, p, cx, cy, d, r, c, v, a2, c2];
        (t, ids)
    }

    #[test]
    fn every_record_of_the_flow_explains_to_the_same_chain() {
        let (task, ids) = flow();
        let whole = &ids[..8];
        for id in whole {
            let view = explain(&task.records, id, &Trust::default()).unwrap();
            assert_eq!(view.asked.id, *id);
            assert_eq!(view.path[0].id, ids[0], "rooted at the assessment");
            assert_eq!(view.path.last().unwrap().id, *id);
            assert_eq!(view.plans.len(), 1);
            assert_eq!(view.plans[0].consultations.len(), 2);
            assert_eq!(view.disagreements[0].resolutions.len(), 1);
            assert_eq!(view.conclusions[0].validations.len(), 1);
            let json = serde_json::to_value(&view).unwrap();
            let marked = json.to_string().matches("\"asked\":true").count();
            assert_eq!(marked, 1, "exactly one record is marked for {id}");
        }
    }

    #[test]
    fn the_path_runs_from_the_assessment_to_the_record() {
        let (task, ids) = flow();
        let view = explain(&task.records, &ids[7], &Trust::default()).unwrap();
        let path: Vec<&str> = view.path.iter().map(|l| l.id.as_str()).collect();
        assert_eq!(path, [&ids[0], &ids[6], &ids[7]]);
        assert!(view.conclusions[0].validations[0].asked);
        assert_eq!(view.conclusions[0].validation, ValidationState::Passed);
        let view = explain(&task.records, &ids[2], &Trust::default()).unwrap();
        let kinds: Vec<Kind> = view.path.iter().map(|l| l.kind).collect();
        assert_eq!(kinds, [Kind::Assessment, Kind::Plan, Kind::Consultation]);
    }

    #[test]
    fn supersession_is_shown_both_ways() {
        let (task, ids) = flow();
        let old = explain(&task.records, &ids[6], &Trust::default()).unwrap();
        let by = old.conclusions[0]
            .superseded_by
            .as_ref()
            .expect("superseded");
        assert_eq!(by.id, ids[9]);
        let new = explain(&task.records, &ids[9], &Trust::default()).unwrap();
        assert_eq!(new.path[0].id, ids[8]);
        let replaces = new.conclusions[0].replaces.as_ref().expect("replaces");
        assert_eq!(replaces.id, ids[6]);
        assert!(new.plans.is_empty());
    }

    /// Explaining from the records near the one asked (the downstream graph's
    /// neighbourhood) answers exactly as explaining over every record of the task, for
    /// every record of a task whose flow sits among unrelated ones.
    #[test]
    fn explain_in_the_neighbourhood_equals_explain_over_every_record() {
        let mut t = Task::new();
        for i in 0..5 {
            let a = t.assessment(&format!("other {i}"));
            t.plan(&a, &["x"]);
        }
        let a = t.assessment("subject");
        let p = t.plan(&a, &["x", "y"]);
        let cx = t.completed(&p, "x", "supports");
        let cy = t.completed(&p, "y", "opposes");
        let d = t.disagreement(&a, &cy);
        t.resolution(&d);
        let c = t.conclusion(&a, &[&cx, &cy], None);
        let v = t.validation(&c, true);
        let a2 = t.assessment("subject");
        let c2 = t.conclusion(&a2, &[], Some(&c));
        let ids = [a, p, cx, cy, d, c, v, a2, c2];
        for i in 0..5 {
            let a = t.assessment(&format!("later {i}"));
            t.conclusion(&a, &[], None);
        }
        let graph = Graph::of(&t.records);
        let trust = Trust::default();
        for record in &t.records {
            assert_eq!(
                explain_in(&t.records, &graph, record.id(), &trust),
                explain(&t.records, record.id(), &trust),
                "{}",
                record.id()
            );
        }
        assert!(ids.iter().all(|id| graph.neighbourhood(id).is_some()));
        assert!(explain_in(&t.records, &graph, "01JNOPE", &trust).is_err());
    }

    #[test]
    fn an_unknown_id_is_not_found() {
        let (task, _) = flow();
        let err = explain(&task.records, "01JNOPE", &Trust::default()).unwrap_err();
        assert_eq!(err.id, "01JNOPE");
        assert!(err.to_string().contains("`01JNOPE`"));
    }

    #[test]
    fn a_broken_chain_names_the_missing_reference() {
        let (mut task, ids) = flow();
        // Drop the plan: its consultations now point at nothing.
        task.records.retain(|r| r.id() != ids[1]);
        let view = explain(&task.records, &ids[2], &Trust::default()).unwrap();
        assert_eq!(view.missing.as_deref(), Some(ids[1].as_str()));
        assert!(view.assessment.is_none());
        assert_eq!(view.detached.len(), 1);
        assert!(view.detached[0].asked);
        let json = serde_json::to_value(&view).unwrap();
        let back: ExplainView = serde_json::from_value(json).unwrap();
        assert_eq!(back, view, "a detached record reads back with its kind");
    }
}
