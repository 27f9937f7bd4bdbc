//! Sharing records beyond one checkout (docs/JOURNAL.md): worktrees of one repository on
//! one machine share one state directory with no bus at all; machines share tasks through
//! the journal, a JetStream stream on a real three-node `nats-server` cluster, each
//! machine a real `advisord --journal` with its own clone of the repository.

use super::support::cli::Project;
use super::support::client::{stop_child, World};
pub(crate) use super::support::cluster::formed_cluster;
use super::support::cluster::{journal_world, start_journal_daemon, urls};
use super::support::output::Output;
use advisord_fakes::nats::NatsServer;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The shared task of these tests.
pub(crate) const TASK: &str = "shared";
/// The journal the repositories name.
const JOURNAL: &str = "team";
/// How long a poll for something the replicas converge on may take.
pub(crate) const CONVERGE: Duration = Duration::from_secs(60);

/// Run the real `git` in `dir`; panics with its output when it fails.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn assessment(subject: &str) -> Value {
    json!({"kind": "assessment", "subject": subject, "materiality": "high",
        "hypothesis": "one writer is enough",
        "evidence": [{"kind": "file", "ref": "src/queue.rs", "showed": "one writer"}]})
}

#[test]
fn two_worktrees_of_one_repository_share_one_task_with_no_bus() {
    let project = Project::new();
    let main = project.root();
    git(&main, &["init", "-q", "-b", "main"]);
    std::fs::write(main.join("README"), "x\n").expect("write");
    git(&main, &["add", "README"]);
    git(
        &main,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "first",
        ],
    );
    let wt = project.outside().join("wt");
    git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "topic",
            wt.to_str().expect("utf-8"),
        ],
    );

    // Each worktree resolves its own root and, with no `--state-dir`, the same state.
    let in_dir = |dir: &Path, args: &[&str], stdin: Option<&Value>| {
        let mut cli = project
            .cli()
            .without_root()
            .without_state_dir()
            .current_dir(dir)
            .args(args.iter().copied())
            .args(["--task", "shared", "--format", "json"]);
        if let Some(input) = stdin {
            cli = cli.stdin(&input.to_string());
        }
        cli.run()
    };
    let first = in_dir(&wt, &["record", "--file", "-"], Some(&assessment("queue")))
        .expect_exit(0)
        .json();
    let second = in_dir(
        &main,
        &["record", "--file", "-"],
        Some(&assessment("cache")),
    )
    .expect_exit(0)
    .json();
    assert_eq!(first["sequence"], 1, "{first}");
    assert_eq!(
        second["sequence"], 2,
        "the main checkout appends to the worktree's chain"
    );

    let mut heads = Vec::new();
    for dir in [&main, &wt] {
        let status = in_dir(dir, &["status"], None).expect_exit(0).json();
        assert_eq!(status["task"], "shared", "{status}");
        assert_eq!(status["records"], 2, "{status}");
        let subjects: Vec<&str> = status["assessments"]
            .as_array()
            .expect("assessments")
            .iter()
            .filter_map(|a| a["subject"].as_str())
            .collect();
        assert_eq!(subjects.len(), 2, "{} sees both: {status}", dir.display());
        let verify = in_dir(dir, &["verify"], None).expect_exit(0).json();
        heads.push(verify["tasks"][0]["head"]["hash"].clone());
    }
    assert_eq!(heads[0], heads[1], "one chain, one head");
    assert!(
        main.join(advisord::paths::DEFAULT_STATE_DIR)
            .join("shared")
            .is_dir(),
        "records live under the main checkout"
    );
    assert!(
        !wt.join(advisord::paths::DEFAULT_STATE_DIR).exists(),
        "nothing under the worktree"
    );
}

/// One machine: a clone of the repository naming the journal, and its `advisord
/// --journal` on the cluster.
pub(crate) struct Machine {
    pub(crate) world: World,
    name: String,
    urls: String,
    daemon: Option<Child>,
}

