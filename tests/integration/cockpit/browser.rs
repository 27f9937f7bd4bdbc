//! The cockpit in a real browser: the system's Chromium driven by Python Playwright
//! (`browser.py`) against an in-process daemon whose scripted advisors disagree, one of
//! them failing on auth. Chromium or Playwright missing fails the test: it never skips.
//! Screenshots land in `target/cockpit-screenshots/`.

use super::scripted;
use crate::support::client as client_support;
use crate::support::daemon::{answer, catalogue, Advisor, Place, TASK};
use crate::support::tcp::Listening;
use advisord_adapters::contract::FailureKind;
use advisord_fakes::scripted::Script;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The system's browser: Playwright is told to use it, never to download its own.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// The Python of the CI tools' virtual environment, with Playwright importable.
pub fn python() -> PathBuf {
    let venv = std::env::var_os("ADVISORD_CI_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/advisord-ci/venv")
        });
    let python = venv.join("bin/python");
    let has_playwright = Command::new(&python)
        .args(["-c", "import playwright.sync_api"])
        .current_dir("/")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        has_playwright,
        "Playwright is not installed in `{}`: run `scripts/ci/install-python-tools.sh` \
         (`.ci/run` does); this test never skips",
        venv.display()
    );
    assert!(
        Path::new(CHROMIUM).exists(),
        "`{CHROMIUM}` is missing: install Debian's `chromium` (`.ci/run` does); this test \
         never skips"
    );
    python
}

/// `text` percent-encoded for a query value.
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// The URL `advisor-consult cockpit` would print for the place's root, task, catalogue
/// and state directory.
pub fn token_url(tcp: &Listening) -> String {
    let place = &tcp.daemon.place;
    format!(
        "http://{}/cockpit?token={}&root={}&task=t&catalogue={}&state_dir={}",
        tcp.addr,
        tcp.token(),
        encode(&place.root().display().to_string()),
        encode(&place.catalogue().display().to_string()),
        encode(&place.state().display().to_string()),
    )
}

/// Run `browser.py` with `args`, bounded; its standard output.
pub fn run_browser(args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/cockpit/browser.py");
    let mut child = Command::new(python())
        .arg(script)
        .args(args)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start browser.py");
    let stdout = client_support::read_all(child.stdout.take().expect("stdout"));
    let stderr = client_support::read_all(child.stderr.take().expect("stderr"));
    let code = client_support::wait_bounded(&mut child, Duration::from_secs(180), "browser.py");
    let stdout = stdout.join().expect("stdout");
    let stderr = stderr.join().expect("stderr");
    assert_eq!(code, 0, "the browser test failed:\n{stderr}\n{stdout}");
    stdout
}

