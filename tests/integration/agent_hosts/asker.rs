//! Who asks, and what their environment withheld, without a real host: the daemon and
//! `advisor-consult mcp` as a host starts them, and askers that differ only in their
//! environment or in the name the host gives itself.
//!
//! - An asker whose environment lacks a process advisor's credential variables (Gemini CLI
//!   strips every `*KEY*` variable before it starts a server) gets that advisor's
//!   preflight "not logged in" recorded as its own `not_configured`: the circuit does not
//!   count it, so another asker's plan still selects the advisor and it answers.
//! - A host naming itself in `initialize` (`clientInfo.name`) has the advisors of its own
//!   vendor ranked after every other, and the plan says so.

use crate::support::client::{client_exe, World};
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;

/// The credential variable the keyed advisor's catalogue entry passes through.
const KEY: &str = "ASKER_TEST_KEY";

/// A script advisor: `login` (its preflight) says "Not logged in" unless `KEY` is set;
/// anything else answers through the demo advisor.
fn keyed_advisor(world: &World) -> String {
    let script = world.tmp().join("keyed.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = login ]; then\n  [ -n \"${KEY}\" ] && exit 0\n  \
             echo 'Error: Not logged in' >&2\n  exit 1\nfi\n\
             exec {exe} __demo-advisor --stance supports --delay-ms 0\n",
            exe = client_exe(),
        ),
    )
    .expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script.display().to_string()
}

fn catalogue(world: &World, yaml: &str) {
    std::fs::write(world.root().join(".advisord/advisors.yaml"), yaml).expect("catalogue");
    world.trust_catalogue();
}

#[test]
fn a_credential_one_asker_withheld_is_its_not_configured_and_opens_no_circuit() {
    let mut world = World::new(&[]);
    let script = keyed_advisor(&world);
    catalogue(
        &world,
        &format!(
            "mode: standard\nadvisors:\n  - id: keyed\n    title: Keyed\n    transport: process\n    \
             adapter: process\n    executable: {script:?}\n    capabilities: [independent_reasoning]\n    \
             pass_env: [{KEY}]\n    preflight: [{script:?}, login]\n"
        ),
    );
    world.start_daemon();
    let assessment = world.assessment();
    // The asker whose host withheld the key: the preflight says "Not logged in".
    let withheld = world
        .run(&["--assessment", &assessment, "--format", "json"])
        .json();
    let outcome = &withheld["consultations"][0];
    assert_eq!(outcome["advisor"], "keyed", "{withheld:#}");
    assert_eq!(outcome["status"], "failed", "{withheld:#}");
    assert_eq!(outcome["failure"], "not_configured", "{withheld:#}");
    let diagnostic = outcome["diagnostic"].as_str().unwrap_or_default();
    assert!(
        diagnostic.contains("Not logged in")
            && diagnostic.contains(&format!("set none of `{KEY}`"))
            && diagnostic.contains("not counted against advisor `keyed`"),
        "{diagnostic}"
    );
    // Another asker, with the key: the advisor is available, selected and answers.
    let with_key = |args: &[&str]| {
        let mut command = world.command(args);
        command.env(KEY, "the-key");
        let output = command.output().expect("run advisor-consult");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        serde_json::from_str::<Value>(&text).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {text}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
    };
    let plan = with_key(&["plan", "--materiality", "high", "--format", "json"]);
    let selected: Vec<&str> = plan["selected"]
        .as_array()
        .expect("selected")
        .iter()
        .filter_map(|s| s["advisor"].as_str())
        .collect();
    assert_eq!(selected, ["keyed"], "no circuit opened: {plan:#}");
    let second = world.assessment();
    let answered = with_key(&["--assessment", &second, "--format", "json"]);
    assert_eq!(
        answered["consultations"][0]["status"], "completed",
        "{answered:#}"
    );
    // The first asker is not shut out either: it is asked again, and told again why.
    let plan = world
        .run(&["plan", "--materiality", "high", "--format", "json"])
        .json();
    assert_eq!(plan["selected"][0]["advisor"], "keyed", "{plan:#}");
}

