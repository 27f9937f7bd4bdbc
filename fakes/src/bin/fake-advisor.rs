//! `fake-advisor`: a scripted stand-in for an advisor CLI, for tests and benchmarks.
//!
//! # Scripted by flags
//!
//! - `--answer TEXT`, `--answer-file F`: prints the answer on standard output;
//! - `--stance S [--conclusion TEXT]`: prints a JSON answer with that stance;
//! - `--echo-prompt [--prompt P]`: answers (JSON) with the prompt it got, `P` if given (the
//!   argument), else what it read on standard input;
//! - `--echo-env`: answers (JSON) with the sorted names of its environment variables;
//! - `--delay-ms N`: waits before printing anything;
//! - `--answer-at-unix-ms T`: waits until that wall-clock time (milliseconds since the
//!   epoch) before printing anything, so a test can place an answer against its own clock
//!   whatever the process took to start;
//! - `--stdout LINE`, `--stderr LINE`: prints a line first (repeatable);
//! - `--flood BYTES`, `--flood-stderr BYTES`: prints that many bytes;
//! - `--invalid-utf8`, `--ansi`: decorates every printed line with invalid UTF-8 / colour;
//! - `--signal-self`: ends itself with SIGUSR1 (a signal the caller did not send);
//! - `--hang`: then sleeps forever; `--ignore-term` blocks SIGTERM first;
//! - `--grandchild --pid-file F`: first starts a grandchild (`--hang`, the same
//!   `--ignore-term`) sharing its output pipes, and writes the grandchild's pid to `F`;
//! - `--setsid`: calls `setsid()` first (a new session and process group, out of reach
//!   of a kill of its parent's group); with `--grandchild`, the grandchild does;
//! - `--exit N`: exit status (default 0);
//! - `--retry-ms N`: interval of the mimics' retry loops (default 200, or
//!   `FAKE_ADVISOR_RETRY_MS`);
//! - `--mimic NAME`: behaves as a real CLI does without credentials or network (below).
//!
//! # The real CLIs, as observed
//!
//! Recorded on this machine with `@openai/codex` 0.171.0, `@google/gemini-cli` 0.61.0 and
//! `@anthropic-ai/claude-code` 2.1.197, no credentials, no network (`tests/integration/real_clis.rs`
//! runs the real ones against `fake-llm-server`). Messages, streams and exit statuses are reproduced
//! exactly; the real ones are slower (`gemini` takes ~2.5 s to exit 41, `claude -p` ~1 s).
//!
//! - `codex-no-login` — `codex login status`: stderr `Not logged in`, exit 1.
//! - `codex-untrusted` — `codex exec` outside a git repository without
//!   `--skip-git-repo-check`: stderr `Not inside a trusted directory and
//!   --skip-git-repo-check was not specified.`, exit 1.
//! - `codex-lookup-retry` — `codex exec --skip-git-repo-check ... -` offline: stderr, a
//!   banner, five WebSocket reconnects, `stream disconnected before completion: failed to
//!   lookup address information: Name does not resolve`, then `ERROR: Reconnecting...
//!   waiting for network` forever.
//! - `gemini-no-auth` — `gemini -p ...` without an auth variable: stderr `Please set an Auth
//!   method in your ~/.gemini/settings.json or specify one of the following environment
//!   variables before running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI,
//!   GOOGLE_GENAI_USE_GCA`, exit 41.
//! - `gemini-untrusted` — `gemini -p ...` with a key in an untrusted folder: stderr (red)
//!   `Gemini CLI is not running in a trusted directory. ...`, exit 55.
//! - `gemini-fetch-retry` — `gemini -p ...` with a key, offline: stderr `Attempt N failed.
//!   Retrying with backoff... Error: exception TypeError: fetch failed sending request` and a
//!   stack trace, nine times, then silence (the real one gives up after ~5 minutes, exit 1).
//! - `gemini-rate-limit-retry` — the same against a quota: `Attempt N failed with status
//!   429. Retrying with backoff...`.
//! - `claude-no-login` — `claude -p` without a login: stdout `Not logged in · Please run
//!   /login`, exit 1 (with `--output-format stream-json --verbose`: init, assistant and
//!   result lines, the result `"is_error":true`).
//! - `claude-auth-status` — `claude auth status` without a login: stdout
//!   `{"loggedIn": false, ...}` (with `--text`: `Not logged in. Run claude auth login to
//!   authenticate.`), exit 1.
//! - `claude-connect-retry` — `claude -p --output-format stream-json --verbose` with a key,
//!   offline: stdout `api_retry` lines with `"error_status":null,"error":"unknown"`, ten
//!   times, then silence (the real one gives up after ~3 minutes: `API Error: Unable to
//!   connect to API`, exit 1); with text output it prints nothing at all until then.
//! - `claude-rate-limit-retry` — the same against a rate limit: `"error_status":429,
//!   "error":"rate_limit"`.
//!
//! # As a drop-in `codex`, `gemini` or `claude`
//!
//! Symlink this binary under one of those names (`ln -s .../fake-advisor DIR/claude`): it
//! reads its command line as that CLI would and picks the behaviour above from it and from
//! its environment — the auth variables the real CLI reads (`GEMINI_API_KEY`,
//! `ANTHROPIC_API_KEY`, `CODEX_API_KEY`, ...), `GEMINI_CLI_TRUST_WORKSPACE` — and these:
//!
//! - `FAKE_ADVISOR_LOGGED_IN=1`: behaves as logged in;
//! - `FAKE_ADVISOR_ANSWER=TEXT`: when logged in, answers `TEXT` (claude's stream-json: in a
//!   `result` line; codex's `--json`: in an `agent_message` item then `turn.completed`;
//!   gemini's `--output-format json`: one document, the tokens per model; each with the
//!   usage `FAKE_ADVISOR_USAGE`, default `12,34`);
//! - `FAKE_ADVISOR_RATE_LIMITED=1`: when logged in and not answering, the rate-limit retry
//!   loop instead of the network one;
//! - `FAKE_ADVISOR_DELAY_MS=N`: waits before anything;
//! - `FAKE_ADVISOR_RETRY_MS=N`: the retry loops' interval.

