//! OpenAI-compatible chat completions: OpenAI itself, and OpenRouter, LiteLLM, vLLM and
//! llama.cpp servers through `endpoint` (which includes the `/v1`).

use super::{answer, malformed, usage, HttpSettings, Wire};
use crate::contract::{Answer, Failure};
use serde_json::{json, Value};

/// The chat completions wire format (`POST {endpoint}/chat/completions`).
pub struct OpenAi;

impl Wire for OpenAi {
    const NAME: &'static str = "openai";

    fn url(settings: &HttpSettings) -> String {
        settings.url("chat/completions")
    }

    fn body(settings: &HttpSettings, prompt: &str) -> Value {
        let mut body = json!({
            "model": settings.model,
            "messages": [{"role": "user", "content": prompt}],
        });
        // Sent only when set: OpenAI's reasoning models refuse both.
        if let Some(max_tokens) = settings.max_tokens {
            body["max_tokens"] = json!(max_tokens);
        }
        if let Some(temperature) = settings.temperature {
            body["temperature"] = json!(temperature);
        }
        body
    }

    fn read(reply: &Value) -> Result<Answer, Failure> {
        let choices = reply
            .get("choices")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("no `choices` list"))?;
        let usage = usage(
            reply.pointer("/usage/prompt_tokens"),
            reply.pointer("/usage/completion_tokens"),
        );
        let Some(choice) = choices.first() else {
            return answer(String::new(), usage, || {
                "the reply has no choice".to_owned()
            });
        };
        let text = match choice.pointer("/message/content") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            // Some compatible servers send content as a list of typed parts.
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|part| part.get("text")?.as_str())
                .collect(),
            Some(_) => return Err(malformed("`choices[0].message.content` is not text")),
        };
        answer(text, usage, || {
            let mut why = String::from("the reply has no text");
            if let Some(refusal) = choice.pointer("/message/refusal").and_then(Value::as_str) {
                why.push_str(&format!(" (refused: {refusal})"));
            } else if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                why.push_str(&format!(" (finish_reason `{reason}`)"));
            }
            why
        })
    }
}
