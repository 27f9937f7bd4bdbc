//! Each advisor's track record: what the experiments that settled its disagreements
//! found. Derived from records, never stored; information for the person or agent reading
//! an answer and for whoever chooses the catalogue. The policy, the plan, the writer's
//! rules and the review count never read it: advisors share training data and blind
//! spots, so a majority is not evidence, and how often an advisor was right before says
//! nothing about this question. Only an experiment settles a disagreement.
//!
//! The rules:
//!
//! - A disagreement counts once, by its newest resolution the chain vouches for (a
//!   disagreement settled again by a later experiment counts by the later one).
//! - Every advisor holding a position in it (the executor is no advisor) has one more
//!   `resolution`. Its position is `favoured` when the resolution favours it (an advisor
//!   holding two positions is favoured when either is), `disfavoured` when the resolution
//!   favours another position (the executor's included).
//! - A resolution that favours `neither` counts in `resolutions` (the advisor took part in
//!   a settled disagreement) and for nobody's `favoured` or `disfavoured`; so
//!   `resolutions - favoured - disfavoured` settled on neither side.
//! - A resolution after a break in its task's hash chain counts for nothing.
//!
//! Pure: records in, counts out. [`TaskLedger`] takes a task's records one at a time, so
//! a long-lived store keeps one per task and feeds it as records are written and read;
//! [`derive`] is the same over records read afresh.

use crate::core::chain::Trust;
use crate::core::records::{Body, ConsultationStatus, Record, Resolution, EXECUTOR, NEITHER};
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

/// How many of an advisor's most recent resolutions a track record carries.
pub const MAX_RECENT: usize = 3;

/// What every surface says beside track records.
pub const INFORMATION_ONLY: &str =
    "track records are information: they change no plan, selection or review count";

/// One advisor's track record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrackRecord {
    /// Resolved disagreements in which it held a position.
    pub resolutions: u32,
    /// Of those, how many favoured its position.
    pub favoured: u32,
    /// Of those, how many favoured another position.
    pub disfavoured: u32,
    /// Its most recent resolutions (at most three, [`MAX_RECENT`]), newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<RecentResolution>,
}

/// One resolution in an advisor's track record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecentResolution {
    /// The task it was recorded in.
    pub task: String,
    /// The resolution's id.
    pub resolution: String,
    /// The subject of the assessment disputed.
    pub subject: String,
    /// What it found for this advisor.
    pub outcome: Outcome,
    /// When it was recorded (RFC 3339 UTC).
    pub at: String,
}

/// What a resolution found for one advisor that held a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Its position was the one favoured.
    Favoured,
    /// Another position was favoured.
    Disfavoured,
    /// The resolution favoured `neither`.
    Neither,
}

impl Outcome {
    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Favoured => "favoured",
            Outcome::Disfavoured => "disfavoured",
            Outcome::Neither => "neither",
        }
    }
}

impl TrackRecord {
    /// Whether it holds no resolution.
    pub fn is_empty(&self) -> bool {
        self.resolutions == 0
    }

    /// The counts with their size, never a bare ratio: `favoured 3 of 4, disfavoured 1
    /// of 4`, and how many settled on `neither`; `no resolution yet` when empty.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "no resolution yet".to_string();
        }
        let n = self.resolutions;
        let mut text = format!(
            "favoured {} of {n}, disfavoured {} of {n}",
            self.favoured, self.disfavoured
        );
        let neither = n.saturating_sub(self.favoured + self.disfavoured);
        if neither > 0 {
            text.push_str(&format!(", {neither} favoured neither"));
        }
        text
    }

    fn count(&mut self, settled: &Settled, outcome: Outcome) {
        self.resolutions += 1;
        match outcome {
            Outcome::Favoured => self.favoured += 1,
            Outcome::Disfavoured => self.disfavoured += 1,
            Outcome::Neither => {}
        }
        let recent = RecentResolution {
            task: settled.task.clone(),
            resolution: settled.resolution.clone(),
            subject: settled.subject.clone(),
            outcome,
            at: settled.at.clone(),
        };
        // Newest first by when, then task and id, whatever order they come in.
        let key = |r: &RecentResolution| (r.at.clone(), r.task.clone(), r.resolution.clone());
        let at = self.recent.partition_point(|r| key(r) > key(&recent));
        if at < MAX_RECENT {
            self.recent.insert(at, recent);
            self.recent.truncate(MAX_RECENT);
        }
    }
}