/// Two advisors of different vendors, the first declared being Anthropic's.
fn vendors_world() -> World {
    let world = World::new(&[]);
    let mut yaml = String::from("mode: standard\nadvisors:\n");
    for (id, vendor, stance) in [
        ("first-a", "anthropic", "supports"),
        ("second-g", "google", "opposes"),
    ] {
        yaml.push_str(&format!(
            "  - id: {id}\n    title: {id}\n    transport: process\n    adapter: process\n    \
             references: {{ provider: {vendor}, vendor: {vendor}, model: m-{id} }}\n    \
             executable: {exe:?}\n    capabilities: [independent_reasoning]\n    \
             args: [__demo-advisor, --stance, {stance}, --delay-ms, \"0\"]\n",
            exe = client_exe(),
        ));
    }
    catalogue(&world, &yaml);
    world
}

/// `advisor-consult mcp` started as a host starts it, initialized by a client calling
/// itself `host`.
async fn host_named(
    world: &World,
    host: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, ClientConfig> {
    let home = world.root().parent().expect("a parent").join("home");
    let transport =
        TokioChildProcess::new(tokio::process::Command::new(client_exe()).configure(|cmd| {
            cmd.env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("HOME", &home)
                .env("TMPDIR", world.tmp())
                .env("ADVISORD_DATA_DIR", world.data())
                .args(["--socket", world.socket().to_str().expect("utf-8")])
                .args(["mcp", "--wait-cap", "20"])
                .current_dir(world.root());
        }))
        .expect("start the server");
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(host, "1.0.0"),
    )
    .serve(transport)
    .await
    .expect("initialize")
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string())
        .with_arguments(arguments.as_object().cloned().unwrap_or_default())
}

#[test]
fn a_host_naming_itself_has_its_own_vendors_advisors_ranked_last() {
    let world = vendors_world();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        // Claude Code names itself `claude-code`: Anthropic's advisor goes last.
        let claude = host_named(&world, "claude-code").await;
        let plan = claude
            .call_tool(call("plan", json!({"materiality": "material"})))
            .await
            .expect("plan")
            .structured_content
            .expect("structured");
        assert_eq!(plan["selected"][0]["advisor"], "second-g", "{plan:#}");
        let left_out = &plan["left_out"][0];
        assert_eq!(left_out["advisor"], "first-a", "{plan:#}");
        let reason = left_out["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("of the asker's own vendor (`anthropic`, asked by `claude-code`)"),
            "{reason}"
        );
        // The same through the daemon's job: the consultation asks the other vendor.
        let job = claude
            .call_tool(call(
                "consult",
                json!({"record": {"subject": "Use SQLite for the job queue",
                                  "materiality": "material", "hypothesis": "WAL is enough",
                                  "evidence": [{"kind": "file", "ref": "src/queue.rs"}]}}),
            ))
            .await
            .expect("consult")
            .structured_content
            .expect("structured");
        assert_eq!(job["state"], "done", "{job:#}");
        assert_eq!(job["consultations"][0]["advisor"], "second-g", "{job:#}");
        let left_out = job["plan_detail"]["left_out"].to_string();
        assert!(left_out.contains("asked by `claude-code`"), "{job:#}");
        claude.cancel().await.expect("close");
        // A client of no known vendor: declaration order decides, no vendor is named.
        let inspector = host_named(&world, "mcp-inspector").await;
        let plan = inspector
            .call_tool(call("plan", json!({"materiality": "material"})))
            .await
            .expect("plan")
            .structured_content
            .expect("structured");
        assert_eq!(plan["selected"][0]["advisor"], "first-a", "{plan:#}");
        assert!(!plan.to_string().contains("own vendor"), "{plan:#}");
        inspector.cancel().await.expect("close");
    });
}
