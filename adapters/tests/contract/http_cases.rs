//! The four HTTP adapters through the table, against the fake LLM server, and the cases
//! only HTTP has: each status, `Retry-After` as a date, a refused port, a host that does
//! not resolve, a body that drips past the deadline, a connection reset, the auth header
//! each protocol sends, the pooled connection.
//!
//! A connection reset (the server reads the request and closes the socket without a
//! response) is `error`, not `unavailable`: the advisor was reached and then broke the
//! exchange, like a 5xx. `unavailable` means no connection could be made at all (refused,
//! no such host).

use crate::{
    advisor, check, Case, Expect, Rig, Scenario, Setup, ANSWER, LONG_TIMEOUT, MALFORMED_ANSWER,
    RETRY_AFTER_S, SLOW_DELAY, USAGE,
};
use advisord_adapters::contract::{consult, env_from_map, AdvisorSpec, FailureKind, Io, Outcome};
use advisord_adapters::registry::Registry;
use advisord_fakes::llm_server::{FakeLlmServer, RecordedRequest, Reply, Script, Step};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// The model every case asks for; the fake scripts it.
const MODEL: &str = "fake-model";

/// The credential variable and its value; the fake refuses any other key.
const KEY_VARIABLE: &str = "FAKE_LLM_API_KEY";
const KEY: &str = "sk-contract-test";

/// The four adapters, by registry name.
const ADAPTERS: [&str; 4] = ["openai", "anthropic", "gemini", "ollama"];

/// One HTTP adapter, made to behave per scenario by the fake LLM server.
pub struct HttpRig {
    adapter: &'static str,
}

impl HttpRig {
    /// The rig of the adapter registered as `adapter`.
    pub fn new(adapter: &'static str) -> Self {
        Self { adapter }
    }
}

impl Rig for HttpRig {
    fn prepare(&self, scenario: Scenario) -> BoxFuture<'_, Setup> {
        Box::pin(async move {
            let step: Step = match scenario {
                Scenario::Answer => {
                    Reply::ok(ANSWER, USAGE.input_tokens, USAGE.output_tokens).into()
                }
                Scenario::SlowAnswer => {
                    let delay = u64::try_from(SLOW_DELAY.as_millis()).expect("a short delay");
                    Reply::ok(ANSWER, USAGE.input_tokens, USAGE.output_tokens).after(delay)
                }
                Scenario::Empty => Reply::Empty.into(),
                Scenario::Malformed => Reply::Malformed.into(),
                Scenario::RateLimited => Reply::rate_limited_for(RETRY_AFTER_S).into(),
                Scenario::AuthFailed => Reply::status(401).into(),
                Scenario::Error => Reply::status(500).into(),
                // A body that never ends: the hardest hang for an HTTP client.
                Scenario::Deadline => Reply::drip_forever(50).into(),
                // Headers that never come.
                Scenario::Cancellation => Reply::ok(ANSWER, 1, 1).after(60_000),
                Scenario::Unavailable => return refused_setup(self.adapter).await,
            };
            let server = FakeLlmServer::start(Script::new().api_key(KEY).model(MODEL, step)).await;
            let stopped = matches!(scenario, Scenario::Deadline | Scenario::Cancellation);
            served_setup(self.adapter, server, stopped)
        })
    }
}

contract_rig!(openai, crate::http_cases::HttpRig::new("openai"));
contract_rig!(anthropic, crate::http_cases::HttpRig::new("anthropic"));
contract_rig!(gemini, crate::http_cases::HttpRig::new("gemini"));
contract_rig!(ollama, crate::http_cases::HttpRig::new("ollama"));

/// The endpoint an advisor of `adapter` names for a server at `base_url` (OpenAI's
/// includes `/v1`).
fn endpoint(adapter: &str, base_url: &str) -> String {
    match adapter {
        "openai" => format!("{base_url}/v1"),
        _ => base_url.to_owned(),
    }
}

/// An advisor of `adapter` at `endpoint`, with the credential variable (none for ollama).
fn http_advisor(adapter: &str, endpoint: &str) -> AdvisorSpec {
    let mut spec = advisor(
        &format!("{adapter}-test"),
        adapter,
        serde_json::json!({"endpoint": endpoint, "model": MODEL}),
    );
    spec.credential = (adapter != "ollama").then(|| KEY_VARIABLE.to_owned());
    spec
}

