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
//!
//! A daemon on the mesh also signs it with its runtime's ed25519 key (the mesh identity,
//! whose seed stays in the data directory), so another machine can check it: the
//! attestation then carries `runtime`, `runtime_key` and `signature`, `ed25519:` and the
//! hex signature of [`signature_bytes`]: the line `advisord-attestation-signature-v1`, a
//! newline, then the whole record serialised the same way with `attestation.mac` and
//! `attestation.signature` empty. The MAC is made last and covers the signature too. On a
//! machine whose key is not the one named, the signature decides ([`judge`]): it counts
//! only when `runtime` is pinned in the user's `peers.yaml`, bound to the pinned key, and
//! the signature holds under that key.

use crate::core::chain::Attestations;
use crate::core::records::{Attestation, Body, ConsultationStatus, Record};
use crate::pins::Pins;
use advisord_adapters::mesh::identity::{self, Identity};
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

/// The first line of what a runtime's signature covers: distinct from [`DOMAIN`], so a
/// signature is never taken for a MAC's input or the reverse.
const SIGNATURE_DOMAIN: &[u8] = b"advisord-attestation-signature-v1\n";

const SIGNATURE_PREFIX: &str = "ed25519:";

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
    /// The MAC does not match, or the runtime's signature does not hold: changed after
    /// the daemon wrote it, or forged.
    Mismatch,
    /// This machine has no key to check it with (the sentence says why).
    NoKey(String),
    /// Signed by another machine's runtime that is not pinned here (the signature holds
    /// under the key the attestation names).
    Unpinned {
        /// The runtime id that signed it.
        runtime: String,
        /// Its public key, as the attestation names it.
        key: String,
    },
    /// Signed in the name of a runtime whose id is not bound to the key pinned for it (or,
    /// unpinned, to the key the attestation names).
    Unbound {
        /// The runtime id the attestation names.
        runtime: String,
    },
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
            Unattested::Unpinned { runtime, key } => format!(
                "is signed by runtime `{}` of another machine, which is not pinned here, so it \
                 never counts as a review here; pinning it means trusting every review that \
                 machine's daemon records: `advisor-consult mesh pin {} --key {}`",
                runtime.escape_debug(),
                runtime.escape_debug(),
                key.escape_debug()
            ),
            Unattested::Unbound { runtime } => format!(
                "names runtime `{}`, whose id is not bound to the key pinned for it (or named \
                 with it): a runtime id ends with the first {} hex digits of its key's \
                 SHA-256; it never counts as a review",
                runtime.escape_debug(),
                identity::FINGERPRINT_CHARS
            ),
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
        self.attest_signed(record, job, counts, None);
    }

    /// [`Key::attest`], also signed by `runtime` (this daemon's mesh identity) when it has
    /// one, so that other machines can check it: the signature is made first, over the
    /// record with `mac` and `signature` empty, then the MAC over the record with the
    /// signature.
    pub fn attest_signed(
        &self,
        record: &mut Record,
        job: &str,
        counts: bool,
        runtime: Option<&Identity>,
    ) {
        let Body::Consultation(c) = &mut record.body else {
            return;
        };
        c.attestation = Some(Box::new(Attestation {
            job: job.to_string(),
            key: self.id.clone(),
            counts,
            mac: String::new(),
            runtime: runtime.map(|r| r.runtime().to_string()),
            runtime_key: runtime.map(Identity::public_key),
            signature: runtime.map(|_| String::new()),
        }));
        if let Some(runtime) = runtime {
            let signature = runtime.sign(&signature_bytes(record));
            let signature = format!("{SIGNATURE_PREFIX}{}", hex::encode(signature));
            if let Body::Consultation(c) = &mut record.body {
                if let Some(attestation) = &mut c.attestation {
                    attestation.signature = Some(signature);
                }
            }
        }
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

/// The bytes a runtime's signature covers: [`SIGNATURE_DOMAIN`], then the record as
/// compact JSON with `attestation.mac` and `attestation.signature` empty.
pub fn signature_bytes(record: &Record) -> Vec<u8> {
    let mut unsigned = record.clone();
    if let Body::Consultation(c) = &mut unsigned.body {
        if let Some(a) = &mut c.attestation {
            a.mac.clear();
            if let Some(signature) = &mut a.signature {
                signature.clear();
            }
        }
    }
    let mut bytes = SIGNATURE_DOMAIN.to_vec();
    // A record always serialises: its types hold only strings, numbers and lists.
    let _ = serde_json::to_writer(&mut bytes, &unsigned);
    bytes
}

/// Check the runtime's signature of `record` against `pins`: `None` when it carries no
/// signature (the caller keeps its own verdict). Counts only when the runtime is pinned,
/// bound to the pinned key, and the signature holds under that key.
pub fn check_signature(record: &Record, pins: &Pins) -> Option<Verdict> {
    let Body::Consultation(c) = &record.body else {
        return None;
    };
    let attestation = c.attestation.as_ref()?;
    let (Some(runtime), Some(signature)) = (&attestation.runtime, &attestation.signature) else {
        return None;
    };
    let Some(signature) = signature
        .strip_prefix(SIGNATURE_PREFIX)
        .and_then(|s| hex::decode(s).ok())
    else {
        return Some(Verdict::Unattested(Unattested::Mismatch));
    };
    let holds = |key: &str| identity::verify(key, &signature_bytes(record), &signature);
    let unbound = || {
        Verdict::Unattested(Unattested::Unbound {
            runtime: runtime.clone(),
        })
    };
    let Some(pin) = pins.peers.iter().find(|p| &p.runtime == runtime) else {
        // Not pinned: never counted, but a forgery is named as one.
        let Some(key) = &attestation.runtime_key else {
            return Some(Verdict::Unattested(Unattested::Unpinned {
                runtime: runtime.clone(),
                key: "<its key, from `advisor-consult advisors` on that machine>".into(),
            }));
        };
        if !identity::bound(runtime, key) {
            return Some(unbound());
        }
        if !holds(key) {
            return Some(Verdict::Unattested(Unattested::Mismatch));
        }
        return Some(Verdict::Unattested(Unattested::Unpinned {
            runtime: runtime.clone(),
            key: key.clone(),
        }));
    };
    if !identity::bound(runtime, &pin.key) {
        return Some(unbound());
    }
    if !holds(&pin.key) {
        return Some(Verdict::Unattested(Unattested::Mismatch));
    }
    Some(if attestation.counts {
        Verdict::Counts
    } else {
        Verdict::Uncounted
    })
}

/// The verdict on `record` (a consultation) on this machine: its MAC checked against
/// `key` when the attestation names it; otherwise (another machine's key, or no key here)
/// the runtime's signature checked against `pins` when it carries one.
pub fn verdict(record: &Record, key: &Result<std::sync::Arc<Key>, String>, pins: &Pins) -> Verdict {
    let local = match key {
        Ok(key) => key.check(record),
        Err(why) => Verdict::Unattested(Unattested::NoKey(why.clone())),
    };
    match local {
        Verdict::Unattested(Unattested::OtherKey(_) | Unattested::NoKey(_)) => {
            check_signature(record, pins).unwrap_or(local)
        }
        local => local,
    }
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

/// Check every consultation of `records` (a task's, in order) against `key`, or, for
/// another machine's, its runtime's signature against `pins` ([`verdict`]), adding what
/// was found to `into`: the edge's part of judging reviews (the core is handed the
/// result). Failed consultations are judged too: they count for nothing either way, but
/// `verify` names every consultation it cannot vouch for.
pub fn judge(
    records: &[Record],
    key: &Result<std::sync::Arc<Key>, String>,
    pins: &Pins,
    into: &mut Attestations,
) {
    for record in records {
        let Body::Consultation(c) = &record.body else {
            continue;
        };
        let verdict = verdict(record, key, pins);
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

    fn pinned(runtime: &str, key: &str) -> Pins {
        Pins {
            peers: vec![crate::pins::Pin {
                runtime: runtime.to_string(),
                key: key.to_string(),
                owner: None,
            }],
        }
    }

    fn attestation(record: &mut Record) -> &mut Attestation {
        match &mut record.body {
            Body::Consultation(c) => c.attestation.as_mut().expect("attested"),
            _ => unreachable!("a consultation"),
        }
    }

    #[test]
    fn a_runtime_signature_counts_on_another_machine_only_when_its_runtime_is_pinned() {
        let theirs = Key::from_bytes([1; 32]);
        let ours: Result<std::sync::Arc<Key>, String> =
            Ok(std::sync::Arc::new(Key::from_bytes([2; 32])));
        let runtime = Identity::generate("machine-a");
        let mut record = consultation();
        theirs.attest_signed(&mut record, "J1", true, Some(&runtime));
        let pins = pinned(runtime.runtime(), &runtime.public_key());
        // Read back from its stored bytes, it still holds, on a machine with its own key
        // and on one with none.
        let stored = serde_json::to_vec_pretty(&record).expect("serialises");
        let read: Record = serde_json::from_slice(&stored).expect("reads");
        assert_eq!(verdict(&read, &ours, &pins), Verdict::Counts);
        assert_eq!(
            verdict(&read, &Err("no key here".into()), &pins),
            Verdict::Counts
        );
        // The machine that wrote it still checks its MAC, which covers the signature.
        assert_eq!(theirs.check(&read), Verdict::Counts);
        let text = String::from_utf8(stored).expect("utf-8");
        assert!(
            !text.contains(&runtime.seed()),
            "the seed never travels: {text}"
        );
        // Every edited field breaks the signature (the MAC is of another machine's key).
        let edits: [fn(&mut Record); 9] = [
            |r| r.envelope.sequence = 4,
            |r| r.envelope.prev = Some("sha256:0000".into()),
            |r| r.envelope.task = "other".into(),
            |r| {
                if let Body::Consultation(c) = &mut r.body {
                    c.conclusion = Some("forged".into());
                }
            },
            |r| {
                if let Body::Consultation(c) = &mut r.body {
                    c.advisor = "beta".into();
                }
            },
            |r| attestation(r).counts = false,
            |r| attestation(r).job = "J2".into(),
            |r| attestation(r).key = "sha256:0000000000000000".into(),
            |r| {
                let a = attestation(r);
                let signature = a.signature.clone().expect("signed");
                // One hex digit of the signature flipped.
                let last = if signature.ends_with('0') { "1" } else { "0" };
                a.signature = Some(format!("{}{last}", &signature[..signature.len() - 1]));
            },
        ];
        for (i, edit) in edits.iter().enumerate() {
            let mut edited = read.clone();
            edit(&mut edited);
            assert_eq!(
                verdict(&edited, &ours, &pins),
                Verdict::Unattested(Unattested::Mismatch),
                "edit {i}"
            );
        }
        // Not vouched for by its transport: valid, never counted.
        let mut unvouched = consultation();
        theirs.attest_signed(&mut unvouched, "J1", false, Some(&runtime));
        assert_eq!(verdict(&unvouched, &ours, &pins), Verdict::Uncounted);

        // An unpinned runtime: unattested, with the exact command that pins it.
        let Verdict::Unattested(why) = verdict(&read, &ours, &Pins::default()) else {
            panic!("counted unpinned");
        };
        assert_eq!(
            why,
            Unattested::Unpinned {
                runtime: runtime.runtime().to_string(),
                key: runtime.public_key()
            }
        );
        let message = why.message();
        assert!(
            message.contains(&format!(
                "advisor-consult mesh pin {} --key {}",
                runtime.runtime(),
                runtime.public_key()
            )) && message.contains("trusting"),
            "{message}"
        );
        // Unpinned and forged: a mismatch still.
        let mut forged = read.clone();
        attestation(&mut forged).job = "J9".into();
        assert_eq!(
            verdict(&forged, &ours, &Pins::default()),
            Verdict::Unattested(Unattested::Mismatch)
        );

        // A runtime id not bound to the key: another key signing in machine A's name.
        let thief = Identity::generate("machine-a");
        let mut claimed = consultation();
        theirs.attest_signed(&mut claimed, "J1", true, Some(&thief));
        attestation(&mut claimed).runtime = Some(runtime.runtime().to_string());
        let unbound = Verdict::Unattested(Unattested::Unbound {
            runtime: runtime.runtime().to_string(),
        });
        assert_eq!(verdict(&claimed, &ours, &Pins::default()), unbound);
        // Pinned, it is checked against the pinned key, under which it does not hold.
        assert_eq!(
            verdict(&claimed, &ours, &pins),
            Verdict::Unattested(Unattested::Mismatch)
        );

        // A pin of another key for the runtime: not bound, never counted.
        let other = Identity::generate("machine-a");
        let wrong_pin = pinned(runtime.runtime(), &other.public_key());
        assert_eq!(verdict(&read, &ours, &wrong_pin), unbound);
        // The other key pinned under its own runtime id vouches for nothing of A's.
        let others = pinned(other.runtime(), &other.public_key());
        assert!(matches!(
            verdict(&read, &ours, &others),
            Verdict::Unattested(Unattested::Unpinned { .. })
        ));

        // Without a signature, another machine's consultation stays `OtherKey`.
        let mut unsigned = consultation();
        theirs.attest(&mut unsigned, "J1", true);
        assert!(matches!(
            verdict(&unsigned, &ours, &pins),
            Verdict::Unattested(Unattested::OtherKey(_))
        ));
        // And judged into the task's attestations as the views read them.
        let mut into = Attestations::default();
        judge(std::slice::from_ref(&read), &ours, &pins, &mut into);
        assert!(into.why_unattested(read.id()).is_none());
        let mut into = Attestations::default();
        judge(
            std::slice::from_ref(&read),
            &ours,
            &Pins::default(),
            &mut into,
        );
        assert!(into
            .why_unattested(read.id())
            .is_some_and(|why| why.contains("mesh pin")));
    }

    #[test]
    fn a_signed_attestation_keeps_old_records_byte_identical() {
        let key = Key::from_bytes([7; 32]);
        let mut record = consultation();
        key.attest(&mut record, "J1", true);
        let text = serde_json::to_string(&record).expect("serialises");
        assert!(
            !text.contains("runtime") && !text.contains("signature"),
            "{text}"
        );
        let a = match &record.body {
            Body::Consultation(c) => c.attestation.clone().expect("attested"),
            _ => unreachable!(),
        };
        let json = serde_json::to_value(&a).expect("serialises");
        let mut fields: Vec<&String> = json.as_object().expect("an object").keys().collect();
        fields.sort_unstable();
        assert_eq!(fields, ["counts", "job", "key", "mac"]);
        // The two domains differ, so neither input can stand for the other.
        assert_ne!(signed_bytes(&record), signature_bytes(&record));
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