/// What one resolution settled: the advisors that held positions and whose was favoured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The task.
    pub task: String,
    /// The resolution's id.
    pub resolution: String,
    /// Its sequence in the task (trust is judged on it).
    pub sequence: u64,
    /// The disagreement it settled.
    pub disagreement: String,
    /// When it was recorded.
    pub at: String,
    /// The subject of the assessment disputed.
    pub subject: String,
    /// Each advisor that held a position, once, in position order.
    pub advisors: Vec<String>,
    /// The advisor whose position was favoured; `None` when the executor's was or when it
    /// favours `neither`.
    pub favoured: Option<String>,
    /// Whether it favours `neither`.
    pub neither: bool,
}

impl Settled {
    /// What it found for `advisor` (one of [`Settled::advisors`]).
    pub fn outcome(&self, advisor: &str) -> Outcome {
        if self.neither {
            Outcome::Neither
        } else if self.favoured.as_deref() == Some(advisor) {
            Outcome::Favoured
        } else {
            Outcome::Disfavoured
        }
    }
}

/// A record id as a ledger keeps it: its hash, so that a long-lived index holds a few
/// bytes per record of every task rather than the id itself.
fn key(id: &str) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    id.hash(&mut hasher);
    hasher.finish()
}

/// A disagreement as a ledger keeps it: its assessment and each position's source with
/// the advisor behind it (an index into [`TaskLedger::names`]; `None`: the executor).
#[derive(Debug, Clone)]
struct Dispute {
    assessment: u64,
    positions: Vec<(u64, Option<u32>)>,
}

/// One task's resolutions, taken from its records one at a time in sequence order.
#[derive(Debug, Clone, Default)]
pub struct TaskLedger {
    /// Each advisor named, once.
    names: Vec<String>,
    /// Assessment → subject.
    subjects: HashMap<u64, String>,
    /// Completed consultation → its advisor (only those can hold a position).
    advisors: HashMap<u64, u32>,
    /// Disagreement → what it disputes.
    disputes: HashMap<u64, Dispute>,
    /// The newest resolution of each disagreement resolved, in the order first resolved.
    settled: Vec<Settled>,
    /// Disagreement → its place in `settled`.
    settled_at: HashMap<u64, usize>,
}

