//! The peers the user pinned: `peers.yaml` in the user's config directory
//! (`$XDG_CONFIG_HOME/advisord/peers.yaml`, else `~/.config/advisord/peers.yaml`, next to
//! the trusted catalogues), written by `advisor-consult mesh pin` or by hand:
//!
//! ```yaml
//! peers:
//!   - runtime: alice-laptop-3f9a0c1d2e4b5a6c7d8e
//!     key: UAB...          # its public key; the runtime id is bound to it
//!     owner: alice         # optional: who answers there (a person, a team, an account)
//! ```
//!
//! A peer's answers count as reviews only when its key is pinned here. Its source (what
//! `independent_review_count` counts once) is its owner when one is declared
//! (`peer:<owner>`), else its key (`peer-key:<fingerprint>`): runtimes sharing a key or a
//! declared owner are one source.

use advisord_adapters::mesh::identity;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file, in the config directory, that lists pinned peers.
pub const PEERS_FILE: &str = "peers.yaml";

/// The pinned peers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pins {
    /// Each pinned peer.
    #[serde(default)]
    pub peers: Vec<Pin>,
}

/// One pinned peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    /// Its runtime id (bound to `key`).
    pub runtime: String,
    /// Its public key (`U...`).
    pub key: String,
    /// Who answers there; runtimes of one owner count as one source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// Why a pin or the pins file was refused: what was wrong, and what is accepted.
#[derive(Debug, thiserror::Error)]
pub enum PinsError {
    /// An owner too long or holding control characters.
    #[error("an owner is 1 to 100 characters, no control characters")]
    Owner,
    /// A runtime id not bound to the key pinned with it.
    #[error(
        "runtime `{runtime}` is not bound to key `{key}`: a runtime id ends with the first {} hex \
         digits of its key's SHA-256; copy both from `advisor-consult advisors`, which prints \
         the command to pin each peer",
        identity::FINGERPRINT_CHARS
    )]
    Unbound {
        /// The runtime id (control characters escaped).
        runtime: String,
        /// The key (control characters escaped).
        key: String,
    },
    /// The file exists but cannot be read.
    #[error("`{}` cannot be read: {source}", file.display())]
    Read {
        /// The peers file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a peers list.
    #[error(
        "`{}` is not a peers list ({source}); it holds `peers:` with `runtime`, `key` and an \
         optional `owner` for each",
        file.display()
    )]
    NotAList {
        /// The peers file.
        file: PathBuf,
        /// What the YAML reader said.
        source: serde_yaml_ng::Error,
    },
    /// An entry of the file is refused.
    #[error("`{}`: {entry}", file.display())]
    Entry {
        /// The peers file.
        file: PathBuf,
        /// Why the entry is refused.
        entry: Box<PinsError>,
    },
    /// The pins could not be written as YAML.
    #[error("{0}")]
    Encode(serde_yaml_ng::Error),
    /// The file's directory cannot be created.
    #[error("cannot create `{}`: {source}", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file cannot be written.
    #[error("cannot write `{}`: {source}", file.display())]
    Write {
        /// The peers file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl Pin {
    /// A pin of `runtime` with `key`, checked: the runtime id must be bound to the key.
    pub fn new(runtime: &str, key: &str, owner: Option<&str>) -> Result<Pin, PinsError> {
        let owner = owner.map(str::trim).filter(|o| !o.is_empty());
        if let Some(owner) = owner {
            if owner.len() > 100 || owner.chars().any(char::is_control) {
                return Err(PinsError::Owner);
            }
        }
        if !identity::bound(runtime, key) {
            return Err(PinsError::Unbound {
                runtime: runtime.escape_debug().to_string(),
                key: key.escape_debug().to_string(),
            });
        }
        Ok(Pin {
            runtime: runtime.to_string(),
            key: key.to_string(),
            owner: owner.map(str::to_string),
        })
    }

    /// The source its answers are counted as.
    pub fn source(&self) -> String {
        match &self.owner {
            Some(owner) => format!("peer:{}", owner.trim().to_lowercase()),
            None => key_source(&self.key),
        }
    }
}

/// The source of an unpinned (or ownerless) key: `peer-key:<fingerprint>`.
pub fn key_source(key: &str) -> String {
    format!("peer-key:{}", identity::fingerprint(key))
}

impl Pins {
    /// The pin of `key`, if it is pinned.
    pub fn of_key(&self, key: &str) -> Option<&Pin> {
        self.peers.iter().find(|p| p.key == key)
    }

    /// The pin of runtime id `runtime`, if it is pinned.
    pub fn of_runtime(&self, runtime: &str) -> Option<&Pin> {
        self.peers.iter().find(|p| p.runtime == runtime)
    }

    /// What the pins vouch for, as a short digest: the SHA-256 (first 16 hex digits) of
    /// each pinned runtime id and key, sorted. Reviews judged under other pins are judged
    /// again ([`crate::core::chain::Attestations`]).
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut pairs: Vec<(&str, &str)> = self
            .peers
            .iter()
            .map(|p| (p.runtime.as_str(), p.key.as_str()))
            .collect();
        pairs.sort_unstable();
        let mut hash = Sha256::new();
        for (runtime, key) in pairs {
            hash.update(runtime.as_bytes());
            hash.update(b" ");
            hash.update(key.as_bytes());
            hash.update(b"\n");
        }
        hex::encode(&hash.finalize()[..8])
    }
}

