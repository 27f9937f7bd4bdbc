//! Invariants end to end through the real `advisor-consult`: the three scopes and their
//! precedence, the writer refusing a material conclusion that leaves one unaddressed or
//! breaks one, a repository unable to remove a global one, and the question carrying
//! them to the advisors.

use crate::support::cli::{Output, Project};
use serde_json::{json, Value};
use std::rc::Rc;

fn run(project: &Rc<Project>, args: &[&str]) -> Output {
    project.cli().args(args.iter().copied()).run()
}

/// `invariant list --format json`'s invariants, as `(name, scope, replaces, description)`.
fn listed(project: &Rc<Project>) -> Vec<(String, String, Vec<String>, String)> {
    let out = run(project, &["invariant", "list", "--format", "json"])
        .expect_exit(0)
        .json();
    out["invariants"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|i| {
            let text = |k: &str| i[k].as_str().unwrap_or_default().to_string();
            let replaces = i["replaces"]
                .as_array()
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            (text("name"), text("scope"), replaces, text("description"))
        })
        .collect()
}

fn add(project: &Rc<Project>, name: &str, scope: Option<&str>, description: &str) {
    let mut args = vec!["invariant", "add", name, "--description", description];
    args.extend(scope);
    run(project, &args).expect_exit(0);
}

fn material_assessment(project: &Rc<Project>) -> String {
    let record = project.record(json!({"kind": "assessment", "subject": "Queue storage",
        "materiality": "material", "hypothesis": "SQLite in WAL mode is enough",
        "evidence": [{"kind": "file", "ref": "src/queue.rs:1-40"}]}));
    record["id"].as_str().expect("an id").to_string()
}

fn conclusion(assessment: &str, invariants: Value) -> Value {
    json!({"kind": "conclusion", "assessment": assessment, "decision": "use SQLite",
        "rationale": "one writer", "evidence": [{"kind": "test", "ref": "queue::load"}],
        "validation_plan": "run the load test", "invariants": invariants})
}

/// Record `input` and expect the writer's refusal `reason`; returns its message.
fn refused(project: &Rc<Project>, input: &Value, reason: &str) -> String {
    let out = project
        .cli()
        .args(["record", "--file", "-", "--format", "json"])
        .stdin(&input.to_string())
        .run()
        .expect_exit(3);
    let text = format!("{}{}", out.stdout, out.stderr);
    let refusal: Value = serde_json::from_str(text.trim()).unwrap_or_else(|_| json!({}));
    assert_eq!(refusal["reason"], reason, "{text}");
    refusal["message"].as_str().unwrap_or_default().to_string()
}

#[test]
fn precedence_runs_task_then_project_then_global() {
    let project = Project::new();
    project.write(
        ".advisord/project.yaml",
        "# the team's file\nproject:\n  advisors-are-optional: true\nbudget:\n  per_day: 5\n",
    );
    add(
        &project,
        "one-writer",
        Some("--global"),
        "global: one writer",
    );
    add(
        &project,
        "one-writer",
        Some("--project"),
        "project: one writer per queue",
    );
    add(
        &project,
        "reversible",
        Some("--project"),
        "migrations roll back",
    );
    add(
        &project,
        "one-writer",
        None,
        "task: one writer per queue and shard",
    );
    add(&project, "keep-v1", None, "the v1 API keeps its shape");
    let text = std::fs::read_to_string(project.root().join(".advisord/project.yaml")).unwrap();
    assert!(
        text.starts_with(
            "# the team's file\nproject:\n  advisors-are-optional: true\nbudget:\n  per_day: 5\n"
        ),
        "what the user wrote is kept:\n{text}"
    );
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        listed(&project),
        [
            (
                "keep-v1".into(),
                "task".into(),
                s(&[]),
                "the v1 API keeps its shape".into()
            ),
            (
                "one-writer".into(),
                "task".into(),
                s(&["global", "project"]),
                "task: one writer per queue and shard".into()
            ),
            (
                "reversible".into(),
                "project".into(),
                s(&[]),
                "migrations roll back".into()
            ),
        ]
    );
    // Removing the narrower one uncovers the wider one, scope by scope.
    run(&project, &["invariant", "remove", "one-writer"]).expect_exit(0);
    let one = |project: &Rc<Project>| {
        listed(project)
            .into_iter()
            .find(|i| i.0 == "one-writer")
            .map(|i| (i.1, i.3))
    };
    assert_eq!(
        one(&project),
        Some(("project".into(), "project: one writer per queue".into()))
    );
    run(
        &project,
        &["invariant", "remove", "one-writer", "--project"],
    )
    .expect_exit(0);
    assert_eq!(
        one(&project),
        Some(("global".into(), "global: one writer".into()))
    );
    let plain = run(&project, &["invariant", "list"]).expect_exit(0).stdout;
    assert!(plain.contains("one-writer (global)"), "{plain}");
    // A name outside the rule is refused with the rule.
    let bad = run(
        &project,
        &[
            "invariant",
            "add",
            "One Writer",
            "--project",
            "--description",
            "x",
        ],
    )
    .expect_exit(2);
    assert!(bad.stderr.contains("a-z 0-9 - _"), "{}", bad.stderr);
}

