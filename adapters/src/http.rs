//! The HTTP transports: four wire formats over the one shared connection pool.
//!
//! Each wire format ([`Wire`]) only says how a prompt becomes a request and how a reply
//! becomes an answer text with usage. Everything else is shared here and the same for
//! every format: reading the credential, sending through [`Io::http`], reading the body
//! under a size cap while honouring the deadline and the cancellation, and turning an
//! HTTP status or a transport error into a typed [`Failure`]. No adapter retries: the
//! circuit in the core decides when to ask again.

pub mod anthropic;
pub mod gemini;
pub mod ollama;
pub mod openai;
pub mod probe;

use crate::contract::{Adapter, AdvisorSpec, Answer, Failure, FailureKind, Io, Usage};
use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{RequestBuilder, Response, StatusCode, Url};
use serde_json::{Map, Value};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The largest reply body read, in bytes; a longer one is `malformed`.
pub const MAX_REPLY_BYTES: usize = 4 * 1024 * 1024;

/// How much of an unreadable reply the diagnostic quotes.
const MAX_PREVIEW_BYTES: usize = 400;

/// The largest error body read for a diagnostic; the rest is ignored.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// The settings an HTTP advisor may carry in the catalogue, besides the common fields.
pub const SETTINGS: &[&str] = &["endpoint", "model", "max_tokens", "temperature"];

/// The largest `max_tokens` accepted; anything above is surely a typo.
const MAX_MAX_TOKENS: u64 = 1_000_000;

/// An HTTP advisor's own settings, read from its catalogue entry.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// The base URL, without a trailing slash.
    pub endpoint: String,
    /// The model asked for.
    pub model: String,
    /// The most tokens the answer may take, when the entry sets it.
    pub max_tokens: Option<u64>,
    /// The sampling temperature, when the entry sets it.
    pub temperature: Option<f64>,
}

impl HttpSettings {
    /// Reads and checks the settings; `Err((field, message))` names what is wrong.
    pub fn parse(settings: &Map<String, Value>) -> Result<Self, (String, String)> {
        if let Some(key) = settings
            .keys()
            .find(|key| !SETTINGS.contains(&key.as_str()))
        {
            return Err((
                key.clone(),
                format!(
                    "`{key}` is not a setting of an HTTP advisor; accepted: {}",
                    SETTINGS.join(", ")
                ),
            ));
        }
        let endpoint = parse_endpoint(settings.get("endpoint"))?;
        let model = match settings.get("model") {
            Some(Value::String(model)) if !model.trim().is_empty() => model.trim().to_owned(),
            Some(_) => return Err(field("model", "`model` must be a non-empty string")),
            None => return Err(field("model", "`model` is required: name the model to ask")),
        };
        let max_tokens = match settings.get("max_tokens") {
            None => None,
            Some(value) => match value.as_u64() {
                Some(n) if (1..=MAX_MAX_TOKENS).contains(&n) => Some(n),
                _ => {
                    return Err(field(
                        "max_tokens",
                        &format!("`max_tokens` must be a whole number from 1 to {MAX_MAX_TOKENS}"),
                    ))
                }
            },
        };
        let temperature = match settings.get("temperature") {
            None => None,
            Some(value) => match value.as_f64() {
                Some(t) if (0.0..=2.0).contains(&t) => Some(t),
                _ => {
                    return Err(field(
                        "temperature",
                        "`temperature` must be a number from 0 to 2",
                    ))
                }
            },
        };
        Ok(Self {
            endpoint,
            model,
            max_tokens,
            temperature,
        })
    }

    /// The endpoint with `path` appended (`path` has no leading slash).
    pub fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.endpoint)
    }
}

fn field(name: &str, message: &str) -> (String, String) {
    (name.to_owned(), message.to_owned())
}

