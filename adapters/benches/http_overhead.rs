//! HTTP exchange overhead: one consultation through an HTTP adapter and the contract
//! layer (request body, auth header, capped body read, reply parsing, normalisation)
//! against the fake LLM server over a pooled connection, compared in the same run with a
//! bare `reqwest` request to the same endpoint with the same body.
//!
//! Bound: median(adapter + contract) / median(bare request) <= 1.2, for every wire
//! format. Prints the figures; exits non-zero when a bound is broken.
//!
//! Run: `cargo bench -p advisord-adapters --bench http_overhead`

use advisord_adapters::contract::{consult, env_from_map, AdvisorSpec, Io};
use advisord_adapters::registry::Registry;
use advisord_fakes::llm_server::{FakeLlmServer, Script};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const BOUND: f64 = 1.2;
const WARM_UP: usize = 300;
const ITERATIONS: usize = 3000;
const KEY_VARIABLE: &str = "BENCH_API_KEY";
const KEY: &str = "sk-bench";

/// One wire format: the adapter name, the path below the server's base URL, the
/// endpoint the advisor names, and how a bare request authenticates.
struct Format {
    adapter: &'static str,
    endpoint_suffix: &'static str,
    path: String,
    headers: Vec<(&'static str, &'static str)>,
    body: serde_json::Value,
}