fn registered(adapter: &str) -> Arc<dyn advisord_adapters::contract::Adapter> {
    Registry::builtin()
        .get(adapter)
        .unwrap_or_else(|| panic!("`{adapter}` is a builtin adapter"))
}

/// A setup against `server`; when `stopped`, the adapter's connection must be closed
/// after the outcome.
fn served_setup(adapter: &str, server: FakeLlmServer, stopped: bool) -> Setup {
    let server = Arc::new(server);
    let probe = Arc::clone(&server);
    let setup = Setup::new(
        registered(adapter),
        http_advisor(adapter, &endpoint(adapter, &server.base_url())),
    )
    .env(KEY_VARIABLE, KEY)
    .keep(server);
    if stopped {
        setup.released(move || probe.open_connections() == 0)
    } else {
        setup
    }
}

/// A port that refuses: bound, then let go.
async fn refused_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    listener.local_addr().expect("an address").port()
}

async fn refused_setup(adapter: &str) -> Setup {
    let base_url = format!("http://127.0.0.1:{}", refused_port().await);
    Setup::new(
        registered(adapter),
        http_advisor(adapter, &endpoint(adapter, &base_url)),
    )
    .env(KEY_VARIABLE, KEY)
    .diagnostic_contains("cannot connect")
}

/// An io context with the key set and a fresh client, for cases run without `check`.
fn io() -> Io {
    Io {
        deadline: tokio::time::Instant::now() + LONG_TIMEOUT,
        cancel: CancellationToken::new(),
        env: env_from_map(BTreeMap::from([(KEY_VARIABLE.to_owned(), KEY.to_owned())])),
        http: reqwest::Client::new(),
    }
}

fn case(expect: Expect) -> Case {
    Case {
        timeout: LONG_TIMEOUT,
        cancel_after: None,
        expect,
    }
}

fn failed(kind: FailureKind, diagnostic_contains: &str) -> Expect {
    Expect::Failed {
        kind,
        retry_after_s: None,
        diagnostic_contains: Some(diagnostic_contains.to_owned()),
    }
}

/// Each adapter against a server whose model always answers `step`; `check` asserts
/// `expect`, and the outcome and recorded requests go to `then`.
async fn each_adapter(
    step: impl Into<Step> + Clone,
    expect: Expect,
    then: impl Fn(&str, &Outcome, &[RecordedRequest]),
) {
    for adapter in ADAPTERS {
        let server = Arc::new(
            FakeLlmServer::start(Script::new().api_key(KEY).model(MODEL, step.clone())).await,
        );
        let setup = Setup::new(
            registered(adapter),
            http_advisor(adapter, &endpoint(adapter, &server.base_url())),
        )
        .env(KEY_VARIABLE, KEY)
        .keep(Arc::clone(&server));
        let outcome = check(adapter, setup, case(expect.clone())).await;
        then(adapter, &outcome, &server.requests());
    }
}

#[tokio::test]
async fn each_protocol_sends_its_own_request_and_reads_its_usage() {
    let expected_path = |adapter: &str| match adapter {
        "openai" => "/v1/chat/completions".to_owned(),
        "anthropic" => "/v1/messages".to_owned(),
        "gemini" => format!("/v1beta/models/{MODEL}:generateContent"),
        _ => "/api/chat".to_owned(),
    };
    let answer = Reply::ok(ANSWER, 1234, 567);
    let expect = Expect::Completed {
        fields: advisord_adapters::normalise::normalise(ANSWER).expect("the answer reads"),
        usage: Some(advisord_adapters::contract::Usage {
            input_tokens: 1234,
            output_tokens: 567,
        }),
    };
    each_adapter(answer, expect, |adapter, _, requests| {
        let [request] = requests else {
            panic!("{adapter}: one request, got {requests:?}")
        };
        assert_eq!(request.method, "POST", "{adapter}");
        assert_eq!(request.path, expected_path(adapter), "{adapter}");
        assert_eq!(request.model.as_deref(), Some(MODEL), "{adapter}");
        assert_eq!(
            request.prompt(),
            Some(crate::PROMPT),
            "{adapter}: the prompt is sent"
        );
        assert_eq!(
            request.header("content-type"),
            Some("application/json"),
            "{adapter}"
        );
        let auth = |name: &str| request.header(name).map(str::to_owned);
        match adapter {
            "openai" => assert_eq!(auth("authorization"), Some(format!("Bearer {KEY}"))),
            "anthropic" => {
                assert_eq!(auth("x-api-key").as_deref(), Some(KEY));
                assert_eq!(auth("anthropic-version").as_deref(), Some("2023-06-01"));
                assert_eq!(request.body["max_tokens"], serde_json::json!(4096));
            }
            "gemini" => assert_eq!(auth("x-goog-api-key").as_deref(), Some(KEY)),
            _ => {
                assert_eq!(request.body["stream"], serde_json::json!(false));
                for name in ["authorization", "x-api-key", "x-goog-api-key"] {
                    assert_eq!(auth(name), None, "ollama sends no credential");
                }
            }
        }
        if adapter != "openai" {
            assert_eq!(auth("authorization"), None, "{adapter}: no bearer token");
        }
    })
    .await;
}

