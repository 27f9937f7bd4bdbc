//! The first hour of a user and of an agent: `--format json` gives the whole answer and
//! every error as one object with a `code`, `consult ID` is a verb, the record keeps what
//! was asked, availability tells the truth, and the catalogue says where it came from.

use crate::support::client as client_support;

use client_support::{Advisor, World};
use serde_json::Value;
use std::collections::BTreeSet;

fn two_quick() -> Vec<Advisor> {
    vec![
        Advisor::new("quick-agree", "supports", 100),
        Advisor::new("quick-oppose", "opposes", 100),
    ]
}

const ASK: &[&str] = &[
    "ask",
    "--subject",
    "Use SQLite for the job queue",
    "--materiality",
    "high",
    "--hypothesis",
    "WAL mode is enough",
    "--evidence",
    "file:src/queue.rs=>one writer at a time",
];

/// Every outcome of a job written out in full, and its disagreement with its positions.
fn assert_whole_answer(job: &Value) {
    assert_eq!(job["state"], "done", "{job}");
    let outcomes = job["consultations"].as_array().expect("consultations");
    assert_eq!(outcomes.len(), 2, "{job}");
    for outcome in outcomes {
        for key in [
            "advisor",
            "record",
            "status",
            "failure",
            "conclusion",
            "stance",
            "confidence",
            "assumptions",
            "risks",
            "falsifiers",
            "diagnostic",
            "usage",
        ] {
            assert!(outcome.get(key).is_some(), "`{key}` missing from {outcome}");
        }
        assert_eq!(outcome["status"], "completed", "{outcome}");
        assert!(outcome["conclusion"]
            .as_str()
            .is_some_and(|c| !c.is_empty()));
    }
    assert_eq!(outcomes[1]["stance"], "opposes");
    let disagreement = &job["disagreement_detail"];
    assert_eq!(disagreement["id"], job["disagreement"], "{job}");
    let advisors: Vec<&str> = disagreement["positions"]
        .as_array()
        .expect("positions")
        .iter()
        .map(|p| p["advisor"].as_str().expect("advisor"))
        .collect();
    assert!(advisors.contains(&"executor") && advisors.contains(&"quick-oppose"));
    assert!(disagreement["discriminating_question"]
        .as_str()
        .is_some_and(|q| !q.is_empty()));
    assert_eq!(
        job["resolution_template"]["disagreement"],
        job["disagreement"]
    );
}