fn formats(prompt: &str, model: &str) -> Vec<Format> {
    let messages = serde_json::json!([{"role": "user", "content": prompt}]);
    vec![
        Format {
            adapter: "openai",
            endpoint_suffix: "/v1",
            path: "/v1/chat/completions".into(),
            headers: vec![("authorization", "Bearer sk-bench")],
            body: serde_json::json!({"model": model, "messages": messages}),
        },
        Format {
            adapter: "anthropic",
            endpoint_suffix: "",
            path: "/v1/messages".into(),
            headers: vec![("x-api-key", KEY), ("anthropic-version", "2023-06-01")],
            body: serde_json::json!({"model": model, "max_tokens": 4096, "messages": messages}),
        },
        Format {
            adapter: "gemini",
            endpoint_suffix: "",
            path: format!("/v1beta/models/{model}:generateContent"),
            headers: vec![("x-goog-api-key", KEY)],
            body: serde_json::json!({"contents": [{"role": "user", "parts": [{"text": prompt}]}]}),
        },
        Format {
            adapter: "ollama",
            endpoint_suffix: "",
            path: "/api/chat".into(),
            headers: vec![],
            body: serde_json::json!({"model": model, "messages": messages, "stream": false}),
        },
    ]
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

async fn bare(client: &reqwest::Client, url: &str, format: &Format) -> Duration {
    let start = Instant::now();
    let mut request = client.post(url).json(&format.body);
    for (name, value) in &format.headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the fake server answers");
    assert!(
        response.status().is_success(),
        "bare request: {}",
        response.status()
    );
    let body = response.bytes().await.expect("a body");
    assert!(!body.is_empty());
    start.elapsed()
}

async fn through_adapter(
    adapter: &dyn advisord_adapters::contract::Adapter,
    advisor: &AdvisorSpec,
    prompt: &str,
    io: &Io,
) -> Duration {
    let start = Instant::now();
    let outcome = consult(adapter, advisor, prompt, io).await;
    let elapsed = start.elapsed();
    if let Err(failure) = outcome.result {
        panic!("{}: the consultation failed: {failure:?}", advisor.adapter);
    }
    assert!(outcome.usage.is_some(), "{}: usage read", advisor.adapter);
    elapsed
}

/// The adapter's exchange alone, without the contract (shown, not bounded: it tells the
/// transport's share of the overhead from the normalisation's).
async fn exchange_only(
    adapter: &dyn advisord_adapters::contract::Adapter,
    advisor: &AdvisorSpec,
    prompt: &str,
    io: &Io,
) -> Duration {
    let start = Instant::now();
    let answer = adapter.exchange(advisor, prompt, io).await;
    let elapsed = start.elapsed();
    let answer = answer.unwrap_or_else(|failure| panic!("{}: {failure:?}", advisor.adapter));
    assert!(answer.usage.is_some(), "{}: usage read", advisor.adapter);
    elapsed
}

fn main() -> ExitCode {
    // The server gets its own thread and runtime so that it does not share the measuring
    // thread's scheduler: both paths see the same server.
    let (started, address) = std::sync::mpsc::channel();
    let stop = CancellationToken::new();
    let server_stop = stop.clone();
    let server_thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let server = FakeLlmServer::start(Script::new().api_key(KEY)).await;
            started.send(server.base_url()).expect("the bench waits");
            server_stop.cancelled().await;
            server.shutdown().await;
        });
    });
    let base_url = address.recv().expect("the server starts");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let prompt = "Is the cache invalidation in the writer correct? ".repeat(40);
    let model = "bench-model";
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("an HTTP client");
    let registry = Registry::builtin();
    let mut broken = false;
    println!("http_overhead: {ITERATIONS} exchanges per path after {WARM_UP} warm-up, medians");
    for format in formats(&prompt, model) {
        let adapter = registry.get(format.adapter).expect("a builtin adapter");
        let mut settings = serde_json::Map::new();
        settings.insert(
            "endpoint".into(),
            format!("{base_url}{}", format.endpoint_suffix).into(),
        );
        settings.insert("model".into(), model.into());
        let advisor = AdvisorSpec {
            id: format!("{}-bench", format.adapter),
            adapter: format.adapter.into(),
            executable: None,
            credential: (format.adapter != "ollama").then(|| KEY_VARIABLE.to_owned()),
            settings,
        };
        let url = format!("{base_url}{}", format.path);
        let io = Io {
            deadline: tokio::time::Instant::now() + Duration::from_secs(600),
            cancel: CancellationToken::new(),
            env: env_from_map(BTreeMap::from([(KEY_VARIABLE.to_owned(), KEY.to_owned())])),
            http: client.clone(),
        };
        let (adapter_median, exchange_median, bare_median) = runtime.block_on(async {
            for _ in 0..WARM_UP {
                bare(&client, &url, &format).await;
                exchange_only(adapter.as_ref(), &advisor, &prompt, &io).await;
                through_adapter(adapter.as_ref(), &advisor, &prompt, &io).await;
            }
            let mut bare_samples = Vec::with_capacity(ITERATIONS);
            let mut exchange_samples = Vec::with_capacity(ITERATIONS);
            let mut adapter_samples = Vec::with_capacity(ITERATIONS);
            // Interleaved, so that drift in the machine's load hits every path alike.
            for _ in 0..ITERATIONS {
                bare_samples.push(bare(&client, &url, &format).await);
                exchange_samples
                    .push(exchange_only(adapter.as_ref(), &advisor, &prompt, &io).await);
                adapter_samples
                    .push(through_adapter(adapter.as_ref(), &advisor, &prompt, &io).await);
            }
            (
                median(&mut adapter_samples),
                median(&mut exchange_samples),
                median(&mut bare_samples),
            )
        });
        let micros = |d: Duration| d.as_secs_f64() * 1e6;
        let ratio = adapter_median.as_secs_f64() / bare_median.as_secs_f64();
        let exchange_ratio = exchange_median.as_secs_f64() / bare_median.as_secs_f64();
        let verdict = if ratio <= BOUND { "ok" } else { "BROKEN" };
        println!(
            "  {:<10} bare reqwest {:>7.1} µs | adapter alone {:>7.1} µs (ratio {exchange_ratio:.3}) \
             | adapter+contract {:>7.1} µs ratio {ratio:.3} (bound {BOUND}) {verdict}",
            format.adapter,
            micros(bare_median),
            micros(exchange_median),
            micros(adapter_median),
        );
        broken |= ratio > BOUND;
    }
    stop.cancel();
    server_thread.join().expect("the server thread ends");
    if broken {
        println!("http_overhead: bound broken");
        ExitCode::FAILURE
    } else {
        println!("http_overhead: every ratio within {BOUND}");
        ExitCode::SUCCESS
    }
}