#[tokio::test]
async fn forbidden_is_an_authentication_failure_with_the_servers_message() {
    let refused = Reply::Status {
        status: 403,
        message: Some("model not enabled".into()),
    };
    each_adapter(
        refused,
        failed(FailureKind::AuthFailed, "model not enabled"),
        |_, _, _| {},
    )
    .await;
}

#[tokio::test]
async fn a_wrong_key_is_refused_by_the_server_as_an_authentication_failure() {
    for adapter in ["openai", "anthropic", "gemini"] {
        let server = Arc::new(FakeLlmServer::start(Script::new().api_key(KEY)).await);
        let setup = Setup::new(
            registered(adapter),
            http_advisor(adapter, &endpoint(adapter, &server.base_url())),
        )
        .env(KEY_VARIABLE, "sk-wrong")
        .keep(Arc::clone(&server));
        check(
            adapter,
            setup,
            case(failed(FailureKind::AuthFailed, "HTTP 401")),
        )
        .await;
        assert_eq!(server.requests().len(), 1, "{adapter}");
    }
}

#[tokio::test]
async fn a_missing_credential_fails_before_any_request_naming_the_variable() {
    for adapter in ["openai", "anthropic", "gemini"] {
        let server = Arc::new(FakeLlmServer::start(Script::new().api_key(KEY)).await);
        for value in [None, Some(""), Some("  ")] {
            let mut setup = Setup::new(
                registered(adapter),
                http_advisor(adapter, &endpoint(adapter, &server.base_url())),
            );
            if let Some(value) = value {
                setup = setup.env(KEY_VARIABLE, value);
            }
            // Our own environment lacks it, not the vendor's refusal: never counted.
            let expect = failed(FailureKind::NotConfigured, &format!("`{KEY_VARIABLE}`"));
            check(&format!("{adapter} {value:?}"), setup, case(expect)).await;
        }
        assert!(server.requests().is_empty(), "{adapter}: nothing was sent");
    }
}

#[tokio::test]
async fn a_credential_no_header_can_carry_is_refused_without_showing_it() {
    for adapter in ADAPTERS {
        let server = Arc::new(FakeLlmServer::start(Script::new()).await);
        let mut spec = http_advisor(adapter, &endpoint(adapter, &server.base_url()));
        spec.credential = Some(KEY_VARIABLE.to_owned());
        let setup = Setup::new(registered(adapter), spec)
            .env(KEY_VARIABLE, "sk-secret\npart")
            .keep(Arc::clone(&server));
        let expect = failed(FailureKind::AuthFailed, &format!("`{KEY_VARIABLE}`"));
        let outcome = check(adapter, setup, case(expect)).await;
        let diagnostic = outcome.result.expect_err("refused").diagnostic;
        assert!(!diagnostic.contains("sk-secret"), "{adapter}: {diagnostic}");
        assert!(server.requests().is_empty(), "{adapter}: nothing was sent");
    }
}