fn parse_endpoint(value: Option<&Value>) -> Result<String, (String, String)> {
    const ACCEPTED: &str = "an http or https base URL such as `http://127.0.0.1:11434`";
    let text = match value {
        Some(Value::String(text)) => text.trim(),
        Some(_) => return Err(field("endpoint", &format!("`endpoint` must be {ACCEPTED}"))),
        None => {
            return Err(field(
                "endpoint",
                &format!("`endpoint` is required: {ACCEPTED}"),
            ))
        }
    };
    let url = Url::parse(text).map_err(|error| {
        field(
            "endpoint",
            &format!("`{text}` is not a URL ({error}); give {ACCEPTED}"),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(field("endpoint", &format!("`{text}` is not {ACCEPTED}")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        // A secret in the URL would end up in diagnostics; credentials go in `credential`.
        return Err(field(
            "endpoint",
            "`endpoint` must not carry a user or password; name the variable in `credential`",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(field(
            "endpoint",
            "`endpoint` must not carry a query or a fragment",
        ));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// One wire format: how a prompt becomes a request and a reply becomes an answer.
pub trait Wire: Send + Sync + 'static {
    /// The registry key (the catalogue's `adapter` value).
    const NAME: &'static str;

    /// The URL the prompt is posted to.
    fn url(settings: &HttpSettings) -> String;

    /// Adds the credential, if any, the way this format expects it; by default as
    /// `Authorization: Bearer`, and nothing without one.
    fn authorise(request: RequestBuilder, credential: Option<&str>) -> RequestBuilder {
        match credential {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// The JSON request body.
    fn body(settings: &HttpSettings, prompt: &str) -> Value;

    /// Reads the answer text and usage from a parsed 2xx reply: `empty` when it carries
    /// no text, `malformed` when it is not shaped like this format's reply.
    fn read(reply: &Value) -> Result<Answer, Failure>;
}

/// An adapter speaking wire format `W` over the shared HTTP client.
pub struct HttpAdapter<W>(PhantomData<fn() -> W>);

impl<W: Wire> HttpAdapter<W> {
    /// The adapter (it holds nothing: the client comes with each exchange's [`Io`]).
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<W: Wire> Default for HttpAdapter<W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<W: Wire> Adapter for HttpAdapter<W> {
    fn exchange<'a>(
        &'a self,
        advisor: &'a AdvisorSpec,
        prompt: &'a str,
        io: &'a Io,
    ) -> BoxFuture<'a, Result<Answer, Failure>> {
        Box::pin(exchange::<W>(advisor, prompt, io))
    }

    fn validate(&self, advisor: &AdvisorSpec) -> Result<(), (String, String)> {
        HttpSettings::parse(&advisor.settings).map(drop)
    }
}

/// The four HTTP adapters under their registry keys.
pub fn adapters() -> Vec<(&'static str, Arc<dyn Adapter>)> {
    vec![
        (
            openai::OpenAi::NAME,
            Arc::new(HttpAdapter::<openai::OpenAi>::new()),
        ),
        (
            anthropic::Anthropic::NAME,
            Arc::new(HttpAdapter::<anthropic::Anthropic>::new()),
        ),
        (
            gemini::Gemini::NAME,
            Arc::new(HttpAdapter::<gemini::Gemini>::new()),
        ),
        (
            ollama::Ollama::NAME,
            Arc::new(HttpAdapter::<ollama::Ollama>::new()),
        ),
    ]
}

async fn exchange<W: Wire>(
    advisor: &AdvisorSpec,
    prompt: &str,
    io: &Io,
) -> Result<Answer, Failure> {
    let settings = HttpSettings::parse(&advisor.settings).map_err(|(name, message)| {
        failure(
            FailureKind::Error,
            &format!("advisor `{}`, field `{name}`: {message}", advisor.id),
        )
    })?;
    let credential = credential(advisor, io)?;
    let url = W::url(&settings);
    let request =
        W::authorise(io.http.post(&url), credential.as_deref()).json(&W::body(&settings, prompt));
    let work = async {
        let response = request
            .send()
            .await
            .map_err(|error| transport_failure(&url, &error))?;
        if response.status().is_success() {
            let (body, complete) = read_capped(response, MAX_REPLY_BYTES)
                .await
                .map_err(|error| transport_failure(&url, &error))?;
            if !complete {
                return Err(failure(
                    FailureKind::Malformed,
                    &format!("the reply is longer than {MAX_REPLY_BYTES} bytes; nothing was kept"),
                ));
            }
            decode::<W>(&body)
        } else {
            Err(status_failure(response).await)
        }
    };
    // Dropping `work` drops the response and with it the connection, so stopping here
    // releases everything even when the body never ends.
    tokio::select! {
        biased;
        () = io.cancel.cancelled() => {
            Err(failure(FailureKind::Cancelled, "the exchange was cancelled"))
        }
        // Before the deadline's arm: a reply complete at the deadline is kept.
        result = work => result,
        () = tokio::time::sleep_until(io.deadline) => Err(failure(
            FailureKind::Timeout,
            &format!("no complete reply from `{url}` before the deadline"),
        )),
    }
}

/// The credential value: read here and nowhere else. An advisor that names no
/// credential is asked without one (a local server needs none).
fn credential(advisor: &AdvisorSpec, io: &Io) -> Result<Option<String>, Failure> {
    let Some(variable) = advisor.credential.as_deref() else {
        return Ok(None);
    };
    match (io.env)(variable) {
        Some(value) if !value.trim().is_empty() => {
            let value = value.trim();
            if HeaderValue::from_str(value).is_err() {
                // Said without the value: it is a secret, whatever is wrong with it.
                return Err(failure(
                    FailureKind::AuthFailed,
                    &format!(
                        "credential variable `{variable}` holds characters an HTTP header                          cannot carry; set it to the key alone"
                    ),
                ));
            }
            Ok(Some(value.to_owned()))
        }
        // The asker had it (availability selected the advisor), so it is our own
        // environment that lacks it: not the vendor's refusal, and never counted.
        _ => Err(failure(
            FailureKind::NotConfigured,
            &format!(
                "credential variable `{variable}` is unset or empty in the environment this \
                 exchange ran with (nothing was sent); export it in the shell that asks, and \
                 where `advisord` runs for jobs it resumes, or disable advisor `{}`",
                advisor.id
            ),
        )),
    }
}

/// A header value for a credential, marked sensitive so that it never shows in a debug
/// print or a log of the request (`None` when it cannot be a header, which
/// [`credential`] has already refused).
pub fn secret(value: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(value).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Reads a body chunk by chunk up to `cap` bytes; `false` when there was more.
async fn read_capped(
    mut response: Response,
    cap: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    if response
        .content_length()
        .is_some_and(|length| length > cap as u64)
    {
        return Ok((Vec::new(), false));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > cap {
            body.extend_from_slice(&chunk[..cap - body.len()]);
            return Ok((body, false));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, true))
}

fn decode<W: Wire>(body: &[u8]) -> Result<Answer, Failure> {
    let reply: Value = serde_json::from_slice(body).map_err(|error| {
        // Enough of the body to recognise it (an HTML error page, a proxy's notice).
        let preview = String::from_utf8_lossy(&body[..body.len().min(MAX_PREVIEW_BYTES)]);
        failure(
            FailureKind::Malformed,
            &format!("the reply is not JSON ({error}): {preview}"),
        )
    })?;
    W::read(&reply).map_err(|unreadable| embedded_error(&reply).unwrap_or(unreadable))
}

/// Some OpenAI-compatible gateways answer 200 with `{"error": ...}`: report that error
/// rather than a puzzling `empty` or `malformed`.
fn embedded_error(reply: &Value) -> Option<Failure> {
    let error = reply.get("error").filter(|error| !error.is_null())?;
    let code = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok());
    let kind = code
        .and_then(|code| StatusCode::from_u16(code).ok())
        .map_or(FailureKind::Error, kind_for_status);
    Some(failure(
        kind,
        &format!("the reply carries an error: {}", message_of(reply)?),
    ))
}

/// The failure kind an HTTP status means (for a status that is not a success).
pub fn kind_for_status(status: StatusCode) -> FailureKind {
    match status.as_u16() {
        401 | 403 => FailureKind::AuthFailed,
        429 => FailureKind::RateLimited,
        _ => FailureKind::Error,
    }
}

async fn status_failure(response: Response) -> Failure {
    let status = response.status();
    let header_wait = retry_after(response.headers(), SystemTime::now());
    // The error body only feeds the diagnostic: a broken one must not hide the status.
    let body = read_capped(response, MAX_ERROR_BODY_BYTES)
        .await
        .map(|(body, _)| body);
    let body = body.unwrap_or_default();
    let kind = kind_for_status(status);
    let retry_after_s =
        (kind == FailureKind::RateLimited).then(|| header_wait.or_else(|| body_retry_delay(&body)));
    let message = error_body_message(&body);
    let diagnostic = if message.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {message}")
    };
    Failure {
        retry_after_s: retry_after_s.flatten(),
        ..failure(kind, &diagnostic)
    }
}

/// The seconds a `Retry-After` header asks to wait: a number of seconds, or an HTTP
/// date (a date already past means now: 0).
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<u64> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds);
    }
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| seconds.ceil() as u64);
    }
    let when = httpdate::parse_http_date(value).ok()?;
    let wait = when.duration_since(now).unwrap_or(Duration::ZERO);
    Some(wait.as_secs() + u64::from(wait.subsec_nanos() > 0))
}

/// The wait a Google-style error body names (`error.details[].retryDelay`, like `"30s"`),
/// for replies that give no `Retry-After` header.
fn body_retry_delay(body: &[u8]) -> Option<u64> {
    let reply: Value = serde_json::from_slice(body).ok()?;
    let reply = reply
        .as_array()
        .and_then(|items| items.first())
        .unwrap_or(&reply);
    let details = reply.pointer("/error/details")?.as_array()?;
    details.iter().find_map(|detail| {
        let delay = detail.get("retryDelay")?.as_str()?.strip_suffix('s')?;
        let seconds = delay.parse::<f64>().ok()?;
        (seconds.is_finite() && seconds >= 0.0).then(|| seconds.ceil() as u64)
    })
}

/// The message of an error body: JSON `error.message` (or `error` as text, or
/// `message`) when present, else the body itself.
fn error_body_message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|reply| message_of(&reply))
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())
}

