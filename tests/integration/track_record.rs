//! Each advisor's track record through the real binaries: derived from the resolutions
//! recorded, shown by `advisors`, `context`, `status` and the MCP `advisors` tool with its
//! size, and read by nothing that decides (the plan, the selection, the review count).

use crate::support::client::{Advisor, World};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};

fn two() -> Vec<Advisor> {
    vec![
        Advisor::new("agrees", "supports", 50),
        Advisor::new("objects", "opposes", 50),
    ]
}

/// Consult a new assessment (both advisors answer, `objects` diverges): the job.
fn disputed(world: &World) -> Value {
    let assessment = world.assessment();
    let job = world
        .run(&["consult", &assessment, "--format", "json"])
        .expect_exit(0)
        .json();
    assert!(job["disagreement"].is_string(), "{job}");
    job
}

/// The resolution of `job`'s disagreement favouring `favours` (a source, an advisor or
/// `neither`).
fn resolve(world: &World, job: &Value, favours: &str) -> Value {
    world.record(json!({
        "kind": "resolution",
        "disagreement": job["disagreement"],
        "experiment": "Ran the queue under 10k concurrent enqueues",
        "observed": "writers stalled for 3 s",
        "favours": favours,
        "evidence": [{"kind": "test", "ref": "tests/queue_load.rs"}]
    }))
}

/// `advisors --format json`.
fn advisors(world: &World, extra: &[&str]) -> Value {
    let mut args = vec!["advisors", "--format", "json"];
    args.extend(extra);
    world.run(&args).expect_exit(0).json()
}

/// The track record of `id` in an `advisors` answer: (resolutions, favoured, disfavoured).
fn track(view: &Value, id: &str) -> (u64, u64, u64) {
    let row = view["advisors"]
        .as_array()
        .expect("advisors")
        .iter()
        .chain(view["former"].as_array().into_iter().flatten())
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no `{id}` in {view}"));
    let t = &row["track_record"];
    let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("`{k}` in {t}"));
    (n("resolutions"), n("favoured"), n("disfavoured"))
}

/// Every advisor row without its track record: what the circuit and the catalogue say.
fn without_track(view: &Value) -> Value {
    let mut view = view.clone();
    for row in view["advisors"].as_array_mut().expect("advisors") {
        row.as_object_mut().expect("a row").remove("track_record");
    }
    view
}

/// A plan preview: who would be selected and who left out.
fn preview(world: &World) -> Value {
    world
        .run(&["plan", "--materiality", "critical", "--format", "json"])
        .expect_exit(0)
        .json()
}