#[test]
fn ask_detach_json_gives_the_job_and_the_assessment_and_wait_the_whole_answer() {
    let mut world = World::new(&two_quick());
    world.start_daemon();
    let mut args = ASK.to_vec();
    args.extend(["--detach", "--format", "json"]);
    let detached = world.run(&args).expect_exit(0).json();
    let job = detached["id"].as_str().expect("the job id").to_string();
    let assessment = detached["assessment"].as_str().expect("the assessment id");
    world
        .run(&["explain", assessment, "--format", "json"])
        .expect_exit(0)
        .expect_stdout("Use SQLite for the job queue");
    let waited = world
        .run(&["wait", &job, "--timeout", "20", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(waited["assessment"], assessment);
    assert_whole_answer(&waited);
}

#[test]
fn ask_and_consult_and_assessment_print_the_whole_answer() {
    let mut world = World::new(&two_quick());
    world.start_daemon();
    let mut args = ASK.to_vec();
    args.extend(["--format", "json"]);
    let asked = world.run(&args).expect_exit(0).json();
    assert_whole_answer(&asked);
    let assessment = world.assessment();
    let by_flag = world
        .run(&["--assessment", &assessment, "--format", "json"])
        .expect_exit(0)
        .json();
    assert_whole_answer(&by_flag);
    let second = world.assessment();
    let by_verb = world
        .run(&["consult", &second, "--format", "json"])
        .expect_exit(0)
        .json();
    assert_whole_answer(&by_verb);
    assert_eq!(by_verb["assessment"], second.as_str());
    // The verb and the flag are one: the same keys, the same outcomes.
    let keys = |v: &Value| {
        v.as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&by_verb), keys(&by_flag));
    let detached = world
        .run(&["consult", &second, "--detach", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(detached["assessment"], second.as_str());
}

/// One JSON object with a `code` on standard output, and the exit status.
fn error_code(world: &World, args: &[&str], exit: i32) -> String {
    let out = world.run(args).expect_exit(exit);
    let json = out.json();
    let code = json["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no `code`: {json}"));
    assert!(
        json["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{json}"
    );
    code.to_string()
}

#[test]
fn a_disagreement_comes_with_a_resolution_template_ready_to_fill() {
    let mut world = World::new(&two_quick());
    world.start_daemon();
    let assessment = world.assessment();
    let plain = world
        .run(&["consult", &assessment])
        .expect_exit(0)
        .expect_stdout("to settle it: run the experiment, fill this in")
        .expect_stdout("advisor-consult record --file resolution.json")
        .expect_stdout("\"kind\": \"resolution\"")
        .expect_stdout("<one of: executor, quick-agree, quick-oppose, neither>");
    assert!(
        plain.stdout.contains("\"disagreement\": \"01"),
        "{}",
        plain.stdout
    );
    let second = world.assessment();
    let job = world
        .run(&["consult", &second, "--format", "json"])
        .expect_exit(0)
        .json();
    let mut template = job["resolution_template"].clone();
    assert_eq!(template["kind"], "resolution");
    assert_eq!(template["disagreement"], job["disagreement"]);
    // Filled in, it is a resolution the writer takes.
    template["experiment"] = "Ran 10k concurrent enqueues against WAL".into();
    template["observed"] = "two writers blocked for 3 s".into();
    template["favours"] = "quick-oppose".into();
    template["evidence"][0]["ref"] = "tests/queue_load.rs".into();
    template["evidence"][0]["showed"] = "3 s writer stalls".into();
    let recorded = world.record(template);
    assert_eq!(recorded["kind"], "resolution");
    // Without a disagreement there is no template.
    let agree = World::new(&[Advisor::new("only-agree", "supports", 50)]);
    let mut agree = agree;
    agree.start_daemon();
    let lone = agree.assessment();
    let job = agree
        .run(&["consult", &lone, "--format", "json"])
        .expect_exit(0)
        .json();
    assert!(job.get("resolution_template").is_none(), "{job}");
}

#[test]
fn with_format_json_every_error_is_one_object_with_a_code() {
    let world = World::new(&two_quick());
    // clap's own usage errors.
    for args in [
        &["--format", "json", "frobnicate"][..],
        &["status", "--bogus", "--format", "json"][..],
        &["plan", "--materiality", "huge", "--format=json"][..],
        &["--format", "json", "--detach"][..],
    ] {
        assert_eq!(error_code(&world, args, 2), "usage", "{args:?}");
    }
    // No daemon and no autostart.
    assert_eq!(
        error_code(&world, &["jobs", "--no-autostart", "--format", "json"], 4),
        "unreachable"
    );
    assert_eq!(
        error_code(&world, &["status", "--no-autostart", "--format", "json"], 4),
        "unreachable"
    );
    // A record that is not there, a job verb without the daemon.
    let missing = ["explain", "01J0000000000000000000000", "--no-daemon"];
    let mut args = missing.to_vec();
    args.extend(["--format", "json"]);
    assert_eq!(error_code(&world, &args, 2), "not_found");
    assert_eq!(
        error_code(&world, &["jobs", "--no-daemon", "--format", "json"], 2),
        "usage"
    );
    // A refusal keeps its fixed shape: its reason is its code.
    let path = world.tmp().join("bad.json");
    std::fs::write(
        &path,
        r#"{"kind": "assessment", "subject": "S", "materiality": "high", "hypothesis": "H"}"#,
    )
    .unwrap();
    let refused = world
        .run(&[
            "record",
            "--file",
            path.to_str().unwrap(),
            "--no-daemon",
            "--format",
            "json",
        ])
        .expect_exit(3)
        .json();
    assert_eq!(refused["reason"], "material_without_evidence");
    assert_eq!(refused["refused"], true);
    // Plain output is unchanged: nothing on standard output for an error.
    let plain = world.run(&["frobnicate"]).expect_exit(2);
    assert!(plain.stdout.is_empty(), "{}", plain.stdout);
}

#[test]
fn a_wait_that_runs_out_prints_the_job_with_its_code() {
    let mut world = World::new(&[Advisor::new("slow-one", "supports", 5_000)]);
    world.start_daemon();
    let assessment = world.assessment();
    let detached = world
        .run(&["consult", &assessment, "--detach", "--format", "json"])
        .expect_exit(0)
        .json();
    let job = detached["id"].as_str().expect("a job id");
    let waited = world
        .run(&["wait", job, "--timeout", "0.3", "--format", "json"])
        .expect_exit(5)
        .json();
    assert_eq!(waited["code"], "wait_timed_out", "{waited}");
    assert_eq!(waited["id"], job);
    assert!(waited["finished_at"].is_null(), "{waited}");
    // A wait that sees the end carries no code.
    world.run(&["cancel", job]).expect_exit(0);
    let ended = world
        .run(&["wait", job, "--format", "json"])
        .expect_exit(1)
        .json();
    assert!(ended.get("code").is_none(), "{ended}");
}

/// The codes of a markdown table that follows `marker` in `text` (first column).
fn documented_codes(text: &str, marker: &str) -> BTreeSet<String> {
    let start = text.find(marker).expect("the marker in docs/cli.md");
    text[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1))
        .filter_map(|cell| {
            cell.trim()
                .strip_prefix('`')?
                .strip_suffix('`')
                .map(String::from)
        })
        .collect()
}

/// The string values of the constants of `pub mod codes` in `src/protocol.rs`.
fn codes_in_source(source: &str) -> BTreeSet<String> {
    let start = source.find("pub mod codes {").expect("the codes module");
    let body = &source[start..];
    let end = body.find("\n}").expect("its end");
    body[..end]
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| l.split('"').nth(1).map(String::from))
        .collect()
}

#[test]
fn docs_list_every_error_code() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let docs = std::fs::read_to_string(format!("{dir}/docs/cli.md")).expect("docs/cli.md");
    let source = std::fs::read_to_string(format!("{dir}/src/protocol.rs")).expect("protocol");
    let documented = documented_codes(&docs, "<!-- error-codes");
    let coded = codes_in_source(&source);
    assert!(
        coded.contains("job_finished") && coded.len() > 15,
        "{coded:?}"
    );
    assert_eq!(
        documented, coded,
        "docs/cli.md's error codes and `protocol::codes` differ"
    );
    // Every code a verb error can carry is one of them (a refusal's is a reason code).
    use advisord::error::Error;
    for err in [
        Error::Usage("u".into()),
        Error::InvalidRequest("r".into()),
        Error::InvalidRoot("r".into()),
        Error::NotFound("n".into()),
        Error::Internal("i".into()),
        Error::Protocol("p".into()),
        Error::ShuttingDown,
        Error::Unreachable {
            socket: "/s".into(),
            reason: "r".into(),
            hint: "h".into(),
        },
    ] {
        assert!(
            coded.contains(err.code()),
            "`{}` is not in `codes`",
            err.code()
        );
    }
}

