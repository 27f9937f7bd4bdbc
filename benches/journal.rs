//! The shared journal (docs/JOURNAL.md), measured on a real three-node `nats-server`
//! JetStream cluster over loopback that the bench starts and stops itself (it fails,
//! naming `scripts/ci/install-nats.sh`, when no server is found), with three real
//! `advisord --journal` daemons, each on its own clone of one repository whose
//! `.advisord/project.yaml` names the journal. Every figure is taken along the user's path:
//! `advisor-consult` → daemon → JetStream → replica files.
//!
//! 1. **Added latency of a shared write**: `record` into a shared task against `record`
//!    into a local task (a `--state-dir` the journal does not share) through the same
//!    daemon, alternating. Goal: the median shared minus the median local ≤ 5 ms.
//! 2. **Catch-up of a machine that joins late**: 10,000 records of one task published
//!    straight into the stream (chained as a writer chains them, as the journal publishes
//!    them), the two machines on the journal left to apply them, then a third daemon
//!    started; from its first `status` (which attaches the repository) until its replica
//!    holds the 10,000th record (the follower applies in the stream's order), polled.
//!    Goal: ≤ 2 s. When `status` through it first shows all 10,000 is printed beside it (it
//!    adds the first read of the 10,000 files, which a local task of that size costs too).
//! 3. **`status` on a shared task of 10,000 records** against the same 10,000 records in a
//!    local task, through the daemon, alternating. Goal: ratio of the medians ≤ 1.2.
//!
//! The three nodes keep their stores in `/dev/shm` when it exists: on a real bus they are
//! other machines' disks, and on this one each record's flush (`syncfs` of the state
//! directory's file system) would also flush the nodes' three copies of the message.
//!
//! The catch-up creates 10,000 files on the state directory's disk. On ext4, creating a
//! file looks past inodes freed in the last minutes (`recently_deleted` in `perf`), so
//! right after a run that deleted tens of thousands of files (this bench's own clean-up,
//! or `no_daemon`'s and `big_task`'s) the same catch-up takes two to five times as long:
//! judge the figure on a run started a few minutes after the last mass deletion.
//! `JOURNAL_BENCH_LOG` sets the daemons' `RUST_LOG` (e.g. `warn,advisord::journal=debug`,
//! which logs when the follower starts and when the replica is current), and
//! `JOURNAL_BENCH_KEEP=FILE` copies the late daemon's log there.
//!
//! `cargo bench -p advisord --bench journal` (exits 1 when a goal is broken).

#[path = "support/stats.rs"]
mod stats;

mod support {
    #[path = "../../tests/integration/support/client.rs"]
    pub mod client;
    #[path = "../../tests/integration/support/cluster.rs"]
    pub mod cluster;
    #[path = "../../tests/integration/support/output.rs"]
    pub mod output;
}

use advisord_fakes::nats::NatsServer;
use serde_json::{json, Value};
use stats::{median, ms};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};
use support::client::{stop_child, World};
use support::cluster::{formed_cluster, journal_world, start_journal_daemon, urls};
use support::output::Output;

/// The journal the repositories name.
const JOURNAL: &str = "team";
/// The shared task the writes go to, and its local twin.
const SHARED: &str = "shared";
const LOCAL: &str = "local";
/// The task of 10,000 records.
const BIG: &str = "big";
const BIG_RECORDS: u64 = 10_000;
/// Writes of each kind for the added latency.
const WRITES: usize = 60;
/// `status` runs of each kind on the large tasks.
const STATUS_RUNS: usize = 9;

const WRITE_GOAL_MS: f64 = 5.0;
const CATCH_UP_GOAL: Duration = Duration::from_secs(2);
const STATUS_GOAL: f64 = 1.2;

/// The longest one client run may take, and a poll for something converging.
const RUN_BOUND: Duration = Duration::from_secs(60);
const CONVERGE: Duration = Duration::from_secs(120);

/// One machine: a clone of the repository naming the journal, and its daemon.
struct Machine {
    world: World,
    name: String,
    urls: String,
    daemon: Option<Child>,
}

impl Machine {
    /// A machine whose daemon is not started yet.
    fn new(name: &str, cluster: &[NatsServer]) -> Machine {
        Machine {
            world: journal_world(JOURNAL),
            name: name.to_string(),
            urls: urls(cluster),
            daemon: None,
        }
    }

    fn log(&self) -> PathBuf {
        self.world.tmp().join(format!("{}.log", self.name))
    }

