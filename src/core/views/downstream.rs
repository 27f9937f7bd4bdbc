//! The downstream graph: which records cite which, walked both ways.
//!
//! Every reference a record makes to another record of its task is an edge from the
//! citing record to the cited one, named by how it cites ([`Cites`]): the field naming its
//! parent (`assessment`, `plan`, `disagreement`, `conclusion`), evidence of kind `record`,
//! a conclusion's `consultations` and `supersedes`, a plan's `reuse`, a disagreement's
//! positions and a resolution's `favours`. The graph is fed record by record in sequence
//! order (a record cites only records before it), so feeding one costs the same whatever
//! the task's size; the store keeps one per cached task (`store::downstream`).
//!
//! What the graph answers is judged against the hash chain ([`Trust`]) when asked: a
//! record the chain does not vouch for cites nothing and supersedes nothing.
//!
//! **Resting on a superseded decision.** An assessment or conclusion that cites a
//! conclusion as evidence rests on it. Once that conclusion is superseded (by a conclusion
//! the chain vouches for), the citing record rests on a superseded decision until either
//!
//! - it is itself superseded (a conclusion), or
//! - it is reaffirmed: it, or a later record that cites it in any way (a conclusion on the
//!   assessment, a record citing it as evidence, ...), cites as evidence the conclusion that
//!   replaced the superseded one, or any conclusion that replaced that one in turn.
//!
//! The cost of finding every such record is that of the supersessions and the records
//! around them, never the task's size.

use crate::core::chain::Trust;
use crate::core::records::{Body, EvidenceKind, Kind, Record, EXECUTOR, NEITHER};
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How a record cites another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Cites {
    /// As its assessment (a plan, disagreement, conclusion or attempt).
    Assessment,
    /// As its plan (a consultation).
    Plan,
    /// As its disagreement (a resolution).
    Disagreement,
    /// As its conclusion (a validation).
    Conclusion,
    /// As evidence of kind `record`.
    Evidence,
    /// In a conclusion's `consultations`.
    Consultation,
    /// In a conclusion's `supersedes`.
    Supersedes,
    /// In a plan's `reuse`.
    Reuse,
    /// As the source of a disagreement's position.
    Position,
    /// In a resolution's `favours`.
    Favours,
}

impl Cites {
    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Cites::Assessment => "assessment",
            Cites::Plan => "plan",
            Cites::Disagreement => "disagreement",
            Cites::Conclusion => "conclusion",
            Cites::Evidence => "evidence",
            Cites::Consultation => "consultation",
            Cites::Supersedes => "supersedes",
            Cites::Reuse => "reuse",
            Cites::Position => "position",
            Cites::Favours => "favours",
        }
    }
}

/// Every reference `record` makes to another record, with how, each at most once.
pub fn citations(record: &Record) -> Vec<(&str, Cites)> {
    let mut out: Vec<(&str, Cites)> = Vec::new();
    fn records_of(list: &[crate::core::records::Evidence]) -> impl Iterator<Item = &str> {
        list.iter()
            .filter(|e| e.kind == EvidenceKind::Record)
            .map(|e| e.reference.as_str())
    }
    #[allow(unreachable_patterns)]
    match &record.body {
        Body::Assessment(a) => out.extend(records_of(&a.evidence).map(|r| (r, Cites::Evidence))),
        Body::Plan(p) => {
            out.push((&p.assessment, Cites::Assessment));
            out.extend(p.reuse.as_deref().map(|r| (r, Cites::Reuse)));
        }
        Body::Consultation(c) => out.push((&c.plan, Cites::Plan)),
        Body::Disagreement(d) => {
            out.push((&d.assessment, Cites::Assessment));
            out.extend(
                d.positions
                    .iter()
                    .filter(|p| p.source != EXECUTOR)
                    .map(|p| (p.source.as_str(), Cites::Position)),
            );
        }
        Body::Resolution(r) => {
            out.push((&r.disagreement, Cites::Disagreement));
            if r.favours != EXECUTOR && r.favours != NEITHER {
                out.push((&r.favours, Cites::Favours));
            }
            out.extend(records_of(&r.evidence).map(|e| (e, Cites::Evidence)));
        }
        Body::Conclusion(c) => {
            out.push((&c.assessment, Cites::Assessment));
            out.extend(records_of(&c.evidence).map(|e| (e, Cites::Evidence)));
            out.extend(
                c.consultations
                    .iter()
                    .map(|x| (x.as_str(), Cites::Consultation)),
            );
            out.extend(c.supersedes.as_deref().map(|s| (s, Cites::Supersedes)));
        }
        Body::Validation(v) => out.push((&v.conclusion, Cites::Conclusion)),
        Body::Attempt(a) => out.push((&a.assessment, Cites::Assessment)),
        // A kind this graph does not know cites nothing it walks.
        _ => {}
    }
    let mut seen = Vec::with_capacity(out.len());
    out.retain(|c| {
        let new = !seen.contains(c);
        if new {
            seen.push(*c);
        }
        new
    });
    out
}

