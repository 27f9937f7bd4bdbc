//! Deadline precision of the contract layer: an adapter that hangs ignoring the deadline and
//! the cancellation is stopped by `contract::consult` on time.
//!
//! Measures, over [`RUNS`] runs each, the overshoot past the deadline (a hang under a
//! deadline) and past the cancellation (a hang cancelled), prints the median and the
//! maximum, and exits non-zero when a maximum is over [`BOUND`]. The cancellation figure
//! includes the contract's deliberate `STOP_GRACE`. (The process group part is measured by
//! the process adapter's own bench.)
//!
//! Run: `cargo bench -p advisord-adapters --bench deadline`

use advisord_adapters::contract::{consult, AdvisorSpec, FailureKind, Io, STOP_GRACE};
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use std::process::ExitCode;
use std::time::Duration;
use tokio::time::Instant;

/// Runs per measurement.
const RUNS: usize = 20;
/// The deadline of each run.
const TIMEOUT: Duration = Duration::from_millis(100);
/// When each cancellation run cancels.
const CANCEL_AFTER: Duration = Duration::from_millis(50);
/// The largest overshoot accepted (SPEC issue: stopped within 200 ms after the deadline).
const BOUND: Duration = Duration::from_millis(200);

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let (deadline, cancel) =
        runtime.block_on(async { (deadline_runs().await, cancel_runs().await) });
    let mut ok = true;
    for (what, mut overshoots) in [("deadline", deadline), ("cancellation", cancel)] {
        overshoots.sort();
        let median = overshoots[overshoots.len() / 2];
        let max = overshoots[overshoots.len() - 1];
        let pass = max <= BOUND;
        ok &= pass;
        println!(
            "deadline bench: hang stopped after the {what}: overshoot median {:.1} ms, max {:.1} ms \
             over {RUNS} runs (bound {} ms{}) {}",
            ms(median),
            ms(max),
            BOUND.as_millis(),
            if what == "cancellation" {
                format!(", includes STOP_GRACE {} ms", STOP_GRACE.as_millis())
            } else {
                String::new()
            },
            if pass { "ok" } else { "OVER THE BOUND" }
        );
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn spec() -> AdvisorSpec {
    AdvisorSpec {
        id: "hang".into(),
        adapter: "scripted".into(),
        executable: None,
        credential: None,
        settings: serde_json::Map::new(),
    }
}

/// Overshoot past the deadline of a hang, per run.
async fn deadline_runs() -> Vec<Duration> {
    let fake = ScriptedAdapter::new(vec![Script::hang(); RUNS]);
    let mut overshoots = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let io = Io::with_timeout(TIMEOUT);
        let outcome = consult(&fake, &spec(), "prompt", &io).await;
        let overshoot = Instant::now().saturating_duration_since(io.deadline);
        assert_eq!(outcome.result.unwrap_err().kind, FailureKind::Timeout);
        overshoots.push(overshoot);
    }
    assert_eq!(fake.dropped(), RUNS, "every hang was dropped");
    overshoots
}

/// Overshoot past the cancellation of a hang, per run.
async fn cancel_runs() -> Vec<Duration> {
    let fake = ScriptedAdapter::new(vec![Script::hang(); RUNS]);
    let mut overshoots = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let io = Io::with_timeout(Duration::from_secs(30));
        let token = io.cancel.clone();
        let cancelled_at = Instant::now() + CANCEL_AFTER;
        tokio::spawn(async move {
            tokio::time::sleep_until(cancelled_at).await;
            token.cancel();
        });
        let outcome = consult(&fake, &spec(), "prompt", &io).await;
        let overshoot = Instant::now().saturating_duration_since(cancelled_at);
        assert_eq!(outcome.result.unwrap_err().kind, FailureKind::Cancelled);
        overshoots.push(overshoot);
    }
    assert_eq!(fake.dropped(), RUNS, "every hang was dropped");
    overshoots
}