#[test]
fn a_resolution_changes_the_track_record_and_nothing_that_decides() {
    let mut world = World::new(&two());
    world.start_daemon();
    let job = disputed(&world);
    let before = advisors(&world, &[]);
    assert_eq!(track(&before, "objects"), (0, 0, 0));
    let plan_before = preview(&world);

    resolve(&world, &job, "objects");
    let after = advisors(&world, &[]);
    assert_eq!(track(&after, "objects"), (1, 1, 0), "{after}");
    assert_eq!(track(&after, "agrees"), (1, 0, 1), "{after}");
    let recent = &after["advisors"][1]["track_record"]["recent"][0];
    assert_eq!(recent["subject"], "Use SQLite for the job queue", "{after}");
    assert_eq!(recent["outcome"], "favoured");
    // Status, reason, capacity and the plan are what they were.
    assert_eq!(without_track(&after), without_track(&before));
    assert_eq!(preview(&world), plan_before);

    // Two more disagreements settled against `objects`: the selection stays the same.
    for _ in 0..2 {
        let job = disputed(&world);
        resolve(&world, &job, "executor");
    }
    let settled = advisors(&world, &[]);
    assert_eq!(track(&settled, "objects"), (3, 1, 2), "{settled}");
    assert_eq!(preview(&world), plan_before);
    let plan = world.record(json!({"kind": "plan", "assessment": world.assessment()}));
    let selected: Vec<&str> = plan["selected"]
        .as_array()
        .expect("selected")
        .iter()
        .map(|s| s["advisor"].as_str().expect("advisor"))
        .collect();
    assert_eq!(selected, ["agrees", "objects"], "{plan}");

    // The review count counts the answers cited, whatever their records.
    let assessment = job["assessment"].as_str().expect("assessment");
    let cited: Vec<&Value> = job["consultations"]
        .as_array()
        .expect("consultations")
        .iter()
        .map(|c| &c["record"])
        .collect();
    let conclusion = world.record(json!({
        "kind": "conclusion", "assessment": assessment,
        "decision": "Keep SQLite with one writer", "rationale": "the load test",
        "evidence": [{"kind": "test", "ref": "tests/queue_load.rs"}],
        "consultations": cited, "validation_plan": "run the load test in CI"
    }));
    assert_eq!(conclusion["independent_review_count"], 2, "{conclusion}");

    // Every surface shows the counts with their size and says they decide nothing.
    let note = "they change no plan, selection or review count";
    world
        .run(&["advisors"])
        .expect_exit(0)
        .expect_stdout("track record: favoured 1 of 3, disfavoured 2 of 3")
        .expect_stdout(note);
    world
        .run(&["advisors", "--format", "table"])
        .expect_exit(0)
        .expect_stdout("favoured 1 of 3")
        .expect_stdout(note);
    world
        .run(&["context"])
        .expect_exit(0)
        .expect_stdout("objects  favoured 1 of 3, disfavoured 2 of 3")
        .expect_stdout(note);
    let status = world
        .run(&["status", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(
        status["track_records"]["objects"]["favoured"], 1,
        "{status}"
    );
    world
        .run(&["status"])
        .expect_exit(0)
        .expect_stdout("track records in this task:")
        .expect_stdout("objects: favoured 1 of 3, disfavoured 2 of 3");
}

#[test]
fn neither_counts_for_nobody() {
    let mut world = World::new(&two());
    world.start_daemon();
    let job = disputed(&world);
    resolve(&world, &job, "neither");
    let view = advisors(&world, &[]);
    assert_eq!(track(&view, "objects"), (1, 0, 0), "{view}");
    assert_eq!(track(&view, "agrees"), (1, 0, 0), "{view}");
    world
        .run(&["advisors"])
        .expect_exit(0)
        .expect_stdout("favoured 0 of 1, disfavoured 0 of 1, 1 favoured neither");
}

/// An advisor removed from the catalogue keeps its history: `advisors` lists it under
/// `former`, and `context` and `status` show it.
#[test]
fn an_advisor_removed_from_the_catalogue_keeps_its_history() {
    let mut world = World::new(&two());
    world.start_daemon();
    let job = disputed(&world);
    resolve(&world, &job, "objects");
    world.write_catalogue(&two()[..1]);
    let view = advisors(&world, &[]);
    let ids: Vec<&str> = view["advisors"]
        .as_array()
        .expect("advisors")
        .iter()
        .map(|a| a["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["agrees"], "{view}");
    assert_eq!(view["former"][0]["id"], "objects", "{view}");
    assert_eq!(track(&view, "objects"), (1, 1, 0));
    world
        .run(&["advisors"])
        .expect_exit(0)
        .expect_stdout("track records of advisors no longer in the catalogue:")
        .expect_stdout("objects: favoured 1 of 1");
    world
        .run(&["context"])
        .expect_exit(0)
        .expect_stdout("objects (not in the catalogue)  favoured 1 of 1");
    world
        .run(&["status"])
        .expect_exit(0)
        .expect_stdout("objects: favoured 1 of 1, disfavoured 0 of 1");
}

/// A resolution another process wrote (the CLI without the daemon) reaches the warm
/// daemon's index, in another task too, and agrees with a fresh derivation.
#[test]
fn a_resolution_written_by_another_process_reaches_the_daemon() {
    let mut world = World::new(&two());
    world.start_daemon();
    let job = disputed(&world);
    resolve(&world, &job, "objects");
    assert_eq!(track(&advisors(&world, &[]), "objects"), (1, 1, 0));
    // A second task, disputed through the daemon, resolved by another process.
    let other = world
        .run(&[
            "--task",
            "other",
            "ask",
            "--subject",
            "Shard the queue",
            "--materiality",
            "high",
            "--hypothesis",
            "one shard is enough",
            "--evidence",
            "file:src/queue.rs=>one writer",
            "--format",
            "json",
        ])
        .expect_exit(0)
        .json();
    assert!(other["disagreement"].is_string(), "{other}");
    let path = world.root().join("resolution.json");
    std::fs::write(
        &path,
        json!({"kind": "resolution", "disagreement": other["disagreement"],
               "experiment": "sharded", "observed": "no stall", "favours": "executor",
               "evidence": [{"kind": "test", "ref": "t"}]})
        .to_string(),
    )
    .expect("input");
    world
        .run(&[
            "--no-daemon",
            "--task",
            "other",
            "record",
            "--file",
            path.to_str().expect("utf-8"),
        ])
        .expect_exit(0);
    let warm = advisors(&world, &[]);
    assert_eq!(track(&warm, "objects"), (2, 1, 1), "{warm}");
    let fresh = advisors(&world, &["--no-daemon"]);
    assert_eq!(warm, fresh);
}

/// The MCP `advisors` tool's structured result is the verb's JSON, track records
/// included, and its output schema names them.
#[test]
fn the_mcp_advisors_tool_carries_track_records() {
    let mut world = World::new(&two());
    world.start_daemon();
    let job = disputed(&world);
    resolve(&world, &job, "objects");
    let cli = advisors(&world, &[]);
    let home = world.root().parent().expect("a parent").join("home");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let transport = TokioChildProcess::new(
            tokio::process::Command::new(env!("CARGO_BIN_EXE_advisor-consult")).configure(|cmd| {
                cmd.env_clear()
                    .env("PATH", "/usr/bin:/bin")
                    .env("HOME", &home)
                    .env("TMPDIR", world.tmp())
                    .env("ADVISORD_DATA_DIR", world.data())
                    .arg("--socket")
                    .arg(world.socket())
                    .arg("mcp")
                    .current_dir(world.root());
            }),
        )
        .expect("start the server");
        let client = ().serve(transport).await.expect("initialize");
        let tools = client.list_all_tools().await.expect("tools");
        let tool = tools
            .iter()
            .find(|t| t.name == "advisors")
            .expect("advisors");
        let schema =
            serde_json::to_value(tool.output_schema.as_ref().expect("a schema")).expect("json");
        let declared = &schema["properties"]["advisors"]["items"]["properties"]["track_record"];
        for field in ["resolutions", "favoured", "disfavoured"] {
            assert_eq!(declared["properties"][field]["type"], "integer", "{schema}");
        }
        let result = client
            .call_tool(
                CallToolRequestParams::new("advisors".to_string())
                    .with_arguments(serde_json::Map::new()),
            )
            .await
            .expect("advisors");
        let structured = result.structured_content.expect("structured content");
        assert_eq!(structured, cli);
        assert_eq!(track(&structured, "objects"), (1, 1, 0));
        client.cancel().await.expect("close");
    });
}

/// Nothing that decides reads the track record: the policy, availability, the writer and
/// its rules, the job runner and the chain name none of it.
#[test]
fn nothing_that_decides_reads_track_records() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![
        root.join("src/core/policy.rs"),
        root.join("src/core/availability.rs"),
        root.join("src/core/chain.rs"),
        root.join("src/core/writer.rs"),
        root.join("src/daemon/runner.rs"),
    ];
    for dir in ["src/core/writer"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("listed") {
            files.push(entry.expect("an entry").path());
        }
    }
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        for name in [
            "core::track",
            "TrackRecord",
            "track_record",
            "track_records",
        ] {
            assert!(
                !text.contains(name),
                "`{}` names `{name}`: no rule may read a track record",
                file.display()
            );
        }
    }
}
