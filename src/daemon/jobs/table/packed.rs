//! The finished jobs, packed: each one's summary and kept events serialised one after the
//! other into chunks of at least [`CHUNK`] bytes, decoded again when asked for.
//!
//! Why: a job's entry is many small allocations (its summary, events, order with the whole
//! request context, token, channels), made during the burst that ran it. Kept as they
//! were, the 256 finished jobs an idle daemon lists sat one block every couple of KiB
//! across the burst's freed pages, and the allocator could give none of those pages back
//! (`docs/DAEMON.md`, "What the daemon keeps in memory"). Packed, they are a few large
//! blocks, each allocated once at its final size and filled whole; jobs are packed in
//! the order they finish and pruned oldest first, so chunks empty from the front, and a
//! chunk whose jobs were all pruned is freed whole.

use super::Kept;
use crate::daemon::memory::PACKED;
use crate::protocol::{Job, JobState};
use crate::store::Store;
use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

/// The least size of a chunk: the allocator's fixed mmap threshold (a chunk is a mapping
/// of its own unless the heap has a free stretch that large).
pub(super) const CHUNK: usize = 128 * 1024;

/// How many packed jobs the index holds before it grows: one chunk's worth.
const SLOTS: usize = CHUNK / std::mem::size_of::<Packed>() + 1;

/// The packed finished jobs.
pub(super) struct Archive {
    /// The chunks, oldest first; chunk `i` has the number `first + i`.
    chunks: Vec<Chunk>,
    first: u64,
    /// One entry per packed job, in the order packed.
    jobs: Vec<Packed>,
    /// The stores the packed jobs' records are read back from (a few: one per state
    /// directory), so a job keeps a number, not a handle of its own.
    stores: Vec<Arc<Store>>,
}

struct Chunk {
    bytes: Vec<u8>,
    /// How many packed jobs it still holds.
    live: usize,
}

/// Where one packed job lies, and what the table asks of every job without decoding it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Packed {
    chunk: u64,
    offset: u32,
    /// The job id's length: the id comes first, the serialised job after it.
    id_len: u32,
    len: u32,
    store: Option<u16>,
    /// When the job ended.
    pub finished: SystemTime,
    /// Its state.
    pub state: JobState,
}

/// What is serialised of a job.
#[derive(Serialize)]
struct Out<'a> {
    job: &'a Job,
    events: &'a [Kept],
}

/// The same, read back.
#[derive(Deserialize)]
pub(super) struct In {
    pub job: Job,
    pub events: Vec<Kept>,
}

impl Default for Archive {
    fn default() -> Archive {
        Archive {
            chunks: Vec::with_capacity(64),
            first: 0,
            // Reserved at once, when the daemon starts: the index is not grown among a
            // burst's small blocks.
            jobs: Vec::with_capacity(SLOTS),
            stores: Vec::with_capacity(8),
        }
    }
}