    fn start(&mut self) {
        let rust_log = std::env::var("JOURNAL_BENCH_LOG").unwrap_or_else(|_| "warn".into());
        self.daemon = Some(start_journal_daemon(
            &self.world,
            &self.name,
            &self.urls,
            Some(&rust_log),
            &self.log(),
        ));
    }

    /// The local state directory (no journal shares a `--state-dir`).
    fn local_state(&self) -> PathBuf {
        self.world.tmp().join("local-state")
    }

    /// The shared (default) state directory.
    fn shared_state(&self) -> PathBuf {
        self.world.root().join(advisord::paths::DEFAULT_STATE_DIR)
    }

    /// Run the client with `args` on `task` (in the local state directory when `local`),
    /// timed from spawn to exit; fails past [`RUN_BOUND`].
    fn run(&self, task: &str, local: bool, args: &[&str]) -> (Duration, Output) {
        let mut all = args.to_vec();
        all.extend(["--task", task, "--format", "json"]);
        let state = self.local_state();
        if local {
            all.extend(["--state-dir", state.to_str().expect("utf-8")]);
        }
        let description = format!("{}: advisor-consult {all:?}", self.name);
        let started = Instant::now();
        let child = self.world.command(&all).spawn().expect("spawn the client");
        let pid = child.id() as i32;
        let (done, watch) = std::sync::mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            if watch.recv_timeout(RUN_BOUND).is_err() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        });
        let output = child.wait_with_output().expect("wait for the client");
        let took = started.elapsed();
        let _ = done.send(());
        let _ = watchdog.join();
        (
            took,
            Output {
                description,
                code: output.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            },
        )
    }

    /// Record `input` into `task`; the time and the stored record.
    fn record(&self, task: &str, local: bool, input: &Value) -> (Duration, Value) {
        let path = self
            .world
            .tmp()
            .join(format!("in-{}.json", ulid::Ulid::new()));
        std::fs::write(&path, input.to_string()).expect("write input");
        let (took, output) = self.run(
            task,
            local,
            &["record", "--file", path.to_str().expect("utf-8")],
        );
        let _ = std::fs::remove_file(&path);
        (took, output.expect_exit(0).json())
    }

    /// `status` of `task`: the time and how many records it showed.
    fn status(&self, task: &str, local: bool) -> (Duration, u64) {
        let (took, output) = self.run(task, local, &["status"]);
        let records = output.expect_exit(0).json()["records"]
            .as_u64()
            .expect("a record count");
        (took, records)
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            stop_child(&mut child);
        }
    }
}

fn assessment(subject: &str) -> Value {
    json!({"kind": "assessment", "subject": subject, "materiality": "low",
        "hypothesis": "one writer is enough", "facts": ["one fact"]})
}

/// The first figure: the added latency of a shared write over a local one; whether the
/// goal holds.
fn write_latency(machine: &Machine) -> bool {
    // The first write of each kind attaches the state directory, creates the stream and
    // the task: not what is measured.
    machine.record(SHARED, false, &assessment("warm shared"));
    machine.record(LOCAL, true, &assessment("warm local"));
    let (mut shared, mut local) = (Vec::new(), Vec::new());
    for i in 0..WRITES {
        local.push(machine.record(LOCAL, true, &assessment(&format!("l{i}"))).0);
        shared.push(
            machine
                .record(SHARED, false, &assessment(&format!("s{i}")))
                .0,
        );
    }
    let (shared, local) = (ms(median(shared)), ms(median(local)));
    let added = shared - local;
    println!(
        "journal write: median `record` into a shared task {shared:.2} ms, into a local task \
         {local:.2} ms ({WRITES} each, alternating): {added:.2} ms added; goal <= \
         {WRITE_GOAL_MS} ms"
    );
    added <= WRITE_GOAL_MS
}

