//! `advisor-consult mcp` started as a host starts it (a real process on pipes, its own
//! socket, data directory and root, scripted advisors), driven by clients nobody here
//! wrote: the official Python SDK (`mcp/host.py`, the whole path) and rmcp's own
//! client (the edges: bad input, a malformed line, a host going away mid-call).

use crate::support::client::{self as client_support, stop, World, RUN_BOUND};
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The advisors of the test catalogue, in declaration (and plan) order.
const ADVISORS: [&str; 2] = ["alpha", "beta"];

/// The cap the server under test waits for a consultation.
const CAP_S: &str = "3";

/// The most `tools/list` may weigh.
const TOOLS_LIST_MAX: usize = 8 * 1024;

/// A world whose two advisors are scripts reading `<dir>/mode` on every run: `fast` both
/// answer at once (alpha supports, beta opposes), `split` beta takes several seconds,
/// `hang` neither answers. Each appends its pid to `<dir>/pids-<id>`.
fn world() -> (World, PathBuf) {
    let world = World::new(&[]);
    let dir = world.root().parent().expect("a parent").join("advisors");
    std::fs::create_dir_all(&dir).expect("advisors dir");
    std::fs::write(dir.join("mode"), "fast").expect("mode");
    let exe = env!("CARGO_BIN_EXE_advisor-consult");
    let mut yaml = String::from("mode: strict\nadvisors:\n");
    for (i, id) in ADVISORS.iter().enumerate() {
        let stance = if i == 0 { "supports" } else { "opposes" };
        let split = if i == 0 { 100 } else { 6000 };
        let script = dir.join(format!("{id}.sh"));
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho $$ >> {dir}/pids-{id}\nmode=$(/bin/cat {dir}/mode)\n\
                 case \"$mode\" in\n  fast) d=100 ;;\n  split) d={split} ;;\n  *) d=600000 ;;\nesac\n\
                 exec {exe} __demo-advisor --stance {stance} --delay-ms $d\n",
                dir = dir.display(),
            ),
        )
        .expect("script");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        yaml.push_str(&format!(
            "  - id: {id}\n    title: Scripted {id}\n    transport: process\n    adapter: process\n    \
             references: {{ provider: p{i}, vendor: v{i}, model: m{i} }}\n    \
             executable: {script:?}\n    capabilities: [independent_reasoning]\n"
        ));
    }
    std::fs::write(world.root().join(".advisord/advisors.yaml"), yaml).expect("catalogue");
    world.trust_catalogue();
    (world, dir)
}

/// The environment the server runs with (nothing inherited).
fn server_env(world: &World) -> Vec<(String, String)> {
    let home = world.root().parent().expect("a parent").join("home");
    vec![
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("HOME".into(), home.display().to_string()),
        ("TMPDIR".into(), world.tmp().display().to_string()),
        (
            "ADVISORD_DATA_DIR".into(),
            world.data().display().to_string(),
        ),
    ]
}

fn server_args(world: &World) -> Vec<String> {
    vec![
        "--socket".into(),
        world.socket().display().to_string(),
        "mcp".into(),
        "--wait-cap".into(),
        CAP_S.into(),
    ]
}

/// The Python interpreter of the CI tools' virtual environment.
fn python() -> PathBuf {
    let venv = std::env::var_os("ADVISORD_CI_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/advisord-ci/venv")
        });
    let python = venv.join("bin/python");
    let has_mcp = Command::new(&python)
        .args(["-c", "import mcp"])
        .current_dir("/")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        has_mcp,
        "the official MCP Python SDK is not installed in `{}`: run \
         `scripts/ci/install-python-tools.sh` (`.ci/run` does); this test never skips",
        venv.display()
    );
    python
}

