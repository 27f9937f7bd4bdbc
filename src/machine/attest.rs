//! The daemon's attestation of the consultations its jobs write.
//!
//! The key is 32 random bytes in `<data dir>/attest.key` (`0600`, created once by the
//! daemon). Its id is `sha256:` and the first 16 hex digits of its SHA-256. A consultation
//! carries `attestation: {"job", "key", "counts", "mac"}`; `mac` is `hmac-sha256:` and the
//! hex HMAC-SHA256, under the key, of [`signed_bytes`]: the line
//! `advisord-attestation-v1`, a newline, then the whole record (envelope and body, `prev`
//! included) serialised compactly by `serde_json` in the record type's field order, with
//! `attestation.mac` set to the empty string. So the MAC covers every stored field, the
//! job, the key id and the `counts` bit, and binds the consultation to its task, sequence
//! and place in the chain.

use crate::core::chain::Attestations;
use crate::core::records::{Attestation, Body, ConsultationStatus, Record};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The key's file name in the data directory.
pub const KEY_FILE: &str = "attest.key";

/// The first line of what a MAC covers: names the scheme, so another use of the key
/// could never produce the same input.
const DOMAIN: &[u8] = b"advisord-attestation-v1\n";

const MAC_PREFIX: &str = "hmac-sha256:";

/// Where the key of a daemon using `data_dir` lives.
pub fn key_path(data_dir: &Path) -> PathBuf {
    data_dir.join(KEY_FILE)
}

/// The daemon's attestation key. Never printed, logged or sent.
pub struct Key {
    bytes: [u8; 32],
    id: String,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({})", self.id)
    }
}

/// Why a consultation does not count as a review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unattested {
    /// It carries no attestation: written before attestations, or outside a job.
    Missing,
    /// Attested with another key: another machine's daemon (or a key since replaced).
    OtherKey(String),
    /// The MAC does not match: changed after the daemon wrote it, or forged.
    Mismatch,
    /// This machine has no key to check it with (the sentence says why).
    NoKey(String),
}

impl Unattested {
    /// One sentence for `verify` and the views.
    pub fn message(&self) -> String {
        match self {
            Unattested::Missing => "carries no attestation: not written by a consultation job of \
                                    a daemon (written by hand, by another program, or before \
                                    attestations), so it never counts as a review"
                .to_string(),
            Unattested::OtherKey(key) => format!(
                "is attested with key `{}`, not this machine's: written by another machine's \
                 daemon (or before this key was made), so it never counts as a review here",
                key.escape_debug()
            ),
            Unattested::Mismatch => "its attestation does not match its content: changed after \
                                     the daemon wrote it, or forged; it never counts as a review"
                .to_string(),
            Unattested::NoKey(why) => {
                format!("cannot be checked: {why}; it never counts as a review")
            }
        }
    }
}

/// What a consultation's attestation says, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Valid, and it may count as a review.
    Counts,
    /// Valid, but the transport did not vouch for who answered: recorded, never counted.
    Uncounted,
    /// Not valid.
    Unattested(Unattested),
}

impl Key {
    /// A key over `bytes` (tests and benches make their own).
    pub fn from_bytes(bytes: [u8; 32]) -> Key {
        let hash = Sha256::digest(bytes);
        let id = format!("sha256:{}", hex::encode(&hash[..8]));
        Key { bytes, id }
    }