#[tokio::test]
async fn a_rate_limit_until_a_date_asks_for_the_seconds_until_then() {
    let until = SystemTime::now() + Duration::from_secs(90);
    for adapter in ADAPTERS {
        let script = Script::new()
            .api_key(KEY)
            .model(MODEL, Reply::rate_limited_until(until));
        let server = FakeLlmServer::start(script).await;
        let spec = http_advisor(adapter, &endpoint(adapter, &server.base_url()));
        // Not through `check`: the exact wait depends on the clock, only its range is known.
        let outcome = consult(registered(adapter).as_ref(), &spec, crate::PROMPT, &io()).await;
        let failure = outcome.result.expect_err("a rate limit");
        assert_eq!(
            failure.kind,
            FailureKind::RateLimited,
            "{adapter}: {failure:?}"
        );
        // An HTTP date has whole seconds; the exchange itself takes a moment.
        let wait = failure.retry_after_s;
        assert!(
            matches!(wait, Some(85..=90)),
            "{adapter}: retry-after {wait:?}"
        );
        server.shutdown().await;
    }
}

#[tokio::test]
async fn a_rate_limit_without_retry_after_carries_none() {
    let limited = Reply::RateLimited { retry_after: None };
    let expect = Expect::Failed {
        kind: FailureKind::RateLimited,
        retry_after_s: None,
        diagnostic_contains: Some("rate limit".into()),
    };
    each_adapter(limited, expect, |_, _, _| {}).await;
}

#[tokio::test]
async fn timeouts_and_server_errors_are_errors_with_the_status() {
    for status in [408, 500, 502, 503, 404] {
        let expect = failed(FailureKind::Error, &format!("HTTP {status}"));
        each_adapter(Reply::status(status), expect, |_, _, _| {}).await;
    }
}

#[tokio::test]
async fn an_answer_without_a_conclusion_is_malformed() {
    let answer = Reply::ok(MALFORMED_ANSWER, 3, 4);
    each_adapter(answer, Expect::failed(FailureKind::Malformed), |_, _, _| {}).await;
}

#[tokio::test]
async fn a_reply_over_the_size_cap_is_malformed() {
    let huge = "x".repeat(advisord_adapters::http::MAX_REPLY_BYTES + 1);
    let expect = failed(FailureKind::Malformed, "longer than");
    for adapter in ["openai", "ollama"] {
        let script = Script::new()
            .api_key(KEY)
            .model(MODEL, Reply::ok(&huge, 1, 1));
        let server = Arc::new(FakeLlmServer::start(script).await);
        let setup = Setup::new(
            registered(adapter),
            http_advisor(adapter, &endpoint(adapter, &server.base_url())),
        )
        .env(KEY_VARIABLE, KEY)
        .keep(server);
        check(adapter, setup, case(expect.clone())).await;
    }
}