/// Where the screenshots go: the target directory's `cockpit-screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("cockpit-screenshots");
    std::fs::create_dir_all(&dir).expect("the screenshot directory");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cockpit_in_chromium_shows_live_rows_a_disagreement_a_cancel_and_a_cooldown() {
    // The page's requests carry no context, so the in-process daemon builds one from this
    // process's environment, where CI sets `CI=true`: the product then runs in mode `ci`
    // and asks nobody. This test is about the page, not the mode: take `CI` out before the
    // daemon starts (nextest runs each test in a process of its own, and nothing else
    // runs yet).
    std::env::remove_var("CI");
    let thinking = Duration::from_millis(1500);
    let (registry, _fakes) = scripted(vec![
        (
            "a",
            vec![
                Script::answer(&answer("one writer is enough", "supports")).after(thinking),
                Script::hang(),
            ],
        ),
        (
            "b",
            vec![
                Script::answer(&answer("two writers race", "opposes")).after(thinking),
                Script::hang(),
            ],
        ),
        (
            "c",
            vec![Script::fail(
                FailureKind::AuthFailed,
                "401: the key was refused",
            )],
        ),
    ]);
    let place = Place::new(&catalogue(&[
        Advisor::scripted("a"),
        Advisor::scripted("b"),
        Advisor::scripted("c"),
    ]));
    let tcp = Listening::start(place, registry).await;
    tcp.daemon.assessment().await;
    tcp.daemon.assessment().await;
    let url = token_url(&tcp);
    let shots = screenshot_dir();
    let shots_arg = shots.display().to_string();
    let out = tokio::task::spawn_blocking(move || run_browser(&["check", &url, &shots_arg]))
        .await
        .expect("the browser run");
    let summary: serde_json::Value =
        serde_json::from_str(out.lines().last().unwrap_or_default()).expect("a summary");
    let checks: Vec<&str> = summary["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter_map(|c| c.as_str())
        .collect();
    for wanted in [
        "token traded for a strict cookie",
        "disagreement shown",
        "cooldown shown",
        "cancel works",
        "keyboard reaches Consult",
        "keyboard keeps its place when the list is drawn again",
        "contrast and labels (dark)",
        "phone width",
    ] {
        assert!(
            checks.contains(&wanted),
            "`{wanted}` was not checked: {summary}"
        );
    }
    for shot in [
        "overview",
        "job-running",
        "disagreement",
        "advisors",
        "cancelled",
        "dark",
        "phone",
    ] {
        let path = shots.join(format!("{shot}.png"));
        assert!(
            std::fs::metadata(&path).is_ok_and(|m| m.len() > 1000),
            "no screenshot `{}`",
            path.display()
        );
    }
}

/// The URL of the page for the place's root, naming `task` or, with `None`, no task (the
/// daemon's default then), with the catalogue and state directory as `token_url`.
fn url_for(tcp: &Listening, task: Option<&str>) -> String {
    let place = &tcp.daemon.place;
    let task = task
        .map(|t| format!("&task={}", encode(t)))
        .unwrap_or_default();
    format!(
        "http://{}/cockpit?token={}&root={}{task}&catalogue={}&state_dir={}",
        tcp.addr,
        tcp.token(),
        encode(&place.root().display().to_string()),
        encode(&place.catalogue().display().to_string()),
        encode(&place.state().display().to_string()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tasks_panel_lists_the_tasks_with_records_on_load_however_the_task_is_named() {
    std::env::remove_var("CI");
    let (registry, _fakes) = scripted(vec![("a", vec![])]);
    let place = Place::new(&catalogue(&[Advisor::scripted("a")]));
    let tcp = Listening::start(place, registry).await;
    // Records exist before the page is opened: two in the helper's task, one in the task
    // the daemon picks when the request names none.
    tcp.daemon.assessment().await;
    tcp.daemon.assessment().await;
    let mut context = tcp.daemon.place.context();
    context
        .as_object_mut()
        .expect("a context object")
        .remove("task");
    let body = serde_json::json!({"context": context, "record": {
        "kind": "assessment", "subject": "the default task", "materiality": "low",
        "hypothesis": "the daemon names it"}});
    let stored = tcp
        .daemon
        .call("POST", "/api/v1/reasoning/records", Some(body))
        .await
        .expect(201);
    let default = stored["task"].as_str().expect("a task").to_string();
    assert_ne!(default, TASK, "the default task differs from the helper's");
    let cases = [
        // `?task=` names the task with records: it is listed and marked.
        (url_for(&tcp, Some(TASK)), TASK, "2", default.as_str()),
        // No task named: the daemon's default is shown, listed and marked, beside the other.
        (url_for(&tcp, None), default.as_str(), "1", TASK),
        // A task without records named: the others are still listed.
        (url_for(&tcp, Some("empty")), "", "0", TASK),
    ];
    for (url, marked, records, also) in cases {
        let args = [
            "tasks".to_string(),
            url.clone(),
            serde_json::json!({"marked": marked, "records": records, "listed": [also]}).to_string(),
        ];
        let out = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_browser(&args)
        })
        .await
        .expect("the browser run");
        let summary: serde_json::Value =
            serde_json::from_str(out.lines().last().unwrap_or_default()).expect("a summary");
        assert_eq!(summary["marked"], marked, "{url}: {summary}");
        let listed: Vec<&str> = summary["listed"]
            .as_array()
            .expect("listed")
            .iter()
            .filter_map(|t| t.as_str())
            .collect();
        assert!(
            listed.contains(&TASK) && listed.contains(&default.as_str()),
            "{url}: {summary}"
        );
    }
}
