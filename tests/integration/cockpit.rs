//! The TCP listener and the cockpit: the token and the `Host` check, the same refusals as
//! the socket, idle connections, `advisor-consult cockpit`, the server-sent events, the
//! OpenAPI document, and the page itself in a real browser (`cockpit/browser.py`).

use crate::support::daemon::{catalogue, Advisor, Place, BOUND};
use crate::support::tcp::{call, Listening};
use advisord_adapters::registry::Registry;
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod browser;
mod events;
mod openapi;

/// A registry with one scripted adapter per `(id, scripts)`, under `scripted-<id>`.
pub fn scripted(advisors: Vec<(&str, Vec<Script>)>) -> (Registry, Vec<Arc<ScriptedAdapter>>) {
    let mut registry = Registry::builtin();
    let mut fakes = Vec::new();
    for (id, scripts) in advisors {
        let fake = Arc::new(ScriptedAdapter::new(scripts));
        registry.insert(&format!("scripted-{id}"), fake.clone());
        fakes.push(fake);
    }
    (registry, fakes)
}

/// A daemon listening on TCP with one scripted advisor that is never asked.
async fn quiet() -> Listening {
    let (registry, _) = scripted(vec![("a", vec![])]);
    Listening::start(Place::new(&catalogue(&[Advisor::scripted("a")])), registry).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tcp_request_needs_the_token_and_learns_nothing_without_it() {
    let tcp = quiet().await;
    let token = tcp.token();
    assert_eq!(token.len(), 64);
    let root = tcp.daemon.place.root().display().to_string();
    let status = format!("/api/v1/reasoning?root={root}&task=t");

    for (what, headers) in [
        ("no token", vec![]),
        (
            "a wrong bearer",
            vec![("authorization", format!("Bearer {}", "0".repeat(64)))],
        ),
        (
            "a short bearer",
            vec![("authorization", "Bearer x".to_string())],
        ),
        (
            "a wrong cookie",
            vec![("cookie", format!("advisord_token={}", "1".repeat(64)))],
        ),
        ("the token as a query", vec![]),
    ] {
        let path = if what == "the token as a query" {
            format!("{status}&token={token}")
        } else {
            status.clone()
        };
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let reply = tcp.call("GET", &path, &headers, None).await;
        let body = reply.expect(401);
        assert_eq!(body["error"], "unauthorized", "{what}");
        assert_eq!(reply.headers["www-authenticate"], "Bearer", "{what}");
        assert!(
            !reply.text().contains(&root),
            "{what} reveals nothing: {}",
            reply.text()
        );
    }

    let bearer = format!("Bearer {token}");
    let reply = tcp
        .call("GET", &status, &[("authorization", &bearer)], None)
        .await;
    assert_eq!(reply.expect(200)["records"], 0);
    let cookie = format!("theme=dark; advisord_token={token}");
    let reply = tcp
        .call("GET", "/api/v1/health", &[("cookie", &cookie)], None)
        .await;
    let health = reply.expect(200);
    assert_eq!(health["listening"]["address"], tcp.addr.to_string());
    assert!(reply.headers.get("access-control-allow-origin").is_none());
    assert_eq!(reply.headers["x-content-type-options"], "nosniff");

    // The socket keeps its peer check and needs no token.
    tcp.daemon
        .call("GET", "/api/v1/health", None)
        .await
        .expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_or_origin_is_refused_with_403_even_with_the_token() {
    let tcp = quiet().await;
    let bearer = format!("Bearer {}", tcp.token());
    let own = tcp.host();
    let port = tcp.addr.port();
    let localhost = format!("localhost:{port}");
    let rebinding = format!("attacker.example:{port}");
    let other_port = format!("127.0.0.1:{}", port.wrapping_add(1));
    for (host, origin, status) in [
        (own.as_str(), None, 200),
        (localhost.as_str(), None, 200),
        (own.as_str(), Some(format!("http://{own}")), 200),
        (rebinding.as_str(), None, 403),
        (other_port.as_str(), None, 403),
        (
            own.as_str(),
            Some("http://attacker.example".to_string()),
            403,
        ),
        (own.as_str(), Some(format!("https://{own}")), 403),
        (own.as_str(), Some("null".to_string()), 403),
    ] {
        let mut headers = vec![("host", host), ("authorization", bearer.as_str())];
        if let Some(origin) = &origin {
            headers.push(("origin", origin.as_str()));
        }
        let reply = call(tcp.addr, "GET", "/api/v1/health", &headers, None).await;
        assert_eq!(
            reply.status,
            status,
            "Host {host}, Origin {origin:?}: {}",
            reply.text()
        );
        assert!(reply.headers.get("access-control-allow-origin").is_none());
        if status == 403 {
            assert_eq!(reply.expect(403)["error"], "forbidden");
        }
    }
    // No Host at all.
    let reply = call(
        tcp.addr,
        "GET",
        "/api/v1/health",
        &[("authorization", &bearer)],
        None,
    )
    .await;
    assert_eq!(reply.status, 403);
    // A preflight gets no CORS answer either.
    let reply = tcp
        .call(
            "OPTIONS",
            "/api/v1/consultations",
            &[
                ("origin", "http://attacker.example"),
                ("access-control-request-method", "POST"),
            ],
            None,
        )
        .await;
    assert_eq!(reply.status, 403);
    assert!(reply.headers.get("access-control-allow-origin").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_url_is_traded_for_a_strict_cookie_and_a_clean_url() {
    let tcp = quiet().await;
    let token = tcp.token();
    let reply = tcp
        .call(
            "GET",
            &format!("/cockpit?root=%2Fr&token={token}&task=t"),
            &[],
            None,
        )
        .await;
    assert_eq!(reply.status, 303, "{}", reply.text());
    assert_eq!(reply.headers["location"], "/cockpit?root=%2Fr&task=t");
    let cookie = reply.headers["set-cookie"].to_str().unwrap();
    assert!(
        cookie.starts_with(&format!("advisord_token={token};")),
        "{cookie}"
    );
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let wrong = tcp
        .call(
            "GET",
            &format!("/cockpit?token={}", "2".repeat(64)),
            &[],
            None,
        )
        .await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.headers.get("set-cookie").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_refuses_big_and_malformed_bodies_as_the_socket_does() {
    let tcp = quiet().await;
    let bearer = format!("Bearer {}", tcp.token());
    let auth = [("authorization", bearer.as_str())];
    let big = vec![b'x'; 1024 * 1024 + 1];
    let reply = tcp
        .call("POST", "/api/v1/reasoning/records", &auth, Some(big))
        .await;
    assert_eq!(reply.expect(413)["error"], "payload_too_large");
    let reply = tcp
        .call(
            "POST",
            "/api/v1/reasoning/records",
            &auth,
            Some(b"{not json".to_vec()),
        )
        .await;
    let body = reply.expect(400);
    assert_eq!(body["error"], "invalid_json");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("not a valid JSON"),
        "{body}"
    );
    let socket = tcp
        .daemon
        .call(
            "POST",
            "/api/v1/reasoning/records",
            Some(json!("{not json")),
        )
        .await;
    assert_eq!(socket.status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_idle_tcp_connections_do_not_keep_a_fresh_client_waiting() {
    let tcp = quiet().await;
    let mut idle = Vec::new();
    for _ in 0..100 {
        idle.push(
            tokio::net::TcpStream::connect(tcp.addr)
                .await
                .expect("an idle connection"),
        );
    }
    let started = Instant::now();
    let reply = tcp.get("/api/v1/health").await;
    reply.expect(200);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a fresh client waited {:?} behind idle ones",
        started.elapsed()
    );
    drop(idle);
}

#[test]
fn the_binary_listens_on_loopback_only_keeps_the_token_out_of_its_log_and_cockpit_prints_the_url() {
    use std::process::{Command, Stdio};
    let place = Place::new(&catalogue(&[]));
    // Not loopback, no `--listen-public`: a usage error naming the flag.
    let refused = Command::new(env!("CARGO_BIN_EXE_advisord"))
        .args(["--listen", "0.0.0.0:0", "--socket"])
        .arg(place.socket())
        .arg("--data-dir")
        .arg(place.data())
        .output()
        .expect("run advisord");
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--listen-public"), "{stderr}");

    let log = place.path().join("daemon.log");
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_advisord"))
        .args(["--listen", "127.0.0.1:0", "--socket"])
        .arg(place.socket())
        .arg("--data-dir")
        .arg(place.data())
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("a log file"))
        .spawn()
        .expect("start advisord");
    let cockpit = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_advisor-consult"))
            .arg("--socket")
            .arg(place.socket())
            .arg("--root")
            .arg(place.root())
            .args(["--task", "t", "--no-autostart"])
            .args(extra)
            .env_clear()
            .env("PATH", place.bin())
            .env("HOME", place.path())
            .output()
            .expect("run advisor-consult")
    };
    let started = Instant::now();
    let printed = loop {
        let out = cockpit(&["cockpit", "--format", "json"]);
        if out.status.success() {
            break out;
        }
        assert!(
            started.elapsed() < BOUND,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let url: serde_json::Value = serde_json::from_slice(&printed.stdout).expect("json");
    let url = url["url"].as_str().expect("a url").to_string();
    let token = advisord::daemon::listen::Token::read(&place.data().join("cockpit.token"))
        .expect("the token file")
        .expose()
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(
        url.contains(&format!("/cockpit?token={token}&root=")),
        "{url}"
    );
    assert!(url.ends_with("&task=t"), "{url}");
    let plain = cockpit(&["cockpit"]);
    assert_eq!(String::from_utf8_lossy(&plain.stdout).trim(), url);
    // `--open` without `xdg-open` on PATH says so and still prints the URL.
    let opened = cockpit(&["cockpit", "--open"]);
    assert!(opened.status.success());
    assert!(String::from_utf8_lossy(&opened.stderr).contains("xdg-open"));

    // Named with flags, the catalogue and state directory travel in the URL, and the page
    // may use them: `cockpit` named them to the daemon through the socket.
    let (cat, state) = (place.catalogue(), place.state());
    let named = cockpit(&[
        "--catalogue",
        cat.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "cockpit",
    ]);
    assert!(named.status.success(), "{named:?}");
    let named = String::from_utf8_lossy(&named.stdout).trim().to_string();
    assert!(named.contains("&catalogue="), "{named}");
    let named_query = named[named.find("&root=").unwrap() + 1..].to_string();

    // Use the token over TCP, then look for it in the log.
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let addr: std::net::SocketAddr = url["http://".len()..url.find("/cockpit").unwrap()]
        .parse()
        .expect("an address");
    rt.block_on(async {
        let host = addr.to_string();
        let path = &url[url.find("/cockpit").unwrap()..];
        let traded = call(addr, "GET", path, &[("host", &host)], None).await;
        assert_eq!(traded.status, 303);
        let bearer = format!("Bearer {token}");
        let status = call(
            addr,
            "GET",
            &format!("/api/v1/reasoning?{named_query}"),
            &[("host", &host), ("authorization", &bearer)],
            None,
        )
        .await;
        assert_eq!(status.status, 200, "{}", status.text());
        call(
            addr,
            "GET",
            "/api/v1/nothing",
            &[("host", &host), ("authorization", &bearer)],
            None,
        )
        .await;
        call(
            addr,
            "GET",
            &format!("/api/v1/health?token={token}"),
            &[("host", &host)],
            None,
        )
        .await;
    });
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = daemon.wait();
    let logged = std::fs::read_to_string(&log).expect("the log");
    assert!(logged.contains("listening on TCP"), "{logged}");
    assert!(
        !logged.contains(&token),
        "the token is in the log:\n{logged}"
    );

    // A daemon without `--listen`: `cockpit` says how to start one.
    let _plain_daemon = crate::support::daemon::Binary::start(&place, &[]);
    let out = cockpit(&["cockpit"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("advisord --listen"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_tree_page_server_side_and_tasks_are_listed() {
    let tcp = quiet().await;
    for _ in 0..3 {
        tcp.daemon.assessment().await;
    }
    tcp.daemon.assessment_in("other").await;
    let place = &tcp.daemon.place;
    let context = format!(
        "root={}&task=t&state_dir={}&catalogue={}",
        place.root().display(),
        place.state().display(),
        place.catalogue().display()
    );
    let status = tcp
        .get(&format!("/api/v1/reasoning?{context}&offset=1&limit=1"))
        .await
        .expect(200);
    assert_eq!(status["assessments"].as_array().unwrap().len(), 1);
    assert_eq!(status["assessments"][0]["sequence"], 2);
    assert_eq!(status["page"], json!({"offset": 1, "limit": 1, "total": 3}));
    assert_eq!(status["timeline_total"], 3);
    assert_eq!(
        status["records"], 3,
        "the count is the task's, not the page's"
    );
    let unpaged = tcp
        .get(&format!("/api/v1/reasoning?{context}"))
        .await
        .expect(200);
    assert!(
        unpaged.get("page").is_none(),
        "no paging asked, none applied"
    );
    assert_eq!(unpaged["assessments"].as_array().unwrap().len(), 3);
    let past = tcp
        .get(&format!("/api/v1/reasoning?{context}&offset=10&limit=5"))
        .await
        .expect(200);
    assert_eq!(past["assessments"], json!([]));
    let tree = tcp
        .get(&format!(
            "/api/v1/reasoning/tree?{context}&offset=2&limit=5"
        ))
        .await
        .expect(200);
    assert_eq!(tree["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(tree["page"]["total"], 3);
    let bad = tcp
        .get(&format!("/api/v1/reasoning?{context}&limit=many"))
        .await;
    assert_eq!(bad.expect(400)["error"], "invalid_request");
    let tasks = tcp
        .get(&format!("/api/v1/reasoning/tasks?{context}"))
        .await
        .expect(200);
    assert_eq!(tasks["tasks"], json!(["other", "t"]));
}

/// A repository catalogue whose one advisor, if it ever ran, would leave `marker` behind.
fn planted_catalogue(place: &Place, marker: &std::path::Path) -> std::path::PathBuf {
    let script = place.script(
        "planted-advisor",
        &format!("touch {}\necho '{{}}'", marker.display()),
    );
    let dir = place.root().join(".advisord");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("advisors.yaml");
    std::fs::write(
        &file,
        catalogue(&[crate::support::daemon::Advisor::process("planted", &script)]),
    )
    .unwrap();
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_holder_cannot_name_a_catalogue_or_state_directory_the_user_did_not() {
    let tcp = quiet().await;
    let place = &tcp.daemon.place;
    let marker = place.path().join("planted-ran");
    let planted = planted_catalogue(place, &marker);
    // The user's own process names the place's catalogue and state directory (socket).
    let assessment = tcp.daemon.assessment().await;
    let root = place.root().display().to_string();
    let bearer = format!("Bearer {}", tcp.token());
    let json = [
        ("authorization", bearer.as_str()),
        ("content-type", "application/json"),
    ];
    let body = |v: serde_json::Value| Some(v.to_string().into_bytes());
    let ours = format!(
        "root={root}&task=t&state_dir={}&catalogue={}",
        place.state().display(),
        place.catalogue().display()
    );

    // A catalogue the user never named, in the query...
    let reply = tcp
        .call(
            "POST",
            &format!(
                "/api/v1/consultations?root={root}&task=t&state_dir={}&catalogue={}",
                place.state().display(),
                planted.display()
            ),
            &json,
            body(json!({ "assessment": assessment })),
        )
        .await;
    let refused = reply.expect(403);
    assert_eq!(refused["error"], "forbidden");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains(&planted.display().to_string()),
        "{message}"
    );
    assert!(message.contains("advisor-consult --catalogue"), "{message}");
    // ... or in the body's context: over TCP the daemon builds the context itself.
    let mut context = place.context();
    context["catalogue_path"] = json!(planted);
    let reply = tcp
        .call(
            "POST",
            "/api/v1/consultations",
            &json,
            body(json!({ "context": context, "assessment": assessment })),
        )
        .await;
    assert_eq!(reply.expect(403)["error"], "forbidden");
    let reply = tcp
        .call(
            "POST",
            &format!("/api/v1/reasoning/plan?{ours}"),
            &json,
            body(json!({ "context": context, "materiality": "high" })),
        )
        .await;
    assert_eq!(reply.expect(403)["error"], "forbidden");
    // A state directory the user never named.
    let elsewhere = place.path().join("elsewhere");
    let reply = tcp
        .get(&format!(
            "/api/v1/reasoning?root={root}&task=t&state_dir={}",
            elsewhere.display()
        ))
        .await;
    assert!(
        reply.expect(403)["message"]
            .as_str()
            .unwrap()
            .contains("state directory"),
        "{}",
        reply.text()
    );
    assert!(!elsewhere.exists());

    // What the user's own processes named, and the root's own state directory, are served.
    tcp.get(&format!("/api/v1/reasoning?{ours}"))
        .await
        .expect(200);
    tcp.get(&format!(
        "/api/v1/reasoning/advisors?root={root}&state_dir={}",
        place.root().join(".ai/local/state/reasoning").display()
    ))
    .await
    .expect(200);

    // The place's own catalogue (the user named it through the socket) is served; the
    // planted advisor never ran.
    let reply = tcp
        .call(
            "POST",
            &format!("/api/v1/consultations?{ours}"),
            &json,
            body(json!({ "assessment": assessment, "timeout_s": 5 })),
        )
        .await;
    let job = reply.expect(202)["id"].as_str().unwrap().to_string();
    let events = tcp.daemon.events(&job).await;
    assert_eq!(events.last().unwrap()["event"], "done", "{events:?}");
    assert!(
        !marker.exists(),
        "the planted advisor ran: a token reached a command the user never chose"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_match_as_the_one_table_says_with_json_404s_and_405s() {
    let tcp = quiet().await;
    let bearer = format!("Bearer {}", tcp.token());
    let id = "01J0000000000000000000000A";
    let job = format!("/api/v1/consultations/{id}");
    let events = format!("{job}/events");
    // A route of the table (a trailing `/` too): answered by its verb, whatever it says.
    for (method, path) in [
        ("GET", "/api/v1/health"),
        ("GET", "/api/v1/health/"),
        ("GET", "/api/v1/reasoning"),
        ("GET", "/api/v1/reasoning/advisors"),
        ("POST", "/api/v1/reasoning/plan"),
        ("POST", "/api/v1/reasoning/records"),
        ("GET", "/api/v1/reasoning/explain"),
        ("GET", "/api/v1/reasoning/tree"),
        ("GET", "/api/v1/reasoning/check"),
        ("GET", "/api/v1/reasoning/verify"),
        ("POST", "/api/v1/consultations"),
        ("GET", "/api/v1/consultations"),
        ("GET", job.as_str()),
        ("DELETE", job.as_str()),
        ("GET", events.as_str()),
    ] {
        let reply = tcp
            .call(method, path, &[("authorization", &bearer)], None)
            .await;
        let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap_or_default();
        assert!(
            reply.status != 405 && body["error"] != "not_found",
            "{method} {path}: {} {}",
            reply.status,
            reply.text()
        );
    }
    // The path with another method: 405, `Allow` and the message naming the methods.
    for (method, path, allowed) in [
        ("POST", "/api/v1/health", "GET"),
        ("GET", "/api/v1/reasoning/records", "POST"),
        ("PUT", "/api/v1/consultations", "GET, HEAD, POST"),
        ("POST", "/api/v1/consultations/x", "GET, HEAD, DELETE"),
    ] {
        let reply = tcp
            .call(method, path, &[("authorization", &bearer)], None)
            .await;
        let body = reply.expect(405);
        assert_eq!(body["error"], "method_not_allowed", "{method} {path}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(allowed), "{method} {path}: {message}");
        let allow = reply.headers["allow"].to_str().unwrap();
        assert!(allow.contains(allowed), "{method} {path}: {allow}");
    }
    // No such path: 404 `not_found`, naming it.
    for path in [
        "/api/v1/nothing",
        "/api/v2/health",
        "/",
        "/api/v1/consultations/x/events/more",
        "/api/v1/consultations//events",
        "/api/v1//",
    ] {
        let reply = tcp
            .call("GET", path, &[("authorization", &bearer)], None)
            .await;
        assert_eq!(reply.expect(404)["error"], "not_found", "{path}");
    }
}
