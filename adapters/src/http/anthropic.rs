//! Anthropic messages (`POST {endpoint}/v1/messages`).

use super::{answer, malformed, secret, usage, HttpSettings, Wire};
use crate::contract::{Answer, Failure};
use reqwest::RequestBuilder;
use serde_json::{json, Value};

/// The API version the request and reply shapes below follow.
pub const API_VERSION: &str = "2023-06-01";

/// The messages API requires `max_tokens`; this is used when the entry sets none.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The messages wire format.
pub struct Anthropic;

impl Wire for Anthropic {
    const NAME: &'static str = "anthropic";

    fn url(settings: &HttpSettings) -> String {
        settings.url("v1/messages")
    }

    fn authorise(request: RequestBuilder, credential: Option<&str>) -> RequestBuilder {
        let request = request.header("anthropic-version", API_VERSION);
        match credential.and_then(secret) {
            Some(key) => request.header("x-api-key", key),
            None => request,
        }
    }

    fn body(settings: &HttpSettings, prompt: &str) -> Value {
        let mut body = json!({
            "model": settings.model,
            "max_tokens": settings.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": [{"role": "user", "content": prompt}],
        });
        if let Some(temperature) = settings.temperature {
            body["temperature"] = json!(temperature);
        }
        body
    }

    fn read(reply: &Value) -> Result<Answer, Failure> {
        let blocks = reply
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("no `content` list"))?;
        let usage = usage(
            reply.pointer("/usage/input_tokens"),
            reply.pointer("/usage/output_tokens"),
        );
        // Only `text` blocks are the answer; `thinking` and tool blocks are not.
        let text = blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text")?.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        answer(text, usage, || {
            match reply.get("stop_reason").and_then(Value::as_str) {
                Some(reason) => format!("the reply has no text (stop_reason `{reason}`)"),
                None => "the reply has no text".to_owned(),
            }
        })
    }
}
