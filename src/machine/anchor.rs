//! The head of every task this machine wrote, kept outside the repository.
//!
//! Every writer on this machine (the daemon, `--no-daemon`) anchors, after each record it
//! stores, the task's new head (sequence and hash) in
//! `<data dir>/anchors/<state dir id>/<task>.head`, where the state directory's id is the
//! first 32 hex digits of the SHA-256 of its canonical path (the path itself is written
//! beside, in `state_dir`, for people). Files are `0600`, directories `0700`. A task whose
//! anchored head is not in place is `foreign` (`core::chain::foreign` says the rule).
//!
//! The anchor is overwritten in place (one fixed-width line of 93 bytes, within one
//! sector) without an `fsync`; it is created once through a temporary file renamed into
//! place. Renaming over it each time would cost a synchronous flush on ext4 (the
//! replace-by-rename heuristic), milliseconds per record. No `fsync` is needed: the record
//! it names was made durable first, records never change, and an older anchor still names
//! a record in place, so losing the newest anchor in a crash costs nothing but the
//! allowance for one record past the anchor; a torn or garbled anchor reads as none, which
//! makes the task foreign, never one foreign task local (see `docs/records.md`).

use super::ensure_private_dir;
use crate::core::chain::Head;
use crate::core::records::TaskName;
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The anchored heads of one state directory's tasks.
pub struct Anchors {
    data_dir: PathBuf,
    state_dir: PathBuf,
    /// The directory of its anchors, once the state directory could be named canonically.
    dir: OnceLock<PathBuf>,
}

impl Anchors {
    /// The anchors of `state_dir` kept in `data_dir` (nothing is read yet).
    pub fn new(data_dir: &Path, state_dir: &Path) -> Anchors {
        Anchors {
            data_dir: data_dir.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            dir: OnceLock::new(),
        }
    }

    /// The directory holding the anchors; `None` while the state directory does not exist
    /// (it then holds no task either).
    pub fn dir(&self) -> Option<&Path> {
        if let Some(dir) = self.dir.get() {
            return Some(dir);
        }
        let canonical = std::fs::canonicalize(&self.state_dir).ok()?;
        let hash = Sha256::digest(canonical.as_os_str().as_encoded_bytes());
        let id = hex::encode(&hash[..16]);
        let dir = self.data_dir.join("anchors").join(id);
        let _ = self.dir.set(dir);
        self.dir.get().map(PathBuf::as_path)
    }

    /// The anchor file of `task`.
    pub fn file(&self, task: &TaskName) -> Option<PathBuf> {
        self.dir().map(|d| d.join(format!("{task}.head")))
    }

    /// The head anchored for `task`, or `None` when this machine anchored none (or the
    /// anchor cannot be read: it then vouches for nothing).
    pub fn head(&self, task: &TaskName) -> Option<Head> {
        let path = self.file(task)?;
        // Its access time left alone: the anchor is read right after each write of it.
        let mut file = crate::paths::open_for_reading(&path, nix::libc::O_NOFOLLOW).ok()?;
        // An anchor is one line of 93 bytes, read whole (at most 256) into room made for
        // it: two `read`s, where `read_to_string`'s growing buffer took four (it is read
        // before every plan the daemon writes).
        let mut bytes = Vec::with_capacity(257);
        Read::by_ref(&mut file)
            .take(256)
            .read_to_end(&mut bytes)
            .ok()?;
        let text = std::str::from_utf8(&bytes).ok()?;
        let (sequence, hash) = text.trim().split_once(' ')?;
        let hash = hash.trim();
        let well_formed = hash.len() == 71
            && hash.starts_with("sha256:")
            && hash[7..].bytes().all(|b| b.is_ascii_hexdigit());
        if !well_formed {
            return None;
        }
        Some(Head {
            sequence: sequence.parse().ok()?,
            hash: hash.to_string(),
        })
    }

    /// Anchor `head` as `task`'s: the anchor overwritten in place, or created through a
    /// private temporary file renamed into place (no `fsync`, see the module
    /// documentation).
    pub fn set(&self, task: &TaskName, head: &Head) -> io::Result<()> {
        self.set_kept(task, head, &mut None)
    }

