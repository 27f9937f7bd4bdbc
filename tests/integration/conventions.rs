//! The conventions of a well-made CLI: the record kinds described by `record --help`,
//! `record --template` and `schema` (shipped in the binary), completions and a man page
//! generated from the flags, `context`, `doctor`, a note on where records go outside a
//! git repository, and `check --path` outside the root.

use crate::support::cli::{Cli, Project};
use advisord::core::records::Kind;
use serde_json::{json, Value};
use std::path::Path;

#[test]
fn schema_prints_the_schema_shipped_in_the_binary() {
    for kind in Kind::ALL {
        let shipped = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("share/schema/{kind}.schema.json")),
        )
        .unwrap();
        let out = Cli::new()
            .args(["schema", kind.as_str()])
            .run()
            .expect_exit(0);
        assert_eq!(out.stdout.trim_end(), shipped.trim_end(), "{kind}");
    }
    Cli::new()
        .args(["schema", "record"])
        .run()
        .expect_exit(0)
        .expect_stdout("any kind");
    let bad = Cli::new().args(["schema", "verdict"]).run().expect_exit(2);
    assert!(bad.stderr.contains("`conclusion`"), "{}", bad.stderr);
    assert!(!bad.stderr.contains("share/schema"), "{}", bad.stderr);
}

#[test]
fn record_help_lists_every_kind_and_its_fields() {
    let help = Cli::new()
        .args(["record", "--help"])
        .run()
        .expect_exit(0)
        .stdout;
    for kind in Kind::ALL {
        assert!(
            help.contains(&format!("\n  {kind}\n")),
            "{kind} in:\n{help}"
        );
    }
    for field in [
        "subject",
        "materiality",
        "supersedes",
        "discriminating_question",
        "favours",
    ] {
        assert!(help.contains(&format!(" {field}: ")), "{field} in:\n{help}");
    }
    assert!(help.contains("--template"), "{help}");
}

#[test]
fn a_filled_template_is_accepted_and_an_unfilled_one_refused() {
    let project = Project::new();
    let template: Value = project
        .cli()
        .args(["record", "--template", "assessment"])
        .run()
        .expect_exit(0)
        .json();
    assert_eq!(template["kind"], "assessment");
    for field in advisord::core::writer::caller_fields(Kind::Assessment) {
        assert!(template.get(field).is_some(), "{field}: {template}");
    }
    // As printed, its placeholders are refused, and nothing is written.
    project
        .cli()
        .args(["record", "--file", "-"])
        .stdin(&template.to_string())
        .run()
        .expect_exit(3);
    let mut filled = template.clone();
    filled["subject"] = json!("Use SQLite for the queue");
    filled["materiality"] = json!("low");
    filled["hypothesis"] = json!("WAL mode is enough");
    filled["evidence"] = json!([]);
    let stored = project.record(filled);
    assert_eq!(stored["kind"], "assessment");
    assert_eq!(stored["sequence"], 1, "the refused one wrote nothing");
    Cli::new()
        .args(["record", "--template", "verdict"])
        .run()
        .expect_exit(2)
        .expect_stderr("`conclusion`");
    Cli::new()
        .args(["record"])
        .run()
        .expect_exit(2)
        .expect_stderr("--file");
}

