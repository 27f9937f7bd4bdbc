//! `advisor-consult` end to end with `--no-daemon`: the real binary on a temporary project
//! in a clean environment (see `support::cli`).

use crate::support::cli as helper;

use helper::{Cli, Project};
use serde_json::{json, Value};
use std::rc::Rc;

const FORMATS: [&str; 4] = ["plain", "table", "yaml", "json"];

fn material_assessment() -> Value {
    json!({
        "kind": "assessment",
        "subject": "Use SQLite for the job queue",
        "materiality": "material",
        "hypothesis": "SQLite in WAL mode is enough for one writer",
        "facts": ["one daemon writes the queue"],
        "evidence": [{"kind": "file", "ref": "src/queue.rs", "showed": "one writer at a time"}]
    })
}

/// A project holding an assessment, its plan and a conclusion; returns their ids.
fn concluded_project() -> (Rc<Project>, String, String, String) {
    let project = Project::new();
    let assessment = project.record(material_assessment());
    let assessment_id = id_of(&assessment);
    let plan = project.record(json!({"kind": "plan", "assessment": assessment_id}));
    let conclusion = project.record(json!({
        "kind": "conclusion",
        "assessment": assessment_id,
        "decision": "keep SQLite in WAL mode",
        "rationale": "one writer; the benchmark holds",
        "evidence": [{"kind": "test", "ref": "queue_bench", "showed": "2k jobs/s"}],
        "validation_plan": "run the queue benchmark in CI"
    }));
    (project, assessment_id, id_of(&plan), id_of(&conclusion))
}

fn id_of(record: &Value) -> String {
    record["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a record with an id: {record}"))
        .to_string()
}

#[test]
fn a_newcomer_records_plans_concludes_and_reads_back() {
    let project = Project::new();
    let assessment = project.record(material_assessment());
    assert_eq!(assessment["kind"], "assessment");
    assert_eq!(assessment["task"], "default");
    assert_eq!(assessment["sequence"], 1);
    let assessment_id = id_of(&assessment);

    // No advisor is installed or configured: each says why.
    let advisors = project
        .cli()
        .args(["advisors", "--format", "json"])
        .run()
        .expect_exit(0)
        .expect_json("/mode", "standard")
        .json();
    let rows = advisors["advisors"].as_array().expect("advisors");
    assert!(!rows.is_empty());
    for row in rows {
        assert_ne!(row["status"], "available", "{row}");
        assert!(!row["reason"].as_str().unwrap_or("").is_empty(), "{row}");
    }
    assert_eq!(advisors["capacity"]["independent_reasoning"], 0);

    // The plan is computed: nobody selected, so a local review for material doubt.
    let plan = project.record(json!({"kind": "plan", "assessment": assessment_id}));
    assert_eq!(plan["kind"], "plan");
    assert_eq!(plan["selected"], json!([]));
    assert_eq!(
        plan["left_out"].as_array().map(Vec::len),
        Some(rows.len()),
        "every advisor left out with a reason: {plan}"
    );
    assert!(!plan["local_review"]
        .as_array()
        .expect("local_review")
        .is_empty());

    let conclusion = project.record(json!({
        "kind": "conclusion",
        "assessment": assessment_id,
        "decision": "keep SQLite in WAL mode",
        "rationale": "one writer; the benchmark holds",
        "evidence": [{"kind": "test", "ref": "queue_bench"}],
        "validation_plan": "run the queue benchmark in CI"
    }));
    assert_eq!(conclusion["independent_review_count"], 0);
    assert_eq!(conclusion["reviewed_by"], json!([]));

    project
        .cli()
        .args(["status", "--format", "json"])
        .run()
        .expect_exit(0)
        .expect_json("/assessments/0/id", assessment_id.as_str())
        .expect_json("/assessments/0/state", "concluded")
        .expect_json("/records", 3);
    let explain = project
        .cli()
        .args(["explain", &id_of(&conclusion), "--format", "json"])
        .run()
        .expect_exit(0)
        .json();
    assert!(
        explain.to_string().contains(&assessment_id),
        "the chain reaches the assessment: {explain}"
    );
    project
        .cli()
        .args(["tree", "--format", "json"])
        .run()
        .expect_exit(0)
        .expect_json("/nodes/0/id", assessment_id.as_str())
        .expect_json("/nodes/0/children/0/kind", "plan");
    project
        .cli()
        .args(["status"])
        .run()
        .expect_exit(0)
        .expect_stdout("Use SQLite for the job queue");
}