/// The record files under the world's state directory.
fn record_files(world: &World) -> usize {
    let state = world.root().join(".ai/local/state/reasoning");
    walk(&state)
}

fn walk(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() {
                walk(&path)
            } else {
                usize::from(path.extension().is_some_and(|x| x == "json"))
            }
        })
        .sum()
}

/// The first value of `key` anywhere in `value`.
fn find<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    match value {
        Value::Object(map) => map
            .get(key)
            .or_else(|| map.values().find_map(|v| find(v, key))),
        Value::Array(items) => items.iter().find_map(|v| find(v, key)),
        _ => None,
    }
}

#[test]
fn the_plan_keeps_what_was_asked_and_the_preview_shows_the_same_prompt() {
    let mut world = World::new(&two_quick());
    world.start_daemon();
    let assessment = world.assessment();
    let asked = [
        "--question",
        "What breaks under load?",
        "--prior-opinion",
        "A colleague said WAL is fine",
    ];
    let before = record_files(&world);
    let mut args = vec!["consult", assessment.as_str()];
    args.extend(asked);
    args.extend(["--preview-prompt", "--format", "json"]);
    let preview = world.run(&args).expect_exit(0).json();
    assert_eq!(preview["assessment"], assessment.as_str());
    assert_eq!(
        preview["advisors"],
        serde_json::json!(["quick-agree", "quick-oppose"])
    );
    let prompt = preview["prompt"].as_str().expect("the prompt");
    assert!(prompt.contains("What breaks under load?"), "{prompt}");
    assert!(prompt.contains("A colleague said WAL is fine"), "{prompt}");
    assert!(prompt.contains("Use SQLite for the job queue"), "{prompt}");
    assert_eq!(preview["bytes"], prompt.len() as u64);
    // Nothing was sent or recorded: no record, no job.
    assert_eq!(record_files(&world), before);
    world
        .run(&["jobs"])
        .expect_exit(0)
        .expect_stdout("no jobs for this root");
    // Plain prints the prompt itself; `--no-daemon` previews too.
    let mut plain = vec!["--assessment", assessment.as_str()];
    plain.extend(asked);
    plain.extend(["--preview-prompt", "--no-daemon"]);
    world
        .run(&plain)
        .expect_exit(0)
        .expect_stdout("nothing sent, nothing recorded")
        .expect_stdout("each of quick-agree, quick-oppose would receive")
        .expect_stdout(prompt);

    // The job records the same question and the same prompt's size and hash with its plan.
    let mut args = vec!["consult", assessment.as_str()];
    args.extend(asked);
    args.extend(["--format", "json"]);
    let job = world.run(&args).expect_exit(0).json();
    let plan = job["plan"].as_str().expect("a plan id");
    let explained = world
        .run(&["explain", plan, "--format", "json", "--no-daemon"])
        .expect_exit(0)
        .json();
    assert_eq!(
        find(&explained, "question"),
        Some(&Value::from("What breaks under load?"))
    );
    assert_eq!(
        find(&explained, "prior_opinion"),
        Some(&Value::from("A colleague said WAL is fine"))
    );
    assert_eq!(find(&explained, "prompt_bytes"), Some(&preview["bytes"]));
    assert_eq!(find(&explained, "prompt_sha256"), Some(&preview["sha256"]));
    assert_eq!(
        find(&explained, "prompt"),
        None,
        "the prompt itself is not kept"
    );
    let sha = preview["sha256"].as_str().expect("sha256");
    world
        .run(&["explain", plan, "--no-daemon"])
        .expect_exit(0)
        .expect_stdout("question: What breaks under load?")
        .expect_stdout("prior opinion: A colleague said WAL is fine")
        .expect_stdout(&format!("prompt: {} bytes, sha256", prompt.len()))
        .expect_stdout(sha);

    // `ask --preview-prompt` records not even the assessment.
    let before = record_files(&world);
    let mut args = ASK.to_vec();
    args.extend(["--preview-prompt", "--format", "json"]);
    let asked = world.run(&args).expect_exit(0).json();
    assert_eq!(asked["assessment"], Value::Null);
    assert!(asked["prompt"]
        .as_str()
        .is_some_and(|p| p.contains("one writer at a time")));
    assert_eq!(record_files(&world), before);
}

