//! Handing memory the daemon freed back to the system once it goes quiet.
//!
//! A burst of jobs allocates and frees a great deal: requests, answers, records read and
//! written. The C allocator keeps what was freed in its per-thread arenas for reuse, so
//! after a burst the daemon would stay as large as at its peak while it sits idle, and a
//! long-lived daemon would drift upwards burst after burst as those arenas fragment.
//! When its last running job ends, the daemon asks the allocator to return its free
//! pages; the next burst takes fresh pages from the kernel as it needs them.
//!
//! It also caps the allocator's arenas at two per core (glibc's default is eight per
//! core): the daemon's threads are a few async workers and a pool of blocking ones, and
//! more arenas than that only spread what is freed across more partly used pages, which
//! no trim can give back.

/// Cap the allocator's arenas at two per core (glibc's only; elsewhere nothing). Call it
/// before any thread starts.
#[allow(unsafe_code)]
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = i32::try_from(cores.saturating_mul(2)).unwrap_or(i32::MAX);
        // SAFETY: `mallopt` takes plain integers and only sets the allocator's own
        // parameters; `M_ARENA_MAX` is read when a thread first needs an arena.
        unsafe {
            nix::libc::mallopt(nix::libc::M_ARENA_MAX, arenas);
        }
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
