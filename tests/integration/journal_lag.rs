//! The views of a shared task say where they come from (docs/JOURNAL.md, "Reads are
//! local"): `status` and `context`, plain and JSON, through a real `advisord --journal` on a
//! real three-node JetStream cluster, name the journal and, while the bus is unreachable,
//! how far behind this machine's replica may be; once the bus is back and the replica
//! caught up they stop saying so. A local task's views are unchanged.

use super::journal::formed_cluster;
use super::support::client::{stop_child, World};
use super::support::cluster::{journal_world, start_journal_daemon, urls};
use super::support::output::Output;
use advisord_fakes::nats::NatsServer;
use serde_json::{json, Value};
use std::process::Child;
use std::time::{Duration, Instant};

const TASK: &str = "shared";
const JOURNAL: &str = "team";
/// How long a poll for something converging may take.
const CONVERGE: Duration = Duration::from_secs(60);

/// One machine: a repository naming the journal, and its `advisord --journal`.
struct Machine {
    world: World,
    name: &'static str,
    daemon: Child,
}

impl Machine {
    fn start(name: &'static str, cluster: &[NatsServer]) -> Machine {
        let world = journal_world(JOURNAL);
        let log = world.tmp().join("daemon.log");
        let daemon = start_journal_daemon(&world, name, &urls(cluster), None, &log);
        Machine {
            world,
            name,
            daemon,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut all = args.to_vec();
        all.extend(["--task", TASK]);
        self.world.run(&all)
    }

    fn json(&self, verb: &str) -> Value {
        self.run(&[verb, "--format", "json"]).expect_exit(0).json()
    }

    /// The plain output of `verb`, its lines joined and spaces collapsed (it wraps at 80
    /// columns).
    fn plain(&self, verb: &str) -> String {
        let out = self.run(&[verb, "--format", "plain"]).expect_exit(0).stdout;
        out.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn record(&self, subject: &str) -> Output {
        let path = self.world.tmp().join(format!("in-{subject}.json"));
        let input = json!({"kind": "assessment", "subject": subject, "materiality": "low",
            "hypothesis": "one writer is enough"});
        std::fs::write(&path, input.to_string()).expect("write input");
        self.run(&[
            "record",
            "--file",
            path.to_str().expect("utf-8"),
            "--format",
            "json",
        ])
    }

    /// Poll `status --format json` until `done` holds of it (bounded).
    fn status_until(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let status = self.json("status");
            if done(&status) {
                return status;
            }
            assert!(
                started.elapsed() < CONVERGE,
                "{}: {what} not within {CONVERGE:?}: {status}; log:\n{}",
                self.name,
                std::fs::read_to_string(self.world.tmp().join("daemon.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        stop_child(&mut self.daemon);
    }
}

#[test]
fn the_views_of_a_machine_cut_off_from_the_bus_say_how_far_behind_they_may_be() {
    let mut cluster = formed_cluster();
    let m1 = Machine::start("m1", &cluster);
    let m2 = Machine::start("m2", &cluster);
    m1.record("queue").expect_exit(0);
    m2.status_until("the first record", |s| s["records"] == 1);

    // Connected and current: the journal is named, nothing says the view may be behind.
    let status = m1.status_until("a current replica", |s| {
        s["journal"]["reachable"] == true && s["journal"]["current_s_ago"] == 0
    });
    assert_eq!(status["journal"]["name"], JOURNAL, "{status}");
    assert_eq!(status["journal"]["stream_sequence"], 1, "{status}");
    let plain = m1.plain("status");
    assert!(
        plain.contains("shared through `team` (bus reachable") && !plain.contains("UNREACHABLE"),
        "{plain}"
    );
    // A local task (a `--state-dir` the journal does not share) says nothing of it.
    let local = m1.world.tmp().join("local-state");
    let local = m1
        .run(&[
            "status",
            "--format",
            "json",
            "--state-dir",
            local.to_str().expect("utf-8"),
        ])
        .expect_exit(0)
        .json();
    assert!(local.get("journal").is_none(), "{local}");

    for node in &mut cluster {
        node.stop();
    }
    let cut = m1.status_until("the bus reported lost", |s| {
        s["journal"]["reachable"] == false
    });
    assert_eq!(cut["records"], 1, "reads work from the replica: {cut}");
    let journal = &cut["journal"];
    assert_eq!(journal["name"], JOURNAL, "{cut}");
    assert_eq!(journal["stream_sequence"], 1, "{cut}");
    let at = journal["current_at"].as_str().expect("when it was current");
    assert!(
        at.ends_with('Z') && journal["current_s_ago"].as_u64() < Some(CONVERGE.as_secs()),
        "{cut}"
    );
    let plain = m1.plain("status");
    assert!(
        plain.contains("`team`, whose bus is UNREACHABLE")
            && plain.contains(&format!("last known current at {at}"))
            && plain.contains("stream sequence 1)")
            && plain.contains("may be behind"),
        "the plain status says how far behind it may be: {plain}"
    );
    let context = m1.json("context");
    assert_eq!(context["journal"]["reachable"], false, "{context}");
    assert_eq!(context["journal"]["current_at"], at, "{context}");
    let plain = m1.plain("context");
    assert!(
        plain.contains("UNREACHABLE") && plain.contains("stream sequence 1)"),
        "the plain context says it too: {plain}"
    );
    let refused = m1.record("cache");
    assert_ne!(refused.code, 0, "{}", refused.stdout);

    for node in &mut cluster {
        node.restart();
    }
    // Once the bus is back the replica is checked against the stream (nothing new was
    // written) and known current again.
    let back = m1.status_until("the replica known current again", |s| {
        s["journal"]["reachable"] == true && s["journal"]["current_s_ago"] == 0
    });
    assert_eq!(back["journal"]["stream_sequence"], 1, "{back}");
    // Another machine's record reaches this one and the views stop saying the replica may
    // be behind.
    let started = Instant::now();
    while m2.record("cache").code != 0 {
        assert!(
            started.elapsed() < CONVERGE,
            "no write once the bus came back"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let caught_up = m1.status_until("the replica caught up", |s| {
        s["records"] == 2 && s["journal"]["reachable"] == true && s["journal"]["current_s_ago"] == 0
    });
    assert_eq!(caught_up["journal"]["stream_sequence"], 2, "{caught_up}");
    for verb in ["status", "context"] {
        let plain = m1.plain(verb);
        assert!(
            plain.contains("shared through `team` (bus reachable")
                && !plain.contains("UNREACHABLE"),
            "{verb} no longer says it may be behind: {plain}"
        );
    }
    assert_eq!(m1.json("context")["journal"]["reachable"], true);
}