#[test]
fn every_verb_prints_every_format() {
    let (project, assessment, _, _) = concluded_project();
    let verbs: Vec<Vec<&str>> = vec![
        vec!["advisors"],
        vec!["plan", "--materiality", "high", "--confidence", "low"],
        vec!["status"],
        vec!["explain", &assessment],
        vec!["tree", "--depth", "2"],
        vec!["check"],
    ];
    for verb in &verbs {
        for format in FORMATS {
            let output = project
                .cli()
                .args(verb.iter().copied())
                .args(["--format", format])
                .run()
                .expect_exit(0);
            match format {
                "json" => assert!(output.json().is_object(), "{verb:?}"),
                "yaml" => assert_eq!(output.yaml(), output_as_json(&project, verb), "{verb:?}"),
                _ => assert!(!output.stdout.trim().is_empty(), "{verb:?} {format}"),
            }
        }
    }
    for format in FORMATS {
        let output = project
            .cli()
            .args(["record", "--file", "-", "--format", format])
            .stdin(
                &json!({"kind": "attempt", "assessment": assessment, "tried": "x",
                          "failure_observed": "y"})
                .to_string(),
            )
            .run()
            .expect_exit(0);
        match format {
            "json" => assert_eq!(output.json()["kind"], "attempt"),
            "yaml" => assert_eq!(output.yaml()["kind"], "attempt"),
            _ => assert!(!output.stdout.trim().is_empty(), "record {format}"),
        }
    }
}

/// The same verb's JSON, for comparing with its YAML.
fn output_as_json(project: &Rc<Project>, verb: &[&str]) -> Value {
    project
        .cli()
        .args(verb.iter().copied())
        .args(["--format", "json"])
        .run()
        .expect_exit(0)
        .json()
}

#[test]
fn a_plan_preview_explains_every_advisor() {
    let plan = Cli::new()
        .args([
            "plan",
            "--materiality",
            "critical",
            "--capabilities",
            "code_review,security_review",
            "--format",
            "json",
        ])
        .run()
        .expect_exit(0)
        .expect_json("/assessment", "")
        .expect_json("/selected", json!([]))
        .json();
    assert_eq!(
        plan["capabilities"],
        json!(["code_review", "security_review"])
    );
    assert!(!plan["left_out"].as_array().expect("left_out").is_empty());
    Cli::new()
        .args([
            "plan",
            "--materiality",
            "high",
            "--capabilities",
            "mind_reading",
        ])
        .run()
        .expect_exit(2)
        .expect_stderr("`mind_reading`")
        .expect_stderr("independent_reasoning");
}

#[test]
fn presence_comes_from_the_asking_path_and_credentials() {
    let project = Project::new();
    project.install("codex");
    let advisors = project
        .cli()
        .env("OPENAI_API_KEY", "sk-test-value-never-shown")
        .env("GEMINI_API_KEY", "")
        .args(["advisors", "--format", "json"])
        .run()
        .expect_exit(0);
    assert!(!advisors.stdout.contains("sk-test-value-never-shown"));
    assert!(!advisors.stderr.contains("sk-test-value-never-shown"));
    let json = advisors.json();
    let status = |id: &str| {
        json["advisors"]
            .as_array()
            .expect("advisors")
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("advisor {id}"))["status"]
            .clone()
    };
    assert_eq!(status("codex-cli"), "available");
    assert_eq!(status("openai-api"), "available");
    assert_eq!(status("gemini-api"), "not_configured");
    assert_eq!(status("claude-cli"), "unavailable");
}