impl TaskLedger {
    /// Take `record` (the task's next one) into account.
    pub fn feed(&mut self, record: &Record) {
        match &record.body {
            Body::Assessment(a) => {
                self.subjects.insert(key(record.id()), a.subject.clone());
            }
            Body::Consultation(c) if c.status == ConsultationStatus::Completed => {
                let name = self.name(&c.advisor);
                self.advisors.insert(key(record.id()), name);
            }
            Body::Disagreement(d) => {
                let positions = d
                    .positions
                    .iter()
                    .map(|p| {
                        let source = key(&p.source);
                        let advisor = (p.source != EXECUTOR)
                            .then(|| self.advisors.get(&source).copied())
                            .flatten();
                        (source, advisor)
                    })
                    .collect();
                self.disputes.insert(
                    key(record.id()),
                    Dispute {
                        assessment: key(&d.assessment),
                        positions,
                    },
                );
            }
            Body::Resolution(r) => {
                let disagreement = key(&r.disagreement);
                if let Some(settled) = self.settle(record, r) {
                    match self.settled_at.get(&disagreement) {
                        Some(&at) => self.settled[at] = settled,
                        None => {
                            self.settled_at.insert(disagreement, self.settled.len());
                            self.settled.push(settled);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The index of advisor `advisor` in `names`, added when new.
    fn name(&mut self, advisor: &str) -> u32 {
        match self.names.iter().position(|n| n == advisor) {
            Some(at) => at as u32,
            None => {
                self.names.push(advisor.to_string());
                (self.names.len() - 1) as u32
            }
        }
    }

    fn settle(&self, record: &Record, r: &Resolution) -> Option<Settled> {
        let dispute = self.disputes.get(&key(&r.disagreement))?;
        let favours = r.favours.as_str();
        let name = |at: u32| self.names[at as usize].clone();
        let mut held: Vec<u32> = Vec::new();
        for &at in dispute.positions.iter().filter_map(|(_, a)| a.as_ref()) {
            if !held.contains(&at) {
                held.push(at);
            }
        }
        let neither = favours == NEITHER;
        // A position's source; records from before the writer stored sources may name
        // the advisor of exactly one position instead.
        let source = key(favours);
        let favoured = match dispute.positions.iter().find(|(s, _)| *s == source) {
            Some((_, advisor)) => advisor.map(name),
            None => {
                let named = dispute
                    .positions
                    .iter()
                    .filter(|(_, a)| a.is_some_and(|at| self.names[at as usize] == favours))
                    .count();
                (named == 1).then(|| favours.to_string())
            }
        };
        Some(Settled {
            task: record.envelope.task.clone(),
            resolution: record.id().to_string(),
            sequence: record.envelope.sequence,
            disagreement: r.disagreement.clone(),
            at: record.envelope.created_at.clone(),
            subject: self
                .subjects
                .get(&dispute.assessment)
                .cloned()
                .unwrap_or_default(),
            advisors: held.into_iter().map(name).collect(),
            favoured: if neither { None } else { favoured },
            neither,
        })
    }

    /// The resolutions taken so far, one per disagreement (its newest), whatever the
    /// chain says of them.
    pub fn settled(&self) -> &[Settled] {
        &self.settled
    }
}

/// The track record of every advisor over `settled`, by advisor id.
pub fn tally<'s>(settled: impl IntoIterator<Item = &'s Settled>) -> BTreeMap<String, TrackRecord> {
    let mut records: BTreeMap<String, TrackRecord> = BTreeMap::new();
    for s in settled {
        for advisor in &s.advisors {
            records
                .entry(advisor.clone())
                .or_default()
                .count(s, s.outcome(advisor));
        }
    }
    records
}

/// The resolutions of one task's `records` (in sequence order) that count: one per
/// disagreement, the newest the chain vouches for.
pub fn settled_in(records: &[Record], trust: &Trust) -> Vec<Settled> {
    // Most tasks have no resolution: they cost one look at each record's kind.
    if !records
        .iter()
        .any(|r| matches!(r.body, Body::Resolution(_)))
    {
        return Vec::new();
    }
    let mut ledger = TaskLedger::default();
    for record in records {
        if trust.is_verified(record.id()) {
            ledger.feed(record);
        }
    }
    ledger.settled
}

/// Every advisor's track record over tasks read afresh: each task's records in sequence
/// order with what its chain vouches for.
pub fn derive<'r>(
    tasks: impl IntoIterator<Item = (&'r [Record], &'r Trust)>,
) -> BTreeMap<String, TrackRecord> {
    let settled: Vec<Settled> = tasks
        .into_iter()
        .flat_map(|(records, trust)| settled_in(records, trust))
        .collect();
    tally(&settled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn record(sequence: u64, id: &str, kind: &str, fields: Value) -> Record {
        let mut value = json!({
            "id": id, "task": "t", "sequence": sequence,
            "created_at": format!("2026-03-02T10:{sequence:02}:00Z"),
            "schema": 1, "redacted": [], "kind": kind,
        });
        for (k, v) in fields.as_object().unwrap() {
            value[k] = v.clone();
        }
        if kind == "consultation" {
            value["finished_at"] = value["created_at"].clone();
        }
        serde_json::from_value(value).expect("a record")
    }

    /// An assessment, a completed consultation of each advisor (of a plan left out), a disagreement
    /// of the executor and each consultation, and a resolution favouring `favours`.
    fn task(advisors: &[&str], favours: &str) -> Vec<Record> {
        let mut records = vec![record(
            1,
            "A",
            "assessment",
            json!({"subject": "Retry uploads", "materiality": "low", "hypothesis": "h"}),
        )];
        let mut positions = vec![json!({"source": "executor", "position": "mine"})];
        for (i, advisor) in advisors.iter().enumerate() {
            let id = format!("C{i}");
            records.push(record(
                2 + i as u64,
                &id,
                "consultation",
                json!({"plan": "P", "advisor": advisor, "status": "completed",
                       "conclusion": "c", "stance": "opposes"}),
            ));
            positions.push(json!({"source": id, "position": advisor}));
        }
        let n = records.len() as u64;
        records.push(record(
            n + 1,
            "D",
            "disagreement",
            json!({"assessment": "A", "positions": positions, "discriminating_question": "q"}),
        ));
        records.push(record(
            n + 2,
            "R",
            "resolution",
            json!({"disagreement": "D", "experiment": "e", "observed": "o", "favours": favours,
                   "evidence": [{"kind": "test", "ref": "t"}]}),
        ));
        records
    }

    fn derived(records: &[Record]) -> BTreeMap<String, TrackRecord> {
        derive([(records, &Trust::default())])
    }

    #[test]
    fn the_favoured_advisor_and_the_others() {
        let track = derived(&task(&["one", "two"], "C0"));
        assert_eq!(
            (
                track["one"].resolutions,
                track["one"].favoured,
                track["one"].disfavoured
            ),
            (1, 1, 0)
        );
        assert_eq!(
            (
                track["two"].resolutions,
                track["two"].favoured,
                track["two"].disfavoured
            ),
            (1, 0, 1)
        );
        assert_eq!(track["one"].recent[0].subject, "Retry uploads");
        assert_eq!(track["one"].recent[0].outcome, Outcome::Favoured);
        assert_eq!(
            track["one"].summary(),
            "favoured 1 of 1, disfavoured 0 of 1"
        );
        assert!(
            !track.contains_key("executor"),
            "the executor is no advisor"
        );
    }

    #[test]
    fn the_executor_favoured_disfavours_every_advisor() {
        let track = derived(&task(&["one"], "executor"));
        assert_eq!((track["one"].favoured, track["one"].disfavoured), (0, 1));
    }

    #[test]
    fn neither_counts_for_nobody_but_is_a_resolution() {
        let track = derived(&task(&["one", "two"], "neither"));
        for advisor in ["one", "two"] {
            let t = &track[advisor];
            assert_eq!((t.resolutions, t.favoured, t.disfavoured), (1, 0, 0));
            assert_eq!(t.recent[0].outcome, Outcome::Neither);
            assert_eq!(
                t.summary(),
                "favoured 0 of 1, disfavoured 0 of 1, 1 favoured neither"
            );
        }
    }

    #[test]
    fn an_advisor_named_in_favours_stands_for_its_one_position() {
        let track = derived(&task(&["one", "two"], "two"));
        assert_eq!((track["two"].favoured, track["one"].disfavoured), (1, 1));
    }

    #[test]
    fn a_disagreement_settled_again_counts_once_by_its_newest_resolution() {
        let mut records = task(&["one"], "C0");
        let n = records.len() as u64;
        records.push(record(
            n + 1,
            "R2",
            "resolution",
            json!({"disagreement": "D", "experiment": "e", "observed": "o",
                   "favours": "executor", "evidence": [{"kind": "test", "ref": "t"}]}),
        ));
        let track = derived(&records);
        let t = &track["one"];
        assert_eq!((t.resolutions, t.favoured, t.disfavoured), (1, 0, 1));
        assert_eq!(t.recent.len(), 1);
        assert_eq!(t.recent[0].resolution, "R2");
    }

    #[test]
    fn an_unverified_resolution_counts_for_nothing() {
        let mut records = task(&["one"], "C0");
        // A chain whose last link (the resolution's) names a hash no record has.
        let digests: Vec<String> = records
            .iter()
            .map(|r| crate::core::chain::digest(r.id().as_bytes()))
            .collect();
        let last = records.len() - 1;
        for (i, r) in records.iter_mut().enumerate() {
            r.envelope.prev = Some(match i {
                0 => crate::core::chain::GENESIS.to_string(),
                i if i == last => crate::core::chain::digest(b"elsewhere"),
                i => digests[i - 1].clone(),
            });
        }
        let entries: Vec<crate::core::chain::Entry> = records
            .iter()
            .zip(&digests)
            .map(|(r, d)| crate::core::chain::Entry {
                file: None,
                sequence: r.envelope.sequence,
                digest: d,
                record: Ok(r),
            })
            .collect();
        let task = crate::core::records::TaskName::new("t").unwrap();
        let trust = Trust::of(&task, &entries);
        assert!(trust.is_verified("C0") && !trust.is_verified("R"));
        assert!(derive([(&records[..], &trust)]).is_empty());
        assert_eq!(
            derived(&records)["one"].favoured,
            1,
            "verified, it would count"
        );
    }

    #[test]
    fn recent_keeps_the_newest_few_newest_first() {
        let mut t = TrackRecord::default();
        for minute in [3, 1, 4, 2, 5] {
            let settled = Settled {
                task: "t".into(),
                resolution: format!("R{minute}"),
                sequence: minute,
                disagreement: format!("D{minute}"),
                at: format!("2026-03-02T10:0{minute}:00Z"),
                subject: "s".into(),
                advisors: vec!["one".into()],
                favoured: None,
                neither: false,
            };
            t.count(&settled, settled.outcome("one"));
        }
        let order: Vec<&str> = t.recent.iter().map(|r| r.resolution.as_str()).collect();
        assert_eq!(order, ["R5", "R4", "R3"]);
        assert_eq!((t.resolutions, t.disfavoured), (5, 5));
    }
}
