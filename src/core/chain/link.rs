//! The chain's links and the record files' names: the hash each `prev` holds, and the one
//! rule for what a name in a task's directory is.

use sha2::{Digest, Sha256};

/// The `prev` of a task's first record: `sha256:` and 64 zeros.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The chain's hash of a record's stored bytes: `sha256:` and the lower-case hex digest.
pub fn digest(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    // Into a buffer, not a string built a character at a time: `verify` hashes every file.
    let mut hexed = [0u8; 64];
    // 32 bytes always fit 64 hex digits, which are ASCII.
    let _ = hex::encode_to_slice(Sha256::digest(bytes), &mut hexed);
    out.push_str(std::str::from_utf8(&hexed).unwrap_or_default());
    out
}

/// The name the store gives the record file of `sequence`: the sequence zero-padded to
/// ten digits, so that names sort in sequence order (`0000000007.json`).
pub fn record_file(sequence: u64) -> String {
    format!("{sequence:010}.json")
}

/// How many digits a record file's name holds.
pub const RECORD_DIGITS: usize = 10;

/// The highest sequence a record file's name can hold: ten digits. A task never grows
/// past it, and the writer never writes a name of any other length.
pub const MAX_SEQUENCE: u64 = 9_999_999_999;

/// The name of a task's lock file, inside the task's directory.
pub const LOCK_FILE: &str = ".lock";

/// What a name in a task's directory is: the one rule that the writer, the views and
/// `verify` share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileName {
    /// A record file: exactly [`RECORD_DIGITS`] ASCII digits and `.json`, holding the
    /// sequence they spell (`0000000007.json`).
    Record(u64),
    /// The store's own: the task's lock ([`LOCK_FILE`]) or a write in flight
    /// (`.<record file>.<pid>.tmp`).
    Store,
    /// Anything else: not a record, never read as one, reported by the views and `verify`.
    Stray,
}

impl FileName {
    /// Classify `name` (a name that is not UTF-8 is a stray).
    pub fn of(name: &std::ffi::OsStr) -> FileName {
        let Some(name) = name.to_str() else {
            return FileName::Stray;
        };
        if let Some(sequence) = record_sequence(name) {
            return FileName::Record(sequence);
        }
        let in_flight = name
            .strip_prefix('.')
            .and_then(|rest| rest.strip_suffix(".tmp"))
            .and_then(|rest| rest.split_once(".json."))
            .is_some_and(|(record, pid)| {
                record_sequence(&format!("{record}.json")).is_some()
                    && !pid.is_empty()
                    && pid.bytes().all(|b| b.is_ascii_digit())
            });
        if name == LOCK_FILE || in_flight {
            FileName::Store
        } else {
            FileName::Stray
        }
    }
}

/// The sequence a record file named `name` holds: `Some` exactly when `name` is
/// [`RECORD_DIGITS`] ASCII digits and `.json` (so `7.json` and `00000000007.json` are not
/// record files, and sequence 0 is none).
pub fn record_sequence(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    if digits.len() != RECORD_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&sequence| sequence > 0)
}
