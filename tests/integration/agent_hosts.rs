//! Agents in the hosts they really run in: `claude -p`, `codex exec` and `gemini -p`, at
//! the versions `scripts/install-real-clis.sh` pins, drive `advisor-consult mcp` end to end,
//! each registered the way `docs/MCP.md` says and with nothing else. The model behind each
//! host is `fake-llm-server` acting as an agent (it calls advisord's tools by the end of
//! their names, in the host's wire format, and keeps what the host sent back), so a test
//! asserts on what the host passed to the model.
//!
//! Per host, three conversations on one project whose two scripted advisors disagree:
//! - **consult**: an inline assessment consulted (the records exist; the tool result the
//!   model received carries both stances and the disagreement), then a refusal
//!   (`material_without_evidence`) and an unknown job id, each reaching the model with
//!   advisord's message and reason code;
//! - **cap**: the registration's wait cap (3 s) is below the host's own tool timeout (10 s,
//!   the pair `init` writes), one advisor takes 5 s: the model receives the partial
//!   outcome and the job id at the cap, never a timeout, then `job` with `wait` collects
//!   the rest;
//! - **exit**: the host is killed mid-job; the job finishes in the daemon and is recorded.
//!
//! Plus the MCP Inspector's CLI (`@modelcontextprotocol/inspector`, a TypeScript-SDK
//! client) as a fourth client: `tools/list`, a consult and a refusal.
//!
//! The hosts are found as the real-CLI suite finds them (`ADVISORD_REAL_CLIS`, else the
//! install script's cache); when one is missing the suite FAILS and says how to install it.

mod asker;
mod place;

use advisord_fakes::llm_server::{Action, FakeLlmServer, Reply, Script};
use place::{Place, Reaped, Registration, RUN_BOUND};
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// An id no job has.
const NO_JOB: &str = "01JZZZZZZZZZZZZZZZZZZZZZZZ";

fn assessment(subject: &str) -> Value {
    json!({
        "subject": subject,
        "materiality": "critical",
        "hypothesis": "WAL mode is enough for one writer",
        "evidence": [{"kind": "file", "ref": "src/queue.rs", "showed": "one writer"}],
    })
}

/// The conversations, each chosen by a phrase of the prompt.
fn script() -> Script {
    let consult = Reply::agent([
        Action::call(
            "consult",
            json!({"record": assessment("Use SQLite for the job queue")}),
        ),
        Action::call(
            "consult",
            json!({"record": {"subject": "Drop the cache", "materiality": "high",
                              "hypothesis": "nobody reads it"}}),
        ),
        Action::call("job", json!({"id": NO_JOB})),
        Action::say("AGENT-DONE"),
    ]);
    let cap = Reply::agent([
        Action::call(
            "consult",
            json!({"record": assessment("Use Postgres for the job queue")}),
        ),
        Action::call("job", json!({"id": "{{last.id}}", "wait": true})),
        Action::say("AGENT-DONE"),
    ]);
    let exit = Reply::agent([
        Action::call(
            "consult",
            json!({"record": assessment("Use Redis for the job queue")}),
        ),
        Action::say("AGENT-DONE"),
    ]);
    Script::new()
        .phrase("AGENT-CONSULT", consult)
        .phrase("AGENT-CAP", cap)
        .phrase("AGENT-EXIT", exit)
}

/// The tool results the host sent back to the model in the conversation named `phrase`
/// (the last request of it carries them all).
fn results_of(server: &FakeLlmServer, phrase: &str) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.body.to_string().contains(phrase))
        .map(|r| r.tool_results())
        .max_by_key(Vec::len)
        .unwrap_or_default()
}