    /// The key's id, as an attestation names it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The key in `data_dir`, or `None` when there is none. A key file that is not a
    /// regular file of 32 bytes, or that others may read, is an error naming what to do.
    pub fn load(data_dir: &Path) -> io::Result<Option<Key>> {
        let path = key_path(data_dir);
        let mut file = match OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
        {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            other => other?,
        };
        let meta = file.metadata()?;
        if !meta.is_file() || meta.len() != 32 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "it is not a file of 32 bytes; remove it and restart the daemon to make a new \
                 one (consultations attested with the old key then show as unattested)",
            ));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "others may read it (mode {:o}); make it private with `chmod 600 {}`",
                    meta.mode() & 0o777,
                    path.display()
                ),
            ));
        }
        let mut bytes = [0u8; 32];
        file.read_exact(&mut bytes)?;
        Ok(Some(Key::from_bytes(bytes)))
    }

    /// The key in `data_dir`, created the first time: 32 random bytes written to a
    /// private temporary file, flushed, then linked into place, so that two processes
    /// creating it at once end up with the same key and no reader sees a partial one.
    pub fn load_or_create(data_dir: &Path) -> io::Result<Key> {
        if let Some(key) = Key::load(data_dir)? {
            return Ok(key);
        }
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
        let temp = super::private_temp(data_dir, KEY_FILE, &bytes, true)?;
        let written = match std::fs::hard_link(&temp, key_path(data_dir)) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        };
        let _ = std::fs::remove_file(&temp);
        written?;
        if let Ok(dir) = File::open(data_dir) {
            let _ = dir.sync_all();
        }
        Key::load(data_dir)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "the key vanished as it was made")
        })
    }

    fn mac(&self, bytes: &[u8]) -> Hmac<Sha256> {
        // HMAC takes a key of any length; 32 bytes is never refused.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.bytes)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(bytes);
        mac
    }

    /// Attest `record` (a consultation; anything else is left as it is) as written by
    /// `job`; `counts` is whether its transport vouched for who answered.
    pub fn attest(&self, record: &mut Record, job: &str, counts: bool) {
        let Body::Consultation(c) = &mut record.body else {
            return;
        };
        c.attestation = Some(Attestation {
            job: job.to_string(),
            key: self.id.clone(),
            counts,
            mac: String::new(),
        });
        let tag = self.mac(&signed_bytes(record)).finalize().into_bytes();
        let mut mac = String::with_capacity(MAC_PREFIX.len() + 64);
        mac.push_str(MAC_PREFIX);
        mac.push_str(&hex::encode(tag));
        if let Body::Consultation(c) = &mut record.body {
            if let Some(attestation) = &mut c.attestation {
                attestation.mac = mac;
            }
        }
    }

    /// Check the attestation of `record` (a consultation) against this key.
    pub fn check(&self, record: &Record) -> Verdict {
        let Body::Consultation(c) = &record.body else {
            return Verdict::Unattested(Unattested::Missing);
        };
        let Some(attestation) = &c.attestation else {
            return Verdict::Unattested(Unattested::Missing);
        };
        if attestation.key != self.id {
            return Verdict::Unattested(Unattested::OtherKey(attestation.key.clone()));
        }
        let Some(tag) = attestation
            .mac
            .strip_prefix(MAC_PREFIX)
            .and_then(decode_hex)
        else {
            return Verdict::Unattested(Unattested::Mismatch);
        };
        // `verify_slice` compares in constant time.
        if self.mac(&signed_bytes(record)).verify_slice(&tag).is_err() {
            return Verdict::Unattested(Unattested::Mismatch);
        }
        if attestation.counts {
            Verdict::Counts
        } else {
            Verdict::Uncounted
        }
    }
}

