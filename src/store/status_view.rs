//! The status view of each cached task (`core::views::status::StatusIndex`), kept in the
//! task's cache and fed only the records read or written since a view last asked, so a
//! page of a task's status costs the page, not the task. A cache read afresh (a file
//! changed behind it) starts its index again with it, and so does another judgement of
//! the task (its chain broken, this machine no longer vouching for it, other pins).

use super::{Store, StoreError};
use crate::core::chain::Trust;
use crate::core::records::{Record, TaskName};
use crate::core::views::downstream::Graph;
use crate::core::views::status::{Judged, StatusIndex};

impl Store {
    /// Call `f` with every record of `task` in sequence order, what the hash chain vouches
    /// for, the task's downstream graph (as [`Store::with_downstream`] does) and its status
    /// index caught up over the records.
    pub fn with_status<R>(
        &self,
        task: &TaskName,
        f: impl FnOnce(&[Record], &Trust, &Graph, &mut StatusIndex<'static>) -> R,
    ) -> Result<R, StoreError> {
        self.with_graph(task, |cache, trust, graph| {
            let mut index = std::mem::take(&mut cache.status);
            let judged = Judged::of(trust, cache.attestations.pins());
            index.catch_up(&cache.records, trust, judged);
            let answer = f(&cache.records, trust, graph, &mut index);
            cache.status = index;
            answer
        })
    }
}