/// The peers file in `config_dir`.
pub fn file_in(config_dir: &Path) -> PathBuf {
    config_dir.join(PEERS_FILE)
}

/// Read the pinned peers; a missing file pins nobody. Entries whose runtime id is not
/// bound to their key are an error (nothing is pinned then).
pub fn read(file: &Path) -> Result<Pins, PinsError> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Pins::default()),
        Err(source) => {
            return Err(PinsError::Read {
                file: file.to_path_buf(),
                source,
            })
        }
    };
    if text.trim().is_empty() {
        return Ok(Pins::default());
    }
    let pins: Pins = serde_yaml_ng::from_str(&text).map_err(|source| PinsError::NotAList {
        file: file.to_path_buf(),
        source,
    })?;
    for pin in &pins.peers {
        Pin::new(&pin.runtime, &pin.key, pin.owner.as_deref()).map_err(|entry| {
            PinsError::Entry {
                file: file.to_path_buf(),
                entry: Box::new(entry),
            }
        })?;
    }
    Ok(pins)
}

/// Write `pins` to `file` atomically (a temporary file renamed), the directory `0700` and
/// the file `0600`.
pub fn write(file: &Path, pins: &Pins) -> Result<(), PinsError> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| PinsError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        })?;
    let text = format!(
        "# Mesh peers whose answers count as reviews (advisor-consult mesh pin).\n{}",
        serde_yaml_ng::to_string(pins).map_err(PinsError::Encode)?
    );
    let tmp = dir.join(format!(".{PEERS_FILE}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        out.write_all(text.as_bytes())?;
        out.sync_all()?;
        std::fs::rename(&tmp, file)
    })();
    written.map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        PinsError::Write {
            file: file.to_path_buf(),
            source,
        }
    })
}

/// Pin `pin` in `file` (replacing the pin of the same runtime id).
pub fn pin(file: &Path, pin: Pin) -> Result<(), PinsError> {
    let mut pins = read(file)?;
    pins.peers.retain(|p| p.runtime != pin.runtime);
    pins.peers.push(pin);
    write(file, &pins)
}

/// Unpin `runtime` from `file`; whether it was pinned.
pub fn unpin(file: &Path, runtime: &str) -> Result<bool, PinsError> {
    let mut pins = read(file)?;
    let before = pins.peers.len();
    pins.peers.retain(|p| p.runtime != runtime);
    if pins.peers.len() == before {
        return Ok(false);
    }
    write(file, &pins).map(|()| true)
}

/// The pins of `file`, read again only when the file changed (its modification time and
/// length), so a sweep costs a `stat`.
#[derive(Debug, Default)]
pub struct Cached {
    seen: Option<(Option<std::time::SystemTime>, u64)>,
    pins: std::sync::Arc<Pins>,
    problem: Option<String>,
}

impl Cached {
    /// The pins now, and the problem reading them (nobody is pinned then).
    pub fn get(&mut self, file: Option<&Path>) -> (&Pins, Option<&str>) {
        self.refresh(file);
        (&self.pins, self.problem.as_deref())
    }

    /// The pins now, shared (nobody is pinned when they cannot be read).
    pub fn shared(&mut self, file: Option<&Path>) -> std::sync::Arc<Pins> {
        self.refresh(file);
        self.pins.clone()
    }

    fn refresh(&mut self, file: Option<&Path>) {
        let Some(file) = file else {
            return;
        };
        let stamp = std::fs::metadata(file)
            .ok()
            .map(|m| (m.modified().ok(), m.len()));
        if stamp.is_none() || self.seen != stamp {
            let (pins, problem) = match read(file) {
                Ok(pins) => (pins, None),
                Err(problem) => {
                    tracing::warn!(%problem, "the pinned peers cannot be read; nobody is pinned");
                    (Pins::default(), Some(problem.to_string()))
                }
            };
            if *self.pins != pins {
                self.pins = std::sync::Arc::new(pins);
            }
            self.problem = problem;
            self.seen = stamp;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use advisord_adapters::mesh::identity::Identity;

    #[test]
    fn pins_are_checked_kept_0600_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = file_in(&dir.path().join("advisord"));
        assert_eq!(read(&file).unwrap(), Pins::default());
        let alice = Identity::generate("alice-laptop");
        let other = Identity::generate("alice-laptop");
        assert!(Pin::new(alice.runtime(), &other.public_key(), None).is_err());
        pin(
            &file,
            Pin::new(alice.runtime(), &alice.public_key(), Some("Alice")).unwrap(),
        )
        .unwrap();
        let pins = read(&file).unwrap();
        let got = pins.of_key(&alice.public_key()).unwrap();
        assert_eq!(got.source(), "peer:alice");
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().unwrap()), 0o700);
        assert!(unpin(&file, alice.runtime()).unwrap());
        assert!(!unpin(&file, alice.runtime()).unwrap());
        std::fs::write(&file, "peers: [{runtime: x-1, key: nope}]").unwrap();
        assert!(read(&file).is_err());
    }
}