use nix::sys::signal::{raise, SigSet, Signal};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Duration;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let name = argv
        .first()
        .map(|a| {
            Path::new(a)
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    let rest = argv.get(1..).unwrap_or_default().to_vec();
    if let Some(ms) = env_u64("FAKE_ADVISOR_DELAY_MS") {
        std::thread::sleep(Duration::from_millis(ms));
    }
    let code = match name.as_str() {
        "codex" => drop_in_codex(&rest),
        "gemini" => drop_in_gemini(&rest),
        "claude" => drop_in_claude(&rest),
        _ => match Script::parse(&rest) {
            Ok(script) => script.run(),
            Err(message) => {
                eprintln!("fake-advisor: {message}");
                2
            }
        },
    };
    ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1))
}

// ---------------------------------------------------------------------------------------
// The scripted mode.

#[derive(Debug, Default)]
struct Script {
    answer: Option<String>,
    answer_file: Option<String>,
    stance: Option<String>,
    conclusion: Option<String>,
    echo_prompt: bool,
    prompt: Option<String>,
    echo_env: bool,
    delay_ms: u64,
    answer_at_unix_ms: u64,
    stdout: Vec<String>,
    stderr: Vec<String>,
    flood: u64,
    flood_stderr: u64,
    invalid_utf8: bool,
    ansi: bool,
    signal_self: bool,
    hang: bool,
    ignore_term: bool,
    setsid: bool,
    grandchild: bool,
    pid_file: Option<String>,
    exit: i32,
    retry_ms: Option<u64>,
    mimic: Option<String>,
}