/// One record of the graph.
#[derive(Debug, Clone)]
struct Node {
    id: String,
    kind: Kind,
    sequence: u64,
    /// What it cites, in the order it names them.
    cites: Vec<(u32, Cites)>,
    /// What cites it, in sequence order.
    cited_by: Vec<(u32, Cites)>,
    /// Whether some record named it in `supersedes` (it is then in `Graph::superseded`).
    named_superseded: bool,
}

/// The citations between a task's records, both ways, fed in sequence order.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    at: HashMap<String, u32>,
    nodes: Vec<Node>,
    /// The conclusions named in some `supersedes`, each once, in the order first named.
    superseded: Vec<u32>,
}

/// A record that rests on another, as `explain --downstream` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Dependent {
    /// Its kind.
    pub kind: Kind,
    /// Its id.
    pub id: String,
    /// Its sequence in the task.
    pub sequence: u64,
    /// How it cites `of`.
    pub cites: Cites,
    /// The record it cites on the way from the one asked about.
    pub of: String,
    /// How many citations away from the record asked about (1: it cites it directly).
    pub depth: u32,
}

/// A record resting on a superseded decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Resting {
    /// Its kind (`assessment` or `conclusion`).
    pub kind: Kind,
    /// Its id.
    pub id: String,
    /// Its sequence in the task.
    pub sequence: u64,
    /// The superseded conclusion it cites as evidence.
    pub superseded: String,
    /// The conclusion that superseded it.
    pub superseded_by: String,
}

impl Graph {
    /// The graph of `records`, fed in sequence order.
    pub fn of(records: &[Record]) -> Graph {
        let mut ordered: Vec<&Record> = records.iter().collect();
        ordered.sort_by_key(|r| r.envelope.sequence);
        let mut graph = Graph::default();
        for record in ordered {
            graph.feed(record);
        }
        graph
    }

    /// The sequences of the records `explain` of `id` reads, in sequence order: the records
    /// `id` cites, transitively (its path to its assessment among them); what cites those,
    /// up to three citations down (an assessment's plans, their consultations; its
    /// disagreements, their resolutions; its conclusions, their validations and the
    /// conclusions superseding them); and what each of those cites (a conclusion's
    /// consultations, a plan's reused conclusion, a resolution's favoured answer). `None`
    /// when `id` was not fed. Costs what those records cost, not the task.
    pub fn neighbourhood(&self, id: &str) -> Option<Vec<u64>> {
        let start = *self.at.get(id)?;
        let mut seen: rustc_hash::FxHashSet<u32> = rustc_hash::FxHashSet::default();
        let mut up = vec![start];
        let mut above = Vec::new();
        while let Some(n) = up.pop() {
            if seen.insert(n) {
                above.push(n);
                up.extend(self.nodes[n as usize].cites.iter().map(|(to, _)| *to));
            }
        }
        let mut below = Vec::new();
        let mut level = above.clone();
        for _ in 0..3 {
            let mut next = Vec::new();
            for n in level {
                for &(by, _) in &self.nodes[n as usize].cited_by {
                    if seen.insert(by) {
                        below.push(by);
                        next.push(by);
                    }
                }
            }
            level = next;
        }
        for n in below {
            for &(to, _) in &self.nodes[n as usize].cites {
                seen.insert(to);
            }
        }
        let mut sequences: Vec<u64> = seen
            .into_iter()
            .map(|n| self.nodes[n as usize].sequence)
            .collect();
        sequences.sort_unstable();
        Some(sequences)
    }

    /// How many records were fed.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no record was fed.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Feed the records of `records` (a task's, in sequence order, as a cache holds them)
    /// past the ones fed already; when the records fed are no longer the first ones of
    /// `records`, start again from the first. Costs what the new records cost.
    pub fn catch_up(&mut self, records: &[Record]) {
        let fed = self.nodes.len();
        let same = fed <= records.len()
            && self
                .nodes
                .last()
                .is_none_or(|last| records[fed - 1].id() == last.id);
        if !same {
            *self = Graph::default();
        }
        for record in &records[self.nodes.len()..] {
            self.feed(record);
        }
    }

