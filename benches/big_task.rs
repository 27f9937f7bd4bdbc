//! One task of 100,000 records against one of 100, through a warm daemon (client → daemon
//! → store, over the daemon's socket), side by side in one process:
//!
//! - **`verify`** of the big task (`GET /api/v1/reasoning/verify`): every record file read
//!   afresh and admitted again through the writer's rules, the work spread over the
//!   machine's cores (the daemon's CPU time for it is printed beside). Bound: ≤ 2 s.
//! - **Writes**: the median `POST /api/v1/reasoning/records` of an assessment (of a subject
//!   with a standing conclusion), its plan (which reuses that conclusion) and a conclusion
//!   on it, into each task, writes alternating so both meet the same disk. Bound: each
//!   ≤ 1.5× the same write into the small task.
//! - **A consultation** of two instant advisors (a fake LLM server), from its `POST
//!   /api/v1/consultations` to its `done` event, on an assessment in each task,
//!   alternating: the job's plan, its two consultations and its journal. Bound: ≤ 1.5× the
//!   small task's, as for a write.
//! - **`explain`** of a three-record chain (a consultation → its plan → its assessment),
//!   the cockpit's first page of 50 assessments (`GET /api/v1/reasoning?offset=0&limit=50`,
//!   the route `share/cockpit/cockpit.js` calls) and its page of 50 from the middle of the
//!   task's assessments. Bound: each ≤ 2× the small task's.
//! - **Memory**: the daemon's RSS once the big task is no longer asked about, against its
//!   RSS when idle before either task was read. Bound: within 64 MiB, polled until the
//!   daemon's idle release ([`advisord::store::IDLE_RELEASE`]) has had time to run.
//!
//! Both tasks are filled straight to files in the store's layout (flows of an assessment,
//! its plan, a completed consultation and a conclusion citing it, chained as the writer
//! chains them) and their heads anchored in the daemon's data directory, as this machine's
//! writer anchors them, so the daemon treats them as its own (not `foreign`).
//!
//! `cargo bench -p advisord --bench big_task` (`BIG_TASK_RECORDS=N` for another size).

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;

#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/flow.rs"]
mod flow;
#[path = "support/stats.rs"]
mod stats;

use advisord::core::chain::{self, Head};
use advisord::core::records::TaskName;
use advisord::machine::anchor::Anchors;
use advisord::store::file_name;
use advisord_fakes::llm_server::{FakeLlmServer, Script};
use daemon_helper::{call, call_json, catalogue, events, Advisor, Binary, Place};
use nix::sys::signal::Signal;
use serde_json::{json, Value};
use stats::{median, ms};
use std::path::Path;
use std::time::{Duration, Instant};

const BIG: usize = 100_000;
const SMALL: usize = 100;
/// Write rounds (each an assessment, its plan and a conclusion per task); enough that the
/// small task holds 50 assessments for the first page.
const ROUNDS: usize = 25;
const READS: usize = 15;
const VERIFY_BOUND: Duration = Duration::from_secs(2);
const WRITE_RATIO: f64 = 1.5;
const READ_RATIO: f64 = 2.0;
const RSS_BOUND_MIB: f64 = 64.0;

/// The id of record `sequence` of the task tagged `tag` (three letters).
fn id(tag: &str, sequence: usize) -> String {
    format!("01J{tag}{sequence:020}")
}

/// Fill `task` with `count` records (whole flows), chained as the writer chains them, and
/// anchor its head in `data` as this machine's writer does.
fn fill(state: &Path, data: &Path, task: &str, tag: &str, count: usize) {
    let dir = state.join(task);
    std::fs::create_dir_all(&dir).expect("the task directory");
    let mut prev = chain::GENESIS.to_string();
    let mut sequence = 0;
    for i in 0..count / 4 {
        for body in flow::flow(i, |n| id(tag, n), format!("stored decision {i}"), false) {
            sequence += 1;
            let (record, bytes) = flow::chained(task, id(tag, sequence), sequence, &mut prev, body);
            std::fs::write(dir.join(file_name(&record)), bytes).expect("a record file");
        }
    }
    let name = TaskName::new(task).expect("a task name");
    Anchors::new(data, state)
        .set(
            &name,
            &Head {
                sequence: sequence as u64,
                hash: prev,
            },
        )
        .expect("the anchor");
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the status");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib / 1024.0
}

/// The CPU time the process `pid` has used, over all its threads (user and system).
fn cpu_ms(pid: u32) -> f64 {
    let (user, system) = cpu::process_ms(pid);
    user + system
}

/// `value` percent-encoded for a query.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

struct Bench {
    place: Place,
    big: usize,
    broken: bool,
}

impl Bench {
    /// The query naming `task`'s context.
    fn query(&self, task: &str) -> String {
        format!(
            "root={}&task={task}&state_dir={}&catalogue={}",
            encode(&self.place.root().display().to_string()),
            encode(&self.place.state().display().to_string()),
            encode(&self.place.catalogue().display().to_string()),
        )
    }

