//! The downstream graph of each cached task (`core::views::downstream`), kept in the task's
//! cache and caught up over the records read or written since a view last asked, so a view
//! of what rests on what costs the new records, never the task again. A cache read afresh
//! (a file changed behind it) starts its graph again with it.
//!
//! Also the writer's dry run: a record judged exactly as [`Store::write`] judges it, under
//! the same cache, without writing anything.

use super::{lock, Checked, Store, StoreError, TaskCache};
use crate::core::chain::{self, Trust};
use crate::core::policy::PlanEnv;
use crate::core::records::{Record, TaskName};
use crate::core::views::downstream::Graph;
use crate::core::writer;

impl Store {
    /// Call `f` with every record of `task` in sequence order, what the hash chain vouches
    /// for and the task's downstream graph, as [`Store::with_trusted_records`] does.
    pub fn with_downstream<R>(
        &self,
        task: &TaskName,
        f: impl FnOnce(&[Record], &Trust, &Graph) -> R,
    ) -> Result<R, StoreError> {
        self.with_graph(task, |cache, trust, graph| f(&cache.records, trust, graph))
    }

    /// Call `f` with the task's cache read up to date, what the hash chain vouches for and
    /// the task's downstream graph caught up over the records; the one way in for the views
    /// kept in the cache (this graph, the status index).
    pub(super) fn with_graph<R>(
        &self,
        task: &TaskName,
        f: impl FnOnce(&mut TaskCache, &Trust, &Graph) -> R,
    ) -> Result<R, StoreError> {
        let slot = self.cache(task);
        let mut cache = lock(&slot);
        if let Checked::Stale = self.check_files(task, &mut cache)? {
            *cache = TaskCache::default();
        }
        self.refresh(task, &mut cache)?;
        let trust = self.judged(task, &mut cache);
        let mut graph = std::mem::take(&mut cache.downstream);
        graph.catch_up(&cache.records);
        let answer = f(&mut cache, &trust, &graph);
        cache.downstream = graph;
        let bytes = cache.bytes;
        drop(cache);
        self.used(task, &slot, bytes);
        Ok(answer)
    }

    /// Judge `input` as [`Store::write`] would now, and write nothing: the record the
    /// writer would store (its id, sequence and `prev` as they would be), or its refusal.
    /// No directory, file or anchor is created or changed.
    pub fn dry_run(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
        invariants: &[crate::core::invariants::InForce],
    ) -> Result<Record, StoreError> {
        if !self.task_dir(task).exists() {
            let mut env = self.write_env(task, 1, plan_env, chain::GENESIS.to_string(), None, &[]);
            env.invariants = invariants;
            return Ok(writer::admit(&[], input, &env)?);
        }
        let slot = self.cache(task);
        let mut cache = lock(&slot);
        self.refresh(task, &mut cache)?;
        let record = self.judge_next(task, &mut cache, input, plan_env, &[], invariants, false);
        let bytes = cache.bytes;
        drop(cache);
        self.used(task, &slot, bytes);
        record
    }
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use crate::core::records::TaskName;
    use serde_json::json;
    use std::fs;

    fn listing(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
            .map(|d| {
                d.map(|e| {
                    let path = e.expect("entry").path();
                    let bytes = fs::read(&path).unwrap_or_default();
                    (path.display().to_string(), bytes)
                })
                .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    }

    /// A dry run judges as the writer does and writes nothing; the graph a view gets
    /// follows the writes since it last asked.
    #[test]
    fn a_dry_run_writes_nothing_and_the_graph_catches_up() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path());
        let t = TaskName::new("t").expect("task");
        let assessment = json!({"kind": "assessment", "subject": "s", "materiality": "low",
                                "hypothesis": "h"});
        let judged = store.dry_run(&t, &assessment, None, &[]).expect("accepted");
        assert_eq!(judged.envelope.sequence, 1);
        assert!(!store.task_dir(&t).exists(), "nothing created");
        let a = store.write(&t, &assessment, None).expect("written");
        let before = listing(&store.task_dir(&t));
        let c = json!({"kind": "conclusion", "assessment": a.id(), "decision": "d",
                       "rationale": "r"});
        let judged = store.dry_run(&t, &c, None, &[]).expect("accepted");
        assert_eq!(judged.envelope.sequence, 2);
        let refused = store.dry_run(
            &t,
            &json!({"kind": "conclusion", "assessment": "nope",
                                                "decision": "d", "rationale": "r"}),
            None,
            &[],
        );
        assert!(matches!(refused, Err(super::StoreError::Refused(_))));
        assert_eq!(listing(&store.task_dir(&t)), before, "nothing written");
        let down = |id: &str| {
            store
                .with_downstream(&t, |_, trust, graph| graph.downstream(id, trust))
                .expect("read")
                .map(|d| d.len())
        };
        assert_eq!(down(a.id()), Some(0));
        store.write(&t, &c, None).expect("written");
        assert_eq!(down(a.id()), Some(1));
    }
}
