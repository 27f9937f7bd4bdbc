//! Handing memory the daemon freed back to the system once it goes quiet.
//!
//! A burst of jobs allocates and frees a great deal: requests, answers, records read and
//! written. The C allocator keeps what was freed in its per-thread arenas for reuse, so
//! after a burst the daemon would stay as large as at its peak while it sits idle, and a
//! long-lived daemon would drift upwards burst after burst as those arenas fragment.
//! When its last running job ends, the daemon asks the allocator to return its free
//! pages; the next burst takes fresh pages from the kernel as it needs them.
//!
//! It also keeps the allocator to one arena (glibc's default is eight per core). The
//! daemon spends its time waiting on advisors and on the disk, not allocating, so its
//! threads never queue for the arena's lock in earnest; more arenas only spread what is
//! freed across more partly used pages, which no trim can give back. Measured on nine
//! rounds of 200 jobs: one arena held the daemon about 3 % smaller after each burst than
//! two per core, with the same latency.

/// How long the daemon stays quiet after its last running job ended before it drops the
/// records it cached for tasks nobody used since, and hands the pages back once more.
pub const QUIET: std::time::Duration = std::time::Duration::from_secs(20);

/// The last running job just ended: hand the allocator's free pages back now, and after
/// [`QUIET`] drop the cached records of the tasks not used since (a task asked about
/// again is read again: a listing and its files) and hand back what that freed, so an
/// idle daemon returns to about its size before the burst well within the half minute
/// `benches/durable_path.rs` allows. Call it from within the runtime.
pub fn after_burst() {
    static PENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    tokio::task::spawn_blocking(release_free_memory);
    if PENDING.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return; // a release is already due
    }
    tokio::spawn(async {
        tokio::time::sleep(QUIET).await;
        PENDING.store(false, std::sync::atomic::Ordering::Release);
        let _ = tokio::task::spawn_blocking(|| {
            crate::store::Stores::process().release_idle(QUIET);
            release_free_memory();
        })
        .await;
    });
}

/// Keep the allocator to one arena (glibc's only; elsewhere nothing), unless
/// `ADVISORD_MALLOC_ARENAS=default` leaves glibc its own default (what
/// `benches/durable_path.rs` compares). Call it before any thread starts.
#[allow(unsafe_code)]
pub fn limit_arenas() {
    if std::env::var_os("ADVISORD_MALLOC_ARENAS").is_some_and(|v| v == "default") {
        return;
    }
    // SAFETY: `mallopt` takes plain integers and only sets the allocator's own
    // parameters; `M_ARENA_MAX` is read when a thread first needs an arena.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        nix::libc::mallopt(nix::libc::M_ARENA_MAX, 1);
    }
}

/// Return the allocator's free pages to the kernel (glibc's `malloc_trim`; elsewhere
/// nothing).
#[allow(unsafe_code)]
pub fn release_free_memory() {
    // SAFETY: `malloc_trim` takes no pointer and touches only the allocator's own
    // arenas, each under its own lock: any thread may call it at any time.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        nix::libc::malloc_trim(0);
    }
}