fn message_of(reply: &Value) -> Option<String> {
    // Some servers wrap the error object in a one-element list.
    let reply = reply
        .as_array()
        .and_then(|items| items.first())
        .unwrap_or(reply);
    let text = reply
        .pointer("/error/message")
        .or_else(|| reply.get("error").filter(|error| error.is_string()))
        .or_else(|| reply.get("message"))
        .or_else(|| reply.get("detail"))?;
    Some(
        text.as_str()
            .map_or_else(|| text.to_string(), str::to_owned),
    )
}

/// A transport error as a failure: no connection (refused, no such host, TLS) is
/// `unavailable`; a connection that broke before the reply was complete is `error`.
fn transport_failure(url: &str, error: &reqwest::Error) -> Failure {
    let cause = causes(error);
    if error.is_connect() {
        failure(
            FailureKind::Unavailable,
            &format!("cannot connect to `{url}`: {cause}"),
        )
    } else if error.is_timeout() {
        failure(
            FailureKind::Timeout,
            &format!("`{url}` did not reply in time: {cause}"),
        )
    } else {
        failure(
            FailureKind::Error,
            &format!("the exchange with `{url}` broke: {cause}"),
        )
    }
}

/// The error's causes below reqwest's own message (which only repeats the URL).
fn causes(error: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    if parts.is_empty() {
        error.to_string()
    } else {
        parts.join(": ")
    }
}