#[test]
fn a_plan_says_which_capabilities_no_available_advisor_offers() {
    let world = World::new(&two_quick());
    let args = [
        "plan",
        "--materiality",
        "high",
        "--capabilities",
        "independent_reasoning,security_review",
        "--no-daemon",
    ];
    let mut json = args.to_vec();
    json.extend(["--format", "json"]);
    let plan = world.run(&json).expect_exit(0).json();
    assert_eq!(
        plan["uncovered_capabilities"],
        serde_json::json!(["security_review"])
    );
    assert_eq!(plan["selected"].as_array().map(Vec::len), Some(2));
    world
        .run(&args)
        .expect_exit(0)
        .expect_stdout("uncovered: no available advisor offers security_review");
    // Every capability offered: nothing uncovered, nothing said.
    let plain = world
        .run(&["plan", "--materiality", "high", "--no-daemon"])
        .expect_exit(0);
    assert!(!plain.stdout.contains("uncovered"), "{}", plain.stdout);
    // Nobody available (every advisor disabled): everything requested is uncovered.
    let disabled = world
        .command(&[
            "plan",
            "--materiality",
            "high",
            "--no-daemon",
            "--format",
            "json",
        ])
        .env("ADVISORD_ADVISORS_DISABLE", "all")
        .output()
        .expect("run");
    let disabled: Value = serde_json::from_slice(&disabled.stdout).expect("json");
    assert_eq!(
        disabled["uncovered_capabilities"],
        serde_json::json!(["independent_reasoning"])
    );
}

