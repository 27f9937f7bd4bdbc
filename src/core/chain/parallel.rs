//! `verify`'s work spread over the machine's cores. What does not depend on order (each
//! file's hash and parse) is done in contiguous chunks side by side; so is admitting each
//! record again through the writer's rules, which depends only on the records before it:
//! each chunk indexes the records before its first one ([`writer::Index`]) and admits its
//! own against that prefix, as a walk in order would. The walk of the chain, which needs
//! order, then runs once over the results. The verdicts are those of one walk in order.

use crate::core::records::{Body, Record, TaskName};
use crate::core::writer::{self, Refusal};
use std::sync::mpsc;

/// Below this many items per worker, one more thread costs more than it saves.
const MIN_PER_WORKER: usize = 256;
/// At most this many workers, whatever the machine has.
const MAX_WORKERS: usize = 8;
/// Each worker admitting records tells how far it has gone every this many records.
const TELL_EVERY: usize = 500;

/// How many workers to give `items` items: the machine's cores, no more than keep each
/// busy with [`MIN_PER_WORKER`] items, at least one.
pub fn workers(items: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    cores.min(items / MIN_PER_WORKER).clamp(1, MAX_WORKERS)
}

/// The bounds of `workers` contiguous chunks of `len` items, in order.
fn chunks(len: usize, workers: usize) -> Vec<(usize, usize)> {
    let workers = workers.clamp(1, len.max(1));
    (0..workers)
        .map(|w| (len * w / workers, len * (w + 1) / workers))
        .collect()
}

/// `f` of each of `items`, in order, computed by `workers` threads over contiguous chunks.
/// Each worker writes its results straight into its own part of one vector, which the
/// result then reuses: at a hundred thousand records of about 500 bytes each, a vector
/// per worker joined into a new one afterwards cost two fresh copies of some 50 MB, and
/// fresh pages are much of what `verify` spends (the kernel zeroing them).
pub fn map<T: Sync, R: Send>(items: &[T], workers: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if workers <= 1 {
        return items.iter().map(f).collect();
    }
    let f = &f;
    let mut out: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|scope| {
        let mut rest = out.as_mut_slice();
        let mut handles = Vec::with_capacity(workers);
        for (from, to) in chunks(items.len(), workers) {
            let (part, after) = rest.split_at_mut(to - from);
            rest = after;
            handles.push(scope.spawn(move || {
                for (slot, item) in part.iter_mut().zip(&items[from..to]) {
                    *slot = Some(f(item));
                }
            }));
        }
        for handle in handles {
            handle
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
        }
    });
    // Every slot was filled (a worker that panicked went on in the caller above); the
    // collection reuses `out`'s allocation.
    out.into_iter()
        .map(|slot| slot.expect("every worker fills its part"))
        .collect()
}

/// The workers' results in chunk order, `capacity` in all; a worker's panic goes on in
/// the caller.
fn joined<R>(handles: Vec<std::thread::ScopedJoinHandle<'_, Vec<R>>>, capacity: usize) -> Vec<R> {
    let mut all = Vec::with_capacity(capacity);
    for handle in handles {
        all.extend(
            handle
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e)),
        );
    }
    all
}

/// What admitting a stored record again through the writer's rules of today gives.
#[derive(Debug, Clone, PartialEq)]
pub enum Readmitted {
    /// The writer would store it as it is (or, for a plan, accepts its assessment).
    Same,
    /// The writer refuses it.
    Refused(Refusal),
    /// The writer would store this field otherwise.
    Differs(String),
}

/// Admit `record` again against `earlier` (the readable records before it) and their
/// `index`.
pub fn readmit_one(
    earlier: &[Record],
    index: &writer::Index,
    record: &Record,
    task: &TaskName,
) -> Readmitted {
    match writer::readmit_indexed(earlier, Some(index), record, task) {
        Err(refusal) => Readmitted::Refused(refusal),
        Ok(None) => Readmitted::Same,
        Ok(Some(again)) => {
            differing_field(&again.body, &record.body).map_or(Readmitted::Same, Readmitted::Differs)
        }
    }
}

/// Admit each of `readable` (a task's readable records, in file order) again against those
/// before it, by `workers` threads over contiguous chunks; `admitted(n)` is told on the
/// calling thread as each `n` more are done.
pub fn readmit_all(
    readable: &[Record],
    task: &TaskName,
    workers: usize,
    admitted: &mut dyn FnMut(usize),
) -> Vec<Readmitted> {
    let chunk = |from: usize, to: usize, tell: &mut dyn FnMut(usize)| -> Vec<Readmitted> {
        let mut index = writer::Index::of(&readable[..from]);
        let mut out = Vec::with_capacity(to - from);
        for i in from..to {
            index.extend(&readable[..i]);
            out.push(readmit_one(&readable[..i], &index, &readable[i], task));
            if (i + 1 - from).is_multiple_of(TELL_EVERY) {
                tell(TELL_EVERY);
            }
        }
        tell((to - from) % TELL_EVERY);
        out
    };
    if workers <= 1 {
        return chunk(0, readable.len(), admitted);
    }
    std::thread::scope(|scope| {
        let (told, telling) = mpsc::channel::<usize>();
        let handles: Vec<_> = chunks(readable.len(), workers)
            .into_iter()
            .map(|(from, to)| {
                let told = told.clone();
                let chunk = &chunk;
                scope.spawn(move || {
                    chunk(from, to, &mut |n| {
                        let _ = told.send(n);
                    })
                })
            })
            .collect();
        drop(told);
        // Every worker's sender is dropped when it ends: the loop ends with the last.
        for n in telling {
            admitted(n);
        }
        joined(handles, readable.len())
    })
}

/// The first field whose value differs between two bodies of one kind.
pub fn differing_field(written: &Body, stored: &Body) -> Option<String> {
    if written == stored {
        return None;
    }
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) =
        (serde_json::to_value(written), serde_json::to_value(stored))
    else {
        return Some("kind".to_string());
    };
    a.keys()
        .chain(b.keys())
        .find(|k| a.get(*k) != b.get(*k))
        .cloned()
        .or_else(|| Some("kind".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_item_once_in_order() {
        for (len, workers) in [(0, 1), (1, 4), (10, 3), (1000, 2), (7, 7), (5, 9)] {
            let bounds = chunks(len, workers);
            assert_eq!(bounds.first().map(|b| b.0), Some(0), "{len} {workers}");
            assert_eq!(bounds.last().map(|b| b.1), Some(len), "{len} {workers}");
            assert!(bounds.windows(2).all(|w| w[0].1 == w[1].0), "{bounds:?}");
        }
        let items: Vec<usize> = (0..1000).collect();
        assert_eq!(
            map(&items, 3, |i| i * 2),
            (0..1000).map(|i| i * 2).collect::<Vec<_>>()
        );
    }
}
