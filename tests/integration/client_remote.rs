//! The network-free verbs through the daemon give what `--no-daemon` gives: the same
//! output, the same refusals (exit 3, the same text), the same exit statuses.

use crate::support::client as client_support;

use client_support::{Advisor, World};
use serde_json::json;

fn world() -> World {
    let mut world = World::new(&[
        Advisor::new("agree", "supports", 0),
        Advisor::new("oppose", "opposes", 0),
    ]);
    world.start_daemon();
    world
}

/// Run `args` through the daemon and in-process; both must exit `code` and print the
/// same standard output.
fn check(world: &World, args: &[&str], code: i32) -> String {
    let remote = world.run(args).expect_exit(code);
    let mut local_args = vec!["--no-daemon"];
    local_args.extend_from_slice(args);
    let local = world.run(&local_args).expect_exit(code);
    assert_eq!(
        remote.stdout, local.stdout,
        "{args:?}: the daemon's output differs from --no-daemon's"
    );
    assert_eq!(
        remote.stderr, local.stderr,
        "{args:?}: standard error differs"
    );
    remote.stdout
}

#[test]
fn a_refusal_through_the_daemon_reads_as_in_process() {
    let world = world();
    let input = world.root().join("no-evidence.json");
    std::fs::write(
        &input,
        json!({"kind": "assessment", "subject": "s", "materiality": "critical", "hypothesis": "h"})
            .to_string(),
    )
    .expect("write");
    let file = input.to_str().expect("utf-8");
    for format in ["plain", "json", "yaml"] {
        let out = check(&world, &["record", "--file", file, "--format", format], 3);
        assert!(out.contains("material_without_evidence"), "{out}");
    }
    check(&world, &["--task", "a/b", "record", "--file", file], 3);
    assert!(
        !world.root().join(".ai").exists(),
        "a refusal writes nothing"
    );
}

#[test]
fn every_view_is_the_same_through_the_daemon() {
    let world = world();
    let assessment = world.assessment();
    world.run(&["--assessment", &assessment]).expect_exit(0);
    for format in ["plain", "table", "json", "yaml"] {
        check(&world, &["status", "--format", format], 0);
        check(&world, &["tree", "--format", format], 0);
        check(&world, &["tree", "--depth", "1", "--format", format], 0);
        check(&world, &["explain", &assessment, "--format", format], 0);
        check(&world, &["advisors", "--format", format], 0);
        check(
            &world,
            &[
                "plan",
                "--materiality",
                "high",
                "--capabilities",
                "independent_reasoning",
                "--format",
                format,
            ],
            0,
        );
    }
    let check_out = world.run(&["--no-daemon", "check"]);
    check(&world, &["check"], check_out.code);
    let status = check(&world, &["status", "--format", "json"], 0);
    assert!(status.contains("\"disputed\""), "{status}");
}

#[test]
fn verify_and_a_broken_chain_read_the_same_through_the_daemon() {
    let world = world();
    let assessment = world.assessment();
    world.run(&["--assessment", &assessment]).expect_exit(0);
    for format in ["plain", "table", "json", "yaml"] {
        check(&world, &["verify", "--format", format], 0);
        check(&world, &["verify", "--all", "--format", format], 0);
    }
    // Edit the job's first consultation on disk, as someone bypassing the writer would.
    let state = world.root().join(".ai/local/state/reasoning");
    let task = std::fs::read_dir(&state)
        .expect("the state directory")
        .map(|e| e.expect("an entry").path())
        .find(|p| p.is_dir())
        .expect("a task directory");
    let path = task.join("0000000003.json");
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("a record")).expect("json");
    assert_eq!(record["kind"], "consultation", "{record}");
    record["conclusion"] = json!("edited after the fact");
    std::fs::write(&path, serde_json::to_string_pretty(&record).expect("json")).expect("edited");
    // `verify` names the edited file, not the next one whose link no longer holds.
    for format in ["plain", "json"] {
        let out = check(&world, &["verify", "--format", format], 1);
        assert!(out.contains("0000000003.json"), "{out}");
    }
    let status = check(&world, &["status", "--format", "json"], 0);
    assert!(status.contains("\"unverified\": true"), "{status}");
    assert!(status.contains("\"broken_at\": 3"), "{status}");
}

#[test]
fn errors_through_the_daemon_keep_their_exit_status() {
    let world = world();
    check(&world, &["explain", "01JNOSUCHRECORD0000000000"], 2);
    check(
        &world,
        &["explain", "01JNOSUCHRECORD0000000000", "--format", "json"],
        2,
    );
    check(&world, &["--task", "a/b", "status"], 2);
    check(
        &world,
        &[
            "plan",
            "--materiality",
            "high",
            "--capabilities",
            "telepathy",
        ],
        2,
    );
}

#[test]
fn no_autostart_stops_the_network_free_verbs_too() {
    let world = World::new(&[]);
    world
        .run(&["--no-autostart", "status"])
        .expect_exit(4)
        .expect_stderr("`--no-autostart` is set")
        .expect_stderr("`--no-daemon` runs the network-free verbs in-process");
    assert!(!world.socket().exists());
}
