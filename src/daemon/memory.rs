//! Handing memory the daemon freed back to the system once it goes quiet.
//!
//! A burst of jobs allocates and frees a great deal: requests, answers, records read and
//! written. The C allocator keeps what was freed in its per-thread arenas for reuse, so
//! after a burst the daemon would stay as large as at its peak while it sits idle, and a
//! long-lived daemon would drift upwards burst after burst as those arenas fragment.
//! When its last running job ends, the daemon asks the allocator to return its free
//! pages; the next burst takes fresh pages from the kernel as it needs them.
//!
//! It leaves glibc its own number of arenas (eight per core), unless
//! `ADVISORD_MALLOC_ARENAS=one` keeps it to one. One arena was the default until measured
//! side by side (`DURABLE_ONLY=arenas cargo bench -p advisord --bench durable_path`):
//! in three runs of four glibc's default was faster (781 against 569 jobs/s, 870
//! against 560, 822 against 812; 437 against 535 on a machine loaded by another bench)
//! and the daemon as large 30 s after the burst (VmRSS ratio 1.60 against 1.57, 1.57
//! against 1.61, 1.63 against 1.59, 1.60 against 1.54), while with one arena its threads
//! spent 18.6 % of their samples on the arena's lock. What stays resident
//! after a burst is the few blocks that outlive it scattered over its pages, whatever the
//! number of arenas (`docs/DAEMON.md`, "What the daemon keeps in memory"): so what the
//! daemon keeps past a burst is kept in a few large blocks where it can be (the feed's
//! items, the finished jobs: `jobs/table/packed.rs`, the ids waiting to leave the
//! journal: `jobs/prune.rs`). jemalloc, measured side by side through `LD_PRELOAD`, was
//! no smaller after a burst and larger before it.

use std::sync::atomic::AtomicUsize;

/// How long the daemon stays quiet after its last running job ended before it drops the
/// records it cached for tasks nobody used since, and hands the pages back once more.
pub const QUIET: std::time::Duration = std::time::Duration::from_secs(20);

/// The last running job just ended: hand the allocator's free pages back now, and once no
/// job has ended for [`QUIET`] drop the cached records of the tasks nobody used in its
/// second half (a task asked about again is read again: a listing and its files) and
/// hand back what that freed, so an
/// idle daemon returns to about its size before the burst well within the half minute
/// `benches/durable_path.rs` allows. Call it from within the runtime.
pub fn after_burst() {
    /// When the last running job last ended (the quiet is counted from there), and
    /// whether a release is due (its timer runs), under one lock.
    static QUIET_SINCE: std::sync::Mutex<(Option<tokio::time::Instant>, bool)> =
        std::sync::Mutex::new((None, false));
    let quiet = || QUIET_SINCE.lock().unwrap_or_else(|p| p.into_inner());
    let ended = tokio::time::Instant::now();
    tokio::task::spawn_blocking(release_free_memory);
    {
        let mut state = quiet();
        state.0 = Some(ended);
        if std::mem::replace(&mut state.1, true) {
            // A release is already due; it waits for the quiet counted from this end,
            // not from the earlier one that armed it (a queue that ran dry for a moment
            // mid-burst would otherwise release while the burst's tasks are in use).
            return;
        }
    }
    tokio::spawn(async move {
        let mut due = ended + QUIET;
        loop {
            tokio::time::sleep_until(due).await;
            let mut state = quiet();
            let last = state.0.unwrap_or(ended);
            if last + QUIET <= tokio::time::Instant::now() {
                state.1 = false;
                break;
            }
            due = last + QUIET;
        }
        let _ = tokio::task::spawn_blocking(|| {
            crate::store::Stores::process().release_idle(QUIET / 2);
            release_free_memory();
        })
        .await;
    });
}

