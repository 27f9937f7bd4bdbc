//! Who sent a message on the mesh: every runtime has its own ed25519 key pair (a NATS user
//! nkey), and its runtime id is bound to its public key: the id is `<name>-<fingerprint>`,
//! the fingerprint being the first [`FINGERPRINT_CHARS`] hex digits of the SHA-256 of the
//! public key. Nobody can take another runtime's id without its key (finding a key whose
//! fingerprint matches is a search of 2^80).
//!
//! Every review request, reply and cancel notice crosses the bus sealed: an envelope
//! naming the sender's runtime id and public key, the message's JSON as text, and the
//! signature of that text under a tag naming the kind of message (so a signature of one
//! kind is never taken for another). [`open`] checks the signature and the binding of the
//! id to the key; the asker further checks that a reply is sealed by the key the peer
//! announced.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Hex digits of the key's SHA-256 in a runtime id (80 bits).
pub const FINGERPRINT_CHARS: usize = 20;

/// The longest name before the fingerprint (`<name>-<fingerprint>` is at most 64).
pub const MAX_NAME_CHARS: usize = 64 - 1 - FINGERPRINT_CHARS;

/// What a sealed message is; part of what is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A review request (asker to peer).
    Request,
    /// A review reply or a typed failure (peer to asker).
    Reply,
    /// A cancel notice (asker to peer).
    Cancel,
}

impl Kind {
    fn tag(self) -> &'static str {
        match self {
            Kind::Request => "advisord/review-request/1",
            Kind::Reply => "advisord/review-reply/1",
            Kind::Cancel => "advisord/review-cancel/1",
        }
    }
}

/// The fingerprint of a public key: the first [`FINGERPRINT_CHARS`] hex digits of its
/// SHA-256.
pub fn fingerprint(public_key: &str) -> String {
    hex::encode(Sha256::digest(public_key.as_bytes()))[..FINGERPRINT_CHARS].to_string()
}

/// Whether `name` can name a runtime: 1 to [`MAX_NAME_CHARS`] of `A-Z a-z 0-9 _ -`.
pub fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The runtime id of `name` with `public_key`: `<name>-<fingerprint>`.
pub fn runtime_id(name: &str, public_key: &str) -> String {
    format!("{name}-{}", fingerprint(public_key))
}

/// Whether `runtime` is bound to `public_key` (it ends with the key's fingerprint after a
/// non-empty name), and the key is a valid user public key.
pub fn bound(runtime: &str, public_key: &str) -> bool {
    let Some((name, fp)) = runtime.rsplit_once('-') else {
        return false;
    };
    valid_name(name)
        && fp == fingerprint(public_key)
        && nkeys::KeyPair::from_public_key(public_key).is_ok()
        && public_key.starts_with('U')
}

/// The name part of a runtime id (without its fingerprint).
pub fn name_of(runtime: &str) -> &str {
    match runtime.rsplit_once('-') {
        Some((name, fp))
            if fp.len() == FINGERPRINT_CHARS && fp.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            name
        }
        _ => runtime,
    }
}

/// This runtime's key pair and id. The seed never leaves it except through
/// [`Identity::seed`] (to be kept, `0600`, in the data directory).
#[derive(Clone)]
pub struct Identity {
    keys: Arc<nkeys::KeyPair>,
    runtime: String,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("runtime", &self.runtime)
            .field("key", &self.public_key())
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// A new key pair; the runtime id is `<name>-<fingerprint>`.
    pub fn generate(name: &str) -> Identity {
        let keys = nkeys::KeyPair::new_user();
        let runtime = runtime_id(name, &keys.public_key());
        Identity {
            keys: Arc::new(keys),
            runtime,
        }
    }

    /// The key pair of a user seed (`SU...`), named `name`.
    pub fn from_seed(name: &str, seed: &str) -> Result<Identity, String> {
        let keys = nkeys::KeyPair::from_seed(seed.trim()).map_err(|e| e.to_string())?;
        if !keys.public_key().starts_with('U') {
            return Err("the seed is not a user key's (it must start with `SU`)".into());
        }
        let runtime = runtime_id(name, &keys.public_key());
        Ok(Identity {
            keys: Arc::new(keys),
            runtime,
        })
    }

    /// The seed, to be kept secret.
    pub fn seed(&self) -> String {
        self.keys.seed().unwrap_or_default()
    }

    /// The public key (`U...`, 56 characters).
    pub fn public_key(&self) -> String {
        self.keys.public_key()
    }

    /// The runtime id, bound to the key.
    pub fn runtime(&self) -> &str {
        &self.runtime
    }

    /// The ed25519 signature of `bytes` under this runtime's key (64 bytes; what the
    /// caller signs names its own domain). Only the signature leaves; never the seed.
    pub fn sign(&self, bytes: &[u8]) -> Vec<u8> {
        self.keys.sign(bytes).unwrap_or_default()
    }

    /// `body` (a message's JSON) sealed as `kind`: the envelope's bytes.
    pub fn seal(&self, kind: Kind, body: &[u8]) -> Vec<u8> {
        let body = String::from_utf8_lossy(body).into_owned();
        let signature = self
            .keys
            .sign(&signed_bytes(kind, &self.runtime, &body))
            .map(|s| hex(&s))
            .unwrap_or_default();
        let sealed = Sealed {
            runtime: self.runtime.clone(),
            key: self.public_key(),
            body,
            signature,
        };
        serde_json::to_vec(&sealed).unwrap_or_default()
    }
}

