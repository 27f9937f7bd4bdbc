//! `fake-llm-server`: a scripted stand-in for the OpenAI, Anthropic, Gemini and Ollama
//! HTTP APIs on a loopback port. Prints its base URL on the first line of standard
//! output, then serves until SIGINT or SIGTERM.
//!
//! ```text
//! fake-llm-server [--script FILE] [--answer TEXT] [--api-key KEY] [--port PORT]
//! ```
//!
//! The script file (JSON or YAML) has the shape of `advisord_fakes::llm_server::Script`:
//! `{"api_key": "k", "default": {"reply": "ok", "text": "..."},
//!   "models": {"m": {"queue": [{"reply": "rate_limited", "retry_after": "30"}],
//!                    "then": {"reply": "status", "status": 503}}}}`.
//! Replies: `ok`, `rate_limited`, `status`, `malformed`, `empty`, `drip`, `reset`; each
//! step may add `delay_ms`, and `answer_at_unix_ms` (a wall-clock instant to answer at).

use advisord_fakes::llm_server::DEFAULT_OUTPUT_TOKENS;
use advisord_fakes::llm_server::{FakeLlmServer, Reply, Script, DEFAULT_INPUT_TOKENS};
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

const USAGE: &str = "usage: fake-llm-server [--script FILE] [--answer TEXT] [--api-key KEY] \
                     [--port PORT]";

#[derive(Default)]
struct Options {
    script: Option<String>,
    answer: Option<String>,
    api_key: Option<String>,
    port: u16,
}

/// The options, or `None` when help was asked for.
fn parse(args: impl Iterator<Item = String>) -> Result<Option<Options>, String> {
    let mut options = Options::default();
    let mut args = args.peekable();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("`{flag}` needs a value; {USAGE}"))
        };
        match flag.as_str() {
            "--script" => options.script = Some(value()?),
            "--answer" => options.answer = Some(value()?),
            "--api-key" => options.api_key = Some(value()?),
            "--port" => {
                let port = value()?;
                options.port = port
                    .parse()
                    .map_err(|_| format!("`--port` takes a port number, not `{port}`"))?;
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument `{other}`; {USAGE}")),
        }
    }
    Ok(Some(options))
}

fn script(options: &Options) -> Result<Script, String> {
    let mut script = match &options.script {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|error| format!("cannot read script `{path}`: {error}"))?;
            // YAML is a superset of JSON: one parser reads both.
            serde_yaml_ng::from_str(&text)
                .map_err(|error| format!("script `{path}` is not a valid script: {error}"))?
        }
        None => Script::new(),
    };
    if let Some(answer) = &options.answer {
        script = script.default_step(Reply::ok(
            answer,
            DEFAULT_INPUT_TOKENS,
            DEFAULT_OUTPUT_TOKENS,
        ));
    }
    if let Some(key) = &options.api_key {
        script = script.api_key(key);
    }
    Ok(script)
}

async fn serve(options: Options) -> Result<(), String> {
    let script = script(&options)?;
    let addr = SocketAddr::from(([127, 0, 0, 1], options.port));
    let server = FakeLlmServer::bind(addr, script)
        .await
        .map_err(|error| format!("cannot listen on `{addr}`: {error}"))?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{}", server.base_url())
        .and_then(|()| stdout.flush())
        .map_err(|error| format!("cannot write the address: {error}"))?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|error| format!("cannot watch SIGTERM: {error}"))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    server.shutdown().await;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let result = match parse(std::env::args().skip(1)) {
        Ok(Some(options)) => serve(options).await,
        Ok(None) => {
            println!("{USAGE}");
            Ok(())
        }
        Err(message) => Err(message),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("fake-llm-server: {message}");
            ExitCode::from(2)
        }
    }
}