/// What the cluster itself takes to acknowledge a publish like the journal's (an R3 file
/// stream, the expected last subject sequence, a message id), for reading the added
/// latency beside: the median of [`WRITES`] publishes into a stream of the bench's own.
fn bus_acknowledgement(runtime: &tokio::runtime::Runtime, cluster: &[NatsServer]) {
    let urls: Vec<String> = cluster.iter().map(NatsServer::url).collect();
    let samples = runtime.block_on(async {
        let client = async_nats::connect(urls).await.expect("connect");
        let js = async_nats::jetstream::new(client);
        let stream = async_nats::jetstream::stream::Config {
            name: "BENCH_ACK".into(),
            subjects: vec!["bench.ack".into()],
            storage: async_nats::jetstream::stream::StorageType::File,
            num_replicas: 3,
            ..Default::default()
        };
        js.create_stream(stream).await.expect("the probe stream");
        let mut samples = Vec::with_capacity(WRITES);
        for i in 0..WRITES as u64 {
            let message = async_nats::jetstream::message::PublishMessage::build()
                .payload(vec![b'x'; 1024].into())
                .message_id(ulid::Ulid::new().to_string())
                .expected_last_subject_sequence(i);
            let started = Instant::now();
            js.send_publish("bench.ack", message)
                .await
                .expect("publish")
                .await
                .expect("acknowledged");
            samples.push(started.elapsed());
        }
        let _ = js.delete_stream("BENCH_ACK").await;
        samples
    });
    println!(
        "journal bus: the cluster acknowledges a 1 KiB publish to an R3 file stream in \
         {:.2} ms (median of {WRITES}; context for the added latency, not a goal)",
        ms(median(samples))
    );
}

/// Publish records 2..=[`BIG_RECORDS`] of task [`BIG`], chained on its first record
/// (`seed`, written through `machine`), straight into the stream.
fn fill_big(runtime: &tokio::runtime::Runtime, cluster: &[NatsServer], machine: &Machine) {
    machine.record(BIG, false, &assessment("s1"));
    let seed = machine.shared_state().join(BIG).join("0000000001.json");
    let mut previous = std::fs::read(&seed).expect("the first record");
    let template: Value = serde_json::from_slice(&previous).expect("a record");
    let mut records = Vec::new();
    for i in 2..=BIG_RECORDS {
        let mut record = template.clone();
        record["id"] = json!(ulid::Ulid::new().to_string());
        record["sequence"] = json!(i);
        record["subject"] = json!(format!("s{i}"));
        record["prev"] = json!(advisord::core::chain::digest(&previous));
        let mut bytes = serde_json::to_vec_pretty(&record).expect("serialise");
        bytes.push(b'\n');
        previous = bytes.clone();
        records.push((record["id"].as_str().expect("id").to_string(), i, bytes));
    }
    let urls: Vec<String> = cluster.iter().map(NatsServer::url).collect();
    let started = Instant::now();
    runtime.block_on(async {
        let client = async_nats::connect(urls).await.expect("connect");
        let js = async_nats::jetstream::new(client);
        let subject = format!("advisord.journal.{JOURNAL}.{BIG}");
        let mut acks = Vec::new();
        for (id, sequence, bytes) in records {
            let message = async_nats::jetstream::message::PublishMessage::build()
                .payload(bytes.into())
                .message_id(id)
                .header("Advisord-Machine", machine.name.as_str())
                .header("Advisord-Sequence", sequence.to_string().as_str());
            acks.push(
                js.send_publish(subject.clone(), message)
                    .await
                    .expect("publish"),
            );
            // An acknowledgement holds a permit until awaited: await them in batches.
            if acks.len() == 500 {
                for ack in acks.drain(..) {
                    ack.await.expect("acknowledged");
                }
            }
        }
        for ack in acks {
            ack.await.expect("acknowledged");
        }
    });
    println!(
        "journal fill: {} records published straight into the stream in {:.1} s (not a goal)",
        BIG_RECORDS - 1,
        started.elapsed().as_secs_f64()
    );
}

/// The second figure: a machine that joins late, from its first command (a `status` of
/// another task of the repository, which attaches the state directory: the daemon catches
/// the replica up before it answers, within a bound) until its replica holds every record;
/// then `status` of the task through it must show them all.
fn catch_up(late: &Machine) -> bool {
    let last = late
        .shared_state()
        .join(BIG)
        .join(format!("{BIG_RECORDS:010}.json"));
    let watched = std::thread::spawn(move || {
        let started = Instant::now();
        while !last.exists() && started.elapsed() < CONVERGE {
            std::thread::sleep(Duration::from_millis(5));
        }
        started.elapsed()
    });
    let (first, _) = late.status("probe", false);
    let took = watched.join().expect("the watcher");
    if let Ok(keep) = std::env::var("JOURNAL_BENCH_KEEP") {
        let _ = std::fs::copy(late.log(), keep);
    }
    let (shown, records) = late.status(BIG, false);
    assert_eq!(records, BIG_RECORDS, "{} shows every record", late.name);
    println!(
        "journal catch-up: a daemon started after {BIG_RECORDS} records were written holds \
         them all in its replica {:.3} s after its first command (which answered at {:.3} s); \
         goal <= {} s (the next `status`, of the task, reads the 10,000 files once: {:.3} s)",
        took.as_secs_f64(),
        first.as_secs_f64(),
        CATCH_UP_GOAL.as_secs_f64(),
        shown.as_secs_f64(),
    );
    took <= CATCH_UP_GOAL
}