    async fn get(&self, task: &str, route: &str, extra: &str) -> (Duration, Value) {
        let path = format!("{route}?{}{extra}", self.query(task));
        let started = Instant::now();
        let reply = call(&self.place.socket(), "GET", &path, None).await;
        let took = started.elapsed();
        (took, reply.expect(200))
    }

    async fn write(&self, task: &str, record: Value) -> (Duration, String) {
        let body = json!({"context": self.place.context_for(task), "record": record});
        let started = Instant::now();
        let reply = call_json(
            &self.place.socket(),
            "POST",
            "/api/v1/reasoning/records",
            &body,
        )
        .await
        .expect(201);
        let took = started.elapsed();
        (took, reply["id"].as_str().expect("an id").to_string())
    }

    /// A consultation of `assessment` in `task`, from its request to its `done` event.
    async fn consult(&self, task: &str, assessment: &str) -> Duration {
        let body = json!({"context": self.place.context_for(task), "assessment": assessment,
            "timeout_s": 60});
        let started = Instant::now();
        let job = call_json(&self.place.socket(), "POST", "/api/v1/consultations", &body)
            .await
            .expect(202);
        let all = events(&self.place.socket(), job["id"].as_str().expect("a job id")).await;
        let took = started.elapsed();
        assert_eq!(
            all.last().map(|e| e["event"].clone()),
            Some(json!("done")),
            "the consultation ended: {all:?}"
        );
        let recorded = all.iter().filter(|e| e["event"] == "recorded").count();
        assert_eq!(
            recorded, 2,
            "both advisors' consultations recorded: {all:?}"
        );
        took
    }