#[test]
fn the_mode_comes_from_the_environment() {
    let check = |env: &[(&str, &str)], expected: &str| {
        let mut cli = Cli::new().args(["advisors", "--format", "json"]);
        for (name, value) in env {
            cli = cli.env(name, value);
        }
        cli.run().expect_exit(0).expect_json("/mode", expected);
    };
    check(&[], "standard");
    check(&[("CI", "true")], "ci");
    check(&[("CI", "")], "standard");
    check(&[("ADVISORD_MODE", "strict"), ("CI", "1")], "strict");
    Cli::new()
        .env("ADVISORD_MODE", "reckless")
        .args(["advisors"])
        .run()
        .expect_exit(2)
        .expect_stderr("reckless");
    Cli::new()
        .env("ADVISORD_COOLDOWN_SECONDS", "soon")
        .args(["advisors"])
        .run()
        .expect_exit(2)
        .expect_stderr("ADVISORD_COOLDOWN_SECONDS");
}

#[test]
fn exit_statuses() {
    // 0: done.
    Cli::new().args(["status"]).run().expect_exit(0);
    // 1: check findings.
    let project = Project::new();
    project.write(
        ".advisord/project.yaml",
        "project:\n  advisors-are-optional: true\n  provider-independent: [src/core]\n",
    );
    project.write("src/core/pick.rs", "// always ask openai first\n");
    let findings = project
        .cli()
        .args(["check", "--format", "json"])
        .run()
        .expect_exit(1)
        .expect_json("/findings/0/file", "src/core/pick.rs")
        .expect_json("/findings/0/line", 1);
    assert_eq!(
        findings.json()["findings"].as_array().map(Vec::len),
        Some(1)
    );
    project
        .cli()
        .args(["check", "--path", "src/core"])
        .run()
        .expect_exit(1)
        .expect_stdout("src/core/pick.rs");
    // 2: the state directory named is a file: the caller's mistake, not the store's.
    let project = Project::new();
    std::fs::write(project.state(), "").expect("a file where the state directory goes");
    project
        .cli()
        .args(["record", "--file", "-"])
        .stdin(&material_assessment().to_string())
        .run()
        .expect_exit(2)
        .expect_stderr("is not a directory");
    project
        .cli()
        .args(["status", "--format", "json"])
        .run()
        .expect_exit(2)
        .expect_json("/error", "usage");
    // 2: usage.
    for args in [
        &["frobnicate"][..],
        &["plan"][..],
        &["plan", "--materiality", "huge"][..],
        &["tree", "--depth", "deep"][..],
        &["--assessment", "01J", "status"][..],
        &[][..],
        &["explain", "01JNOSUCHRECORD"][..],
        &["record", "--file", "no-such-file.json"][..],
        &["check", "--path", "no/such/dir"][..],
    ] {
        Cli::new().args(args.iter().copied()).run().expect_exit(2);
    }
    // 3: refused by the writer.
    Cli::new()
        .args(["record", "--file", "-"])
        .stdin(
            r#"{"kind": "assessment", "subject": "s", "materiality": "high", "hypothesis": "h"}"#,
        )
        .run()
        .expect_exit(3);
}

#[test]
fn usage_errors_say_what_was_wrong_and_what_to_do() {
    Cli::new()
        .args(["explain", "01JNOSUCHRECORD"])
        .run()
        .expect_exit(2)
        .expect_stderr("error: ")
        .expect_stderr("`01JNOSUCHRECORD`")
        .expect_no_stdout();
    Cli::new()
        .args(["explain", "01JNOSUCHRECORD", "--format", "json"])
        .run()
        .expect_exit(2)
        .expect_json("/error", "not_found");
    Cli::new()
        .args(["record", "--file", "-"])
        .stdin("{\"kind\": \"assessment\",")
        .run()
        .expect_exit(2)
        .expect_stderr("standard input is not JSON")
        .expect_stderr("`kind` plus your fields");
    Cli::new()
        .args(["record", "--file", "missing.json"])
        .run()
        .expect_exit(2)
        .expect_stderr("cannot read `missing.json`");
    Cli::new()
        .without_root()
        .args(["--root", "/no/such/root", "status"])
        .run()
        .expect_exit(2)
        .expect_stderr("`/no/such/root` is not an existing directory");
}