impl Script {
    fn parse(args: &[String]) -> Result<Script, String> {
        let mut s = Script::default();
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .cloned()
                    .ok_or_else(|| format!("`{flag}` needs a value"))
            };
            let number = |v: String| {
                v.parse::<u64>()
                    .map_err(|_| format!("`{flag}` takes a number, got `{v}`"))
            };
            match flag.as_str() {
                "--answer" => s.answer = Some(value()?),
                "--answer-file" => s.answer_file = Some(value()?),
                "--stance" => s.stance = Some(value()?),
                "--conclusion" => s.conclusion = Some(value()?),
                "--echo-prompt" => s.echo_prompt = true,
                "--prompt" => s.prompt = Some(value()?),
                "--echo-env" => s.echo_env = true,
                "--delay-ms" => s.delay_ms = number(value()?)?,
                "--answer-at-unix-ms" => s.answer_at_unix_ms = number(value()?)?,
                "--stdout" => s.stdout.push(value()?),
                "--stderr" => s.stderr.push(value()?),
                "--flood" => s.flood = number(value()?)?,
                "--flood-stderr" => s.flood_stderr = number(value()?)?,
                "--invalid-utf8" => s.invalid_utf8 = true,
                "--ansi" => s.ansi = true,
                "--signal-self" => s.signal_self = true,
                "--hang" => s.hang = true,
                "--ignore-term" => s.ignore_term = true,
                "--setsid" => s.setsid = true,
                "--grandchild" => s.grandchild = true,
                "--pid-file" => s.pid_file = Some(value()?),
                "--exit" => {
                    let v = value()?;
                    s.exit = v
                        .parse()
                        .map_err(|_| format!("`--exit` takes a status, got `{v}`"))?;
                }
                "--retry-ms" => s.retry_ms = Some(number(value()?)?),
                "--mimic" => s.mimic = Some(value()?),
                other => return Err(format!("unknown flag `{other}`; see the file's header")),
            }
        }
        Ok(s)
    }

    fn run(self) -> i32 {
        if self.ignore_term {
            block_term();
        }
        if self.setsid && !self.grandchild {
            let _ = nix::unistd::setsid();
        }
        if self.grandchild {
            if let Err(e) = self.start_grandchild() {
                eprintln!("fake-advisor: could not start the grandchild: {e}");
                return 2;
            }
        }
        if self.delay_ms > 0 {
            std::thread::sleep(Duration::from_millis(self.delay_ms));
        }
        if self.answer_at_unix_ms > 0 {
            let at = std::time::UNIX_EPOCH + Duration::from_millis(self.answer_at_unix_ms);
            if let Ok(wait) = at.duration_since(std::time::SystemTime::now()) {
                std::thread::sleep(wait);
            }
        }
        let retry = retry_interval(self.retry_ms);
        if let Some(mimic) = &self.mimic {
            return run_mimic(mimic, retry);
        }
        let deco = Decoration {
            invalid_utf8: self.invalid_utf8,
            ansi: self.ansi,
        };
        for line in &self.stderr {
            emit(&mut std::io::stderr(), &deco, line);
        }
        for line in &self.stdout {
            emit(&mut std::io::stdout(), &deco, line);
        }
        flood(&mut std::io::stdout(), self.flood);
        flood(&mut std::io::stderr(), self.flood_stderr);
        match self.answer() {
            Ok(Some(text)) => emit(&mut std::io::stdout(), &deco, &text),
            Ok(None) => {}
            Err(message) => {
                eprintln!("fake-advisor: {message}");
                return 2;
            }
        }
        if self.signal_self {
            let _ = raise(Signal::SIGUSR1);
        }
        if self.hang {
            sleep_forever();
        }
        self.exit
    }

    fn answer(&self) -> Result<Option<String>, String> {
        if let Some(text) = &self.answer {
            return Ok(Some(text.clone()));
        }
        if let Some(file) = &self.answer_file {
            return std::fs::read_to_string(file)
                .map(Some)
                .map_err(|e| format!("cannot read `--answer-file {file}`: {e}"));
        }
        if let Some(stance) = &self.stance {
            let conclusion = self
                .conclusion
                .as_deref()
                .unwrap_or("The scripted advisor's conclusion.");
            return Ok(Some(json_answer(conclusion, stance)));
        }
        if self.echo_prompt {
            let (via, prompt) = match &self.prompt {
                Some(p) => ("argument", p.clone()),
                None => {
                    let mut input = Vec::new();
                    let _ = std::io::stdin().read_to_end(&mut input);
                    ("stdin", String::from_utf8_lossy(&input).into_owned())
                }
            };
            return Ok(Some(json_answer(
                &format!("prompt via {via}: {prompt}"),
                "supports",
            )));
        }
        if self.echo_env {
            let mut names: Vec<String> = std::env::vars_os()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .collect();
            names.sort();
            return Ok(Some(json_answer(
                &format!("environment: {}", names.join(", ")),
                "supports",
            )));
        }
        Ok(None)
    }

    fn start_grandchild(&self) -> std::io::Result<()> {
        let mut command = Command::new(std::env::current_exe()?);
        command.arg("--hang");
        if self.ignore_term {
            command.arg("--ignore-term");
        }
        if self.setsid {
            command.arg("--setsid");
        }
        // Output pipes are inherited on purpose: a reader waiting for their end would wait
        // for the grandchild too, as it does with a real CLI's helper processes.
        let child = command.spawn()?;
        if let Some(file) = &self.pid_file {
            let partial = format!("{file}.partial");
            std::fs::write(&partial, child.id().to_string())?;
            std::fs::rename(&partial, file)?;
        }
        Ok(())
    }
}