fn drive(host: &'static str, by: Registration) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let server = runtime.block_on(FakeLlmServer::start(script()));
    let place = Place::new(host, &server.base_url(), by);
    let phrase = |name: &str| format!("AGENT-{name} ({host}, {by:?})");

    // consult, a refusal, an unknown job.
    let prompt = phrase("CONSULT");
    let started = Instant::now();
    let (code, stdout, stderr) = place.run(&prompt);
    eprintln!(
        "{host} consult: exit {code} in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let results = results_of(&server, &prompt);
    assert_eq!(
        results.len(),
        3,
        "{host} passed {} tool results to the model: {results:#?}\nstdout: {stdout}\nstderr: {stderr}",
        results.len()
    );
    let tools: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains(&prompt))
        .flat_map(|r| r.tool_names())
        .collect();
    eprintln!("{host} offered the model: {tools:?}");
    let consulted = &results[0];
    for needle in [
        "supports",
        "opposes",
        "discriminating_question",
        "alpha",
        "beta",
    ] {
        assert!(
            consulted.contains(needle),
            "{host}: the consult result the model received lacks `{needle}`: {consulted}"
        );
    }
    assert!(
        results[1].contains("material_without_evidence") && results[1].contains("evidence"),
        "{host}: the refusal did not reach the model with its reason code: {}",
        results[1]
    );
    assert!(
        results[2].contains("unknown_job") && results[2].contains(NO_JOB),
        "{host}: the unknown job did not reach the model with its code: {}",
        results[2]
    );
    assert!(
        stdout.contains("AGENT-DONE"),
        "{host} did not finish: {stdout}\n{stderr}"
    );
    let status = place.cli(&["status"]);
    assert!(
        status["records"].as_u64().unwrap_or(0) >= 5,
        "{host}: the records of the consult: {status}"
    );

    // The cap: partial outcomes and the job id at the cap, then `job` collects the rest.
    place.set_mode("split");
    let prompt = phrase("CAP");
    let started = Instant::now();
    let (code, stdout, stderr) = place.run(&prompt);
    eprintln!(
        "{host} cap: exit {code} in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let results = results_of(&server, &prompt);
    assert_eq!(
        results.len(),
        2,
        "{host}: {results:#?}\nstdout: {stdout}\nstderr: {stderr}"
    );
    match by {
        // The cap (3 s) passes before the slow advisor (5 s) answers.
        Registration::Docs => assert!(
            results[0].contains("running") && results[0].contains("supports"),
            "{host}: at the cap the model gets the partial outcome and the running job: {}",
            results[0]
        ),
        // `init`'s cap (50 s) waits for both.
        Registration::Init | Registration::Bare => assert!(
            results[0].contains("done") && results[0].contains("opposes"),
            "{host}: under init's cap the consult ends in one call: {}",
            results[0]
        ),
    }
    assert!(
        !results[0].to_lowercase().contains("timed out"),
        "{host}: the host timed out before the cap: {}",
        results[0]
    );
    assert!(
        results[1].contains("done") && results[1].contains("opposes"),
        "{host}: `job` with wait collects the rest: {}",
        results[1]
    );

    // The host exits mid-job: the job finishes in the daemon and is recorded.
    let prompt = phrase("EXIT");
    let before = place.pids("beta");
    let child = place
        .host_command(&prompt)
        .spawn()
        .expect("the host starts");
    let mut child = Reaped(child);
    let started = Instant::now();
    while place.pids("beta") == before {
        assert!(
            started.elapsed() < RUN_BOUND,
            "{host}: the advisors never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.end();
    let jobs = place.cli(&["jobs"]);
    let job = jobs["jobs"]
        .as_array()
        .and_then(|all| {
            all.iter()
                .rfind(|j| j["state"] == "running" || j["state"] == "queued")
                .or(all.last())
        })
        .and_then(|j| j["id"].as_str())
        .unwrap_or_else(|| panic!("{host}: no job: {jobs}"))
        .to_string();
    let waited = place.cli(&["wait", &job, "--timeout", "30"]);
    assert_eq!(waited["state"], "done", "{host}: {waited}");
    for c in waited["consultations"].as_array().expect("consultations") {
        assert_eq!(c["status"], "completed", "{host}: {c}");
    }
    drop(place);
    runtime.block_on(server.shutdown());
}

#[test]
fn claude_code_drives_advisord_registered_as_the_docs_say() {
    drive("claude", Registration::Docs);
}

#[test]
fn gemini_cli_drives_advisord_registered_as_the_docs_say() {
    drive("gemini", Registration::Docs);
}

#[test]
fn codex_drives_advisord_registered_as_the_docs_say() {
    drive("codex", Registration::Docs);
}

#[test]
fn claude_code_drives_advisord_in_a_repository_prepared_by_init() {
    drive("claude", Registration::Init);
}

#[test]
fn gemini_cli_drives_advisord_in_a_repository_prepared_by_init() {
    drive("gemini", Registration::Init);
}

#[test]
fn codex_drives_advisord_in_a_repository_prepared_by_init() {
    drive("codex", Registration::Init);
}

/// The MCP Inspector's CLI on the server, once: its JSON answer.
fn inspect(place: &Place, args: &[&str]) -> Value {
    let mut command = Command::new(place.path("bin").join("mcp-inspector"));
    place.env(&mut command);
    let out = command
        .args(["--cli", "advisor-consult", "mcp", "--wait-cap", "30"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the inspector runs");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the inspector's answer to {args:?} is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn the_mcp_inspector_lists_consults_and_sees_a_refusal() {
    let place = Place::new("mcp-inspector", "http://127.0.0.1:9", Registration::Docs);
    let listed = inspect(&place, &["--method", "tools/list"]);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["advisors", "plan", "record", "consult", "job", "cancel", "status", "explain"]
    );
    let record = format!("record={}", assessment("Use SQLite for the job queue"));
    let consulted = inspect(
        &place,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "consult",
            "--tool-arg",
            &record,
        ],
    );
    assert_ne!(consulted["isError"], true, "{consulted}");
    let job = &consulted["structuredContent"];
    assert_eq!(job["state"], "done", "{consulted}");
    let stances: Vec<&str> = job["consultations"]
        .as_array()
        .expect("consultations")
        .iter()
        .filter_map(|c| c["stance"].as_str())
        .collect();
    assert_eq!(stances, ["supports", "opposes"], "{job}");
    assert!(
        job["disagreement_detail"]["discriminating_question"].is_string(),
        "{job}"
    );
    // A refusal: a tool error the TypeScript SDK accepts (no structured content to fail
    // the output schema), carrying the reason code.
    let refused = inspect(
        &place,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "record",
            "--tool-arg",
            r#"record={"kind":"assessment","subject":"x","materiality":"high","hypothesis":"h"}"#,
        ],
    );
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("refused (material_without_evidence)"),
        "{refused}"
    );
    let unknown = inspect(
        &place,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "job",
            "--tool-arg",
            &format!("id={NO_JOB}"),
        ],
    );
    assert_eq!(unknown["isError"], true, "{unknown}");
    assert!(unknown.to_string().contains("unknown_job"), "{unknown}");
}

