//! What this machine keeps about the records outside every repository, in the daemon's
//! data directory, so that files in a repository cannot vouch for themselves: the key that
//! attests the consultations the daemon writes (`attest.rs`) and the head of every task
//! written here (`anchor.rs`).
//!
//! A process uses one data directory for both, installed once ([`install`]): the daemon
//! installs its `--data-dir`, the CLI the one its daemon would use (`ADVISORD_DATA_DIR`,
//! else `$XDG_STATE_HOME/advisord`, else `~/.local/state/advisord`). A process that
//! installed none (a program using the library directly) neither anchors nor judges.
//!
//! A daemon on the mesh also hands it its runtime identity ([`Machine::set_runtime`]),
//! whose key signs the consultations its jobs write so that other machines can check them;
//! and every process reads the user's pinned peers (`peers.yaml`, [`crate::pins`]) from its
//! config directory to judge the consultations other machines signed.

pub mod anchor;
pub mod attest;

use anchor::Anchors;
use attest::Key;
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// This machine's data directory, and what was read of it.
pub struct Machine {
    data_dir: PathBuf,
    /// The attestation key, read once (or why there is none).
    key: OnceLock<Result<Arc<Key>, String>>,
    /// The anchors of each state directory used, by the path the store was given.
    anchors: Mutex<HashMap<PathBuf, Arc<Anchors>>>,
    /// Held while the key is made.
    making: Mutex<()>,
    /// This daemon's mesh identity, when it joined the mesh: it signs the consultations.
    runtime: std::sync::RwLock<Option<advisord_adapters::mesh::identity::Identity>>,
    /// The user's pinned peers file, when a config directory is known.
    peers_file: Option<PathBuf>,
    /// The pins, read again only when the file changed.
    pins: Mutex<crate::pins::Cached>,
}

static INSTALLED: OnceLock<Machine> = OnceLock::new();

/// Use `data_dir` for this process's key and anchors. The first call wins: a process keeps
/// one data directory (a second daemon started in the same process shares the first's).
pub fn install(data_dir: &Path) -> &'static Machine {
    INSTALLED.get_or_init(|| Machine::new(data_dir))
}

/// The data directory this process installed, if any.
pub fn installed() -> Option<&'static Machine> {
    INSTALLED.get()
}

impl Machine {
    /// A machine over `data_dir` (nothing is read or created yet).
    pub fn new(data_dir: &Path) -> Machine {
        Machine {
            data_dir: data_dir.to_path_buf(),
            key: OnceLock::new(),
            anchors: Mutex::new(HashMap::new()),
            making: Mutex::new(()),
            runtime: std::sync::RwLock::new(None),
            peers_file: crate::trust::own_config_dir().map(|dir| crate::pins::file_in(&dir)),
            pins: Mutex::new(crate::pins::Cached::default()),
        }
    }

    /// Sign the consultations written from now on with `identity` (the daemon's mesh
    /// runtime): what the daemon does once it joined the mesh.
    pub fn set_runtime(&self, identity: advisord_adapters::mesh::identity::Identity) {
        *self
            .runtime
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(identity);
    }

    /// The mesh identity that signs consultations, if the daemon joined the mesh.
    pub fn runtime(&self) -> Option<advisord_adapters::mesh::identity::Identity> {
        self.runtime
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The user's pinned peers now (a `stat` of the file when it did not change; nobody
    /// when the file is missing, unreadable or no config directory is known).
    pub fn pins(&self) -> Arc<crate::pins::Pins> {
        self.pins
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .shared(self.peers_file.as_deref())
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The attestation key, created (32 random bytes, `0600`, in a `0700` directory) the
    /// first time: what the daemon does when it starts.
    pub fn key_or_create(&self) -> io::Result<Arc<Key>> {
        if let Some(Ok(key)) = self.key.get() {
            return Ok(key.clone());
        }
        // Daemons started at once in one process (the tests') make it once.
        let _making = self
            .making
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(Ok(key)) = self.key.get() {
            return Ok(key.clone());
        }
        ensure_private_dir(&self.data_dir)?;
        let key = Arc::new(Key::load_or_create(&self.data_dir)?);
        // Another thread may have read it meanwhile: the file is the same either way.
        let _ = self.key.set(Ok(key.clone()));
        match self.key.get() {
            Some(Ok(kept)) => Ok(kept.clone()),
            _ => Ok(key),
        }
    }

    /// The attestation key if this machine has one, or why not (said as a sentence): the
    /// key is only read, never created, so a machine whose daemon never wrote a
    /// consultation has none.
    pub fn key(&self) -> Result<Arc<Key>, String> {
        self.key
            .get_or_init(|| match Key::load(&self.data_dir) {
                Ok(Some(key)) => Ok(Arc::new(key)),
                Ok(None) => Err(format!(
                    "this machine has no attestation key (`{}` does not exist: no daemon \
                     using this data directory has run a consultation job)",
                    attest::key_path(&self.data_dir).display()
                )),
                Err(e) => Err(format!(
                    "the attestation key `{}` cannot be used: {e}",
                    attest::key_path(&self.data_dir).display()
                )),
            })
            .clone()
    }

    /// The anchored heads of the tasks of `state_dir`.
    pub fn anchors(&self, state_dir: &Path) -> Arc<Anchors> {
        let mut anchors = self
            .anchors
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        anchors
            .entry(state_dir.to_path_buf())
            .or_insert_with(|| Arc::new(Anchors::new(&self.data_dir, state_dir)))
            .clone()
    }
}

/// A name for a temporary file beside `name` that no other writer (thread or process)
/// picks at the same time.
pub(crate) fn temp_name(name: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(".{name}.{}.{n}.tmp", std::process::id())
}

/// A new private (`0600`) temporary file beside `dir/name` holding `bytes` (flushed to disk
/// when `sync`), never through a symlink: what the key and the anchors are written to
/// before they are linked or renamed into place. Its path; the caller removes it on error.
pub(crate) fn private_temp(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    sync: bool,
) -> std::io::Result<std::path::PathBuf> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let temp = dir.join(temp_name(name));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&temp)?;
        file.write_all(bytes)?;
        if sync {
            file.sync_all()?;
        }
        Ok(())
    })();
    match written {
        Ok(()) => Ok(temp),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

/// Create `dir` (and its parents) `0700` when it does not exist; one that exists keeps its
/// mode (nothing changes the mode of a directory it did not create).
pub(crate) fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}
