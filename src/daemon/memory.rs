//! Handing memory the daemon freed back to the system once it goes quiet.
//!
//! A burst of jobs allocates and frees a great deal: requests, answers, records read and
//! written. The C allocator keeps what was freed in its per-thread arenas for reuse, so
//! after a burst the daemon would stay as large as at its peak while it sits idle, and a
//! long-lived daemon would drift upwards burst after burst as those arenas fragment.
//! When its last running job ends, the daemon asks the allocator to return its free
//! pages; the next burst takes fresh pages from the kernel as it needs them.
//!
//! What stays resident after a burst is the blocks that outlive it scattered over its
//! pages (`docs/DAEMON.md`, "What the daemon keeps in memory"). Two kinds of them: blocks
//! the daemon keeps, which it keeps in a few large blocks where it can (the feed's items,
//! the finished jobs: `jobs/table/packed.rs`, the ids waiting to leave the journal:
//! `jobs/prune.rs`); and freed blocks that glibc's per-thread cache holds back from the
//! arenas, several hundred per worker thread after a burst, each keeping a page resident.
//! A third kind is not the heap's: the stacks of the blocking pool's threads that ended
//! after the burst, which glibc caches with their last used pages resident.
//! So the daemon runs without those caches and with at most four arenas ([`Malloc::Lean`],
//! [`tune_allocator`]); `ADVISORD_MALLOC=glibc` or `one-arena` picks another setting, all
//! three measured side by side (`DURABLE_ONLY=arenas cargo bench -p advisord --bench
//! durable_path`, figures in `docs/DAEMON.md`). jemalloc, measured through `LD_PRELOAD`,
//! was no smaller after a burst and larger before it.

use std::sync::atomic::AtomicUsize;

/// How long the daemon waits after its last running job ended, with none ended since,
/// before it hands the allocator's free pages back: a session asking one consultation
/// after another (each the last running job when it ends) would otherwise trim the heap
/// after every one and fault the same pages back in on the next.
pub const SOON: std::time::Duration = std::time::Duration::from_secs(1);

/// How long the daemon stays quiet after its last running job ended before it drops the
/// records it cached for tasks nobody used since, and hands the pages back once more.
pub const QUIET: std::time::Duration = std::time::Duration::from_secs(20);

/// At most this many jobs ended since the daemon last went quiet: the pace of sessions
/// asking now and then, not a burst. The tasks they use then stay cached across the quiet
/// release ([`crate::store::WorkingSet::SESSIONS`]), so a session's next consultation
/// does not read its whole task again first. After a burst every idle task goes: the few
/// kept would hold on to pages scattered through the heap the burst grew (keeping two of
/// a 500-job burst's tasks left the daemon's VmRSS 1.27 to 1.30 times what it was before
/// the burst, 30 s after, against 1.15 when none was kept).
pub const SESSION_JOBS: usize = 32;

/// The jobs ended since the daemon last went quiet ([`SESSION_JOBS`]).
static ENDED_SINCE_QUIET: AtomicUsize = AtomicUsize::new(0);