#[test]
fn refusals_print_their_reason_in_every_format() {
    let unevidenced =
        r#"{"kind": "assessment", "subject": "s", "materiality": "critical", "hypothesis": "h"}"#;
    let refused = |format: &str| {
        Cli::new()
            .args(["record", "--file", "-", "--format", format])
            .stdin(unevidenced)
            .run()
            .expect_exit(3)
    };
    let json = refused("json")
        .expect_json("/refused", true)
        .expect_json("/reason", "material_without_evidence")
        .json();
    assert!(!json["message"].as_str().unwrap_or("").is_empty(), "{json}");
    assert_eq!(json.as_object().map(|o| o.len()), Some(3), "{json}");
    assert_eq!(refused("yaml").yaml(), json);
    for format in ["plain", "table"] {
        let output = refused(format).expect_stdout("refused (material_without_evidence): ");
        assert_eq!(
            output.stdout.trim().lines().count(),
            1,
            "one sentence: {output:?}"
        );
    }
    // The envelope is the writer's.
    Cli::new()
        .args(["record", "--file", "-", "--format", "json"])
        .stdin(r#"{"kind": "attempt", "id": "x", "assessment": "a", "tried": "t", "failure_observed": "f"}"#)
        .run()
        .expect_exit(3)
        .expect_json("/reason", "computed_field_supplied");
}

#[test]
fn a_refusal_writes_nothing() {
    let project = Project::new();
    project
        .cli()
        .args(["record", "--file", "-"])
        .stdin(
            r#"{"kind": "assessment", "subject": "s", "materiality": "high", "hypothesis": "h"}"#,
        )
        .run()
        .expect_exit(3);
    project
        .cli()
        .args(["status", "--format", "json"])
        .run()
        .expect_exit(0)
        .expect_json("/records", 0);
}

#[test]
fn a_bad_task_is_refused_by_record_and_a_usage_error_elsewhere() {
    let project = Project::new();
    let before = project.files();
    for task in ["a/b", "..", "../../escape", "", "x y"] {
        project
            .cli()
            .args(["--task", task, "record", "--file", "-", "--format", "json"])
            .stdin(&material_assessment().to_string())
            .run()
            .expect_exit(3)
            .expect_json("/refused", true)
            .expect_json("/reason", "invalid_task");
        project
            .cli()
            .args(["--task", task, "status"])
            .run()
            .expect_exit(2)
            .expect_stderr("error: task name")
            .expect_stderr("A-Z a-z 0-9");
        project
            .cli()
            .env("ADVISORD_TASK", "../env")
            .args(["tree", "--format", "json"])
            .run()
            .expect_exit(2)
            .expect_json("/error", "invalid_task");
    }
    assert_eq!(project.files(), before, "nothing was created");
}

#[test]
fn standard_input_is_read_only_for_record_file_dash() {
    // An open, never-closed standard input must not make any verb wait.
    for args in [
        &["status"][..],
        &["advisors"][..],
        &["tree"][..],
        &["plan", "--materiality", "low"][..],
        &["check"][..],
    ] {
        Cli::new()
            .args(args.iter().copied())
            .stdin_open()
            .run()
            .expect_exit(0);
    }
    // A record from a file ignores standard input too.
    let project = Project::new();
    let file = project.write("a.json", &material_assessment().to_string());
    project
        .cli()
        .args(["record", "--format", "json", "--file"])
        .args([file])
        .stdin_open()
        .run()
        .expect_exit(0)
        .expect_json("/kind", "assessment");
}

#[test]
fn the_task_comes_from_flag_environment_branch_or_default() {
    let project = Project::new();
    project.write(".git/HEAD", "ref: refs/heads/feature/x\n");
    project
        .cli()
        .args(["record", "--file", "-", "--format", "json"])
        .stdin(&material_assessment().to_string())
        .run()
        .expect_exit(0)
        .expect_json("/task", "feature-x");
    assert!(project.state().join("feature-x").is_dir());
    project
        .cli()
        .env("ADVISORD_TASK", "from-env")
        .args(["record", "--file", "-", "--format", "json"])
        .stdin(&material_assessment().to_string())
        .run()
        .expect_exit(0)
        .expect_json("/task", "from-env");
    project
        .cli()
        .env("ADVISORD_TASK", "from-env")
        .args([
            "--task",
            "from-flag",
            "record",
            "--file",
            "-",
            "--format",
            "json",
        ])
        .stdin(&material_assessment().to_string())
        .run()
        .expect_exit(0)
        .expect_json("/task", "from-flag");
    project
        .cli()
        .args(["status", "--format", "json"])
        .run()
        .expect_exit(0)
        .expect_json("/task", "feature-x")
        .expect_json("/records", 1);
}

#[test]
fn the_root_and_state_default_from_the_working_directory() {
    let project = Project::new();
    project.write(".git/HEAD", "ref: refs/heads/main\n");
    let deep = project.root().join("src/deep");
    std::fs::create_dir_all(&deep).expect("mkdir");
    project
        .cli()
        .without_root()
        .without_state_dir()
        .current_dir(&deep)
        .args(["record", "--file", "-", "--format", "json"])
        .stdin(&material_assessment().to_string())
        .run()
        .expect_exit(0)
        .expect_json("/task", "main");
    let task_dir = project.root().join(".ai/local/state/reasoning/main");
    assert_eq!(
        std::fs::read_dir(&task_dir)
            .expect("the default state directory")
            .filter(|e| e
                .as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json")))
            .count(),
        1
    );
}

fn one_advisor_catalogue(id: &str) -> String {
    format!(
        "advisors:\n  - id: {id}\n    title: {id}\n    transport: process\n    adapter: process\n    \
         executable: {id}-bin\n    capabilities: [independent_reasoning]\n"
    )
}

fn advisor_ids(output: &helper::Output) -> Vec<String> {
    output.json()["advisors"]
        .as_array()
        .expect("advisors")
        .iter()
        .map(|a| a["id"].as_str().expect("an id").to_string())
        .collect()
}

#[test]
fn the_catalogue_comes_from_flag_environment_root_or_embedded() {
    let project = Project::new();
    let run = |env: Option<&str>, flag: Option<&std::path::Path>| {
        let mut cli = project.cli().args(["advisors", "--format", "json"]);
        if let Some(env) = env {
            cli = cli.env("ADVISORD_CATALOGUE", env);
        }
        if let Some(flag) = flag {
            cli = cli.args(["--catalogue".as_ref(), flag.as_os_str()]);
        }
        advisor_ids(&cli.run().expect_exit(0))
    };
    let embedded = run(None, None);
    assert!(embedded.len() > 1, "the embedded catalogue: {embedded:?}");
    project.write(
        ".advisord/advisors.yaml",
        &one_advisor_catalogue("from-root"),
    );
    project.trust_catalogue();
    assert_eq!(run(None, None), ["from-root"]);
    let env_file = project.outside().join("env.yaml");
    std::fs::write(&env_file, one_advisor_catalogue("from-env")).expect("write");
    assert_eq!(
        run(Some(env_file.to_str().expect("utf-8")), None),
        ["from-env"]
    );
    let flag_file = project.outside().join("flag.yaml");
    std::fs::write(&flag_file, one_advisor_catalogue("from-flag")).expect("write");
    assert_eq!(
        run(Some(env_file.to_str().expect("utf-8")), Some(&flag_file)),
        ["from-flag"]
    );
    // A relative `--catalogue` is relative to the working directory.
    project.write("rel.yaml", &one_advisor_catalogue("relative"));
    assert_eq!(
        run(None, Some(std::path::Path::new("rel.yaml"))),
        ["relative"]
    );
}

#[test]
fn a_bad_catalogue_names_the_file_the_advisor_and_the_field() {
    let check = |yaml: &str, fragments: &[&str]| {
        let project = Project::new();
        let file = project.write(".advisord/advisors.yaml", yaml);
        project.trust_catalogue();
        let output = project
            .cli()
            .args(["advisors"])
            .run()
            .expect_exit(2)
            .expect_stderr("error: ")
            .expect_stderr(&file.display().to_string());
        for fragment in fragments {
            assert!(
                output.stderr.contains(fragment),
                "stderr lacks {fragment:?}: {}",
                output.stderr
            );
        }
    };
    let entry = "  - id: mine\n    title: Mine\n    transport: process\n    adapter: process\n    \
                 executable: mine\n    capabilities: [independent_reasoning]\n";
    check(&format!("advisor:\n{entry}"), &["`advisor`"]);
    check(
        &format!("mode: turbo\nadvisors:\n{entry}"),
        &["mode", "turbo"],
    );
    check(
        &format!(
            "advisors:\n{}",
            entry.replace("transport: process", "transport: pigeon")
        ),
        &["`mine`", "transport", "pigeon"],
    );
    check(
        &format!(
            "advisors:\n{}",
            entry.replace("independent_reasoning", "independant_reasoning")
        ),
        &["`mine`", "capabilities", "independant_reasoning"],
    );
    check(
        &format!("advisors:\n{entry}{entry}"),
        &["`mine`", "declared twice"],
    );
    check("advisors: [", &[]);
    // The flag's file is named too, and a missing one is an error, not a fallback.
    let project = Project::new();
    project
        .cli()
        .args(["--catalogue", "nowhere.yaml", "advisors"])
        .run()
        .expect_exit(2)
        .expect_stderr("nowhere.yaml");
}

#[test]
fn help_shows_an_example_per_verb_and_version_prints() {
    let help = Cli::new().args(["--help"]).run().expect_exit(0);
    for verb in [
        "record",
        "advisors",
        "plan",
        "--assessment",
        "ask",
        "jobs",
        "status",
        "explain",
        "tree",
        "check",
        "demo",
    ] {
        assert!(
            help.stdout.contains(&format!("advisor-consult {verb}")),
            "no example of {verb}: {}",
            help.stdout
        );
    }
    for verb in [
        "record", "advisors", "plan", "ask", "jobs", "wait", "cancel", "status", "explain", "tree",
        "check", "demo",
    ] {
        Cli::new()
            .args([verb, "--help"])
            .run()
            .expect_exit(0)
            .expect_stdout("Example")
            .expect_stdout(&format!("advisor-consult {verb}"));
    }
    Cli::new()
        .args(["--version"])
        .run()
        .expect_exit(0)
        .expect_stdout(env!("CARGO_PKG_VERSION"));
}

#[test]
fn explain_and_tree_follow_the_records() {
    let (project, assessment, plan, conclusion) = concluded_project();
    let explain = project
        .cli()
        .args(["explain", &plan, "--format", "json"])
        .run()
        .expect_exit(0)
        .json();
    let text = explain.to_string();
    assert!(
        text.contains(&assessment) && text.contains(&conclusion),
        "{explain}"
    );
    project
        .cli()
        .args(["tree", "--depth", "1", "--format", "json"])
        .run()
        .expect_exit(0)
        .expect_json("/nodes/0/id", assessment.as_str())
        .expect_json("/nodes/0/children", json!([]));
    project
        .cli()
        .args(["--task", "other", "explain", &plan])
        .run()
        .expect_exit(2)
        .expect_stderr(&plan);
}

#[test]
fn ask_records_its_assessment_through_the_writer_first() {
    let project = Project::new();
    project
        .cli()
        .args([
            "ask",
            "--subject",
            "Use SQLite",
            "--materiality",
            "high",
            "--hypothesis",
            "WAL is enough",
            "--format",
            "json",
        ])
        .run()
        .expect_exit(3)
        .expect_json("/reason", "material_without_evidence");
    project
        .cli()
        .args([
            "ask",
            "--subject",
            "s",
            "--materiality",
            "low",
            "--hypothesis",
            "h",
        ])
        .args(["--evidence", "rumour:heard it somewhere"])
        .run()
        .expect_exit(2)
        .expect_stderr("evidence kind `rumour` is not known");
    project
        .cli()
        .args(["status", "--format", "json"])
        .run()
        .expect_exit(0)
        .expect_json("/records", 0);
}

/// Two HTTP advisors needing nothing to be present: `alpha` at 1 USD per million tokens
/// each way, `beta` unpriced.
const PRICED_CATALOGUE: &str = "advisors:
  - id: alpha
    title: Alpha
    transport: http
    adapter: openai
    endpoint: http://127.0.0.1:9/v1
    model: m
    capabilities: [independent_reasoning]
    price: {currency: USD, input_per_million: 1, output_per_million: 1, as_of: 2026-12-01}
  - id: beta
    title: Beta
    transport: http
    adapter: ollama
    endpoint: http://127.0.0.1:9
    model: m
    capabilities: [independent_reasoning]
";

#[test]
fn spend_and_budgets_end_to_end() {
    let project = Project::new();
    project.write(".advisord/advisors.yaml", PRICED_CATALOGUE);
    project.trust_catalogue();
    let mut assessment = material_assessment();
    assessment["materiality"] = json!("high");
    let assessment = id_of(&project.record(assessment));
    let plan = project.record(json!({"kind": "plan", "assessment": assessment}));
    let selected: Vec<&str> = plan["selected"]
        .as_array()
        .expect("selected")
        .iter()
        .filter_map(|s| s["advisor"].as_str())
        .collect();
    assert_eq!(selected, ["alpha", "beta"], "{plan}");
    let consultation = |advisor: &str, usage: Option<Value>| {
        let mut c = json!({"kind": "consultation", "plan": id_of(&plan), "advisor": advisor,
                           "status": "completed", "conclusion": "fine", "stance": "supports"});
        if let Some(usage) = usage {
            c["usage"] = usage;
        }
        project.record_consultation(c)
    };
    let alpha = id_of(&consultation(
        "alpha",
        Some(json!({"input_tokens": 500_000, "output_tokens": 500_000})),
    ));
    consultation("beta", None);

    // `spend` in every format: the known amount, and the unknown one said, never zero.
    let json = project
        .cli()
        .env("TZ", "EST5")
        .args(["spend", "--format", "json"])
        .run()
        .expect_exit(0)
        .json();
    assert_eq!(json["currency"], "USD");
    assert_eq!(json["utc_offset"], "UTC-05:00");
    let row = |list: &str, name: &str| {
        json[list]
            .as_array()
            .expect("rows")
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{list} {name}: {json}"))
            .clone()
    };
    assert_eq!(row("advisors", "alpha")["amount"], 1.0);
    assert_eq!(row("advisors", "beta")["unknown"], 1);
    assert_eq!(row("advisors", "beta")["amount"], 0.0);
    assert_eq!(row("tasks", "default")["consultations"], 2);
    assert_eq!(json["days"].as_array().expect("days").len(), 1);
    assert_eq!(json["days"][0]["name"], json["today"]);
    assert_eq!(json["total"]["amount"], 1.0);
    assert_eq!(json["budgets"]["lines"], json!([]));
    let plain = project.cli().args(["spend"]).run().expect_exit(0);
    let plain = plain.expect_stdout("total: 1.0000 USD + 1 unknown (2 consultations");
    let plain = plain.expect_stdout("beta: unknown (1)");
    plain.expect_stdout("no budget set");
    let table = project
        .cli()
        .args(["spend", "--format", "table"])
        .run()
        .expect_exit(0);
    table.expect_stdout("1.0000 USD + 1 unknown");
    let yaml = project
        .cli()
        .args(["spend", "--format", "yaml"])
        .run()
        .expect_exit(0)
        .yaml();
    assert_eq!(yaml["total"], json["total"]);

    // `status` shows each consultation's cost and the task's totals.
    let status = project.cli().args(["status"]).run().expect_exit(0);
    let status = status.expect_stdout("  alpha: 1.0000 USD");
    status.expect_stdout("  total: 1.0000 USD + 1 unknown");
    let status = project
        .cli()
        .args(["status", "--format", "json"])
        .run()
        .expect_exit(0)
        .json();
    let lines = &status["assessments"][0]["consultations"];
    assert_eq!(
        lines[0]["cost"],
        json!({"basis": "metered", "amount": 1.0, "currency": "USD"})
    );
    assert_eq!(
        lines[1]["cost"],
        json!({"basis": "unknown", "reason": "no price in the catalogue"})
    );

    // `explain` and `tree` show each consultation's cost.
    project
        .cli()
        .args(["explain", &alpha])
        .run()
        .expect_exit(0)
        .expect_stdout("cost: 1.0000 USD")
        .expect_stdout("cost: unknown (no price in the catalogue)");
    let tree = project
        .cli()
        .args(["tree", "--format", "json"])
        .run()
        .expect_exit(0);
    let tree = tree.expect_stdout("\"basis\": \"metered\"").json();
    let consultations = &tree["nodes"][0]["children"][0]["children"];
    assert_eq!(consultations[0]["cost"]["amount"], 1.0, "{tree}");
    assert_eq!(consultations[1]["cost"]["basis"], "unknown", "{tree}");

    // An advisor's budget from the environment: `alpha` is over budget and left out.
    let env = ("ADVISORD_BUDGET_ADVISORS_DAY", "alpha=1");
    let advisors = project
        .cli()
        .env(env.0, env.1)
        .args(["advisors", "--format", "json"])
        .run()
        .expect_exit(0)
        .json();
    let alpha = &advisors["advisors"][0];
    assert_eq!(alpha["status"], "over_budget", "{advisors}");
    let reason = alpha["reason"].as_str().expect("reason");
    assert!(
        reason.contains("spent 1.0000 USD of its per-day budget of 1.0000 USD"),
        "{reason}"
    );
    assert!(reason.contains("resets at "), "{reason}");
    assert!(alpha["until"].is_string());
    assert_eq!(advisors["advisors"][1]["status"], "available");
    let preview = project
        .cli()
        .env(env.0, env.1)
        .args(["plan", "--materiality", "high", "--format", "json"])
        .run()
        .expect_exit(0)
        .json();
    assert_eq!(preview["selected"][0]["advisor"], "beta");
    assert!(preview["left_out"][0]["reason"]
        .as_str()
        .expect("reason")
        .starts_with("over_budget: over budget: spent"));
    let spend = project
        .cli()
        .env(env.0, env.1)
        .args(["spend", "--format", "json"])
        .run()
        .expect_exit(0)
        .json();
    assert_eq!(spend["budgets"]["lines"][0]["exhausted"], true);
    assert_eq!(spend["budgets"]["lines"][0]["advisor"], "alpha");

    // A total budget in the project's config: every advisor with a (possibly unknown)
    // marginal cost is out, and a material plan's local review says why.
    project.write(".advisord/project.yaml", "budget:\n  per_task: 0.5\n");
    let preview = project
        .cli()
        .args(["plan", "--materiality", "material", "--format", "json"])
        .run()
        .expect_exit(0)
        .json();
    assert_eq!(preview["selected"], json!([]), "{preview}");
    let review = preview["local_review"][0].as_str().expect("local review");
    assert!(review.contains("the total budget is exhausted"), "{review}");
    assert!(
        review.contains("per-task budget of 0.5000 USD in task `default`"),
        "{review}"
    );
    // The environment replaces the project's limit.
    project
        .cli()
        .env("ADVISORD_BUDGET_TASK", "100")
        .args(["advisors", "--format", "json"])
        .run()
        .expect_exit(0)
        .expect_json("/advisors/0/status", "available");

    // Bad budgets are usage errors naming the variable or the file and field.
    project
        .cli()
        .env("ADVISORD_BUDGET_DAY", "5 USD")
        .args(["spend"])
        .run()
        .expect_exit(2)
        .expect_stderr("ADVISORD_BUDGET_DAY");
    project.write(".advisord/project.yaml", "budget:\n  per_day: -1\n");
    project
        .cli()
        .args(["spend"])
        .run()
        .expect_exit(2)
        .expect_stderr("field `budget.per_day`");
}