#[test]
fn python_sdk_host_drives_the_server() {
    let python = python();
    let (world, dir) = world();
    let env: serde_json::Map<String, Value> = server_env(&world)
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let config = json!({
        "command": env!("CARGO_BIN_EXE_advisor-consult"),
        "args": server_args(&world),
        "env": env,
        "root": world.root(),
        "dir": dir,
        "advisors": ADVISORS,
    });
    let config_path = dir.join("config.json");
    std::fs::write(&config_path, config.to_string()).expect("config");
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/mcp/host.py");
    let mut child = Command::new(python)
        .arg(host)
        .arg(&config_path)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the python host");
    let stdout = client_support::read_all(child.stdout.take().expect("stdout"));
    let stderr = client_support::read_all(child.stderr.take().expect("stderr"));
    let code = client_support::wait_bounded(&mut child, Duration::from_secs(180), "host.py");
    let stdout = stdout.join().expect("stdout");
    let stderr = stderr.join().expect("stderr");
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    assert_eq!(
        code, 0,
        "the python host failed:\n{stderr}\n--- server stderr ---\n{log}"
    );
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no summary ({e}): {stdout}"));
    let size = summary["tools_list_bytes"].as_u64().expect("a size") as usize;
    eprintln!("tools/list as the python SDK read it: {size} bytes; summary {summary}");
    assert!(size < TOOLS_LIST_MAX, "tools/list is {size} bytes");
    assert!(summary["progress_notifications"].as_u64().unwrap_or(0) >= 5);
    for pid in summary["cancelled_pids"].as_array().expect("pids") {
        let pid = pid.as_i64().expect("a pid") as i32;
        assert!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err()
                || is_zombie(pid),
            "advisor process {pid} outlived the cancel"
        );
    }
    // Nothing but protocol went to standard output: the SDK would have failed to parse.
    drop(world);
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z')))
        .unwrap_or(true)
}

/// The server as a raw child process: lines in, lines out.
struct Raw {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::sync::mpsc::Receiver<String>,
}

impl Raw {
    fn start(world: &World) -> Raw {
        let mut command = Command::new(env!("CARGO_BIN_EXE_advisor-consult"));
        command.env_clear().envs(server_env(world));
        let mut child = command
            .args(server_args(world))
            .current_dir(world.root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server");
        let input = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, output) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Raw {
            child,
            input,
            output,
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.input, "{line}").expect("write a line");
        self.input.flush().expect("flush");
    }

    fn next(&self) -> String {
        self.output
            .recv_timeout(RUN_BOUND)
            .expect("the server answers within the bound")
    }

    fn json(&self) -> Value {
        let line = self.next();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

#[test]
fn a_malformed_line_gets_a_protocol_error_and_the_server_keeps_serving() {
    let (world, _dir) = world();
    let mut raw = Raw::start(&world);
    raw.send("this is not json");
    let error = raw.json();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not JSON"));
    raw.send(r#"{"jsonrpc":"2.0","id":"x","nothing":1}"#);
    let error = raw.json();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    raw.send(INITIALIZE);
    let init = raw.json();
    assert_eq!(init["id"], 1, "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "advisord");
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    raw.send("{truncated");
    assert_eq!(raw.json()["error"]["code"], -32700);
    // Lines serde reads only loosely: each is a parse error, with `"id": null`.
    for line in [
        r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":{"n":1e400}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"ping","params":{"s":"\ud800"}}"#,
    ] {
        raw.send(line);
        let error = raw.json();
        assert_eq!(error["error"]["code"], -32700, "{line}: {error}");
        assert!(
            error.as_object().unwrap().contains_key("id") && error["id"].is_null(),
            "{error}"
        );
    }
    // An invalid envelope whose id cannot be read: `"id": null`.
    raw.send(r#"{"jsonrpc":"2.0","id":[1],"nothing":1}"#);
    let error = raw.json();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert!(
        error.as_object().unwrap().contains_key("id") && error["id"].is_null(),
        "{error}"
    );
    // A line over the limit (4 MiB) is answered with an error naming it, and the server
    // goes on.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"record","arguments":{{"record":{{"subject":"{}"}}}}}}}}"#,
        "y".repeat(4 * 1024 * 1024 + 10)
    );
    raw.send(&big);
    let error = raw.json();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than 4194304 bytes"),
        "{error}"
    );
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    assert_eq!(raw.json()["id"], 3);
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    let line = raw.next();
    eprintln!("tools/list response: {} bytes", line.len());
    assert!(
        line.len() < TOOLS_LIST_MAX,
        "tools/list is {} bytes",
        line.len()
    );
    let tools: Value = serde_json::from_str(&line).expect("json");
    assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 8);
}

/// rmcp's client on the server as a child process.
async fn client(world: &World) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    client_with(world, ()).await
}

/// rmcp's client, handling what the server sends with `handler`, on the server as a child
/// process.
async fn client_with<H: rmcp::ClientHandler>(
    world: &World,
    handler: H,
) -> rmcp::service::RunningService<rmcp::RoleClient, H> {
    let transport = TokioChildProcess::new(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_advisor-consult")).configure(|cmd| {
            cmd.env_clear()
                .envs(server_env(world))
                .args(server_args(world))
                .current_dir(world.root());
        }),
    )
    .expect("start the server");
    handler.serve(transport).await.expect("initialize")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string())
        .with_arguments(arguments.as_object().cloned().unwrap_or_default())
}