/// A catalogue with one local HTTP advisor at `endpoint` whose executable (`sh`) is on
/// `PATH`.
fn local_http_catalogue(endpoint: &str) -> String {
    format!(
        "advisors:\n  - id: local-llm\n    title: A local model server\n    transport: http\n    \
         adapter: ollama\n    executable: sh\n    capabilities: [independent_reasoning]\n    \
         local: true\n    endpoint: {endpoint}\n    model: tiny\n"
    )
}

/// The `local-llm` line of `advisors --format json` run with `catalogue`.
fn local_llm(world: &World, catalogue: &std::path::Path, daemon: bool) -> Value {
    let path = catalogue.to_str().expect("utf-8");
    let mut args = vec!["advisors", "--catalogue", path, "--format", "json"];
    if !daemon {
        args.push("--no-daemon");
    }
    let view = world.run(&args).expect_exit(0).json();
    view["advisors"]
        .as_array()
        .expect("advisors")
        .iter()
        .find(|a| a["id"] == "local-llm")
        .cloned()
        .expect("local-llm listed")
}

#[test]
fn a_local_http_advisor_is_available_only_when_its_endpoint_answers() {
    use std::io::{Read, Write};
    let mut world = World::new(&two_quick());
    // A loopback server that answers every request.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let up = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            let mut buf = [0u8; 1024];
            let _ = socket.read(&mut buf);
            let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        }
    });
    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let down = format!("http://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let up_file = world.tmp().join("up.yaml");
    std::fs::write(&up_file, local_http_catalogue(&up)).unwrap();
    let down_file = world.tmp().join("down.yaml");
    std::fs::write(&down_file, local_http_catalogue(&down)).unwrap();

    world.start_daemon();
    for daemon in [false, true] {
        let answering = local_llm(&world, &up_file, daemon);
        assert_eq!(answering["status"], "available", "{answering}");
        assert!(
            answering["reason"].as_str().unwrap().contains("answers"),
            "{answering}"
        );
        let silent = local_llm(&world, &down_file, daemon);
        assert_eq!(silent["status"], "unavailable", "{silent}");
        let reason = silent["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("`{down}` does not answer")),
            "{reason}"
        );
        assert!(reason.contains("connection refused"), "{reason}");
    }
    // A plan does not select it, and says the capability is uncovered.
    let path = down_file.to_str().unwrap();
    let plan = world
        .run(&[
            "plan",
            "--materiality",
            "high",
            "--catalogue",
            path,
            "--format",
            "json",
        ])
        .expect_exit(0)
        .json();
    assert_eq!(plan["selected"], serde_json::json!([]));
    assert_eq!(
        plan["uncovered_capabilities"],
        serde_json::json!(["independent_reasoning"])
    );
}