    /// Add `record`, whose references name records fed before it (a reference to anything
    /// else is no edge).
    pub fn feed(&mut self, record: &Record) {
        if self.at.contains_key(record.id()) {
            return;
        }
        let index = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        let mut cites = Vec::new();
        for (target, how) in citations(record) {
            let Some(&to) = self.at.get(target) else {
                continue;
            };
            cites.push((to, how));
            let cited = &mut self.nodes[to as usize];
            cited.cited_by.push((index, how));
            if how == Cites::Supersedes && !cited.named_superseded {
                cited.named_superseded = true;
                self.superseded.push(to);
            }
        }
        self.at.insert(record.id().to_string(), index);
        self.nodes.push(Node {
            id: record.id().to_string(),
            kind: record.kind(),
            sequence: record.envelope.sequence,
            cites,
            cited_by: Vec::new(),
            named_superseded: false,
        });
    }

    fn node(&self, index: u32) -> &Node {
        &self.nodes[index as usize]
    }

    fn verified(&self, index: u32, trust: &Trust) -> bool {
        trust.is_verified(&self.node(index).id)
    }

    /// The conclusion that supersedes `index`: the first one the chain vouches for that
    /// names it in `supersedes`.
    fn superseded_by(&self, index: u32, trust: &Trust) -> Option<u32> {
        self.node(index)
            .cited_by
            .iter()
            .find(|&&(by, how)| {
                how == Cites::Supersedes
                    && self.node(by).kind == Kind::Conclusion
                    && self.verified(by, trust)
            })
            .map(|&(by, _)| by)
    }

    /// Each conclusion in a line of supersession: the line's first conclusion and its
    /// place in it (the first is 0, what superseded it 1, ...). One pass over the
    /// supersessions, whatever the lines' lengths.
    fn lines(&self, trust: &Trust) -> HashMap<u32, (u32, u32)> {
        let mut olds = self.superseded.clone();
        olds.sort_unstable();
        let mut lines: HashMap<u32, (u32, u32)> = HashMap::default();
        for old in olds {
            let Some(by) = self.superseded_by(old, trust) else {
                continue;
            };
            // Oldest first: `old` has its place already when something superseded it.
            let (first, at) = *lines.entry(old).or_insert((old, 0));
            lines.insert(by, (first, at + 1));
        }
        lines
    }

    /// Whether `index` cites as evidence a record `after` accepts.
    fn cites_evidence_in(&self, index: u32, after: &impl Fn(u32) -> bool) -> bool {
        self.node(index)
            .cites
            .iter()
            .any(|&(to, how)| how == Cites::Evidence && after(to))
    }

    /// Whether `index` was reaffirmed: it, or a record the chain vouches for that cites
    /// it, cites as evidence a conclusion `after` accepts (one that replaced the
    /// superseded one, directly or in turn).
    fn reaffirmed(&self, index: u32, after: &impl Fn(u32) -> bool, trust: &Trust) -> bool {
        self.cites_evidence_in(index, after)
            || self
                .node(index)
                .cited_by
                .iter()
                .any(|&(by, _)| self.verified(by, trust) && self.cites_evidence_in(by, after))
    }