#[test]
fn bad_input_is_named_with_what_is_accepted() {
    let (world, _dir) = world();
    runtime().block_on(async {
        let client = client(&world).await;
        // An unknown tool: a JSON-RPC error naming the tools.
        let err = client
            .call_tool(call("consultt", json!({})))
            .await
            .expect_err("an unknown tool is an error");
        let text = err.to_string();
        assert!(text.contains("no tool `consultt`") && text.contains("advisors, plan, record"), "{text}");
        // A missing argument, a wrong one, an unknown one: tool errors naming the field.
        let cases = [
            ("plan", json!({}), "`plan` needs `materiality`: one of trivial, low, material, high, critical"),
            ("plan", json!({"materiality": "huge"}), "`huge` is not a materiality; accepted: trivial, low, material, high, critical"),
            ("plan", json!({"materiality": "high", "confidence": 3}), "`confidence` of `plan` must be a string"),
            ("explain", json!({"id": "01NOPE"}), "no record `01NOPE` in this task"),
            ("job", json!({"id": "01NOPE"}), "no job `01NOPE`"),
            ("job", json!({}), "`job` needs `id`"),
            ("consult", json!({}), "`consult` needs `assessment`"),
            ("consult", json!({"assessment": "a", "timeout_s": 0}), "`timeout_s`"),
            ("status", json!({"tsk": "x"}), "`status` takes no argument `tsk` (did you mean `task`?); accepted: root, task"),
            ("status", json!({"task": "../x"}), "task"),
            ("record", json!({"record": {"kind": "assessment", "subject": "s", "materiality": "high", "hypothesis": "h"}}), "refused (material_without_evidence)"),
        ];
        for (tool, arguments, expected) in cases {
            let result = client
                .call_tool(call(tool, arguments.clone()))
                .await
                .unwrap_or_else(|e| panic!("{tool} {arguments}: {e}"));
            assert_eq!(result.is_error, Some(true), "{tool} {arguments}");
            let text = format!("{:?}", result.content);
            assert!(text.contains(expected), "{tool} {arguments}: {text}");
        }
        let refused = client
            .call_tool(call("record", json!({"record": {"kind": "plan", "assessment": "x", "budget": 1}})))
            .await
            .expect("a tool error");
        // An error result carries no structured content (it would fail the tool's output
        // schema in SDKs that check it); its second text is the JSON.
        assert_eq!(refused.structured_content, None);
        let structured: Value = serde_json::from_str(
            &refused.content[1].as_text().expect("a text").text,
        )
        .expect("json");
        assert_eq!(structured["refused"], true);
        assert!(structured["reason"].is_string(), "{structured}");
        // A host's own argument is ignored; a typo is refused.
        let status = client
            .call_tool(call("status", json!({"wait_for_previous": true})))
            .await
            .expect("status");
        assert_ne!(status.is_error, Some(true), "{:?}", status.content);
        // A record over the limit is refused naming the limit, before the daemon sees it.
        let huge = "x".repeat(2 * 1024 * 1024);
        let refused = client
            .call_tool(call("record", json!({"record": {"kind": "assessment", "subject": huge,
                "materiality": "low", "hypothesis": "h"}})))
            .await
            .expect("a tool error");
        assert_eq!(refused.is_error, Some(true));
        let text = format!("{:?}", refused.content);
        assert!(text.contains("over the limit of 1048576 bytes"), "{text}");
        // An unknown record or job read as a resource is the caller's mistake (-32002).
        for uri in ["advisord://record/01NOPE", "advisord://job/01NOPE"] {
            let err = client
                .read_resource(ReadResourceRequestParams::new(uri))
                .await
                .expect_err("unknown");
            match err {
                rmcp::ServiceError::McpError(e) => assert_eq!(e.code.0, -32002, "{uri}: {e:?}"),
                other => panic!("{uri}: {other}"),
            }
        }
        // An unknown resource: an error naming what is accepted.
        let err = client
            .read_resource(ReadResourceRequestParams::new("advisord://jobs"))
            .await
            .expect_err("unknown");
        assert!(err.to_string().contains("accepted: advisord://advisors"), "{err}");
        client.cancel().await.expect("close");
    });
}

