//! The persisted index of a state directory (`<state>/+index`) through the real binary:
//! `advisors --no-daemon` gives the same availability with the index, without it, after
//! records were added behind it, and after a task was created behind it.

use crate::support::client::{Advisor, World};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The world's state directory.
fn state(world: &World) -> PathBuf {
    world.root().join(".ai/local/state/reasoning")
}

/// Store a consultation of `advisor` as record `sequence` of `task`, `ago_s` seconds ago,
/// as another process would.
fn put(state: &Path, task: &str, sequence: u64, advisor: &str, status: &str, ago_s: i64) {
    let at = (OffsetDateTime::now_utc() - time::Duration::seconds(ago_s))
        .format(&Rfc3339)
        .expect("a time");
    let record = json!({
        "id": format!("01JC{task}{sequence:04}"), "task": task, "sequence": sequence,
        "created_at": at, "schema": 1, "redacted": [], "kind": "consultation",
        "plan": "01JPLAN", "advisor": advisor, "status": status,
        "failure": (status == "failed").then_some("timeout"),
        "conclusion": (status == "completed").then_some("it holds"),
        "stance": (status == "completed").then_some("supports"),
        "finished_at": at,
    });
    let dir = state.join(task);
    std::fs::create_dir_all(&dir).expect("a task directory");
    std::fs::write(
        dir.join(format!("{sequence:010}.json")),
        serde_json::to_vec_pretty(&record).expect("json"),
    )
    .expect("a record file");
}

/// Each advisor's (id, status, until) in `advisors --no-daemon --format json`.
fn availability(world: &World) -> Vec<(Value, Value, Value)> {
    let view = world
        .run(&["advisors", "--no-daemon", "--format", "json"])
        .expect_exit(0)
        .json();
    view["advisors"]
        .as_array()
        .expect("advisors")
        .iter()
        .map(|a| (a["id"].clone(), a["status"].clone(), a["until"].clone()))
        .collect()
}

#[test]
fn advisors_without_the_daemon_agree_with_and_without_the_index() {
    let world = World::new(&[
        Advisor::new("flaky", "supports", 0),
        Advisor::new("steady", "supports", 0),
    ]);
    let state = state(&world);
    // `flaky` timed out twice in a row in one task: its circuit is open.
    put(&state, "a", 1, "steady", "completed", 120);
    put(&state, "a", 2, "flaky", "failed", 60);
    put(&state, "b", 1, "flaky", "failed", 30);
    for t in 0..20 {
        put(&state, &format!("quiet-{t}"), 1, "steady", "completed", 90);
    }
    let index = advisord::store::index_path(&state);
    let first = availability(&world);
    let flaky = first.iter().find(|a| a.0 == "flaky").expect("flaky");
    assert_ne!(flaky.1, "available", "{first:?}");
    assert!(flaky.2.is_string(), "the cooldown's end: {first:?}");
    assert!(index.is_file(), "the first call writes the index");
    assert_eq!(availability(&world), first, "with the index");
    std::fs::remove_file(&index).expect("removed");
    assert_eq!(availability(&world), first, "without the index");
    // A completed answer added behind the index closes the circuit.
    put(&state, "b", 2, "flaky", "completed", 5);
    let closed = availability(&world);
    let flaky = closed.iter().find(|a| a.0 == "flaky").expect("flaky");
    assert_eq!(flaky.1, "available", "{closed:?}");
    std::fs::remove_file(&index).expect("removed");
    assert_eq!(availability(&world), closed, "without the index");
    // A task created behind the index, where `steady` timed out twice: its circuit opens.
    availability(&world);
    put(&state, "c", 1, "steady", "failed", 4);
    put(&state, "c", 2, "steady", "failed", 3);
    let opened = availability(&world);
    let steady = opened.iter().find(|a| a.0 == "steady").expect("steady");
    assert_ne!(steady.1, "available", "{opened:?}");
    std::fs::remove_file(&index).expect("removed");
    assert_eq!(availability(&world), opened, "without the index");
}
