//! The one narrow seam between the store and the journal: the store calls [`opened`] when
//! it opens a state directory, [`publish`] under a task's lock just before it writes a
//! record's file, and [`take_behind`] after each attempt to learn whether another machine
//! wrote first (then it judges the record again). A process not on the journal writes as
//! it always did, except into a state directory this machine shares: there a write is
//! refused, never stored on the side.

use super::stream::{self, PublishError};
use crate::core::records::TaskName;
use std::cell::RefCell;
use std::path::Path;

thread_local! {
    /// Set when this thread's last publish found another machine's record first.
    static BEHIND: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The store opened `state_dir`: a process on the journal attaches it (the replica caught
/// up before the first view reads it).
pub fn opened(state_dir: &Path) {
    if let Some(journal) = stream::installed() {
        journal.attach(state_dir, true);
    }
}

/// Record `sequence` of `task` (its stored `bytes`, id `id`) is about to be written into
/// `state_dir`: in a shared state directory it is published first and exists once the
/// journal acknowledged it. `Err` is the whole message; nothing may be written.
pub fn publish(
    state_dir: &Path,
    task: &TaskName,
    sequence: u64,
    id: &str,
    bytes: &[u8],
) -> Result<(), String> {
    let Some(journal) = stream::installed() else {
        return refuse_if_shared(state_dir, task);
    };
    let Some(shared) = journal.attach(state_dir, false) else {
        return Ok(());
    };
    match journal.publish(&shared, task, sequence, id, bytes) {
        Ok(()) => Ok(()),
        Err(PublishError::Behind(note)) => {
            let message = format!("{note}; the record is judged again");
            BEHIND.with(|b| *b.borrow_mut() = Some(note));
            Err(message)
        }
        Err(PublishError::Refused(message)) => Err(message),
    }
}

/// The journal `state_dir` is shared through, as the views show it (whether the bus is
/// reachable, how current this machine's replica is); `None` when it is not shared or this
/// process is not on the journal.
pub fn state(state_dir: &Path) -> Option<crate::core::views::status::JournalState> {
    let journal = stream::installed()?;
    journal
        .attach(state_dir, false)
        .map(|shared| shared.state())
}

/// Whether this thread's last [`publish`] found another machine's record first (and
/// caught the task up): which record, from which machine. Cleared by reading.
pub fn take_behind() -> Option<String> {
    BEHIND.with(|b| b.borrow_mut().take())
}

fn refuse_if_shared(state_dir: &Path, task: &TaskName) -> Result<(), String> {
    let Some(text) = super::marker::marker(state_dir).and_then(|p| std::fs::read_to_string(p).ok())
    else {
        return Ok(());
    };
    let name = text.split_whitespace().next().unwrap_or("?");
    Err(format!(
        "task `{task}` is shared through the journal `{name}` and this process is not on it, \
         so nothing was stored (a record kept only here would fork the task's chain); \
         record through the daemon started with `advisord --journal` (drop `--no-daemon`)"
    ))
}
