//! Cancellation: from `DELETE /api/v1/consultations/{id}` to every process of the
//! advisors' process groups gone (each advisor is a shell script that starts a grandchild
//! and waits). Bound: at most 200 ms.
//!
//! `cargo bench -p advisord --bench daemon_cancel`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;

use advisord_adapters::registry::Registry;
use daemon_helper::{catalogue, process_gone, Advisor, Daemon, Place};
use std::time::{Duration, Instant};

const RUNS: usize = 5;
const BOUND: Duration = Duration::from_millis(200);

fn pids(file: &std::path::Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[tokio::main]
async fn main() {
    let place = Place::new("advisors: []\n");
    let pid_file = place.path().join("pids");
    let advisors: Vec<Advisor> = ["a", "b", "c"]
        .iter()
        .map(|id| {
            let script = place.script(
                &format!("{id}.sh"),
                &format!(
                    "sleep 300 &\necho $! >> {pids}\necho $$ >> {pids}\nsleep 300",
                    pids = pid_file.display()
                ),
            );
            Advisor::process(id, &script)
        })
        .collect();
    place.set_catalogue(&catalogue(&advisors));
    let daemon = Daemon::start_in(place, Registry::builtin(), Box::new(|_| {})).await;
    let mut times = Vec::new();
    for _ in 0..RUNS {
        let _ = std::fs::remove_file(&pid_file);
        let assessment = daemon.assessment().await;
        let job = daemon.consult(&assessment, 60.0).await;
        let id = job["id"].as_str().expect("a job id").to_string();
        daemon_helper::wait_for("three advisors and their grandchildren started", || {
            pids(&pid_file).len() == 6
        });
        let running = pids(&pid_file);
        let started = Instant::now();
        let socket = daemon.socket();
        let path = format!("/api/v1/consultations/{id}");
        let cancel =
            tokio::spawn(async move { daemon_helper::call(&socket, "DELETE", &path, None).await });
        while !running.iter().all(|&pid| process_gone(pid)) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "advisors still running"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let gone = started.elapsed();
        let reply = cancel.await.expect("the cancel request");
        assert_eq!(reply.json()["state"], "cancelled");
        times.push(gone);
    }
    daemon.stop().await;
    times.sort();
    let worst = *times.last().expect("runs");
    println!(
        "daemon_cancel: DELETE to process groups gone: median {:?}, worst {worst:?} over {RUNS} runs; bound <= {BOUND:?}",
        times[RUNS / 2]
    );
    if worst > BOUND {
        eprintln!("daemon_cancel: bound broken: {worst:?} > {BOUND:?}");
        std::process::exit(1);
    }
}
