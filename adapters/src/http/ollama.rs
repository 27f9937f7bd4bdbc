//! Ollama chat (`POST {endpoint}/api/chat`, not streamed).

use super::{answer, malformed, text_of, usage, HttpSettings, Wire};
use crate::contract::{Answer, Failure};
use serde_json::{json, Value};

/// The chat wire format of a local server. It takes no key; an entry that names one (a
/// server behind an authenticating proxy) gets it as a bearer token, the trait's default.
pub struct Ollama;

impl Wire for Ollama {
    const NAME: &'static str = "ollama";

    fn url(settings: &HttpSettings) -> String {
        settings.url("api/chat")
    }

    fn body(settings: &HttpSettings, prompt: &str) -> Value {
        let mut body = json!({
            "model": settings.model,
            "messages": [{"role": "user", "content": prompt}],
            "stream": false,
        });
        let mut options = serde_json::Map::new();
        if let Some(max_tokens) = settings.max_tokens {
            options.insert("num_predict".to_owned(), json!(max_tokens));
        }
        if let Some(temperature) = settings.temperature {
            options.insert("temperature".to_owned(), json!(temperature));
        }
        if !options.is_empty() {
            body["options"] = Value::Object(options);
        }
        body
    }

    fn read(reply: &Value) -> Result<Answer, Failure> {
        let message = reply
            .get("message")
            .filter(|message| message.is_object())
            .ok_or_else(|| malformed("no `message` object"))?;
        let usage = usage(reply.get("prompt_eval_count"), reply.get("eval_count"));
        let text = text_of(message.get("content"), "message.content")?;
        answer(text, usage, || {
            match reply.get("done_reason").and_then(Value::as_str) {
                Some(reason) => format!("the reply has no text (done_reason `{reason}`)"),
                None => "the reply has no text".to_owned(),
            }
        })
    }
}
