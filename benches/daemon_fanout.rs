//! Fan-out: one consultation of three advisors answering after 500 ms each, through the
//! daemon's socket (in-process daemon, scripted advisors). A concurrent fan-out takes
//! about 500 ms; a sequential one 1,500 ms. Bound: wall time / 500 ms ≤ 1.15.
//!
//! `cargo bench -p advisord --bench daemon_fanout`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;

use advisord_adapters::registry::Registry;
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use daemon_helper::{answer, catalogue, Advisor, Daemon};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DELAY: Duration = Duration::from_millis(500);
const RUNS: usize = 5;
const BOUND: f64 = 1.15;

#[tokio::main]
async fn main() {
    let ids = ["a", "b", "c"];
    let mut registry = Registry::builtin();
    for id in ids {
        let scripts = (0..RUNS)
            .map(|_| Script::answer(&answer(id, "supports")).after(DELAY))
            .collect();
        registry.insert(
            &format!("scripted-{id}"),
            Arc::new(ScriptedAdapter::new(scripts)),
        );
    }
    let advisors: Vec<Advisor> = ids.iter().map(|id| Advisor::scripted(id)).collect();
    let daemon = Daemon::start(&catalogue(&advisors), registry).await;
    let mut ratios = Vec::new();
    for _ in 0..RUNS {
        let assessment = daemon.assessment().await;
        let started = Instant::now();
        let job = daemon.consult(&assessment, 30.0).await;
        let done = daemon.wait(job["id"].as_str().expect("a job id")).await;
        let wall = started.elapsed();
        assert_eq!(done["state"], "done");
        assert_eq!(done["consultations"].as_array().map(Vec::len), Some(3));
        ratios.push(wall.as_secs_f64() / DELAY.as_secs_f64());
    }
    daemon.stop().await;
    ratios.sort_by(f64::total_cmp);
    let median = ratios[RUNS / 2];
    println!(
        "daemon_fanout: three advisors of {} ms: wall/500ms median {median:.3} (runs {ratios:.3?}); bound <= {BOUND}",
        DELAY.as_millis()
    );
    if median > BOUND {
        eprintln!("daemon_fanout: bound broken: {median:.3} > {BOUND}");
        std::process::exit(1);
    }
}
