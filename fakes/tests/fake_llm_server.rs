//! The `fake-llm-server` binary: reads a YAML script, prints its address, answers per
//! model in each wire format, and stops on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Stops the server even when an assertion fails.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 POST over a fresh connection; returns the status line and the body.
fn post(base_url: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (String, String) {
    let address = base_url.strip_prefix("http://").expect("an http URL");
    let mut stream = TcpStream::connect(address).expect("the server listens");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream
        .write_all(request.as_bytes())
        .expect("the request is sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("a response");
    let status = response.lines().next().unwrap_or_default().to_owned();
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, body)
}

#[test]
fn the_binary_serves_a_yaml_script_until_terminated() {
    let script = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-llm-ok.yaml");
    std::fs::write(
        &script,
        "models:\n  busy: {queue: [{reply: rate_limited, retry_after: '9'}]}\n",
    )
    .expect("the script is written");
    let child = Command::new(env!("CARGO_BIN_EXE_fake-llm-server"))
        .args([
            "--script",
            script.to_str().expect("a UTF-8 path"),
            "--api-key",
            "k",
        ])
        .args(["--answer", "{\"conclusion\": \"fine\"}"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut server = Server(child);
    let stdout = server.0.stdout.take().expect("stdout is piped");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("the address is printed");
    let base_url = first.trim().to_owned();
    assert!(base_url.starts_with("http://127.0.0.1:"), "{base_url:?}");

    let chat = r#"{"model": "busy", "messages": [{"role": "user", "content": "hi"}]}"#;
    let bearer = [("authorization", "Bearer k")];
    let (status, body) = post(&base_url, "/v1/chat/completions", &bearer, chat);
    assert!(status.contains(" 429 "), "{status}: {body}");
    let (status, body) = post(&base_url, "/v1/chat/completions", &bearer, chat);
    assert!(status.contains(" 200 "), "{status}: {body}");
    let reply: serde_json::Value = serde_json::from_str(&body).expect("a JSON reply");
    assert_eq!(
        reply["choices"][0]["message"]["content"],
        "{\"conclusion\": \"fine\"}"
    );

    let (status, _) = post(
        &base_url,
        "/v1/chat/completions",
        &[("authorization", "Bearer x")],
        chat,
    );
    assert!(status.contains(" 401 "), "a wrong key is refused: {status}");
    let gemini = r#"{"contents": [{"parts": [{"text": "hi"}]}]}"#;
    let (status, body) = post(
        &base_url,
        "/v1beta/models/g:generateContent",
        &[("x-goog-api-key", "k")],
        gemini,
    );
    assert!(status.contains(" 200 "), "{status}: {body}");

    let pid = nix::unistd::Pid::from_raw(i32::try_from(server.0.id()).expect("a pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM is sent");
    let bound = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(status) = server.0.try_wait().expect("the child is waited on") {
            assert!(status.success(), "exits cleanly on SIGTERM: {status}");
            break;
        }
        assert!(Instant::now() < bound, "still running 5 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_bad_script_is_refused_with_exit_status_2() {
    let script = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-llm-bad.yaml");
    std::fs::write(&script, "default: {reply: teleport}\n").expect("the script is written");
    let output = Command::new(env!("CARGO_BIN_EXE_fake-llm-server"))
        .args(["--script", script.to_str().expect("a UTF-8 path")])
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a valid script"), "{stderr}");
}

/// Starts the binary on `script` (YAML) and returns it with its base URL.
fn start(name: &str, script: &str) -> (Server, String) {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, script).expect("the script is written");
    let child = Command::new(env!("CARGO_BIN_EXE_fake-llm-server"))
        .args(["--script", path.to_str().expect("a UTF-8 path")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut server = Server(child);
    let stdout = server.0.stdout.take().expect("stdout is piped");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("the address is printed");
    (server, first.trim().to_owned())
}

#[test]
fn the_clis_wire_formats_stream_and_fail_as_the_vendors_do() {
    let (_server, base_url) = start(
        "fake-llm-clis.yaml",
        "phrases:\n  CASE-401: {then: {reply: status, status: 401}}\n  \
         CASE-403: {then: {reply: status, status: 403}}\n  \
         CASE-429: {then: {reply: rate_limited, retry_after: '30'}}\n  \
         CASE-CORRUPT: {then: {reply: malformed}}\n",
    );
    let anthropic = [("x-api-key", "k"), ("anthropic-version", "2023-06-01")];
    let messages = |text: &str| {
        format!(
            r#"{{"model": "m", "max_tokens": 9, "stream": true,
                 "messages": [{{"role": "user", "content": "{text}"}}]}}"#
        )
    };
    // Anthropic messages as server-sent events, usage in message_start and message_delta.
    let (status, body) = post(&base_url, "/v1/messages", &anthropic, &messages("hi"));
    assert!(status.contains(" 200 "), "{status}: {body}");
    for event in [
        "event: message_start",
        "text_delta",
        "\"output_tokens\":48",
        "message_stop",
    ] {
        assert!(body.contains(event), "{event} in {body}");
    }
    let (status, body) = post(&base_url, "/v1/messages", &anthropic, &messages("CASE-401"));
    assert!(
        status.contains(" 401 ") && body.contains("authentication_error"),
        "{body}"
    );
    // The OpenAI Responses API, streamed, usage in response.completed.
    let responses = r#"{"model": "gpt", "stream": true, "input": [{"role": "user",
                        "content": [{"type": "input_text", "text": "hi"}]}]}"#;
    let (status, body) = post(&base_url, "/v1/responses", &[], responses);
    assert!(status.contains(" 200 "), "{status}: {body}");
    for event in [
        "response.output_text.delta",
        "response.completed",
        "\"input_tokens\":120",
    ] {
        assert!(body.contains(event), "{event} in {body}");
    }
    let (status, body) = post(
        &base_url,
        "/v1/responses",
        &[],
        &responses.replace("hi", "CASE-429"),
    );
    assert!(
        status.contains(" 429 ") && body.contains("rate_limit_exceeded"),
        "{body}"
    );
    // Gemini: streamed with alt=sse, errors with the API's status names, and the model
    // router's classifier call answered whatever the script says.
    let gemini = |text: &str| format!(r#"{{"contents": [{{"parts": [{{"text": "{text}"}}]}}]}}"#);
    let (status, body) = post(
        &base_url,
        "/v1beta/models/g:streamGenerateContent?alt=sse",
        &[],
        &gemini("hi"),
    );
    assert!(status.contains(" 200 "), "{status}: {body}");
    assert!(
        body.contains("data: {") && body.contains("usageMetadata"),
        "{body}"
    );
    let (status, body) = post(
        &base_url,
        "/v1beta/models/g:generateContent",
        &[],
        &gemini("CASE-403"),
    );
    assert!(
        status.contains(" 403 ") && body.contains("PERMISSION_DENIED"),
        "{body}"
    );
    let router = r#"{"contents": [{"parts": [{"text": "CASE-403"}]}], "generationConfig":
        {"responseJsonSchema": {"properties": {"complexity_reasoning": {}, "complexity_score": {}}}}}"#;
    let (status, body) = post(
        &base_url,
        "/v1beta/models/flash-lite:generateContent",
        &[],
        router,
    );
    assert!(
        status.contains(" 200 ") && body.contains("complexity_score"),
        "{body}"
    );
    // A corrupt stream: an event whose data is not JSON.
    let (status, body) = post(
        &base_url,
        "/v1/messages",
        &anthropic,
        &messages("CASE-CORRUPT"),
    );
    assert!(
        status.contains(" 200 ") && body.contains("data: {\"cut sh"),
        "{body}"
    );
}