/// Fix the allocator's mmap threshold, and keep it to one arena when
/// `ADVISORD_MALLOC_ARENAS=one` (glibc's only; elsewhere nothing; `default`, glibc's own
/// number, is what any other value leaves, as `benches/durable_path.rs` compares). Call
/// it before any thread starts.
#[allow(unsafe_code)]
pub fn limit_arenas() {
    // SAFETY: as below: plain integers, the allocator's own parameters. A fixed mmap
    // threshold keeps every block of 128 KiB or more (a task's records, a large answer)
    // in a mapping of its own, returned whole when freed; glibc's default raises the
    // threshold each time such a block is freed, and then a burst's large blocks land
    // among the small ones that outlive it, where no trim can return their pages.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
    let one = std::env::var_os("ADVISORD_MALLOC_ARENAS").is_some_and(|v| v == "one");
    if !one {
        return;
    }
    // SAFETY: `mallopt` takes plain integers and only sets the allocator's own
    // parameters; `M_ARENA_MAX` is read when a thread first needs an arena.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        nix::libc::mallopt(nix::libc::M_ARENA_MAX, 1);
    }
}

/// How many bytes of dropped records (their size on disk) are worth a trim of their own
/// ([`released`]): below it, a few small tasks' caches wait for the next trim.
pub const RELEASE_AFTER: usize = 1024 * 1024;

/// The bytes of dropped records not yet followed by a trim.
static PENDING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Caches of `bytes` of records (their size on disk) were dropped since the last call
/// (`store::Stores::take_released`): once they add up to [`RELEASE_AFTER`], hand the
/// freed pages back. Without this, a large task dropped for the budget by another task's
/// request (what happens to a task of 100,000 records once it is not asked about) left
/// its records' pages with the allocator: at 100,000 records about 250 MiB free in the
/// heap and still resident.
pub fn released(bytes: usize) {
    use std::sync::atomic::Ordering;
    let pending = PENDING.fetch_add(bytes, Ordering::Relaxed) + bytes;
    if pending >= RELEASE_AFTER {
        release_free_memory();
    }
}

/// Return the allocator's free pages to the kernel (glibc's `malloc_trim`; elsewhere
/// nothing).
#[allow(unsafe_code)]
pub fn release_free_memory() {
    PENDING.store(0, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: `malloc_trim` takes no pointer and touches only the allocator's own
    // arenas, each under its own lock: any thread may call it at any time.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        nix::libc::malloc_trim(0);
    }
    report("trimmed");
}

/// How many finished jobs are packed, and the bytes their chunks reserve
/// (`daemon/jobs/table/packed.rs`), for [`report`].
pub static PACKED: (AtomicUsize, AtomicUsize) = (AtomicUsize::new(0), AtomicUsize::new(0));

/// With `ADVISORD_MALLOC_STATS` set (any value), print to standard error what the
/// daemon holds at `stage`: its VmRSS, what the allocator counts (glibc's `mallinfo2`:
/// bytes in use, free in its heaps, in mappings of their own) and the records cached.
/// A tool to find what a burst leaves behind (`docs/DAEMON.md`, "What the daemon keeps in
/// memory"); without the variable it costs one look at the environment.
#[allow(unsafe_code)]
pub fn report(stage: &str) {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*WANTED.get_or_init(|| std::env::var_os("ADVISORD_MALLOC_STATS").is_some()) {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    let rss = format!(
        "{} (anonymous {}, files {}), {} threads",
        field("VmRSS:"),
        field("RssAnon:"),
        field("RssFile:"),
        field("Threads:")
    );
    let (bytes, tasks) = crate::store::Stores::process().cached();
    let (jobs, packed) = (
        PACKED.0.load(std::sync::atomic::Ordering::Relaxed),
        PACKED.1.load(std::sync::atomic::Ordering::Relaxed),
    );
    eprintln!(
        "advisord memory: {stage}: VmRSS {rss};{}; cached records {} KiB of {tasks} tasks; \
         {jobs} finished jobs packed in {} KiB",
        allocator(),
        bytes / 1024,
        packed / 1024
    );
}

/// What glibc's `mallinfo2` counts, in words.
#[allow(unsafe_code)]
fn allocator() -> String {
    // SAFETY: `mallinfo2` takes nothing and returns plain counters.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let m = unsafe { nix::libc::mallinfo2() };
        format!(
            " heap {} KiB (in use {} KiB, free {} KiB in {} chunks, top {} KiB), {} mappings \
             {} KiB",
            m.arena / 1024,
            m.uordblks / 1024,
            m.fordblks / 1024,
            m.ordblks,
            m.keepcost / 1024,
            m.hblks,
            m.hblkhd / 1024,
        )
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    String::new()
}