impl Archive {
    /// Pack `job` and its `events`, ended at `finished`, whose records are read back from
    /// `store`. False (nothing packed) when the job would not read back identical.
    pub fn pack(
        &mut self,
        job: &Job,
        events: &[Kept],
        finished: SystemTime,
        store: Option<&Arc<Store>>,
    ) -> bool {
        let Ok(text) = serde_json::to_vec(&Out { job, events }) else {
            return false;
        };
        match serde_json::from_slice::<In>(&text) {
            Ok(back) if back.job == *job && back.events == events => {}
            _ => return false,
        }
        let id = job.id.as_str().as_bytes();
        let len = id.len() + text.len();
        let (Ok(id_len), Ok(text_len)) = (u32::try_from(id.len()), u32::try_from(text.len()))
        else {
            return false;
        };
        let store = match store {
            None => None,
            Some(store) => match self.stores.iter().position(|s| Arc::ptr_eq(s, store)) {
                Some(at) => u16::try_from(at).ok(),
                None => {
                    self.stores.push(store.clone());
                    u16::try_from(self.stores.len() - 1).ok()
                }
            },
        };
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.bytes.capacity() - c.bytes.len() >= len);
        if !fits {
            // Never grown in place: a chunk is allocated once, at its final size.
            let bytes = Vec::with_capacity(len.max(CHUNK));
            PACKED.1.fetch_add(bytes.capacity(), Ordering::Relaxed);
            self.chunks.push(Chunk { bytes, live: 0 });
        }
        let number = self.first + self.chunks.len() as u64 - 1;
        let chunk = self.chunks.last_mut().expect("a chunk");
        let Ok(offset) = u32::try_from(chunk.bytes.len()) else {
            return false;
        };
        chunk.bytes.extend_from_slice(id);
        chunk.bytes.extend_from_slice(&text);
        chunk.live += 1;
        PACKED.0.fetch_add(1, Ordering::Relaxed);
        self.jobs.push(Packed {
            chunk: number,
            offset,
            id_len,
            len: text_len,
            store,
            finished,
            state: job.state,
        });
        true
    }

    /// Every packed job, in the order packed.
    pub fn jobs(&self) -> &[Packed] {
        &self.jobs
    }

    fn bytes(&self, packed: &Packed) -> &[u8] {
        let chunk = &self.chunks[(packed.chunk - self.first) as usize];
        let start = packed.offset as usize;
        &chunk.bytes[start..start + packed.id_len as usize + packed.len as usize]
    }

    /// The id of `packed`.
    pub fn id(&self, packed: &Packed) -> &str {
        let bytes = &self.bytes(packed)[..packed.id_len as usize];
        std::str::from_utf8(bytes).unwrap_or_default()
    }

    /// The packed job `id`, if any.
    pub fn find(&self, id: &str) -> Option<&Packed> {
        self.jobs.iter().find(|p| self.id(p) == id)
    }

    /// `packed` decoded, with the store its records are read back from.
    pub fn unpack(&self, packed: &Packed) -> Option<(In, Option<Arc<Store>>)> {
        let text = &self.bytes(packed)[packed.id_len as usize..];
        let back = serde_json::from_slice::<In>(text).ok()?;
        let store = packed
            .store
            .and_then(|s| self.stores.get(s as usize).cloned());
        Some((back, store))
    }

    /// Keep only the packed jobs `keep` says yes to; a chunk left without any is freed.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &Packed) -> bool) {
        let mut dropped = Vec::new();
        let mut index = 0;
        while index < self.jobs.len() {
            let packed = self.jobs[index];
            if keep(self.id(&packed), &packed) {
                index += 1;
            } else {
                dropped.push(packed.chunk);
                self.jobs.remove(index);
            }
        }
        if dropped.is_empty() {
            return;
        }
        PACKED.0.fetch_sub(dropped.len(), Ordering::Relaxed);
        for number in dropped {
            let chunk = &mut self.chunks[(number - self.first) as usize];
            chunk.live -= 1;
        }
        let last = self.chunks.len().saturating_sub(1);
        let everything = self.jobs.is_empty();
        for (at, chunk) in self.chunks.iter_mut().enumerate() {
            // The last chunk is filled on; it goes only when nothing is packed.
            if chunk.live == 0 && (at != last || everything) {
                PACKED
                    .1
                    .fetch_sub(chunk.bytes.capacity(), Ordering::Relaxed);
                chunk.bytes = Vec::new();
            }
        }
        while !self.chunks.is_empty() && self.chunks[0].live == 0 {
            self.chunks.remove(0);
            self.first += 1;
        }
        if everything {
            self.stores.clear();
        }
    }

    /// How many chunks it holds, and their bytes in use.
    #[cfg(test)]
    pub fn size(&self) -> (usize, usize) {
        let used = self.chunks.iter().map(|c| c.bytes.len()).sum();
        (self.chunks.iter().filter(|c| c.live > 0).count(), used)
    }
}
