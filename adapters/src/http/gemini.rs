//! Gemini generateContent (`POST {endpoint}/v1beta/models/{model}:generateContent`).

use super::{answer, malformed, secret, usage, HttpSettings, Wire};
use crate::contract::{Answer, Failure, Usage};
use reqwest::RequestBuilder;
use serde_json::{json, Value};

/// The generateContent wire format.
pub struct Gemini;

impl Wire for Gemini {
    const NAME: &'static str = "gemini";

    fn url(settings: &HttpSettings) -> String {
        // The API's own model names read `models/x`; accept the entry either way.
        let model = settings.model.trim_start_matches("models/");
        settings.url(&format!("v1beta/models/{model}:generateContent"))
    }

    fn authorise(request: RequestBuilder, credential: Option<&str>) -> RequestBuilder {
        match credential.and_then(secret) {
            Some(key) => request.header("x-goog-api-key", key),
            None => request,
        }
    }

    fn body(settings: &HttpSettings, prompt: &str) -> Value {
        let mut body = json!({
            "contents": [{"role": "user", "parts": [{"text": prompt}]}],
        });
        let mut config = serde_json::Map::new();
        if let Some(max_tokens) = settings.max_tokens {
            config.insert("maxOutputTokens".to_owned(), json!(max_tokens));
        }
        if let Some(temperature) = settings.temperature {
            config.insert("temperature".to_owned(), json!(temperature));
        }
        if !config.is_empty() {
            body["generationConfig"] = Value::Object(config);
        }
        body
    }

    fn read(reply: &Value) -> Result<Answer, Failure> {
        let metadata = reply.get("usageMetadata");
        let usage = usage(
            metadata.and_then(|m| m.get("promptTokenCount")),
            metadata.and_then(|m| m.get("candidatesTokenCount")),
        )
        .map(|usage| Usage {
            // Thinking tokens are billed as output but not counted among the candidates'.
            output_tokens: usage.output_tokens
                + metadata
                    .and_then(|m| m.get("thoughtsTokenCount"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            ..usage
        });
        let candidates = match reply.get("candidates") {
            Some(Value::Array(candidates)) => candidates.as_slice(),
            Some(_) => return Err(malformed("`candidates` is not a list")),
            // A blocked prompt comes back with `promptFeedback` and no candidates.
            None if reply.get("promptFeedback").is_some() => &[],
            None => return Err(malformed("no `candidates` list")),
        };
        let candidate = candidates.first();
        let text = candidate
            .and_then(|candidate| candidate.pointer("/content/parts"))
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter(|part| part.get("thought").and_then(Value::as_bool) != Some(true))
                    .filter_map(|part| part.get("text")?.as_str())
                    .collect::<String>()
            })
            .unwrap_or_default();
        answer(text, usage, || {
            let blocked = reply
                .pointer("/promptFeedback/blockReason")
                .and_then(Value::as_str);
            let finish = candidate
                .and_then(|c| c.get("finishReason"))
                .and_then(Value::as_str);
            match (blocked, finish) {
                (Some(reason), _) => format!("the prompt was blocked (blockReason `{reason}`)"),
                (None, Some(reason)) => format!("the reply has no text (finishReason `{reason}`)"),
                (None, None) => "the reply has no text".to_owned(),
            }
        })
    }
}