    fn judge(&mut self, what: &str, big: Duration, small: Duration, bound: f64) {
        let ratio = big.as_secs_f64() / small.as_secs_f64();
        let ok = ratio <= bound;
        println!(
            "big_task: {what}: {:.2} ms at {} records, {:.2} ms at {SMALL}: {ratio:.2}x \
             (bound {bound}x){}",
            ms(big),
            self.big,
            ms(small),
            if ok { "" } else { "  BROKEN" }
        );
        self.broken |= !ok;
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let big = std::env::var("BIG_TASK_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(BIG);
    // Two instant advisors, for the consultations.
    let server = FakeLlmServer::start(Script::new()).await;
    let place = Place::new(&catalogue(&[
        Advisor::http("first", &server.base_url(), "m"),
        Advisor::http("second", &server.base_url(), "m"),
    ]));
    let filling = Instant::now();
    fill(&place.state(), &place.data(), "big", "BIG", big);
    fill(&place.state(), &place.data(), "small", "SMA", SMALL);
    println!(
        "big_task: filled {big} + {SMALL} records in {:.1} s",
        filling.elapsed().as_secs_f64()
    );
    // A daemon's files are older than the store's racy window (a file changed within it is
    // judged by its bytes); let freshly written ones pass it once.
    std::thread::sleep(advisord::store::RACY_WINDOW + Duration::from_millis(100));
    let mut daemon = Binary::start(&place, &["--grace", "0"]);
    let pid = daemon.child.id();
    let mut bench = Bench {
        place,
        big,
        broken: false,
    };
    // Idle: the daemon up, neither task read yet (one health call, so it served once).
    call(&bench.place.socket(), "GET", "/api/v1/health", None)
        .await
        .expect(200);
    let idle = rss_mib(pid);

    // The daemon reads each task once (what any earlier use would have done).
    for task in ["big", "small"] {
        let started = Instant::now();
        bench.get(task, "/api/v1/reasoning", "&limit=1").await;
        println!(
            "big_task: first read of `{task}` {:.0} ms",
            ms(started.elapsed())
        );
    }

    // verify, through the daemon.
    let (small_verify, _) = bench.get("small", "/api/v1/reasoning/verify", "").await;
    let cpu_before = cpu_ms(pid);
    let (big_verify, report) = bench.get("big", "/api/v1/reasoning/verify", "").await;
    let verify_cpu = cpu_ms(pid) - cpu_before;
    let task = &report["tasks"][0];
    assert_eq!(
        task["records"].as_u64(),
        Some(big as u64),
        "verify walked every record: {task}"
    );
    assert!(
        task["foreign"].is_null(),
        "the filled task is anchored as this machine's: {}",
        task["foreign"]
    );
    let ok = big_verify <= VERIFY_BOUND;
    // The daemon's CPU time beside the wall time: its work spread over the cores, and
    // on a loaded machine the figure that does not depend on what else runs.
    println!(
        "big_task: verify {:.0} ms at {big} records (bound {} ms; the daemon's CPU time \
         {verify_cpu:.0} ms over {} core(s)), {:.1} ms at {SMALL}{}",
        ms(big_verify),
        VERIFY_BOUND.as_millis(),
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
        ms(small_verify),
        if ok { "" } else { "  BROKEN" }
    );
    bench.broken |= !ok;

    // Writes, alternating between the tasks.
    let mut times: [[Vec<Duration>; 2]; 3] = Default::default();
    for round in 0..ROUNDS {
        for (t, task) in ["big", "small"].into_iter().enumerate() {
            let (took, assessment) = bench
                .write(
                    task,
                    json!({"kind": "assessment", "subject": "Stored decision 1",
                        "materiality": "low", "hypothesis": format!("round {round}")}),
                )
                .await;
            times[0][t].push(took);
            let (took, _) = bench
                .write(task, json!({"kind": "plan", "assessment": assessment}))
                .await;
            times[1][t].push(took);
            let (took, _) = bench
                .write(
                    task,
                    json!({"kind": "conclusion", "assessment": assessment,
                        "decision": "keep it", "rationale": format!("round {round}")}),
                )
                .await;
            times[2][t].push(took);
        }
    }
    for (kind, [b, s]) in ["assessment", "plan", "conclusion"].iter().zip(times) {
        bench.judge(
            &format!("{kind} write (median of {ROUNDS})"),
            median(b),
            median(s),
            WRITE_RATIO,
        );
    }

    // Consultations, alternating: an assessment of the highest materiality in each task
    // (both advisors are asked), consulted ROUNDS times.
    let mut consulted: [Vec<Duration>; 2] = Default::default();
    let mut assessments = Vec::new();
    for task in ["big", "small"] {
        let (_, assessment) = bench
            .write(
                task,
                json!({"kind": "assessment", "subject": "consulted decision",
                    "materiality": "critical", "hypothesis": "asked of both",
                    "evidence": [{"kind": "file", "ref": "benches/big_task.rs"}]}),
            )
            .await;
        assessments.push(assessment);
    }
    for _ in 0..ROUNDS {
        for (t, task) in ["big", "small"].into_iter().enumerate() {
            consulted[t].push(bench.consult(task, &assessments[t]).await);
        }
    }
    let [b, s] = consulted;
    bench.judge(
        &format!("consultation of two advisors (median of {ROUNDS})"),
        median(b),
        median(s),
        WRITE_RATIO,
    );

    // explain of a three-record chain, the cockpit's first page and a page from the middle,
    // alternating.
    let mut explain: [Vec<Duration>; 2] = Default::default();
    let mut page: [Vec<Duration>; 2] = Default::default();
    let mut middle: [Vec<Duration>; 2] = Default::default();
    for _ in 0..READS {
        for (t, (task, tag)) in [("big", "BIG"), ("small", "SMA")].into_iter().enumerate() {
            let consultation = id(tag, 4 * 10 + 3);
            let (took, view) = bench
                .get(
                    task,
                    "/api/v1/reasoning/explain",
                    &format!("&id={consultation}"),
                )
                .await;
            assert!(view.to_string().contains(&id(tag, 4 * 10 + 1)), "{view}");
            explain[t].push(took);
            let (took, view) = bench
                .get(task, "/api/v1/reasoning", "&offset=0&limit=50")
                .await;
            assert_eq!(
                view["assessments"].as_array().map(Vec::len),
                Some(50),
                "a page of 50"
            );
            page[t].push(took);
            // A page from the middle of the assessments costs the page as well.
            let total = view["page"]["total"].as_u64().expect("the page's total");
            let offset = (total / 2).saturating_sub(25);
            let (took, view) = bench
                .get(
                    task,
                    "/api/v1/reasoning",
                    &format!("&offset={offset}&limit=50"),
                )
                .await;
            assert_eq!(view["page"]["offset"].as_u64(), Some(offset), "{view}");
            assert_eq!(
                view["assessments"].as_array().map(Vec::len),
                Some(50),
                "a page of 50"
            );
            middle[t].push(took);
        }
    }
    let [b, s] = explain;
    bench.judge(
        "explain of a three-record chain",
        median(b),
        median(s),
        READ_RATIO,
    );
    let [b, s] = page;
    bench.judge(
        "the cockpit's first page of 50 assessments",
        median(b),
        median(s),
        READ_RATIO,
    );
    let [b, s] = middle;
    bench.judge(
        "a page of 50 assessments from the middle",
        median(b),
        median(s),
        READ_RATIO,
    );

    // Memory: the big task no longer asked about (the small one still is, now and then).
    let busy = rss_mib(pid);
    let started = Instant::now();
    let patience = advisord::store::IDLE_RELEASE * 3 + Duration::from_secs(10);
    let mut now = busy;
    while started.elapsed() < patience {
        tokio::time::sleep(Duration::from_millis(500)).await;
        bench.get("small", "/api/v1/reasoning", "&limit=1").await;
        now = rss_mib(pid);
        if now - idle <= RSS_BOUND_MIB {
            break;
        }
    }
    let ok = now - idle <= RSS_BOUND_MIB;
    println!(
        "big_task: daemon RSS idle {idle:.1} MiB, {busy:.1} MiB after the calls, {now:.1} MiB \
         {:.0} s after the big task was last asked about (+{:.1} MiB; bound +{RSS_BOUND_MIB} \
         MiB){}",
        started.elapsed().as_secs_f64(),
        now - idle,
        if ok { "" } else { "  BROKEN" }
    );
    bench.broken |= !ok;

    let status = daemon.signal_and_wait(Signal::SIGTERM);
    assert!(status.success(), "{status:?}");
    server.shutdown().await;
    if bench.broken {
        eprintln!("big_task: a bound is broken");
        std::process::exit(1);
    }
}