/// A job ended (whichever): counted towards telling a burst from sessions' pace.
pub fn job_ended() {
    ENDED_SINCE_QUIET.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// What the quiet release keeps cached after `ended` jobs since the last one.
fn kept_after(ended: usize) -> crate::store::WorkingSet {
    if ended <= SESSION_JOBS {
        crate::store::WorkingSet::SESSIONS
    } else {
        crate::store::WorkingSet::NONE
    }
}

/// The last running job just ended: once no job has ended for [`SOON`], hand the
/// allocator's free pages back; once none has for [`QUIET`], shrink `feed`'s buffers to
/// the items it keeps, drop the cached records of the tasks nobody used in its second half
/// (a task asked about again is read again: a listing and its files) but the sessions'
/// working set when no burst ran since the last such release ([`SESSION_JOBS`]), and hand
/// back what that freed, so an idle daemon returns to about its size before the burst well
/// within the half minute `benches/durable_path.rs` allows. Call it from within the
/// runtime.
pub fn after_burst(feed: std::sync::Arc<crate::daemon::feed::Feed>) {
    static STATE: std::sync::Mutex<Quiet> = std::sync::Mutex::new(Quiet::new());
    let ended = tokio::time::Instant::now();
    lock(&STATE).last_end = Some(ended);
    release_once_quiet(&STATE, |q| &mut q.soon_due, SOON, release_free_memory);
    release_once_quiet(
        &STATE,
        |q| &mut q.quiet_due,
        QUIET,
        move || {
            feed.shrink();
            let ended = ENDED_SINCE_QUIET.swap(0, std::sync::atomic::Ordering::Relaxed);
            crate::store::Stores::process().release_idle(QUIET / 2, kept_after(ended));
            release_free_memory();
        },
    );
}

/// When the last running job last ended (each wait is counted from there), and whether
/// each release is due (its timer runs), under one lock.
struct Quiet {
    last_end: Option<tokio::time::Instant>,
    soon_due: bool,
    quiet_due: bool,
}

impl Quiet {
    const fn new() -> Quiet {
        Quiet {
            last_end: None,
            soon_due: false,
            quiet_due: false,
        }
    }
}

fn lock(state: &std::sync::Mutex<Quiet>) -> std::sync::MutexGuard<'_, Quiet> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Run `release` on the blocking pool once no job has ended for `wait` (the latest end is
/// `state`'s), unless that release is due already (`due` picks its flag): a due release
/// waits for the quiet counted from the latest end, not from the earlier one that armed
/// it (a queue that ran dry for a moment mid-burst would otherwise release while the
/// burst's tasks are in use).
fn release_once_quiet(
    state: &'static std::sync::Mutex<Quiet>,
    due: fn(&mut Quiet) -> &mut bool,
    wait: std::time::Duration,
    release: impl FnOnce() + Send + 'static,
) {
    let armed_at = {
        let mut quiet = lock(state);
        if std::mem::replace(due(&mut quiet), true) {
            return;
        }
        quiet.last_end.unwrap_or_else(tokio::time::Instant::now)
    };
    tokio::spawn(async move {
        let mut at = armed_at + wait;
        loop {
            tokio::time::sleep_until(at).await;
            let mut quiet = lock(state);
            let latest = quiet.last_end.unwrap_or(armed_at) + wait;
            if latest <= tokio::time::Instant::now() {
                *due(&mut quiet) = false;
                break;
            }
            at = latest;
        }
        let _ = tokio::task::spawn_blocking(release).await;
    });
}

/// The variable that picks the allocator's settings: `lean` (the default), `glibc` or
/// `one-arena` (see [`Malloc`]).
pub const ENV_MALLOC: &str = "ADVISORD_MALLOC";

/// glibc's variable of tunables, read by the dynamic loader before `main`.
const TUNABLES: &str = "GLIBC_TUNABLES";

/// The tunables every setting but glibc's own adds, each unless the user's
/// `GLIBC_TUNABLES` names it already (their value is kept):
/// - the per-thread cache of freed blocks off (see [`Malloc::Lean`]);
/// - no cache of the stacks of threads that ended. glibc keeps up to 40 MiB of them for
///   threads started later, each with the pages its thread last used near its top still
///   resident (about 24 KiB each here); a burst starts a dozen threads of the blocking
///   pool, which end once idle for 10 s, and their cached stacks kept about 0.4 MiB of
///   the daemon resident after it. Without the cache a thread's stack is unmapped when
///   it ends; a new thread maps its own (a few µs, paid when the pool grows).
const TUNED: [(&str, &str); 2] = [
    ("glibc.malloc.tcache_count", "0"),
    ("glibc.pthread.stack_cache_size", "0"),
];

/// How the daemon sets up glibc's allocator, measured side by side in
/// `DURABLE_ONLY=arenas cargo bench -p advisord --bench durable_path`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malloc {
    /// No per-thread cache of freed blocks, at most four arenas: what a burst freed is
    /// in the arenas' free lists, where `malloc_trim` returns it, not held by a worker
    /// thread's cache (up to seven blocks of each of 64 sizes per thread) scattered over
    /// the burst's pages; fewer arenas, fewer partly used heaps; no cache of ended
    /// threads' stacks ([`TUNED`]). The default.
    Lean,
    /// glibc's own settings (eight arenas per core, each thread its cache).
    Glibc,
    /// One arena, no per-thread cache, no cache of ended threads' stacks.
    OneArena,
}