impl Machine {
    pub(crate) fn new(name: &str, cluster: &[NatsServer]) -> Machine {
        let mut machine = Machine {
            world: journal_world(JOURNAL),
            name: name.to_string(),
            urls: urls(cluster),
            daemon: None,
        };
        machine.start();
        machine
    }

    pub(crate) fn log(&self) -> std::path::PathBuf {
        self.world.tmp().join(format!("{}.log", self.name))
    }

    fn start(&mut self) {
        self.daemon = Some(start_journal_daemon(
            &self.world,
            &self.name,
            &self.urls,
            Some("info,advisord::journal=debug"),
            &self.log(),
        ));
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        let mut all = args.to_vec();
        all.extend(["--task", TASK, "--format", "json"]);
        self.world.run(&all)
    }

    /// Record `input` in the shared task; the run's output, whatever its exit.
    pub(crate) fn record(&self, input: &Value) -> Output {
        let path = self
            .world
            .tmp()
            .join(format!("in-{}.json", ulid::Ulid::new()));
        std::fs::write(&path, input.to_string()).expect("write input");
        self.run(&["record", "--file", path.to_str().expect("utf-8")])
    }

    pub(crate) fn status(&self) -> Value {
        self.run(&["status"]).expect_exit(0).json()
    }

    /// The head `verify` prints for the shared task, and its record count.
    fn verified_head(&self) -> (Value, Value) {
        let verify = self.run(&["verify"]).expect_exit(0).json();
        let task = &verify["tasks"][0];
        (task["head"]["hash"].clone(), task["records"].clone())
    }

    /// Poll `status` until it holds `records` records.
    pub(crate) fn wait_for_records(&self, records: u64) -> Value {
        let started = Instant::now();
        loop {
            let status = self.status();
            if status["records"].as_u64() >= Some(records) {
                return status;
            }
            assert!(
                started.elapsed() < CONVERGE,
                "{} holds {} records, not {records}, after {CONVERGE:?}; log:\n{}",
                self.name,
                status["records"],
                std::fs::read_to_string(self.log()).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            stop_child(&mut child);
        }
    }
}

fn low_assessment(subject: &str) -> Value {
    json!({"kind": "assessment", "subject": subject, "materiality": "low",
        "hypothesis": "one writer is enough"})
}

pub(crate) fn conclusion(assessment: &str, decision: &str) -> Value {
    json!({"kind": "conclusion", "assessment": assessment, "decision": decision,
        "rationale": "measured", "consultations": [],
        "evidence": [{"kind": "test", "ref": "queue_bench"}],
        "validation_plan": "run the queue benchmark"})
}

fn machines(cluster: &[NatsServer]) -> Vec<Machine> {
    ["m1", "m2", "m3"]
        .iter()
        .map(|name| Machine::new(name, cluster))
        .collect()
}

#[test]
fn ten_conclusions_raced_from_three_machines_leave_one_standing_and_one_head() {
    let cluster = formed_cluster();
    let machines = machines(&cluster);
    let assessment = machines[0]
        .record(&low_assessment("queue"))
        .expect_exit(0)
        .json();
    let assessment = assessment["id"].as_str().expect("an id").to_string();
    for machine in &machines {
        machine.wait_for_records(1);
    }
    let outcomes: Vec<Output> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..10)
            .map(|i| {
                let machine = &machines[i % 3];
                let input = conclusion(&assessment, &format!("decision {i}"));
                scope.spawn(move || machine.record(&input))
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("a run")).collect()
    });
    let stored: Vec<&Output> = outcomes.iter().filter(|o| o.code == 0).collect();
    assert_eq!(
        stored.len(),
        1,
        "exactly one conclusion stands: {:#?}",
        outcomes
            .iter()
            .map(|o| (o.code, &o.stdout, &o.stderr))
            .collect::<Vec<_>>()
    );
    for refused in outcomes.iter().filter(|o| o.code != 0) {
        let said = format!("{}{}", refused.stdout, refused.stderr);
        assert!(
            said.contains("supersedes_missing"),
            "refused for the rule: {said}"
        );
    }
    let mut heads = Vec::new();
    for machine in &machines {
        machine.wait_for_records(2);
        heads.push(machine.verified_head());
    }
    assert_eq!(heads[0].1, 2, "{heads:?}");
    assert!(
        heads.iter().all(|h| *h == heads[0]),
        "one head everywhere: {heads:?}"
    );
}

