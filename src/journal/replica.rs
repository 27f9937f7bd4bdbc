//! This machine's replica of a shared task: each record the stream holds written into the
//! state directory byte for byte (`<state>/<task>/<sequence>.json`, atomically, as the
//! store writes its own), and its head anchored, so the store, the views and `verify` read
//! it as they read any task.

use crate::core::chain::{self, Head};
use crate::core::records::TaskName;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// What applying one record did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The file was written.
    Written,
    /// The file was there with the same bytes (this machine wrote it, or applied it
    /// before).
    Had,
    /// A different file holds this sequence: the replica forked from the stream before the
    /// journal (records written here before it was turned on). Left alone and reported.
    Diverged,
}

/// The sequence of a record's bytes, and its id.
pub fn identify(bytes: &[u8]) -> Option<(u64, String)> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        id: String,
        sequence: u64,
    }
    let envelope: Envelope = serde_json::from_slice(bytes).ok()?;
    (envelope.sequence >= 1 && envelope.sequence <= chain::MAX_SEQUENCE)
        .then_some((envelope.sequence, envelope.id))
}

/// Write record `sequence` of `task` (its stored `bytes`) into `state_dir`, taking the
/// task's lock first unless the caller (the store's write, through the seam) holds it.
pub fn apply(
    state_dir: &Path,
    task: &TaskName,
    sequence: u64,
    bytes: &[u8],
    take_lock: bool,
    anchor: bool,
) -> std::io::Result<Applied> {
    let dir = state_dir.join(task.as_str());
    // A caller holding the task's lock holds it in this directory: it exists.
    let _held = if take_lock {
        DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        Some(lock(&dir)?)
    } else {
        None
    };
    let name = format!("{sequence:010}.json");
    let target = dir.join(&name);
    match fs::read(&target) {
        Ok(existing) if existing == bytes => {
            if anchor {
                anchor_head(state_dir, task, sequence, bytes);
            }
            return Ok(Applied::Had);
        }
        // A replica file a crash left empty or torn (the replica is not flushed: the stream
        // is what is durable) is written again; a whole record that differs is a fork.
        Ok(existing) if identify(&existing).is_some() => return Ok(Applied::Diverged),
        Ok(_) => {
            let _ = fs::remove_file(&target);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&temp)?;
        file.write_all(bytes)?;
        fs::rename(&temp, &target)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    if anchor {
        anchor_head(state_dir, task, sequence, bytes);
    }
    Ok(Applied::Written)
}

/// Anchor record `sequence` (its `bytes`) as `task`'s head on this machine, unless a later
/// one is anchored.
fn anchor_head(state_dir: &Path, task: &TaskName, sequence: u64, bytes: &[u8]) {
    anchor(state_dir, task, sequence, chain::digest(bytes));
}

/// Anchor record `sequence` (hashing to `hash`) as `task`'s head on this machine, unless a
/// later one is anchored.
pub fn anchor(state_dir: &Path, task: &TaskName, sequence: u64, hash: String) {
    if let Some(machine) = crate::machine::installed() {
        let anchors = machine.anchors(state_dir);
        let behind = anchors
            .head(task)
            .is_none_or(|anchored| anchored.sequence < sequence);
        if behind {
            let head = Head { sequence, hash };
            if let Err(e) = anchors.set(task, &head) {
                tracing::warn!(error = %e, task = %task, "cannot anchor a replicated head");
            }
        }
    }
}

/// A task's lock, held until dropped.
pub struct Held {
    _lock: Flock<File>,
}

/// Take `task`'s lock in `state_dir` (its directory made first), as the store takes it,
/// for applying several records under it ([`apply`] with `take_lock` false).
pub fn lock_task(state_dir: &Path, task: &TaskName) -> std::io::Result<Held> {
    let dir = state_dir.join(task.as_str());
    DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    lock(&dir).map(|lock| Held { _lock: lock })
}

/// The task's lock (`.lock`, `flock`), as the store takes it.
fn lock(dir: &Path) -> std::io::Result<Flock<File>> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(dir.join(".lock"))?;
    loop {
        match Flock::lock(file, FlockArg::LockExclusive) {
            Ok(held) => return Ok(held),
            Err((back, nix::errno::Errno::EINTR)) => file = back,
            Err((_, errno)) => return Err(errno.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_written_once_and_a_different_one_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let task = TaskName::new("t").expect("task");
        let bytes = br#"{"id": "A", "sequence": 1}"#;
        assert_eq!(identify(bytes), Some((1, "A".into())));
        let applied = |b: &[u8]| apply(dir.path(), &task, 1, b, true, true).expect("apply");
        assert_eq!(applied(bytes), Applied::Written);
        assert_eq!(applied(bytes), Applied::Had);
        assert_eq!(applied(b"{}"), Applied::Diverged);
        assert_eq!(
            fs::read(dir.path().join("t/0000000001.json")).expect("read"),
            bytes
        );
    }
}