    /// [`Anchors::set`], writing through `kept`, the anchor file this call or an earlier
    /// one of the same batch opened (kept open for the batch's next head: a batch of three
    /// records anchors three times, each right after its record is renamed into place).
    pub fn set_kept(
        &self,
        task: &TaskName,
        head: &Head,
        kept: &mut Option<File>,
    ) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        // One fixed width, so each anchor overwrites the last in place.
        let text = format!("{:020} {}\n", head.sequence, head.hash);
        if let Some(file) = kept {
            return file.write_all_at(text.as_bytes(), 0);
        }
        let dir = self.dir().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "the state directory `{}` does not exist",
                    self.state_dir.display()
                ),
            )
        })?;
        let name = format!("{task}.head");
        // The common case first, with no look at the directory: the anchor is there and
        // is written over (one `open`, one `pwrite`, no `statx`: the daemon anchors after
        // every record it places).
        match OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(dir.join(&name))
        {
            Ok(file) => {
                let written = file.write_all_at(text.as_bytes(), 0);
                *kept = Some(file);
                written
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !dir.is_dir() {
                    ensure_private_dir(dir)?;
                    if let Ok(canonical) = std::fs::canonicalize(&self.state_dir) {
                        let mut named = canonical.as_os_str().as_encoded_bytes().to_vec();
                        named.push(b'\n');
                        write_replacing(dir, "state_dir", &named)?;
                    }
                }
                write_replacing(dir, &name, text.as_bytes())
            }
            Err(e) => Err(e),
        }
    }
}

/// Replace `dir/name` with `bytes`: a `0600` temporary file renamed into place.
fn write_replacing(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let temp = super::private_temp(dir, name, bytes, false)?;
    let result = std::fs::rename(&temp, dir.join(name));
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn heads_are_kept_private_per_canonical_state_directory() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path().join("root/state");
        std::fs::create_dir_all(&state).expect("state");
        let data = dir.path().join("data");
        let anchors = Anchors::new(&data, &state);
        let t = TaskName::new("t").expect("task");
        assert_eq!(anchors.head(&t), None);
        let head = Head {
            sequence: 3,
            hash: crate::core::chain::digest(b"three"),
        };
        anchors.set(&t, &head).expect("anchored");
        assert_eq!(anchors.head(&t), Some(head.clone()));
        // The same directory named another way is the same state directory.
        let again = Anchors::new(&data, &dir.path().join("root/./state/../state"));
        assert_eq!(again.head(&t), Some(head));
        let file = anchors.file(&t).expect("named");
        let mode = |p: &Path| std::fs::metadata(p).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().expect("dir")), 0o700);
        assert_eq!(mode(&data), 0o700);
        // Garbage vouches for nothing.
        std::fs::write(&file, "3 not-a-hash\n").expect("garbage");
        assert_eq!(anchors.head(&t), None);
    }

    /// A batch anchors each head through the file its first one opened: every head lands
    /// in the anchor, the last one stays.
    #[test]
    fn a_batch_anchors_each_head_through_one_open_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path().join("state");
        std::fs::create_dir_all(&state).expect("state");
        let anchors = Anchors::new(&dir.path().join("data"), &state);
        let t = TaskName::new("t").expect("task");
        let head = |sequence: u64| Head {
            sequence,
            hash: crate::core::chain::digest(sequence.to_string().as_bytes()),
        };
        let mut kept = None;
        anchors.set_kept(&t, &head(1), &mut kept).expect("created");
        assert!(
            kept.is_none(),
            "a new anchor is renamed into place, not kept open"
        );
        assert_eq!(anchors.head(&t), Some(head(1)));
        anchors
            .set_kept(&t, &head(2), &mut kept)
            .expect("written over");
        assert!(kept.is_some(), "opened once, kept for the next head");
        assert_eq!(anchors.head(&t), Some(head(2)));
        anchors
            .set_kept(&t, &head(3), &mut kept)
            .expect("through the kept file");
        assert_eq!(anchors.head(&t), Some(head(3)));
    }
}