    /// The assessments and conclusions the chain vouches for that cite `index` as evidence
    /// and still stand (a conclusion not superseded), in sequence order.
    fn evidence_citers<'g>(
        &'g self,
        index: u32,
        trust: &'g Trust,
    ) -> impl Iterator<Item = u32> + 'g {
        let trust_ok = move |by: u32| self.verified(by, trust);
        self.node(index)
            .cited_by
            .iter()
            .filter(|&&(_, how)| how == Cites::Evidence)
            .map(|&(by, _)| by)
            .filter(move |&by| {
                matches!(self.node(by).kind, Kind::Assessment | Kind::Conclusion)
                    && trust_ok(by)
                    && self.superseded_by(by, trust).is_none()
            })
    }

    /// Every record resting on a superseded decision (see the module documentation), in
    /// sequence order, each once per superseded conclusion it cites.
    pub fn resting(&self, trust: &Trust) -> Vec<Resting> {
        let lines = self.lines(trust);
        let mut out = Vec::new();
        for &old in &self.superseded {
            let Some(by) = self.superseded_by(old, trust) else {
                continue;
            };
            let Some(&(first, at)) = lines.get(&old) else {
                continue;
            };
            let after = |e: u32| {
                lines
                    .get(&e)
                    .is_some_and(|&(f, place)| f == first && place > at)
            };
            for citer in self.evidence_citers(old, trust) {
                if after(citer) || self.reaffirmed(citer, &after, trust) {
                    continue;
                }
                let node = self.node(citer);
                out.push(Resting {
                    kind: node.kind,
                    id: node.id.clone(),
                    sequence: node.sequence,
                    superseded: self.node(old).id.clone(),
                    superseded_by: self.node(by).id.clone(),
                });
            }
        }
        out.sort_by(|a, b| (a.sequence, &a.superseded).cmp(&(b.sequence, &b.superseded)));
        out
    }

    /// What would rest on a superseded decision if conclusion `id` were superseded now:
    /// the standing assessments and conclusions that cite it as evidence. Empty when `id`
    /// is no conclusion of the graph or is superseded already.
    pub fn impact_of_superseding(&self, id: &str, trust: &Trust) -> Vec<Dependent> {
        let Some(&old) = self.at.get(id) else {
            return Vec::new();
        };
        if self.node(old).kind != Kind::Conclusion || self.superseded_by(old, trust).is_some() {
            return Vec::new();
        }
        self.evidence_citers(old, trust)
            .map(|citer| {
                let node = self.node(citer);
                Dependent {
                    kind: node.kind,
                    id: node.id.clone(),
                    sequence: node.sequence,
                    cites: Cites::Evidence,
                    of: id.to_string(),
                    depth: 1,
                }
            })
            .collect()
    }

    /// Everything that rests on record `id`, transitively: each record the chain vouches
    /// for that cites it, or cites one of those, ..., once, nearest first and in sequence
    /// order at each depth. `None` when `id` is no record of the graph.
    pub fn downstream(&self, id: &str, trust: &Trust) -> Option<Vec<Dependent>> {
        let &start = self.at.get(id)?;
        let mut seen = rustc_hash::FxHashSet::default();
        seen.insert(start);
        let mut queue = VecDeque::from([(start, 0u32)]);
        let mut out = Vec::new();
        while let Some((at, depth)) = queue.pop_front() {
            for &(by, how) in &self.node(at).cited_by {
                if !self.verified(by, trust) || !seen.insert(by) {
                    continue;
                }
                let node = self.node(by);
                out.push(Dependent {
                    kind: node.kind,
                    id: node.id.clone(),
                    sequence: node.sequence,
                    cites: how,
                    of: self.node(at).id.clone(),
                    depth: depth + 1,
                });
                queue.push_back((by, depth + 1));
            }
        }
        out.sort_by_key(|d| (d.depth, d.sequence));
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::records::{Record, SCHEMA_VERSION};
    use crate::core::views::test_support::broken_at;
    use serde_json::{json, Value};

    /// A task built record by record, each record `r<sequence>`.
    #[derive(Default)]
    struct Task {
        records: Vec<Record>,
    }

    impl Task {
        fn put(&mut self, kind: &str, fields: Value) -> String {
            let sequence = self.records.len() as u64 + 1;
            let id = format!("r{sequence}");
            let mut value = json!({
                "id": id, "task": "t", "sequence": sequence,
                "created_at": "2026-03-02T00:00:00Z", "schema": SCHEMA_VERSION,
                "redacted": [], "kind": kind,
            });
            for (k, v) in fields.as_object().expect("fields") {
                value[k] = v.clone();
            }
            self.records
                .push(serde_json::from_value(value).expect("a record"));
            id
        }

        fn assessment(&mut self, evidence: &[&str]) -> String {
            let evidence: Vec<Value> = evidence
                .iter()
                .map(|r| json!({"kind": "record", "ref": r}))
                .collect();
            self.put(
                "assessment",
                json!({"subject": "s", "materiality": "low", "hypothesis": "h",
                       "evidence": evidence}),
            )
        }

        fn conclusion(&mut self, on: &str, evidence: &[&str], supersedes: Option<&str>) -> String {
            let evidence: Vec<Value> = evidence
                .iter()
                .map(|r| json!({"kind": "record", "ref": r}))
                .collect();
            let mut fields = json!({"assessment": on, "decision": "d", "rationale": "r",
                                    "evidence": evidence, "reviewed_by": [],
                                    "independent_review_count": 0});
            if let Some(old) = supersedes {
                fields["supersedes"] = json!(old);
            }
            self.put("conclusion", fields)
        }
    }

    fn ids(resting: &[Resting]) -> Vec<(&str, &str)> {
        resting
            .iter()
            .map(|r| (r.id.as_str(), r.superseded.as_str()))
            .collect()
    }

    #[test]
    fn a_supersession_leaves_what_cited_it_resting_until_reaffirmed() {
        let trust = Trust::default();
        let mut t = Task::default();
        let a1 = t.assessment(&[]);
        let c1 = t.conclusion(&a1, &[], None);
        let a2 = t.assessment(&[&c1]);
        let c2 = t.conclusion(&a2, &[&c1], None);
        assert!(Graph::of(&t.records).resting(&trust).is_empty());
        let impact = Graph::of(&t.records).impact_of_superseding(&c1, &trust);
        let impact: Vec<&str> = impact.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(impact, [a2.as_str(), c2.as_str()]);

        let c3 = t.conclusion(&a1, &[], Some(&c1));
        let graph = Graph::of(&t.records);
        assert_eq!(
            ids(&graph.resting(&trust)),
            [(a2.as_str(), c1.as_str()), (c2.as_str(), c1.as_str())]
        );
        assert_eq!(graph.resting(&trust)[0].superseded_by, c3);
        assert!(graph.impact_of_superseding(&c1, &trust).is_empty());

        // A conclusion on a2 citing the replacement reaffirms a2; superseding c2 ends it.
        t.conclusion(&a2, &[&c3], Some(&c2));
        assert!(Graph::of(&t.records).resting(&trust).is_empty());
    }

    #[test]
    fn a_replacement_further_down_the_line_reaffirms_and_unverified_records_count_for_nothing() {
        let mut t = Task::default();
        let a1 = t.assessment(&[]);
        let c1 = t.conclusion(&a1, &[], None);
        let a2 = t.assessment(&[&c1]);
        t.put(
            "attempt",
            json!({"assessment": a1, "tried": "t", "failure_observed": "f"}),
        );
        let c2 = t.conclusion(&a1, &[], Some(&c1));
        let c3 = t.conclusion(&a1, &[], Some(&c2));
        let graph = Graph::of(&t.records);
        assert_eq!(
            ids(&graph.resting(&Trust::default())),
            [(a2.as_str(), c1.as_str())]
        );
        // A record the chain does not vouch for supersedes nothing.
        let broken = broken_at(&t.records, 4);
        assert!(broken.is_verified(&a2) && !broken.is_verified(&c2));
        assert!(graph.resting(&broken).is_empty());
        assert_eq!(graph.impact_of_superseding(&c1, &broken).len(), 1);
        // An assessment citing the newest replacement reaffirms.
        t.assessment(&[&a2, &c3]);
        assert!(Graph::of(&t.records).resting(&Trust::default()).is_empty());
    }

    #[test]
    fn downstream_walks_every_citation_transitively_nearest_first() {
        let mut t = Task::default();
        let a1 = t.assessment(&[]);
        let c1 = t.conclusion(&a1, &[], None);
        let a2 = t.assessment(&[&c1]);
        let v = t.put(
            "validation",
            json!({"conclusion": c1, "check": "c", "passed": true}),
        );
        let c2 = t.conclusion(&a2, &[], None);
        let graph = Graph::of(&t.records);
        let down = graph.downstream(&a1, &Trust::default()).expect("known");
        let got: Vec<(&str, Cites, u32)> = down
            .iter()
            .map(|d| (d.id.as_str(), d.cites, d.depth))
            .collect();
        assert_eq!(
            got,
            [
                (c1.as_str(), Cites::Assessment, 1),
                (a2.as_str(), Cites::Evidence, 2),
                (v.as_str(), Cites::Conclusion, 2),
                (c2.as_str(), Cites::Assessment, 3),
            ]
        );
        assert!(graph.downstream("nothing", &Trust::default()).is_none());
    }

    #[test]
    fn catching_up_feeds_only_new_records_and_restarts_on_a_changed_past() {
        let mut t = Task::default();
        let a1 = t.assessment(&[]);
        t.conclusion(&a1, &[], None);
        let mut graph = Graph::default();
        graph.catch_up(&t.records[..1]);
        assert_eq!(graph.len(), 1);
        graph.catch_up(&t.records);
        assert_eq!(graph.len(), 2);
        let mut other = Task::default();
        other.put(
            "attempt",
            json!({"assessment": "x", "tried": "t", "failure_observed": "f"}),
        );
        other.records[0].envelope.id = "elsewhere".into();
        graph.catch_up(&other.records);
        assert_eq!(graph.len(), 1);
        assert!(graph.downstream(&a1, &Trust::default()).is_none());
    }
}
