//! CPU time read from `/proc`, in milliseconds (`/proc` counts it in USER_HZ, 100 ticks
//! a second on Linux's user ABI).

// Each bench includes this file as a module of its own and uses a part of it.
#![allow(dead_code)]

/// Milliseconds of one `/proc` tick.
const TICK_MS: f64 = 10.0;

/// The user and system CPU time process `pid` has used, over all its threads (those
/// that ended included), in milliseconds.
pub fn process_ms(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // After the command's closing parenthesis: the state, then utime is the 12th field
    // and stime the 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a command in parentheses")
        .1
        .split_whitespace()
        .collect();
    let ticks = |at: usize| fields[at].parse::<f64>().expect("a tick count");
    (ticks(11) * TICK_MS, ticks(12) * TICK_MS)
}

/// What the machine has done since it started, from one read of `/proc/stat`: the busy
/// time of every CPU (user, nice, system, interrupts and steal: all but idle and waiting
/// for I/O), in milliseconds, and how many times its CPUs switched from one thread to
/// another (every process's, and the kernel's own threads').
pub fn machine() -> (f64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let cpu: Vec<f64> = stat
        .lines()
        .next()
        .expect("the cpu line")
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().expect("a tick count"))
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy = [0, 1, 2, 5, 6, 7].iter().map(|&at| cpu[at]).sum::<f64>() * TICK_MS;
    let switches = stat
        .lines()
        .find_map(|l| l.strip_prefix("ctxt "))
        .and_then(|n| n.trim().parse().ok())
        .expect("a ctxt line");
    (busy, switches)
}