/// Copy the files of task `from` under `state` into task `to` under `into`, byte for byte.
fn copy_task(state: &Path, from: &str, into: &Path, to: &str) {
    let target = into.join(to);
    std::fs::create_dir_all(&target).expect("the local task");
    for entry in std::fs::read_dir(state.join(from)).expect("the replica") {
        let entry = entry.expect("an entry");
        let name = entry.file_name();
        if name.to_string_lossy().ends_with(".json") && !name.to_string_lossy().starts_with('.') {
            std::fs::copy(entry.path(), target.join(&name)).expect("copy a record");
        }
    }
}

/// The third figure: `status` on the shared task of 10,000 records against the same
/// records in a local task, through one daemon.
fn status_ratio(machine: &Machine) -> bool {
    copy_task(&machine.shared_state(), BIG, &machine.local_state(), BIG);
    // The first `status` of each reads every file once: not what is measured.
    assert_eq!(machine.status(BIG, true).1, BIG_RECORDS, "the local copy");
    assert_eq!(machine.status(BIG, false).1, BIG_RECORDS, "the shared task");
    let (mut shared, mut local) = (Vec::new(), Vec::new());
    for _ in 0..STATUS_RUNS {
        local.push(machine.status(BIG, true).0);
        shared.push(machine.status(BIG, false).0);
    }
    let (shared, local) = (ms(median(shared)), ms(median(local)));
    let ratio = shared / local;
    println!(
        "journal status: median `status` of a shared task of {BIG_RECORDS} records \
         {shared:.1} ms, of a local task of the same records {local:.1} ms ({STATUS_RUNS} \
         each, alternating): {ratio:.2}x; goal <= {STATUS_GOAL}x"
    );
    ratio <= STATUS_GOAL
}

fn main() {
    // The nodes keep their JetStream stores in memory (`/dev/shm`) when it is there: on a
    // team's bus they are other machines' disks, but a loopback cluster on this disk makes
    // each write's flush (`syncfs` of the state directory's file system) flush the three
    // nodes' copies of the message too, which no deployment pays. Set before any thread
    // starts (the nodes' stores are temporary directories of `TMPDIR`).
    let shm = Path::new("/dev/shm");
    let stores = shm.is_dir().then(|| {
        let dir = tempfile::tempdir_in(shm).expect("a directory in /dev/shm");
        std::env::set_var("TMPDIR", dir.path());
        dir
    });
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let cluster = formed_cluster();
    let mut machines: Vec<Machine> = ["m1", "m2", "m3"]
        .iter()
        .map(|name| Machine::new(name, &cluster))
        .collect();
    // The write is measured with one daemon on the journal: another machine's follower
    // works on its own machine's CPU and disk, not on the writer's as it would here.
    machines[0].start();
    let mut results = vec![("write", write_latency(&machines[0]))];
    bus_acknowledgement(&runtime, &cluster);
    machines[1].start();
    fill_big(&runtime, &cluster, &machines[1]);
    // The machines already on the journal apply the records first (alone on the machine,
    // the late one is measured catching up, not sharing the disk and CPUs with them).
    for machine in &machines[..2] {
        let started = Instant::now();
        let last = machine
            .shared_state()
            .join(BIG)
            .join(format!("{BIG_RECORDS:010}.json"));
        while !last.exists() {
            assert!(
                started.elapsed() < CONVERGE,
                "{} never caught up",
                machine.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // What the others wrote is flushed first: on a team those replicas sit on other
    // machines' disks, and their writeback would otherwise land inside the late one's figure.
    nix::unistd::sync();
    machines[2].start();
    results.push(("catch-up", catch_up(&machines[2])));
    results.push(("status", status_ratio(&machines[2])));
    // Every replica agrees with the late one.
    for machine in &machines[..2] {
        let started = Instant::now();
        while machine.status(BIG, false).1 < BIG_RECORDS {
            assert!(
                started.elapsed() < CONVERGE,
                "{} never caught up",
                machine.name
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    drop(machines);
    drop(cluster);
    drop(stores);
    let broken: Vec<&str> = results
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(n, _)| *n)
        .collect();
    if !broken.is_empty() {
        eprintln!("journal: goal broken: {}", broken.join(", "));
        std::process::exit(1);
    }
}