impl Malloc {
    /// The choice in `value` (`ADVISORD_MALLOC`; unset is `lean`), or what is accepted.
    pub fn parse(value: Option<&str>) -> Result<Malloc, String> {
        match value {
            None | Some("" | "lean") => Ok(Malloc::Lean),
            Some("glibc") => Ok(Malloc::Glibc),
            Some("one-arena") => Ok(Malloc::OneArena),
            Some(other) => Err(format!(
                "`{ENV_MALLOC}={other}` is not an allocator setting: use `lean` (the \
                 default), `glibc` or `one-arena`"
            )),
        }
    }

    /// `GLIBC_TUNABLES` as this choice needs it, given the value the process started
    /// with: `None` when it already holds what is needed (a tunable the user set is kept
    /// as it is, whatever its value).
    pub fn tunables(self, current: Option<&str>) -> Option<String> {
        if self == Malloc::Glibc {
            return None;
        }
        let current = current.filter(|c| !c.is_empty());
        let named = |name: &str| {
            current.is_some_and(|c| {
                c.split(':')
                    .any(|t| t.split_once('=').is_some_and(|(n, _)| n == name))
            })
        };
        let added: Vec<String> = TUNED
            .iter()
            .filter(|(name, _)| !named(name))
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        if added.is_empty() {
            return None;
        }
        Some(
            current
                .into_iter()
                .map(str::to_string)
                .chain(added)
                .collect::<Vec<_>>()
                .join(":"),
        )
    }
}