/// The envelope of every message on the mesh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sealed {
    /// The sender's runtime id (bound to `key`).
    pub runtime: String,
    /// The sender's public key.
    pub key: String,
    /// The message, as JSON text.
    pub body: String,
    /// The ed25519 signature (hex) of the kind's tag, the runtime id and the body.
    pub signature: String,
}

/// A sealed message whose seal holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// Who sealed it.
    pub runtime: String,
    /// Its public key.
    pub key: String,
    /// The message's JSON.
    pub body: String,
}

/// Why a message could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsealed {
    /// Not an envelope at all.
    Garbage(String),
    /// An envelope whose runtime id is not bound to its key, or whose signature does not
    /// hold: someone wrote it who does not hold the key of the runtime it names.
    Forged(String),
}

/// Open an envelope of `kind`: the runtime id is bound to the key, and the signature holds.
pub fn open(kind: Kind, payload: &[u8]) -> Result<Opened, Unsealed> {
    let sealed: Sealed =
        serde_json::from_slice(payload).map_err(|e| Unsealed::Garbage(e.to_string()))?;
    if !bound(&sealed.runtime, &sealed.key) {
        return Err(Unsealed::Forged(format!(
            "runtime id `{}` is not bound to the key it names",
            sealed.runtime.escape_debug()
        )));
    }
    let verifier = nkeys::KeyPair::from_public_key(&sealed.key)
        .map_err(|e| Unsealed::Forged(format!("the key is unusable: {e}")))?;
    let signature = unhex(&sealed.signature)
        .ok_or_else(|| Unsealed::Forged("the signature is not hex".into()))?;
    verifier
        .verify(
            &signed_bytes(kind, &sealed.runtime, &sealed.body),
            &signature,
        )
        .map_err(|_| {
            Unsealed::Forged(format!(
                "the signature does not hold for runtime `{}`",
                sealed.runtime
            ))
        })?;
    Ok(Opened {
        runtime: sealed.runtime,
        key: sealed.key,
        body: sealed.body,
    })
}

/// Whether `signature` is the ed25519 signature of `bytes` under the user public key
/// `public_key` (what [`Identity::sign`] made).
pub fn verify(public_key: &str, bytes: &[u8], signature: &[u8]) -> bool {
    public_key.starts_with('U')
        && nkeys::KeyPair::from_public_key(public_key)
            .is_ok_and(|verifier| verifier.verify(bytes, signature).is_ok())
}

fn signed_bytes(kind: Kind, runtime: &str, body: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(body.len() + 100);
    bytes.extend_from_slice(kind.tag().as_bytes());
    bytes.push(b'\n');
    bytes.extend_from_slice(runtime.as_bytes());
    bytes.push(b'\n');
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    hex::decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_id_is_bound_to_its_key() {
        let me = Identity::generate("laptop");
        assert!(me.runtime().starts_with("laptop-"));
        assert!(crate::mesh::wire::valid_runtime_id(me.runtime()));
        assert!(bound(me.runtime(), &me.public_key()));
        assert_eq!(name_of(me.runtime()), "laptop");
        let other = Identity::generate("laptop");
        assert!(!bound(me.runtime(), &other.public_key()));
        assert!(!bound("laptop", &me.public_key()));
        let again = Identity::from_seed("laptop", &me.seed()).unwrap();
        assert_eq!(again.runtime(), me.runtime());
        assert!(Identity::from_seed("x", "not a seed").is_err());
        let long = "n".repeat(MAX_NAME_CHARS);
        assert!(crate::mesh::wire::valid_runtime_id(
            Identity::generate(&long).runtime()
        ));
    }

    #[test]
    fn a_seal_holds_only_for_its_kind_its_sender_and_its_bytes() {
        let me = Identity::generate("peer");
        let sealed = me.seal(Kind::Reply, br#"{"a":1}"#);
        let opened = open(Kind::Reply, &sealed).unwrap();
        assert_eq!(opened.runtime, me.runtime());
        assert_eq!(opened.body, r#"{"a":1}"#);
        assert!(matches!(
            open(Kind::Request, &sealed),
            Err(Unsealed::Forged(_))
        ));
        let mut envelope: Sealed = serde_json::from_slice(&sealed).unwrap();
        envelope.body = r#"{"a":2}"#.into();
        let tampered = serde_json::to_vec(&envelope).unwrap();
        assert!(matches!(
            open(Kind::Reply, &tampered),
            Err(Unsealed::Forged(_))
        ));
        // Claiming another runtime's id with one's own key.
        let victim = Identity::generate("beta");
        let mut claimed: Sealed = serde_json::from_slice(&sealed).unwrap();
        claimed.runtime = victim.runtime().to_string();
        assert!(matches!(
            open(Kind::Reply, &serde_json::to_vec(&claimed).unwrap()),
            Err(Unsealed::Forged(_))
        ));
        assert!(matches!(
            open(Kind::Reply, b"not json"),
            Err(Unsealed::Garbage(_))
        ));
    }
}