/// `S (sleeping)`, `Z (zombie)`, ... of `pid`, and its parent; `None` once it is gone.
fn state_and_parent(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rfind(')').and_then(|i| stat.get(i + 2..))?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

/// An advisor CLI that leaves a process behind (as `codex` leaves its background `git
/// ls-remote`): the orphan comes to the daemon, a child subreaper, and exits there; the
/// daemon reaps it instead of keeping one zombie per consultation.
#[test]
fn the_daemon_reaps_the_orphans_an_advisor_cli_leaves() {
    let world = crate::support::client::World::new(&[]);
    let dir = world.root().parent().expect("a parent").join("orphans");
    std::fs::create_dir_all(&dir).expect("a directory");
    let script = dir.join("leaves-one.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n/usr/bin/env -i /bin/sleep 0.5 >/dev/null 2>&1 &\necho $! >> {orphans}\n\
             exec {exe} __demo-advisor --stance supports --delay-ms 50\n",
            orphans = dir.join("pids").display(),
            exe = env!("CARGO_BIN_EXE_advisor-consult"),
        ),
    )
    .expect("the script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(
        world.root().join(".advisord/advisors.yaml"),
        format!(
            "mode: strict\nadvisors:\n  - id: leaver\n    title: Leaves an orphan\n    \
             transport: process\n    adapter: process\n    \
             references: {{ provider: p, vendor: v, model: m }}\n    \
             executable: {script:?}\n    capabilities: [independent_reasoning]\n"
        ),
    )
    .expect("the catalogue");
    world.trust_catalogue();
    for _ in 0..3 {
        let assessment = world.assessment();
        world.run(&["--assessment", &assessment]).expect_exit(0);
    }
    let daemon = world.daemon_pid().expect("the daemon runs");
    let orphans: Vec<i32> = std::fs::read_to_string(dir.join("pids"))
        .expect("the orphans' pids")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(orphans.len(), 3);
    let started = Instant::now();
    loop {
        let zombies: Vec<i32> = orphans
            .iter()
            .copied()
            .filter(|&pid| state_and_parent(pid) == Some(('Z', daemon)))
            .collect();
        let alive: Vec<i32> = orphans
            .iter()
            .copied()
            .filter(|&pid| state_and_parent(pid).is_some_and(|(_, parent)| parent == daemon))
            .collect();
        if alive.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the daemon keeps {} zombie(s) of the orphans it inherited: {zombies:?} (of {alive:?})",
            zombies.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    crate::support::client::stop(daemon);
}