struct Decoration {
    invalid_utf8: bool,
    ansi: bool,
}

fn emit(out: &mut dyn Write, deco: &Decoration, line: &str) {
    let mut bytes = Vec::new();
    if deco.invalid_utf8 {
        bytes.extend_from_slice(b"\xff\xfe\xc3 ");
    }
    if deco.ansi {
        bytes.extend_from_slice(b"\x1b[1;31m");
    }
    bytes.extend_from_slice(line.as_bytes());
    if deco.ansi {
        bytes.extend_from_slice(b"\x1b[0m");
    }
    bytes.push(b'\n');
    let _ = out.write_all(&bytes);
    let _ = out.flush();
}

fn flood(out: &mut dyn Write, mut bytes: u64) {
    let chunk = [b'x'; 64 * 1024];
    while bytes > 0 {
        let n = usize::try_from(bytes.min(chunk.len() as u64)).unwrap_or(chunk.len());
        if out.write_all(&chunk[..n]).is_err() {
            return;
        }
        bytes -= n as u64;
    }
    let _ = out.flush();
}

fn json_answer(conclusion: &str, stance: &str) -> String {
    format!(
        "{{\"conclusion\": {}, \"stance\": {}, \"confidence\": 0.7}}",
        json_string(conclusion),
        json_string(stance)
    )
}

fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// SIGTERM stays pending forever: the process "ignores" it without an unsafe handler.
fn block_term() {
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    let _ = set.thread_block();
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty())
}

fn retry_interval(flag: Option<u64>) -> Duration {
    Duration::from_millis(
        flag.or_else(|| env_u64("FAKE_ADVISOR_RETRY_MS"))
            .unwrap_or(200),
    )
}

