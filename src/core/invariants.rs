//! Invariants: constraints the team declared, which every material decision accounts for.
//!
//! Three scopes, narrowest first in precedence: the task's (records of kind `invariant`,
//! and conclusions that remove or narrow one), the project's (`.advisord/project.yaml`)
//! and the user's global ones. A narrower one replaces a wider one of the same name; a
//! project never removes a global one (the edge refuses the attempt when it reads the
//! file). Pure: the edge reads the files and hands the declared invariants in; the task's
//! come from its records, folded one at a time so the writer's index keeps them.

use crate::core::records::{Body, InvariantAction, InvariantChange, Record};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The longest invariant name, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// What an invariant name is, as messages say it.
pub const NAME_RULE: &str =
    "1 to 64 of `a-z 0-9 - _`, starting with a letter or a digit (e.g. `no-core-network`)";

/// Where an invariant was declared.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The user's configuration directory: every repository and task.
    Global,
    /// The repository's `.advisord/project.yaml`.
    Project,
    /// The task's records.
    Task,
}

impl Scope {
    /// Every scope, widest first.
    pub const ALL: [Scope; 3] = [Scope::Global, Scope::Project, Scope::Task];

    /// The name used in output and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Project => "project",
            Scope::Task => "task",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An invariant as a file declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Declared {
    /// Its name.
    pub name: String,
    /// The constraint.
    pub description: String,
}

/// An invariant in force, with the scope it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InForce {
    /// Its name.
    pub name: String,
    /// The constraint.
    pub description: String,
    /// The scope whose declaration is in force.
    pub scope: Scope,
    /// The wider scopes whose declaration of the same name this one replaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<Scope>,
    /// The record that put it in force (task scope only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
}

/// Whether `name` is an invariant name; the error says what is accepted.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invariant name `{}` is not accepted: a name is {NAME_RULE}",
            name.escape_debug()
        ))
    }
}

/// One task-scope entry: an invariant the task put in force, or one it decided to drop.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TaskEntry {
    /// In force at task scope, from `record`.
    InForce {
        description: String,
        record: String,
        /// Added by an `invariant` record (not narrowed from a wider one by a decision).
        added: bool,
    },
    /// A conclusion decided it no longer holds in this task, whatever its scope.
    Dropped,
}

/// The task's invariants: the fold of its `invariant` records and of the conclusions that
/// remove or narrow one, in record order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskInvariants {
    entries: BTreeMap<String, TaskEntry>,
}

impl TaskInvariants {
    /// The fold of `records`.
    pub fn of(records: &[Record]) -> TaskInvariants {
        let mut task = TaskInvariants::default();
        for record in records {
            task.apply(record);
        }
        task
    }

    /// Fold one record in (any other kind changes nothing).
    pub fn apply(&mut self, record: &Record) {
        match &record.body {
            Body::Invariant(x) => match x.action {
                InvariantAction::Add | InvariantAction::Narrow => {
                    let added = x.action == InvariantAction::Add
                        || matches!(
                            self.entries.get(&x.name),
                            Some(TaskEntry::InForce { added: true, .. })
                        );
                    self.entries.insert(
                        x.name.clone(),
                        TaskEntry::InForce {
                            description: x.description.clone().unwrap_or_default(),
                            record: record.id().to_string(),
                            added,
                        },
                    );
                }
                InvariantAction::Remove => {
                    self.entries.remove(&x.name);
                }
            },
            Body::Conclusion(c) => {
                for check in &c.invariants {
                    match check.change {
                        Some(InvariantChange::Remove) => {
                            self.entries.insert(check.name.clone(), TaskEntry::Dropped);
                        }
                        Some(InvariantChange::Narrow) => {
                            self.entries.insert(
                                check.name.clone(),
                                TaskEntry::InForce {
                                    description: check.description.clone().unwrap_or_default(),
                                    record: record.id().to_string(),
                                    added: false,
                                },
                            );
                        }
                        None => {}
                    }
                }
            }
            _ => {}
        }
    }

    /// The record that added `name` at task scope, when the task added it and it is in
    /// force: only those may an `invariant` record narrow or remove.
    pub fn added_by(&self, name: &str) -> Option<&str> {
        match self.entries.get(name) {
            Some(TaskEntry::InForce {
                record,
                added: true,
                ..
            }) => Some(record),
            _ => None,
        }
    }