#[test]
fn catalogue_layers_extend_and_say_where_they_came_from() {
    let mut world = World::new(&two_quick());
    let home = world.root().join("../home/.config/advisord");
    std::fs::create_dir_all(&home).unwrap();
    let user = home.join("advisors.yaml");
    std::fs::write(
        &user,
        "extends: true\nadvisors:\n  - id: ollama-local\n    model: qwen-test\n    \
         endpoint: http://127.0.0.1:9\n  - id: user-one\n    title: Mine\n    \
         transport: process\n    adapter: process\n    executable: sh\n    \
         capabilities: [debugging]\n",
    )
    .unwrap();
    let project = world.root().join(".advisord/advisors.yaml");
    std::fs::write(
        &project,
        "extends: true\nadvisors:\n  - id: user-one\n    title: Renamed by the project\n",
    )
    .unwrap();
    world.trust_catalogue();
    let user = user.canonicalize().unwrap();
    let ids = |view: &Value, key: &str| -> Vec<String> {
        view[key]
            .as_array()
            .expect("a list")
            .iter()
            .map(|a| a["id"].as_str().unwrap().to_string())
            .collect()
    };

    let view = world
        .run(&["advisors", "--no-daemon", "--format", "json"])
        .expect_exit(0)
        .json();
    let files: Vec<(String, String)> = view["catalogue_files"]
        .as_array()
        .expect("catalogue_files")
        .iter()
        .map(|f| {
            (
                f["source"].as_str().unwrap().into(),
                f["how"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(files[0].0.contains("embedded"), "{files:?}");
    assert_eq!(
        std::path::Path::new(&files[1].0).canonicalize().unwrap(),
        user
    );
    assert_eq!(files[1].1, "extends");
    assert!(files[2].0.ends_with(".advisord/advisors.yaml") && files[2].1 == "extends");
    let listed = ids(&view, "advisors");
    assert!(listed.contains(&"ollama-local".to_string()), "{listed:?}");
    assert_eq!(listed.last().map(String::as_str), Some("user-one"));
    let row = view["advisors"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(row["title"], "Renamed by the project");
    world
        .run(&["advisors", "--no-daemon"])
        .expect_exit(0)
        .expect_stdout("catalogue files, in order:")
        .expect_stdout("(extends the above)");
    // The daemon reads the same layers.
    world.start_daemon();
    let through = world
        .run(&["advisors", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(through["catalogue_files"], view["catalogue_files"]);

    // `catalogue`: the effective catalogue, ready to copy.
    let effective = world
        .run(&["catalogue", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(effective["files"], view["catalogue_files"]);
    let ollama = effective["catalogue"]["advisors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "ollama-local")
        .cloned()
        .expect("ollama-local");
    assert_eq!(ollama["model"], "qwen-test");
    assert_eq!(ollama["endpoint"], "http://127.0.0.1:9");
    assert!(
        ollama["title"].is_string(),
        "the fields not overridden stay: {ollama}"
    );
    let copied = world.run(&["catalogue"]).expect_exit(0);
    let copy = world.tmp().join("copy.yaml");
    std::fs::write(&copy, &copied.stdout).unwrap();
    let again = world
        .run(&[
            "advisors",
            "--no-daemon",
            "--format",
            "json",
            "--catalogue",
            copy.to_str().unwrap(),
        ])
        .expect_exit(0)
        .json();
    assert_eq!(
        ids(&again, "advisors"),
        listed,
        "the copy is the same catalogue"
    );

    // A bad layer names its file and the field.
    std::fs::write(
        home.join("advisors.yaml"),
        "extends: true\nadvisors:\n  - id: ollama-local\n    transport: pigeon\n",
    )
    .unwrap();
    let failed = world
        .run(&["advisors", "--no-daemon"])
        .expect_exit(2)
        .expect_stderr("advisord/advisors.yaml")
        .expect_stderr("advisor `ollama-local`")
        .expect_stderr("transport");
    assert!(failed.stdout.is_empty());
}