/// Set up the allocator before any thread starts, as `ADVISORD_MALLOC` says (see
/// [`Malloc`]); on glibc a choice that turns glibc's caches off starts this executable
/// again (`exec`, same pid and arguments) with the tunables ([`TUNED`]) in
/// `GLIBC_TUNABLES`, which the loader reads only at start. Returns the error message for
/// an unknown value; when the restart itself fails the daemon goes on with glibc's caches.
/// The daemon's children never see the variable: advisors run with an environment built
/// for them, nothing inherited.
#[allow(unsafe_code)]
pub fn tune_allocator() -> Result<(), String> {
    let value = std::env::var(ENV_MALLOC).ok();
    let choice = Malloc::parse(value.as_deref())?;
    // The restart first: the settings below would be lost with this process image.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if let Some(tunables) = choice.tunables(std::env::var(TUNABLES).ok().as_deref()) {
        use std::os::unix::process::CommandExt;
        if let Ok(exe) = std::env::current_exe() {
            // Returns only when the exec failed: go on as we are.
            let _ = std::process::Command::new(exe)
                .args(std::env::args_os().skip(1))
                .env(TUNABLES, tunables)
                .exec();
        }
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    let arenas = match choice {
        Malloc::Lean => Some(4),
        Malloc::OneArena => Some(1),
        Malloc::Glibc => None,
    };
    // SAFETY: `mallopt` takes plain integers and only sets the allocator's own
    // parameters (`M_ARENA_MAX` is read when a thread first needs an arena). A fixed mmap
    // threshold keeps every block of 128 KiB or more (a task's records, a large answer)
    // in a mapping of its own, returned whole when freed; glibc's default raises the
    // threshold each time such a block is freed, and then a burst's large blocks land
    // among the small ones that outlive it, where no trim can return their pages.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, 128 * 1024);
        if let Some(arenas) = arenas {
            nix::libc::mallopt(nix::libc::M_ARENA_MAX, arenas);
        }
    }
    report("started");
    Ok(())
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
        "{} (anonymous {}, files {}), {} threads; allocator {}, GLIBC_TUNABLES {}",
        field("VmRSS:"),
        field("RssAnon:"),
        field("RssFile:"),
        field("Threads:"),
        std::env::var(ENV_MALLOC)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "lean".into()),
        std::env::var(TUNABLES).unwrap_or_else(|_| "unset".into()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Sessions' pace keeps their tasks cached across the quiet release; after a burst
    /// none is kept.
    #[test]
    fn the_working_set_is_kept_after_sessions_pace_and_not_after_a_burst() {
        assert_eq!(kept_after(0), crate::store::WorkingSet::SESSIONS);
        assert_eq!(kept_after(SESSION_JOBS), crate::store::WorkingSet::SESSIONS);
        assert_eq!(kept_after(SESSION_JOBS + 1), crate::store::WorkingSet::NONE);
        assert_eq!(kept_after(500), crate::store::WorkingSet::NONE);
    }

    #[test]
    fn each_setting_is_read_from_its_name_and_anything_else_is_refused_with_the_choices() {
        assert_eq!(Malloc::parse(None), Ok(Malloc::Lean));
        assert_eq!(Malloc::parse(Some("")), Ok(Malloc::Lean));
        assert_eq!(Malloc::parse(Some("lean")), Ok(Malloc::Lean));
        assert_eq!(Malloc::parse(Some("glibc")), Ok(Malloc::Glibc));
        assert_eq!(Malloc::parse(Some("one-arena")), Ok(Malloc::OneArena));
        let refused = Malloc::parse(Some("jemalloc")).unwrap_err();
        assert!(refused.contains("ADVISORD_MALLOC=jemalloc"), "{refused}");
        assert!(
            ["`lean`", "`glibc`", "`one-arena`"]
                .iter()
                .all(|c| refused.contains(c)),
            "{refused}"
        );
    }

    #[test]
    fn the_caches_are_turned_off_once_beside_the_users_tunables_and_never_over_their_own() {
        const BOTH: &str = "glibc.malloc.tcache_count=0:glibc.pthread.stack_cache_size=0";
        assert_eq!(Malloc::Lean.tunables(None).as_deref(), Some(BOTH));
        assert_eq!(Malloc::OneArena.tunables(Some("")).as_deref(), Some(BOTH));
        assert_eq!(
            Malloc::Lean
                .tunables(Some("glibc.malloc.arena_test=4"))
                .as_deref(),
            Some(format!("glibc.malloc.arena_test=4:{BOTH}").as_str())
        );
        // Already restarted with them, or the user's own values: no restart.
        assert_eq!(Malloc::Lean.tunables(Some(BOTH)), None);
        assert_eq!(
            Malloc::Lean.tunables(Some(
                "glibc.pthread.stack_cache_size=1048576:glibc.malloc.tcache_count=3"
            )),
            None
        );
        // The user's value of one is kept, the other added.
        assert_eq!(
            Malloc::Lean
                .tunables(Some("glibc.malloc.tcache_count=3"))
                .as_deref(),
            Some("glibc.malloc.tcache_count=3:glibc.pthread.stack_cache_size=0")
        );
        // A name is matched whole, not as a prefix of another's.
        assert_eq!(
            Malloc::Lean
                .tunables(Some("glibc.malloc.tcache_count_x=1"))
                .as_deref(),
            Some(format!("glibc.malloc.tcache_count_x=1:{BOTH}").as_str())
        );
        assert_eq!(Malloc::Glibc.tunables(None), None);
    }

    /// A release armed by one end waits for the quiet counted from the latest end, runs
    /// once however many ends came meanwhile, and the next end arms it again.
    #[tokio::test(start_paused = true)]
    async fn a_release_waits_for_quiet_after_the_latest_end_and_runs_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::time::{advance, Instant};
        static STATE: std::sync::Mutex<Quiet> = std::sync::Mutex::new(Quiet::new());
        static RAN: AtomicUsize = AtomicUsize::new(0);
        let wait = Duration::from_secs(1);
        let end = || {
            lock(&STATE).last_end = Some(Instant::now());
            release_once_quiet(
                &STATE,
                |q| &mut q.soon_due,
                wait,
                || {
                    RAN.fetch_add(1, Ordering::SeqCst);
                },
            );
        };
        // Lets the timer task and the blocking release (a thread of its own, in real
        // time) run, until `count` releases ran or five seconds went by.
        let settle = || async {
            for _ in 0..50 {
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        let ran = |count: usize| async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            loop {
                settle().await;
                let ran = RAN.load(Ordering::SeqCst);
                if ran >= count || std::time::Instant::now() >= deadline {
                    return ran;
                }
            }
        };
        end();
        advance(Duration::from_millis(600)).await;
        end(); // a second end before the first's quiet: the same release, later
        advance(Duration::from_millis(600)).await;
        settle().await;
        assert_eq!(
            RAN.load(Ordering::SeqCst),
            0,
            "1.2 s after the first end, 0.6 s after the last"
        );
        advance(Duration::from_millis(500)).await;
        assert_eq!(ran(1).await, 1, "once, a second after the last end");
        end();
        advance(Duration::from_millis(1100)).await;
        assert_eq!(ran(2).await, 2, "the next end arms it again");
    }
}