#[test]
fn a_machine_cut_off_from_the_bus_reads_refuses_writes_and_catches_up() {
    let mut cluster = formed_cluster();
    let machines: Vec<Machine> = ["m1", "m2"]
        .iter()
        .map(|name| Machine::new(name, &cluster))
        .collect();
    machines[0].record(&low_assessment("queue")).expect_exit(0);
    machines[1].wait_for_records(1);
    for node in &mut cluster {
        node.stop();
    }
    let status = machines[0].status();
    assert_eq!(
        status["records"], 1,
        "reads work from the replica: {status}"
    );
    let refused = machines[0].record(&low_assessment("cache"));
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    let said = format!("{}{}", refused.stdout, refused.stderr);
    assert!(
        said.contains("journal `team`") && said.contains("nothing was stored"),
        "the refusal says what happened and what to do: {said}"
    );
    assert_eq!(
        machines[0].status()["records"],
        1,
        "nothing kept on the side"
    );
    for node in &mut cluster {
        node.restart();
    }
    let started = Instant::now();
    loop {
        let output = machines[0].record(&low_assessment("cache"));
        if output.code == 0 {
            break;
        }
        assert!(
            started.elapsed() < CONVERGE,
            "no write once the bus came back: {}{}",
            output.stdout,
            output.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    machines[1].wait_for_records(2);
    assert_eq!(machines[0].verified_head(), machines[1].verified_head());
}

#[test]
fn the_stream_leader_killed_mid_burst_loses_nothing_and_stores_nothing_twice() {
    let mut cluster = formed_cluster();
    let machines: Vec<Machine> = ["m1", "m2"]
        .iter()
        .map(|name| Machine::new(name, &cluster))
        .collect();
    machines[0].record(&low_assessment("s0")).expect_exit(0);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let urls: Vec<String> = cluster.iter().map(NatsServer::url).collect();
    let leader = runtime.block_on(async {
        let client = async_nats::connect(urls).await.expect("connect");
        let js = async_nats::jetstream::new(client);
        let mut stream = js
            .get_stream(format!("ADVISORD_JOURNAL_{JOURNAL}"))
            .await
            .expect("the journal's stream");
        let info = stream.info().await.expect("stream info");
        assert_eq!(info.config.num_replicas, 3, "R3 on a cluster");
        info.cluster
            .as_ref()
            .and_then(|c| c.leader.clone())
            .expect("a leader")
    });
    // Four writes before the leader dies, then writes go on until ten more are stored:
    // while the survivors elect a new leader a write is refused (clearly, naming the
    // journal), never lost or stored twice. How long the election takes depends on the
    // machine's load, so the test bounds the time it waits, not the writes refused.
    let mut stored = Vec::new();
    let mut refused = 0;
    let mut after_kill = 0;
    let mut killed_at = None;
    let mut i = 0;
    while after_kill < 10 {
        i += 1;
        if i == 5 {
            let node = cluster
                .iter_mut()
                .find(|n| n.name() == Some(leader.as_str()))
                .expect("the leader's node");
            node.stop();
            killed_at = Some(std::time::Instant::now());
        }
        if let Some(at) = killed_at {
            assert!(
                at.elapsed() < Duration::from_secs(90),
                "writes never resumed after the leader's death ({refused} refused, {after_kill} \
                 stored since)"
            );
        }
        let output = machines[0].record(&low_assessment(&format!("s{i}")));
        if output.code == 0 {
            stored.push(output.json()["id"].as_str().expect("id").to_string());
            if killed_at.is_some() {
                after_kill += 1;
            }
        } else {
            let said = format!("{}{}", output.stdout, output.stderr);
            assert!(said.contains("journal `team`"), "refused clearly: {said}");
            assert!(
                killed_at.is_some(),
                "refused before the leader died: {said}"
            );
            refused += 1;
        }
    }
    assert_eq!(
        stored.len(),
        14,
        "four before the death, ten after ({refused} refused)"
    );
    let (head, count) = machines[0].verified_head();
    let count = count.as_u64().expect("a count");
    let status = machines[1].wait_for_records(count);
    let ids: Vec<&str> = status["assessments"]
        .as_array()
        .expect("assessments")
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    for id in &stored {
        assert!(
            ids.contains(&id.as_str()),
            "{id} was acknowledged, so it is kept"
        );
    }
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "nothing stored twice");
    assert_eq!(machines[1].verified_head(), (head, json!(count)));
}

#[test]
fn a_machine_that_joins_late_catches_up_ten_thousand_records() {
    const RECORDS: u64 = 10_000;
    let cluster = formed_cluster();
    let first = Machine::new("m1", &cluster);
    first.record(&low_assessment("s0")).expect_exit(0);
    // The rest of the task, chained on the first record as a writer chains (each `prev`
    // the hash of the previous record's bytes) and published as the journal publishes
    // (a record's id as its message id).
    let seed = first
        .world
        .root()
        .join(advisord::paths::DEFAULT_STATE_DIR)
        .join(TASK)
        .join("0000000001.json");
    let mut previous = std::fs::read(&seed).expect("the first record");
    let template: Value = serde_json::from_slice(&previous).expect("a record");
    let mut records = Vec::new();
    for i in 2..=RECORDS {
        let mut record = template.clone();
        record["id"] = json!(ulid::Ulid::new().to_string());
        record["sequence"] = json!(i);
        record["subject"] = json!(format!("s{i}"));
        record["prev"] = json!(advisord::core::chain::digest(&previous));
        let mut bytes = serde_json::to_vec_pretty(&record).expect("serialise");
        bytes.push(b'\n');
        previous = bytes.clone();
        records.push((record["id"].as_str().expect("id").to_string(), bytes));
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let urls: Vec<String> = cluster.iter().map(NatsServer::url).collect();
    runtime.block_on(async {
        let client = async_nats::connect(urls).await.expect("connect");
        let js = async_nats::jetstream::new(client);
        let subject = format!("advisord.journal.{JOURNAL}.{TASK}");
        let mut acks = Vec::new();
        for (id, bytes) in records {
            let message = async_nats::jetstream::message::PublishMessage::build()
                .payload(bytes.into())
                .message_id(id)
                .header("Advisord-Machine", "m1");
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
    let late = Machine::new("m3", &cluster);
    let started = Instant::now();
    late.wait_for_records(RECORDS);
    let took = started.elapsed();
    let (head, count) = late.verified_head();
    assert_eq!(count, json!(RECORDS));
    first.wait_for_records(RECORDS);
    assert_eq!(
        (head, count),
        first.verified_head(),
        "the writer's replica agrees"
    );
    assert!(took < CONVERGE, "{took:?}");
}

#[test]
fn a_plan_on_one_machine_reuses_a_conclusion_recorded_on_another() {
    let cluster = formed_cluster();
    let machines: Vec<Machine> = ["m1", "m2"]
        .iter()
        .map(|name| Machine::new(name, &cluster))
        .collect();
    let assessment = machines[0]
        .record(&low_assessment("queue"))
        .expect_exit(0)
        .json();
    let assessment = assessment["id"].as_str().expect("id").to_string();
    let concluded = machines[0]
        .record(&conclusion(&assessment, "one writer"))
        .expect_exit(0)
        .json();
    machines[1].wait_for_records(2);
    let again = machines[1]
        .record(&low_assessment("queue"))
        .expect_exit(0)
        .json();
    let plan = machines[1]
        .record(&json!({"kind": "plan", "assessment": again["id"]}))
        .expect_exit(0)
        .json();
    assert_eq!(
        plan["reuse"], concluded["id"],
        "machine m2 reuses m1's conclusion and asks nobody: {plan}"
    );
    assert_eq!(plan["selected"], json!([]), "{plan}");
}