#[test]
fn a_conclusion_is_refused_until_it_addresses_every_invariant() {
    let project = Project::new();
    add(
        &project,
        "no-core-network",
        Some("--global"),
        "the core opens no connection",
    );
    add(&project, "keep-v1", None, "the v1 API keeps its shape");
    let assessment = material_assessment(&project);
    let message = refused(
        &project,
        &conclusion(&assessment, json!([])),
        "invariant_unaddressed",
    );
    assert!(message.contains("`keep-v1`"), "{message}");
    let one = json!([{"name": "keep-v1", "holds": true,
        "evidence": [{"kind": "test", "ref": "api::v1_shape"}]}]);
    let message = refused(
        &project,
        &conclusion(&assessment, one),
        "invariant_unaddressed",
    );
    assert!(
        message.contains("`no-core-network` (global scope"),
        "{message}"
    );
    let both = json!([
        {"name": "keep-v1", "holds": true, "evidence": [{"kind": "test", "ref": "api::v1_shape"}]},
        {"name": "no-core-network", "holds": true,
         "evidence": [{"kind": "command", "ref": "advisor-consult check"}]}]);
    let stored = project.record(conclusion(&assessment, both));
    assert_eq!(stored["invariants"][1]["name"], "no-core-network");
    // Low doubt is not burdened.
    let low = project.record(json!({"kind": "assessment", "subject": "Log format",
        "materiality": "low", "hypothesis": "lines"}));
    project.record(json!({"kind": "conclusion", "assessment": low["id"],
        "decision": "lines", "rationale": "enough"}));
    run(&project, &["verify"]).expect_exit(0);
}

#[test]
fn holds_false_is_refused_unless_the_conclusion_decides_the_change() {
    let project = Project::new();
    add(
        &project,
        "no-core-network",
        Some("--project"),
        "the core opens no connection",
    );
    let assessment = material_assessment(&project);
    let broken = |change: Value| {
        let mut entry = json!({"name": "no-core-network", "holds": false,
            "evidence": [{"kind": "file", "ref": "src/core/fetch.rs"}]});
        if let Value::Object(extra) = change {
            for (k, v) in extra {
                entry[k] = v;
            }
        }
        conclusion(&assessment, json!([entry]))
    };
    let message = refused(&project, &broken(json!({})), "invariant_violated");
    assert!(message.contains("`no-core-network`"), "{message}");
    project.record(broken(json!({"change": "narrow",
        "description": "the core opens no connection but to the local store"})));
    let now = listed(&project);
    assert_eq!(now[0].1, "task", "{now:?}");
    assert_eq!(now[0].2, ["project"], "{now:?}");
    assert_eq!(
        now[0].3,
        "the core opens no connection but to the local store"
    );
    // The project file is unchanged: the decision holds in this task.
    let text = std::fs::read_to_string(project.root().join(".advisord/project.yaml")).unwrap();
    assert!(text.contains("the core opens no connection\""), "{text}");
}

#[test]
fn a_repository_cannot_remove_a_global_invariant() {
    let project = Project::new();
    add(
        &project,
        "no-core-network",
        Some("--global"),
        "the core opens no connection",
    );
    project.write(
        ".advisord/project.yaml",
        "invariants:\n  - name: no-core-network\n    removed: true\n  - name: reversible\n    description: migrations roll back\n",
    );
    let out = run(&project, &["invariant", "list", "--format", "json"]).expect_exit(0);
    assert!(
        out.stderr.contains(
            "never removes the user's global ones; global `no-core-network` stays in force"
        ),
        "{}",
        out.stderr
    );
    let names: Vec<(String, String)> = listed(&project).into_iter().map(|i| (i.0, i.1)).collect();
    assert_eq!(
        names,
        [
            ("no-core-network".into(), "global".into()),
            ("reversible".into(), "project".into())
        ]
    );
    // Neither the project scope nor a task record removes it.
    let out = run(
        &project,
        &["invariant", "remove", "no-core-network", "--project"],
    )
    .expect_exit(2);
    assert!(
        out.stderr
            .contains("declares no invariant `no-core-network`"),
        "{}",
        out.stderr
    );
    let out = run(&project, &["invariant", "remove", "no-core-network"]).expect_exit(3);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("unknown_reference"), "{said}");
    assert!(said.contains("was not added in task"), "{said}");
    // And a material conclusion still accounts for it.
    let assessment = material_assessment(&project);
    let only_project = json!([{"name": "reversible", "holds": true,
        "evidence": [{"kind": "test", "ref": "migrate::down"}]}]);
    let message = refused(
        &project,
        &conclusion(&assessment, only_project),
        "invariant_unaddressed",
    );
    assert!(message.contains("`no-core-network`"), "{message}");
}

#[test]
fn the_question_carries_the_invariants_as_the_team_s_constraints() {
    let project = Project::new();
    add(
        &project,
        "no-core-network",
        Some("--global"),
        "the core opens no connection",
    );
    add(&project, "keep-v1", None, "the v1 API keeps its shape");
    let assessment = material_assessment(&project);
    let preview = run(
        &project,
        &[
            "consult",
            &assessment,
            "--preview-prompt",
            "--format",
            "json",
        ],
    )
    .expect_exit(0)
    .json();
    let prompt = preview["prompt"].as_str().expect("the prompt");
    for want in [
        "## The team's constraints (invariants)",
        "binding on the decision",
        "- `keep-v1` (task): the v1 API keeps its shape",
        "- `no-core-network` (global): the core opens no connection",
        "whether the hypothesis keeps it",
        "\"invariants\": list of {\"name\"",
    ] {
        assert!(
            prompt.contains(want),
            "the question lacks {want:?}:\n{prompt}"
        );
    }
    assert_eq!(
        advisord_adapters::question::asked_invariants(prompt),
        ["keep-v1", "no-core-network"]
    );
}