#[test]
fn completions_and_the_man_page_come_from_the_flags() {
    let bash = Cli::new()
        .args(["completions", "bash"])
        .run()
        .expect_exit(0)
        .stdout;
    for verb in [
        "doctor",
        "context",
        "daemon",
        "schema",
        "--format",
        "--template",
    ] {
        assert!(bash.contains(verb), "bash lacks {verb}");
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("advisor-consult.bash");
    std::fs::write(&script, &bash).unwrap();
    let syntax = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .unwrap();
    assert!(
        syntax.success(),
        "the bash completion script does not parse"
    );
    let zsh = Cli::new()
        .args(["completions", "zsh"])
        .run()
        .expect_exit(0)
        .stdout;
    assert!(
        zsh.starts_with("#compdef advisor-consult"),
        "{}",
        &zsh[..60.min(zsh.len())]
    );
    let fish = Cli::new()
        .args(["completions", "fish"])
        .run()
        .expect_exit(0)
        .stdout;
    assert!(fish.contains("complete -c advisor-consult") && fish.contains("doctor"));
    Cli::new()
        .args(["completions", "tcsh"])
        .run()
        .expect_exit(2);
    let man = Cli::new().args(["man"]).run().expect_exit(0).stdout;
    assert!(
        man.starts_with(".ie") || man.starts_with(".TH"),
        "{}",
        &man[..80.min(man.len())]
    );
    for text in [
        ".TH advisor-consult",
        "advisor\\-consult\\-doctor",
        "\\-\\-no\\-daemon",
        "\\-\\-template",
    ] {
        assert!(man.contains(text), "the man page lacks {text}");
    }
}

#[test]
fn context_lists_what_a_new_session_needs_in_json_and_plain() {
    let project = Project::new();
    let open = project.record(
        json!({"kind": "assessment", "subject": "Cache the catalogue",
        "materiality": "low", "hypothesis": "reading it costs nothing"}),
    );
    let decided = project.record(json!({"kind": "assessment", "subject": "Keep one writer",
        "materiality": "low", "hypothesis": "a lock per task is enough"}));
    let conclusion = project.record(json!({"kind": "conclusion", "assessment": decided["id"],
        "decision": "One writer per task, under a flock", "rationale": "measured"}));
    let json = project
        .cli()
        .args(["context", "--format", "json"])
        .run()
        .expect_exit(0)
        .json();
    assert_eq!(json["standing"]["items"][0]["conclusion"], conclusion["id"]);
    assert_eq!(json["standing"]["items"][0]["reviewed_by"], json!([]));
    assert_eq!(json["open"]["items"][0]["assessment"], open["id"]);
    assert_eq!(json["open"]["items"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(json["disputed"]["items"], json!([]));
    let plain = project.cli().args(["context"]).run().expect_exit(0).stdout;
    for fact in [
        conclusion["id"].as_str().unwrap(),
        open["id"].as_str().unwrap(),
        "decided locally",
        "unresolved disagreements: none",
    ] {
        assert!(plain.contains(fact), "`{fact}` missing:\n{plain}");
    }
    // Many open assessments: still about 40 lines, and the rest counted.
    for n in 0..12 {
        project.record(
            json!({"kind": "assessment", "subject": format!("Question {n}"),
            "materiality": "low", "hypothesis": "h"}),
        );
    }
    let plain = project.cli().args(["context"]).run().expect_exit(0).stdout;
    assert!(plain.lines().count() <= 40, "{plain}");
    assert!(plain.contains("and 8 more"), "{plain}");
    let json = project
        .cli()
        .args(["context", "--format", "json"])
        .run()
        .expect_exit(0)
        .json();
    assert_eq!(json["open"]["more"], 8);
}

#[test]
fn doctor_says_what_each_advisor_needs_and_exits_zero_without_problems() {
    let project = Project::new();
    let socket = project.outside().join("none.sock");
    let out = project
        .cli()
        .args([
            "doctor",
            "--format",
            "json",
            "--socket",
            socket.to_str().unwrap(),
        ])
        .run()
        .expect_exit(0);
    let json = out.json();
    assert_eq!(json["problems"], 0, "{json:#}");
    assert_eq!(
        json["catalogue"]["source"]
            .as_str()
            .map(|s| s.contains("embedded")),
        Some(true),
        "{json:#}"
    );
    let advisors = json["advisors"].as_array().unwrap();
    assert!(!advisors.is_empty());
    for advisor in advisors {
        assert!(
            !advisor["needs"].as_array().unwrap().is_empty(),
            "{advisor}"
        );
        if advisor["status"] != "available" {
            assert!(advisor["next_step"].is_string(), "a next step: {advisor}");
        }
    }
    // An advisor with a credential: `not_configured` says which variable to export.
    let credentialed = advisors
        .iter()
        .find(|a| a["status"] == "not_configured")
        .expect("an HTTP advisor without its key");
    assert!(
        credentialed["next_step"]
            .as_str()
            .unwrap()
            .contains("export "),
        "{credentialed}"
    );
    assert_eq!(json["daemon"]["answering"], false);
    assert_eq!(json["daemon"]["problem"], false);
    assert_eq!(json["state"]["writable"], true);
    let plain = project
        .cli()
        .args(["doctor", "--socket", socket.to_str().unwrap()])
        .run()
        .expect_exit(0)
        .stdout;
    assert!(
        plain.contains("no problems") && plain.contains("next: "),
        "{plain}"
    );
}

/// An HTTP advisor behind a gateway counts as available from its key alone (availability
/// asks only `local: true` endpoints before a plan); `doctor` asks its endpoint and calls a
/// gateway that does not answer a problem, with the next step, instead of "no problems".
#[test]
fn doctor_asks_an_available_http_advisors_endpoint_and_calls_silence_a_problem() {
    let project = Project::new();
    let catalogue = |port: u16| {
        format!(
            "advisors:\n  - id: gateway-review\n    title: Review through a gateway\n    \
             transport: http\n    adapter: openai\n    \
             references: {{ provider: acme, vendor: acme, model: acme-1 }}\n    \
             credential: ACME_GATEWAY_KEY\n    capabilities: [independent_reasoning]\n    \
             endpoint: http://127.0.0.1:{port}/v1\n    model: acme-1\n"
        )
    };
    let socket = project.outside().join("none.sock");
    let doctor = |port: u16, exit: i32| {
        let path = project.write("gateway.yaml", &catalogue(port));
        project
            .cli()
            .env("ADVISORD_CATALOGUE", path.to_str().unwrap())
            .env("ACME_GATEWAY_KEY", "k-123")
            .args(["doctor", "--format", "json", "--socket"])
            .args([socket.to_str().unwrap()])
            .run()
            .expect_exit(exit)
            .json()
    };
    // A port nothing listens on: bound, then released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let json = doctor(closed, 1);
    assert_eq!(json["problems"], 1, "{json:#}");
    let gateway = |json: &serde_json::Value| {
        json["advisors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == "gateway-review")
            .cloned()
            .expect("the gateway advisor")
    };
    let advisor = gateway(&json);
    assert_eq!(advisor["status"], "available", "{advisor}");
    assert_eq!(advisor["problem"], true, "{advisor}");
    assert_eq!(advisor["endpoint"]["answering"], false, "{advisor}");
    assert!(
        advisor["reason"]
            .as_str()
            .unwrap()
            .contains("does not answer"),
        "{advisor}"
    );
    assert!(
        advisor["next_step"]
            .as_str()
            .unwrap()
            .contains("start the server"),
        "{advisor}"
    );
    // A server that answers HTTP (any status counts): no problem.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut stream, _) = listener.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = stream.read(&mut buf);
        let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
    });
    let json = doctor(port, 0);
    server.join().unwrap();
    assert_eq!(json["problems"], 0, "{json:#}");
    assert_eq!(gateway(&json)["endpoint"]["answering"], true, "{json:#}");
    assert_eq!(gateway(&json)["problem"], false, "{json:#}");
}

#[test]
fn doctor_exits_one_on_a_check_finding_and_names_it() {
    let project = Project::new();
    project.write(
        ".advisord/project.yaml",
        "project:\n  advisors-are-optional: true\n  provider-independent: [src/core]\n",
    );
    project.write("src/core/pick.rs", "// always ask openai first\n");
    let socket = project.outside().join("none.sock");
    let json = project
        .cli()
        .args([
            "doctor",
            "--format",
            "json",
            "--socket",
            socket.to_str().unwrap(),
        ])
        .run()
        .expect_exit(1)
        .json();
    assert_eq!(json["problems"], 1);
    assert_eq!(json["check"]["findings"][0]["file"], "src/core/pick.rs");
}

#[test]
fn outside_a_git_repository_record_says_where_records_go() {
    let project = Project::new();
    let assessment = json!({"kind": "assessment", "subject": "s", "materiality": "low",
        "hypothesis": "h"});
    let out = project
        .cli()
        .without_root()
        .without_state_dir()
        .current_dir(&project.root())
        .args(["record", "--file", "-"])
        .stdin(&assessment.to_string())
        .run()
        .expect_exit(0);
    let state = project.root().join(".ai/local/state/reasoning");
    assert!(
        out.stderr.contains("not in a git repository")
            && out.stderr.contains(state.to_str().unwrap()),
        "{}",
        out.stderr
    );
    assert!(state.is_dir());
    // Inside one, nothing is said.
    std::fs::create_dir(project.root().join(".git")).unwrap();
    let out = project
        .cli()
        .without_root()
        .without_state_dir()
        .current_dir(&project.root())
        .args(["record", "--file", "-"])
        .stdin(&assessment.to_string())
        .run()
        .expect_exit(0);
    assert!(!out.stderr.contains("note:"), "{}", out.stderr);
}

#[test]
fn check_path_outside_the_root_is_a_usage_error() {
    let project = Project::new();
    project.write(
        ".advisord/project.yaml",
        "project:\n  advisors-are-optional: true\n  provider-independent: [src]\n",
    );
    project.write("src/lib.rs", "// nothing here\n");
    let outside = project.outside().join("elsewhere");
    std::fs::create_dir(&outside).unwrap();
    project
        .cli()
        .args(["check", "--path", outside.to_str().unwrap()])
        .run()
        .expect_exit(2)
        .expect_stderr("outside the root");
    project
        .cli()
        .args(["check", "--path", "src"])
        .run()
        .expect_exit(0);
}

#[test]
fn a_ci_finding_quotes_the_variable_as_the_file_spells_it() {
    let project = Project::new();
    project.write(
        ".advisord/project.yaml",
        "project:\n  advisors-are-optional: true\n  provider-independent: [src]\n",
    );
    project.write("src/lib.rs", "// nothing here\n");
    project.write(
        ".github/workflows/ci.yml",
        "jobs:\n  t:\n    env:\n      OPENAI_API_KEY: ${{ secrets.OPENAI_API_KEY }}\n",
    );
    let json = project
        .cli()
        .args(["check", "--format", "json"])
        .run()
        .expect_exit(1)
        .json();
    let finding = &json["findings"][0];
    assert_eq!(finding["word"], "OPENAI_API_KEY", "{json:#}");
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains("`OPENAI_API_KEY`"),
        "{finding}"
    );
}