/// The bytes a consultation's MAC covers: [`DOMAIN`], then the record as compact JSON with
/// `attestation.mac` empty.
pub fn signed_bytes(record: &Record) -> Vec<u8> {
    let mut unsigned;
    let record = match &record.body {
        Body::Consultation(c) if c.attestation.as_ref().is_some_and(|a| !a.mac.is_empty()) => {
            unsigned = record.clone();
            if let Body::Consultation(c) = &mut unsigned.body {
                if let Some(a) = &mut c.attestation {
                    a.mac.clear();
                }
            }
            &unsigned
        }
        _ => record,
    };
    let mut bytes = DOMAIN.to_vec();
    // A record always serialises: its types hold only strings, numbers and lists.
    let _ = serde_json::to_writer(&mut bytes, record);
    bytes
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Check every consultation of `records` (a task's, in order) against `key`, adding what
/// was found to `into`: the edge's part of judging reviews (the core is handed the
/// result). Failed consultations are judged too: they count for nothing either way, but
/// `verify` names every consultation it cannot vouch for.
pub fn judge(
    records: &[Record],
    key: &Result<std::sync::Arc<Key>, String>,
    into: &mut Attestations,
) {
    for record in records {
        let Body::Consultation(c) = &record.body else {
            continue;
        };
        let verdict = match key {
            Ok(key) => key.check(record),
            Err(why) => Verdict::Unattested(Unattested::NoKey(why.clone())),
        };
        let completed = c.status == ConsultationStatus::Completed;
        match verdict {
            Verdict::Counts if completed => into.counting(record.id()),
            Verdict::Counts | Verdict::Uncounted => {}
            Verdict::Unattested(why) => into.unattested(record.id(), why.message()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consultation() -> Record {
        serde_json::from_value(serde_json::json!({
            "id": "C1", "task": "t", "sequence": 3, "created_at": "2026-01-01T00:00:00.000Z",
            "schema": 2, "redacted": [], "prev": crate::core::chain::GENESIS,
            "kind": "consultation", "plan": "P", "advisor": "alpha", "status": "completed",
            "conclusion": "fine", "stance": "supports", "confidence": 0.7,
            "finished_at": "2026-01-01T00:00:00.000Z"}))
        .expect("a consultation")
    }

    #[test]
    fn an_attestation_checks_only_with_its_key_and_content() {
        let key = Key::from_bytes([7; 32]);
        let mut record = consultation();
        assert_eq!(key.check(&record), Verdict::Unattested(Unattested::Missing));
        key.attest(&mut record, "J1", true);
        assert_eq!(key.check(&record), Verdict::Counts);
        // Read back from its stored bytes, it still checks.
        let stored = serde_json::to_vec_pretty(&record).expect("serialises");
        let read: Record = serde_json::from_slice(&stored).expect("reads");
        assert_eq!(key.check(&read), Verdict::Counts);
        // Another key, any changed field, the `counts` bit or the job: not attested.
        let other = Key::from_bytes([8; 32]);
        assert!(matches!(
            other.check(&record),
            Verdict::Unattested(Unattested::OtherKey(_))
        ));
        let edits: [fn(&mut Record); 4] = [
            |r| r.envelope.sequence = 4,
            |r| {
                if let Body::Consultation(c) = &mut r.body {
                    c.conclusion = Some("forged".into());
                }
            },
            |r| {
                if let Body::Consultation(c) = &mut r.body {
                    c.attestation.as_mut().expect("attested").counts = false;
                }
            },
            |r| {
                if let Body::Consultation(c) = &mut r.body {
                    c.attestation.as_mut().expect("attested").job = "J2".into();
                }
            },
        ];
        for edit in edits {
            let mut edited = record.clone();
            edit(&mut edited);
            assert_eq!(
                key.check(&edited),
                Verdict::Unattested(Unattested::Mismatch)
            );
        }
        // Not vouched for: valid, never counted.
        let mut unvouched = consultation();
        key.attest(&mut unvouched, "J1", false);
        assert_eq!(key.check(&unvouched), Verdict::Uncounted);
    }

    #[test]
    fn the_key_is_made_once_private_and_refused_when_others_may_read_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(Key::load(dir.path()).expect("no key").is_none());
        let made = Key::load_or_create(dir.path()).expect("made");
        let again = Key::load_or_create(dir.path()).expect("read back");
        assert_eq!(made.id(), again.id());
        let path = key_path(dir.path());
        let mode = std::fs::metadata(&path).expect("key").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let refused = Key::load(dir.path()).expect_err("readable by others");
        assert!(refused.to_string().contains("chmod 600"), "{refused}");
    }
}