/// A critical assessment recorded in `world`'s task: its id.
fn critical_assessment(world: &World) -> String {
    world.record(json!({
        "kind": "assessment",
        "subject": "Use SQLite for the job queue",
        "materiality": "critical",
        "hypothesis": "WAL mode is enough",
        "evidence": [{"kind": "file", "ref": "src/queue.rs"}]
    }))["id"]
        .as_str()
        .expect("an id")
        .to_string()
}

#[test]
fn a_host_that_goes_away_mid_call_leaves_the_job_running_and_recorded() {
    let (world, dir) = world();
    std::fs::write(dir.join("mode"), "split").expect("mode");
    let assessment = critical_assessment(&world);
    runtime().block_on(async {
        let client = client(&world).await;
        let peer = client.peer().clone();
        let call = tokio::spawn(async move {
            peer.call_tool(call("consult", json!({"assessment": assessment})))
                .await
        });
        // Wait until both advisors run, then go away (the server's stdin closes).
        let started = Instant::now();
        while ADVISORS
            .iter()
            .any(|id| !dir.join(format!("pids-{id}")).exists())
        {
            assert!(started.elapsed() < RUN_BOUND, "the advisors never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        client.cancel().await.expect("close");
        let _ = call.await;
    });
    // The job goes on in the daemon and ends with both outcomes recorded.
    let jobs = world
        .run(&["jobs", "--format", "json"])
        .expect_exit(0)
        .json();
    let job = jobs["jobs"][0]["id"].as_str().expect("a job").to_string();
    let waited = world
        .run(&["wait", &job, "--timeout", "30", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(waited["state"], "done", "{waited}");
    for c in waited["consultations"].as_array().expect("consultations") {
        assert_eq!(c["status"], "completed", "{c}");
        assert!(
            c["conclusion"].is_string(),
            "the outcome is written out: {c}"
        );
    }
    assert!(waited["disagreement_detail"]["discriminating_question"].is_string());
    if let Some(pid) = world.daemon_pid() {
        stop(pid);
    }
}

/// A host that keeps the messages of the progress notifications it is sent.
#[derive(Clone, Default)]
struct Listening(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl rmcp::ClientHandler for Listening {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0
            .lock()
            .unwrap()
            .push(params.message.unwrap_or_default());
    }
}

#[test]
fn a_job_that_ended_as_the_wait_ran_out_is_sent_its_end() {
    // `job` without `wait` is the wait running out at once: the job ended before it, so
    // every event its host was not sent comes as progress, `job done` last, exactly as
    // when a `job` with `wait` sees its cap pass as the job ends.
    let (world, _dir) = world();
    let assessment = critical_assessment(&world);
    // Consulted from the command line: this host was sent none of the job's events.
    let done = world
        .run(&["--assessment", &assessment, "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(done["state"], "done", "{done}");
    runtime().block_on(async {
        let heard = Listening::default();
        let client = client_with(&world, heard.clone()).await;
        let mut asked = call("job", json!({"id": done["id"]}));
        use rmcp::model::RequestParamsMeta;
        asked.set_progress_token(rmcp::model::ProgressToken(
            rmcp::model::NumberOrString::String("late".into()),
        ));
        let job = client
            .call_tool(asked)
            .await
            .expect("job")
            .structured_content
            .expect("the job");
        assert_eq!(job["state"], "done", "{job}");
        // Notifications may trail the result on the wire: wait for the end, bounded.
        let started = Instant::now();
        while !heard.0.lock().unwrap().iter().any(|m| m == "job done") {
            assert!(
                started.elapsed() < RUN_BOUND,
                "the end was never sent: {:?}",
                heard.0.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let heard = heard.0.lock().unwrap().clone();
        assert!(
            heard.iter().any(|m| m.starts_with("plan ")),
            "the events before the end are sent too: {heard:?}"
        );
        assert_eq!(
            heard.last().map(String::as_str),
            Some("job done"),
            "{heard:?}"
        );
        client.cancel().await.expect("close");
    });
    if let Some(pid) = world.daemon_pid() {
        stop(pid);
    }
}

#[test]
fn structured_content_is_the_cli_json_of_the_same_verb() {
    let (world, _dir) = world();
    // `--assessment ID --format json`: the job with every outcome written out.
    let assessment = world.assessment();
    let consulted = world
        .run(&["--assessment", &assessment, "--format", "json"])
        .expect_exit(0)
        .json();
    let job = consulted["id"].as_str().expect("a job id").to_string();
    assert_eq!(consulted["state"], "done");
    for c in consulted["consultations"]
        .as_array()
        .expect("consultations")
    {
        for field in [
            "advisor",
            "record",
            "status",
            "failure",
            "conclusion",
            "stance",
        ] {
            assert!(c.get(field).is_some(), "`{field}` in {c}");
        }
        assert!(
            c["assumptions"].is_array() && c["falsifiers"].is_array(),
            "{c}"
        );
    }
    assert_eq!(
        consulted["disagreement_detail"]["id"], consulted["disagreement"],
        "{consulted}"
    );
    // `wait JOB --format json` gives the same.
    let waited = world
        .run(&["wait", &job, "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(waited, consulted);
    // `ask --format json` has the same shape.
    let asked = world
        .run(&[
            "ask",
            "--subject",
            "Use Postgres for the job queue",
            "--materiality",
            "critical",
            "--hypothesis",
            "one writer is enough",
            "--evidence",
            "file:src/queue.rs=>one writer",
            "--format",
            "json",
        ])
        .expect_exit(0)
        .json();
    let keys = |v: &Value| {
        v.as_object()
            .expect("an object")
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&asked), keys(&consulted));
    // The MCP tools answer the same.
    runtime().block_on(async {
        let client = client(&world).await;
        let result = client
            .call_tool(call("job", json!({"id": job})))
            .await
            .expect("job");
        assert_eq!(result.structured_content, Some(consulted.clone()));
        let status = client
            .call_tool(call("status", json!({})))
            .await
            .expect("status");
        let cli_status = world
            .run(&["status", "--format", "json"])
            .expect_exit(0)
            .json();
        assert_eq!(status.structured_content, Some(cli_status));
        client.cancel().await.expect("close");
    });
}
