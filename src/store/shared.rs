//! One store per state directory per process.

use super::*;

/// One [`Store`] per state directory, kept for the life of a process that serves many
/// requests (the daemon), so each store's cache of records is read once rather than once
/// per request: a write into a task of ten thousand records then costs what a write into
/// an empty one does.
#[derive(Default)]
pub struct Stores {
    stores: Mutex<HashMap<PathBuf, Arc<Store>>>,
}

/// The stores of this process, one per state directory ([`Store::shared`]).
pub(super) static SHARED: std::sync::OnceLock<Stores> = std::sync::OnceLock::new();

impl Stores {
    /// This process's stores: the daemon's live as long as it does, so every request and
    /// job reads a task once; the CLI's for one invocation.
    pub fn process() -> &'static Stores {
        SHARED.get_or_init(Stores::default)
    }

    /// Drop the cached records of every task not used for `idle`, in every store, but
    /// those of `keep` in each ([`Store::release_idle`]).
    pub fn release_idle(&self, idle: Duration, keep: WorkingSet) {
        let stores: Vec<Arc<Store>> = lock(&self.stores).values().cloned().collect();
        for store in stores {
            store.release_idle(idle, keep);
        }
    }

    /// Drop the cached records of every large task not used for `idle`, in every store
    /// ([`Store::release_large_idle`]); the bytes dropped.
    pub fn release_large_idle(&self, idle: Duration) -> usize {
        let stores: Vec<Arc<Store>> = lock(&self.stores).values().cloned().collect();
        stores.iter().map(|s| s.release_large_idle(idle)).sum()
    }

    /// The bytes of records cached now across every store, and how many tasks they
    /// belong to ([`Store::cached`]).
    pub fn cached(&self) -> (usize, usize) {
        let stores: Vec<Arc<Store>> = lock(&self.stores).values().cloned().collect();
        stores
            .iter()
            .map(|s| s.cached())
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    /// The store of `state_dir`, opened on first use.
    pub fn get(&self, state_dir: &Path) -> Arc<Store> {
        lock(&self.stores)
            .entry(state_dir.to_path_buf())
            .or_insert_with(|| Arc::new(Store::open(state_dir).sharing_flushes()))
            .clone()
    }
}