#[tokio::test]
async fn a_connection_reset_before_the_reply_is_an_error() {
    each_adapter(
        Reply::Reset,
        failed(FailureKind::Error, "broke"),
        |adapter, _, requests| {
            assert_eq!(
                requests.len(),
                1,
                "{adapter}: the request arrived, then the reset"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn a_host_that_does_not_resolve_is_unavailable_quickly() {
    for adapter in ADAPTERS {
        let setup = Setup::new(
            registered(adapter),
            http_advisor(
                adapter,
                &endpoint(adapter, "http://advisord-test.nonexistent.invalid"),
            ),
        )
        .env(KEY_VARIABLE, KEY);
        let outcome = check(
            adapter,
            setup,
            case(failed(FailureKind::Unavailable, "cannot connect")),
        )
        .await;
        assert!(
            outcome.duration_ms < 5_000,
            "{adapter}: took {} ms",
            outcome.duration_ms
        );
    }
}

#[tokio::test]
async fn a_slow_drip_that_ends_in_time_is_an_answer() {
    let drip = Reply::Drip {
        text: ANSWER.to_owned(),
        every_ms: 2,
        chunk_bytes: 64,
        forever: false,
    };
    let server =
        Arc::new(FakeLlmServer::start(Script::new().api_key(KEY).model(MODEL, drip)).await);
    let setup = Setup::new(
        registered("openai"),
        http_advisor("openai", &endpoint("openai", &server.base_url())),
    )
    .env(KEY_VARIABLE, KEY)
    .keep(server);
    let expect = Expect::Completed {
        fields: advisord_adapters::normalise::normalise(ANSWER).expect("the answer reads"),
        usage: Some(advisord_adapters::contract::Usage {
            input_tokens: advisord_fakes::llm_server::DEFAULT_INPUT_TOKENS,
            output_tokens: advisord_fakes::llm_server::DEFAULT_OUTPUT_TOKENS,
        }),
    };
    check("drip", setup, case(expect)).await;
}

#[tokio::test]
async fn a_never_ending_body_is_cancelled_on_time_and_its_connection_closed() {
    for adapter in ADAPTERS {
        let script = Script::new()
            .api_key(KEY)
            .model(MODEL, Reply::drip_forever(20));
        let server = FakeLlmServer::start(script).await;
        let setup = served_setup(adapter, server, true);
        let case = Case {
            timeout: LONG_TIMEOUT,
            cancel_after: Some(Duration::from_millis(300)),
            expect: Expect::failed(FailureKind::Cancelled),
        };
        check(adapter, setup, case).await;
    }
}

#[tokio::test]
async fn headers_that_never_come_time_out_and_the_connection_is_closed() {
    for adapter in ADAPTERS {
        let script = Script::new()
            .api_key(KEY)
            .model(MODEL, Reply::ok(ANSWER, 1, 1).after(60_000));
        let server = FakeLlmServer::start(script).await;
        let setup = served_setup(adapter, server, true);
        let case = Case {
            timeout: Duration::from_millis(500),
            cancel_after: None,
            expect: Expect::failed(FailureKind::Timeout),
        };
        check(adapter, setup, case).await;
    }
}

#[tokio::test]
async fn one_model_follows_its_scripted_sequence_over_one_pooled_connection() {
    let script = Script::new().api_key(KEY).model_queue(
        MODEL,
        [Reply::rate_limited_for(3), Reply::status(503), Reply::Empty],
        Some(Reply::ok(ANSWER, 5, 6).into()),
    );
    let server = FakeLlmServer::start(script).await;
    let io = io();
    let adapter = registered("anthropic");
    let spec = http_advisor("anthropic", &server.base_url());
    let mut kinds = Vec::new();
    for _ in 0..5 {
        let outcome = consult(adapter.as_ref(), &spec, crate::PROMPT, &io).await;
        kinds.push(outcome.result.map(|_| ()).map_err(|failure| failure.kind));
    }
    assert_eq!(
        kinds,
        [
            Err(FailureKind::RateLimited),
            Err(FailureKind::Error),
            Err(FailureKind::Empty),
            Ok(()),
            Ok(()),
        ]
    );
    assert_eq!(server.requests().len(), 5);
    assert_eq!(
        server.connections(),
        1,
        "every exchange reused the pooled connection"
    );
    server.shutdown().await;
}

#[test]
fn settings_are_validated_through_the_registry() {
    fn check(adapter: &str, settings: serde_json::Value, expected: Result<(), &str>) {
        let spec = advisor("a", adapter, settings.clone());
        let got = Registry::builtin().validate(&spec);
        assert_eq!(
            got.as_ref()
                .map(|_| ())
                .map_err(|(field, _)| field.as_str()),
            expected,
            "{adapter} {settings}: {got:?}"
        );
    }
    for adapter in ADAPTERS {
        check(
            adapter,
            serde_json::json!({"endpoint": "http://127.0.0.1:1", "model": "m"}),
            Ok(()),
        );
        check(adapter, serde_json::json!({"model": "m"}), Err("endpoint"));
        check(
            adapter,
            serde_json::json!({"endpoint": "127.0.0.1:1", "model": "m"}),
            Err("endpoint"),
        );
        check(
            adapter,
            serde_json::json!({"endpoint": "http://h"}),
            Err("model"),
        );
        check(
            adapter,
            serde_json::json!({"endpoint": "http://h", "model": "m", "args": ["-p"]}),
            Err("args"),
        );
    }
}

#[test]
fn the_shipped_catalogues_http_entries_validate() {
    let text = include_str!("../../../share/advisors.yaml");
    let catalogue: serde_json::Value =
        serde_yaml_ng::from_str(text).expect("the catalogue is YAML");
    let entries = catalogue["advisors"].as_array().expect("an advisors list");
    let mut seen = Vec::new();
    for entry in entries.iter().filter(|entry| entry["transport"] == "http") {
        let entry = entry.as_object().expect("an entry is a mapping");
        let spec = AdvisorSpec::from_mapping(entry);
        assert_eq!(Registry::builtin().validate(&spec), Ok(()), "{}", spec.id);
        seen.push(spec.adapter);
    }
    seen.sort();
    assert_eq!(
        seen,
        ["anthropic", "gemini", "ollama", "openai"],
        "one entry per adapter"
    );
}