/// A failure whose diagnostic is `text` made one line (an HTTP body is the diagnostic
/// whole, not its last line), then cleaned by [`crate::contract::clean_diagnostic`].
pub fn failure(kind: FailureKind, text: &str) -> Failure {
    Failure::new(kind, &text.replace(['\n', '\r'], " "))
}

/// Token usage from two reply fields; `None` when the reply reports neither.
pub fn usage(input: Option<&Value>, output: Option<&Value>) -> Option<Usage> {
    let count = |value: Option<&Value>| value.and_then(Value::as_u64);
    let (input, output) = (count(input), count(output));
    (input.is_some() || output.is_some()).then(|| Usage {
        input_tokens: input.unwrap_or(0),
        output_tokens: output.unwrap_or(0),
    })
}

/// The answer when `text` has something in it, else `empty` with `why` as diagnostic,
/// keeping the usage (the tokens were spent).
pub fn answer(
    text: String,
    usage: Option<Usage>,
    why: impl FnOnce() -> String,
) -> Result<Answer, Failure> {
    if text.trim().is_empty() {
        Err(failure(FailureKind::Empty, &why()).with_usage(usage))
    } else {
        Ok(Answer {
            text,
            usage,
            source: None,
            vouched: true,
        })
    }
}

/// A `malformed` failure naming what the reply lacks.
pub fn malformed(what: &str) -> Failure {
    failure(
        FailureKind::Malformed,
        &format!("the reply is not shaped as expected: {what}"),
    )
}

/// The text of a JSON value that should be a string: `Ok("")` when absent or null.
pub fn text_of(value: Option<&Value>, path: &str) -> Result<String, Failure> {
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(malformed(&format!("`{path}` is not text"))),
    }
}

#[cfg(test)]
mod tests;