    /// Whether the task holds nothing about invariants.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The global and project invariants merged: a project one replaces a global one of the
/// same name. (A project's attempt to remove a global one never reaches here: the edge
/// refuses it when it reads the file.)
pub fn outer(global: &[Declared], project: &[Declared]) -> Vec<InForce> {
    let mut merged: BTreeMap<&str, InForce> = BTreeMap::new();
    for (scope, declared) in [(Scope::Global, global), (Scope::Project, project)] {
        for d in declared {
            let replaces = merged
                .get(d.name.as_str())
                .map(|wider| {
                    let mut r = wider.replaces.clone();
                    r.push(wider.scope);
                    r
                })
                .unwrap_or_default();
            merged.insert(
                &d.name,
                InForce {
                    name: d.name.clone(),
                    description: d.description.clone(),
                    scope,
                    replaces,
                    record: None,
                },
            );
        }
    }
    merged.into_values().collect()
}

/// The invariants in force in a task: `outer` (see [`outer`]) with the task's own on top,
/// by name. A task-scope one replaces a wider one of the same name; one a conclusion
/// removed is in force no more.
pub fn effective(outer: &[InForce], task: &TaskInvariants) -> Vec<InForce> {
    let mut merged: BTreeMap<&str, InForce> =
        outer.iter().map(|i| (i.name.as_str(), i.clone())).collect();
    for (name, entry) in &task.entries {
        match entry {
            TaskEntry::Dropped => {
                merged.remove(name.as_str());
            }
            TaskEntry::InForce {
                description,
                record,
                ..
            } => {
                let replaces = merged
                    .get(name.as_str())
                    .map(|wider| {
                        let mut r = wider.replaces.clone();
                        r.push(wider.scope);
                        r
                    })
                    .unwrap_or_default();
                merged.insert(
                    name,
                    InForce {
                        name: name.clone(),
                        description: description.clone(),
                        scope: Scope::Task,
                        replaces,
                        record: Some(record.clone()),
                    },
                );
            }
        }
    }
    merged.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declared(name: &str, description: &str) -> Declared {
        Declared {
            name: name.into(),
            description: description.into(),
        }
    }

    fn record(sequence: u64, body: serde_json::Value) -> Record {
        let mut value = json!({
            "id": format!("R{sequence}"), "task": "t", "sequence": sequence,
            "created_at": "2026-01-01T00:00:00.000Z", "schema": 2, "redacted": [],
        });
        for (k, v) in body.as_object().unwrap() {
            value[k] = v.clone();
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn names_follow_one_rule() {
        for ok in ["a", "no-core-network", "x_1", "9lives", &"a".repeat(64)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "_a", "A", "a b", "ä", &"a".repeat(65), "a.b"] {
            let e = check_name(bad).unwrap_err();
            assert!(e.contains("a-z 0-9 - _"), "{e}");
        }
    }

    #[test]
    fn task_replaces_project_replaces_global() {
        let global = [declared("a", "global a"), declared("b", "global b")];
        let project = [declared("b", "project b"), declared("c", "project c")];
        let outer = outer(&global, &project);
        let scopes: Vec<(&str, Scope, &[Scope])> = outer
            .iter()
            .map(|i| (i.name.as_str(), i.scope, &i.replaces[..]))
            .collect();
        assert_eq!(
            scopes,
            [
                ("a", Scope::Global, &[][..]),
                ("b", Scope::Project, &[Scope::Global][..]),
                ("c", Scope::Project, &[][..]),
            ]
        );
        let task = TaskInvariants::of(&[
            record(
                1,
                json!({"kind": "invariant", "name": "b", "action": "add", "description": "task b"}),
            ),
            record(
                2,
                json!({"kind": "invariant", "name": "d", "action": "add", "description": "task d"}),
            ),
        ]);
        let all = effective(&outer, &task);
        let b = all.iter().find(|i| i.name == "b").unwrap();
        assert_eq!(b.scope, Scope::Task);
        assert_eq!(b.description, "task b");
        assert_eq!(b.replaces, [Scope::Global, Scope::Project]);
        assert_eq!(b.record.as_deref(), Some("R1"));
        assert_eq!(all.len(), 4);
        assert_eq!(task.added_by("d"), Some("R2"));
        assert_eq!(task.added_by("a"), None);
    }

    #[test]
    fn removing_a_task_one_uncovers_the_wider_one_and_a_decision_drops_any() {
        let outer = outer(&[declared("a", "global a")], &[]);
        let mut task = TaskInvariants::of(&[
            record(
                1,
                json!({"kind": "invariant", "name": "a", "action": "add", "description": "task a"}),
            ),
            record(
                2,
                json!({"kind": "invariant", "name": "a", "action": "remove"}),
            ),
        ]);
        let all = effective(&outer, &task);
        assert_eq!(
            (all[0].scope, all[0].description.as_str()),
            (Scope::Global, "global a")
        );
        task.apply(&record(
            3,
            json!({"kind": "conclusion", "assessment": "A", "decision": "d", "rationale": "r",
                   "reviewed_by": [], "independent_review_count": 0,
                   "invariants": [{"name": "a", "holds": false, "change": "remove"}]}),
        ));
        assert!(effective(&outer, &task).is_empty());
        task.apply(&record(
            4,
            json!({"kind": "conclusion", "assessment": "A", "decision": "d", "rationale": "r",
                   "reviewed_by": [], "independent_review_count": 0,
                   "invariants": [{"name": "a", "holds": false, "change": "narrow",
                                   "description": "narrower a"}]}),
        ));
        let all = effective(&outer, &task);
        assert_eq!(
            (all[0].scope, all[0].description.as_str()),
            (Scope::Task, "narrower a")
        );
        // Narrowed by a decision, not added by the task: a record cannot remove it.
        assert_eq!(task.added_by("a"), None);
    }
}