fn line(out: &mut dyn Write, text: &str) {
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

// ---------------------------------------------------------------------------------------
// The mimics.

fn run_mimic(name: &str, retry: Duration) -> i32 {
    match name {
        "codex-no-login" => codex_not_logged_in(),
        "codex-untrusted" => codex_untrusted(),
        "codex-lookup-retry" => codex_lookup_retry("-", retry),
        "gemini-no-auth" => gemini_no_auth(),
        "gemini-untrusted" => gemini_untrusted(),
        "gemini-fetch-retry" => gemini_retry(false, retry),
        "gemini-rate-limit-retry" => gemini_retry(true, retry),
        "claude-no-login" => claude_not_logged_in(Format::Text),
        "claude-auth-status" => claude_auth_status(false, false),
        "claude-connect-retry" => claude_retry(false, retry),
        "claude-rate-limit-retry" => claude_retry(true, retry),
        other => {
            eprintln!(
                "fake-advisor: unknown mimic `{other}`; accepted: codex-no-login, \
                 codex-untrusted, codex-lookup-retry, gemini-no-auth, gemini-untrusted, \
                 gemini-fetch-retry, gemini-rate-limit-retry, claude-no-login, \
                 claude-auth-status, claude-connect-retry, claude-rate-limit-retry"
            );
            2
        }
    }
}

fn codex_not_logged_in() -> i32 {
    line(&mut std::io::stderr(), "Not logged in");
    1
}

fn codex_untrusted() -> i32 {
    line(
        &mut std::io::stderr(),
        "Not inside a trusted directory and --skip-git-repo-check was not specified.",
    );
    1
}

fn codex_lookup_retry(prompt_arg: &str, retry: Duration) -> i32 {
    let prompt = if prompt_arg == "-" {
        let mut input = String::new();
        let _ = std::io::stdin().read_to_string(&mut input);
        input
    } else {
        prompt_arg.to_string()
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let err = &mut std::io::stderr();
    for text in [
        "OpenAI Codex v0.171.0",
        "--------",
        &format!("workdir: {}", cwd.display()),
        "model: gpt-6.2-sol",
        "provider: openai",
        "approval: never",
        "sandbox: read-only",
        "reasoning effort: none",
        "reasoning summaries: none",
        "session id: 01a227fe-a181-7b43-b519-073880afe3e1",
        "--------",
        "user",
        prompt.trim_end(),
    ] {
        line(err, text);
    }
    let ws = "ERROR codex_api::endpoint::responses_websocket: failed to connect to Responses \
              WebSocket stage=Unknown";
    line(err, &format!("2026-11-29T15:48:48.668317Z {ws}"));
    for attempt in 2..=5 {
        std::thread::sleep(retry / 4);
        line(err, &format!("2026-11-29T15:48:49.004773Z {ws}"));
        line(err, &format!("ERROR: Reconnecting... {attempt}/5"));
    }
    line(err, &format!("2026-11-29T15:48:55.185484Z {ws}"));
    line(
        err,
        "warning: Falling back from WebSockets to HTTPS transport. stream disconnected before \
         completion: failed to lookup address information: Name does not resolve",
    );
    loop {
        line(err, "ERROR: Reconnecting... waiting for network");
        std::thread::sleep(retry);
    }
}

fn gemini_no_auth() -> i32 {
    let home = std::env::var("HOME").unwrap_or_default();
    line(
        &mut std::io::stderr(),
        &format!(
            "Please set an Auth method in your {home}/.gemini/settings.json or specify one of \
             the following environment variables before running: GEMINI_API_KEY, \
             GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA"
        ),
    );
    41
}

fn gemini_untrusted() -> i32 {
    line(
        &mut std::io::stderr(),
        "\x1b[31mGemini CLI is not running in a trusted directory. To proceed, either use \
         `--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or \
         trust this directory in interactive mode. For more details, see \
         https://geminicli.com/docs/cli/trusted-folders/#headless-and-automated-environments\
         \x1b[0m",
    );
    55
}

/// Nine attempts, then silence: the real one gives up with exit 1 after ~5 minutes, longer
/// than any deadline.
fn gemini_retry(rate_limited: bool, retry: Duration) -> ! {
    let err = &mut std::io::stderr();
    line(
        err,
        "Warning: Basic terminal detected (TERM=dumb). Visual rendering will be limited. For the \
         best experience, use a terminal emulator with truecolor support.",
    );
    line(err, "Ripgrep is not available. Falling back to GrepTool.");
    for attempt in 1..=9 {
        if rate_limited {
            line(
                err,
                &format!("Attempt {attempt} failed with status 429. Retrying with backoff..."),
            );
            line(
                err,
                "ApiError: {\"error\":{\"code\":429,\"message\":\"Resource has been exhausted \
                 (e.g. check quota).\",\"status\":\"RESOURCE_EXHAUSTED\"}}",
            );
        } else {
            line(
                err,
                &format!(
                    "Attempt {attempt} failed. Retrying with backoff... Error: exception \
                     TypeError: fetch failed sending request"
                ),
            );
        }
        line(
            err,
            "    at async retryWithBackoff (file:///gemini-cli/bundle/chunk-JDPZ4CE3.js:308039:23)",
        );
        std::thread::sleep(retry);
    }
    sleep_forever()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Json,
    StreamJson,
}

const CLAUDE_SESSION: &str = "1331d3ae-775d-4cee-ae2e-702f15ee970b";

fn claude_init() -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    format!(
        "{{\"type\":\"system\",\"subtype\":\"init\",\"cwd\":{},\"session_id\":\"{CLAUDE_SESSION}\",\
         \"tools\":[\"Task\",\"Bash\",\"Read\"],\"mcp_servers\":[],\"model\":\"claude-opus-4-8\",\
         \"permissionMode\":\"default\",\"apiKeySource\":\"none\",\
         \"claude_code_version\":\"2.1.197\"}}",
        json_string(&cwd.to_string_lossy())
    )
}

fn claude_result(is_error: bool, text: &str, usage: (u64, u64)) -> String {
    format!(
        "{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":{is_error},\
         \"api_error_status\":null,\"duration_ms\":118,\"duration_api_ms\":0,\"num_turns\":1,\
         \"result\":{},\"stop_reason\":\"stop_sequence\",\"session_id\":\"{CLAUDE_SESSION}\",\
         \"total_cost_usd\":0,\"usage\":{{\"input_tokens\":{},\"cache_creation_input_tokens\":0,\
         \"cache_read_input_tokens\":0,\"output_tokens\":{}}},\"terminal_reason\":\"completed\"}}",
        json_string(text),
        usage.0,
        usage.1
    )
}

fn claude_assistant(text: &str, error: Option<&str>) -> String {
    let error = error.map_or(String::new(), |e| format!(",\"error\":\"{e}\""));
    format!(
        "{{\"type\":\"assistant\",\"message\":{{\"model\":\"<synthetic>\",\"role\":\"assistant\",\
         \"type\":\"message\",\"content\":[{{\"type\":\"text\",\"text\":{}}}]}},\
         \"parent_tool_use_id\":null,\"session_id\":\"{CLAUDE_SESSION}\"{error}}}",
        json_string(text)
    )
}

fn claude_not_logged_in(format: Format) -> i32 {
    const TEXT: &str = "Not logged in · Please run /login";
    let out = &mut std::io::stdout();
    match format {
        Format::Text => line(out, TEXT),
        Format::Json => line(out, &claude_result(true, TEXT, (0, 0))),
        Format::StreamJson => {
            line(out, &claude_init());
            line(out, &claude_assistant(TEXT, Some("authentication_failed")));
            line(out, &claude_result(true, TEXT, (0, 0)));
        }
    }
    1
}

fn claude_auth_status(logged_in: bool, text: bool) -> i32 {
    let out = &mut std::io::stdout();
    match (logged_in, text) {
        (false, false) => line(
            out,
            "{\n  \"loggedIn\": false,\n  \"authMethod\": \"none\",\n  \"apiProvider\": \
             \"firstParty\"\n}",
        ),
        (false, true) => line(out, "Not logged in. Run claude auth login to authenticate."),
        (true, false) => line(
            out,
            "{\n  \"loggedIn\": true,\n  \"authMethod\": \"api_key\",\n  \"apiProvider\": \
             \"firstParty\"\n}",
        ),
        (true, true) => line(out, "API key: ANTHROPIC_API_KEY"),
    }
    i32::from(!logged_in)
}

/// Ten attempts (`max_retries`), then silence: the real one waits ~35 s between the last
/// ones and gives up after ~3 minutes, longer than any deadline.
fn claude_retry(rate_limited: bool, retry: Duration) -> ! {
    let out = &mut std::io::stdout();
    line(out, &claude_init());
    let (status, error) = if rate_limited {
        ("429", "rate_limit")
    } else {
        ("null", "unknown")
    };
    for attempt in 1..=10 {
        std::thread::sleep(retry);
        line(
            out,
            &format!(
                "{{\"type\":\"system\",\"subtype\":\"api_retry\",\"attempt\":{attempt},\
                 \"max_retries\":10,\"retry_delay_ms\":608.47,\"error_status\":{status},\
                 \"error\":\"{error}\",\"session_id\":\"{CLAUDE_SESSION}\"}}"
            ),
        );
    }
    sleep_forever()
}

// ---------------------------------------------------------------------------------------
// Drop-in mode: argv[0] is `codex`, `gemini` or `claude`.

fn has(args: &[String], flag: &str) -> bool {
    args.iter().any(|a| a == flag)
}

fn value_of<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// `FAKE_ADVISOR_USAGE` (`INPUT,OUTPUT`, default `12,34`): the tokens an answer reports.
fn usage_from_env() -> (u64, u64) {
    let usage = std::env::var("FAKE_ADVISOR_USAGE").unwrap_or_else(|_| "12,34".into());
    let mut parts = usage.split(',').map(|n| n.trim().parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn answer_from_env() -> Option<String> {
    std::env::var("FAKE_ADVISOR_ANSWER").ok()
}

fn inside_git_repo() -> bool {
    let cwd = std::env::current_dir().unwrap_or_default();
    cwd.ancestors().any(|dir| dir.join(".git").exists())
}

fn drop_in_codex(args: &[String]) -> i32 {
    let retry = retry_interval(None);
    let logged_in = env_set("FAKE_ADVISOR_LOGGED_IN") || env_set("CODEX_API_KEY");
    match args.first().map(String::as_str) {
        Some("login") if args.get(1).map(String::as_str) == Some("status") => {
            if env_set("FAKE_ADVISOR_LOGGED_IN") {
                line(&mut std::io::stderr(), "Logged in using an API key");
                0
            } else {
                codex_not_logged_in()
            }
        }
        Some("exec") => {
            if !has(args, "--skip-git-repo-check") && !inside_git_repo() {
                return codex_untrusted();
            }
            let prompt = args.last().map_or("-", String::as_str);
            match answer_from_env() {
                Some(answer) if logged_in => {
                    if prompt == "-" {
                        let _ = std::io::stdin().read_to_end(&mut Vec::new());
                    }
                    if has(args, "--json") {
                        // As `codex exec --json` prints it: the answer in the
                        // `agent_message` item, the tokens in `turn.completed`.
                        let (input, output) = usage_from_env();
                        let out = &mut std::io::stdout();
                        line(out, "{\"type\":\"thread.started\",\"thread_id\":\"01a23202-177f-7653-9546-a4d32c2db824\"}");
                        line(out, "{\"type\":\"turn.started\"}");
                        line(
                            out,
                            &format!(
                                "{{\"type\":\"item.completed\",\"item\":{{\"id\":\"item_0\",\
                                 \"type\":\"agent_message\",\"text\":{}}}}}",
                                json_string(&answer)
                            ),
                        );
                        line(
                            out,
                            &format!(
                                "{{\"type\":\"turn.completed\",\"usage\":{{\"input_tokens\":{input},\
                                 \"cached_input_tokens\":0,\"cache_write_input_tokens\":0,\
                                 \"output_tokens\":{output},\"reasoning_output_tokens\":0}}}}"
                            ),
                        );
                    } else {
                        line(&mut std::io::stdout(), &answer);
                    }
                    0
                }
                _ => codex_lookup_retry(prompt, retry),
            }
        }
        _ => {
            eprintln!("fake-advisor (as codex): only `login status` and `exec` are mimicked");
            2
        }
    }
}

fn drop_in_gemini(args: &[String]) -> i32 {
    let retry = retry_interval(None);
    if value_of(args, "-p").is_none() && value_of(args, "--prompt").is_none() {
        eprintln!("fake-advisor (as gemini): only `-p PROMPT` is mimicked");
        return 2;
    }
    let authenticated = [
        "GEMINI_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_GENAI_USE_GCA",
    ]
    .iter()
    .any(|v| env_set(v));
    if !authenticated {
        return gemini_no_auth();
    }
    let trusted = std::env::var("GEMINI_CLI_TRUST_WORKSPACE").is_ok_and(|v| v == "true")
        || has(args, "--skip-trust");
    if !trusted {
        return gemini_untrusted();
    }
    match answer_from_env() {
        Some(answer) if value_of(args, "--output-format") == Some("json") => {
            // As `gemini --output-format json` prints it: one document, the tokens per
            // model asked (the model router's call first).
            let (input, output) = usage_from_env();
            let model = |name: &str, input: u64, output: u64| {
                format!(
                    "    \"{name}\": {{\n      \"api\": {{ \"totalRequests\": 1, \"totalErrors\": 0 }},\n      \
                     \"tokens\": {{ \"input\": {input}, \"prompt\": {input}, \"candidates\": {output}, \
                     \"total\": {} }}\n    }}",
                    input + output
                )
            };
            let document = format!(
                "{{\n  \"session_id\": \"01629762-332e-46f7-9eb6-6ff249f6fa6a\",\n  \"response\": {},\n  \
                 \"stats\": {{\n  \"models\": {{\n{},\n{}\n  }}\n  }}\n}}",
                json_string(&answer),
                model("gemini-3.5-flash-lite", 1, 1),
                model("gemini-3.8-flash", input.saturating_sub(1), output.saturating_sub(1)),
            );
            line(&mut std::io::stdout(), &document);
            0
        }
        Some(answer) => {
            line(&mut std::io::stdout(), &answer);
            0
        }
        None => gemini_retry(env_set("FAKE_ADVISOR_RATE_LIMITED"), retry),
    }
}

fn drop_in_claude(args: &[String]) -> i32 {
    let retry = retry_interval(None);
    let logged_in = env_set("FAKE_ADVISOR_LOGGED_IN") || env_set("ANTHROPIC_API_KEY");
    if args.first().map(String::as_str) == Some("auth")
        && args.get(1).map(String::as_str) == Some("status")
    {
        return claude_auth_status(logged_in, has(args, "--text"));
    }
    if !has(args, "-p") && !has(args, "--print") {
        eprintln!("fake-advisor (as claude): only `-p` and `auth status` are mimicked");
        return 2;
    }
    let format = match value_of(args, "--output-format") {
        None | Some("text") => Format::Text,
        Some("json") => Format::Json,
        Some("stream-json") => Format::StreamJson,
        Some(other) => {
            eprintln!("error: option '--output-format <format>' argument '{other}' is invalid");
            return 1;
        }
    };
    if format == Format::StreamJson && !has(args, "--verbose") {
        line(
            &mut std::io::stderr(),
            "Error: When using --print, --output-format=stream-json requires --verbose",
        );
        return 1;
    }
    let mut input = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut input);
    if !logged_in {
        return claude_not_logged_in(format);
    }
    match answer_from_env() {
        Some(answer) => {
            let usage = usage_from_env();
            let out = &mut std::io::stdout();
            match format {
                Format::Text => line(out, &answer),
                Format::Json => line(out, &claude_result(false, &answer, usage)),
                Format::StreamJson => {
                    line(out, &claude_init());
                    line(out, &claude_assistant(&answer, None));
                    line(out, &claude_result(false, &answer, usage));
                }
            }
            0
        }
        None if format == Format::StreamJson => {
            claude_retry(env_set("FAKE_ADVISOR_RATE_LIMITED"), retry)
        }
        // With text output the real CLI retries silently: nothing is printed until it gives up.
        None => sleep_forever(),
    }
}
