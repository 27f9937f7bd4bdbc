//! The fake model as an agent's model: it calls tools, in each vendor's wire format, and
//! reads what the host sends back.
//!
//! An [`Action`] list is a conversation: the request that carries N tool results gets
//! action N. `{"call": "consult", "arguments": {...}}` calls the tool whose name ends in
//! `consult` (the host's own prefix, `mcp__advisord__consult` or `mcp_advisord_consult`,
//! is found in the request's tool list); `{"say": "..."}` answers with text, which ends the
//! host's turn. A string `{{last.id}}` in the arguments is the first id (a 26-character
//! ULID) in the last tool result, so `job` with `wait` can follow the job `consult`
//! started.
//!
//! The shapes: Anthropic `tool_use` content blocks (streamed as `content_block_start` and
//! `input_json_delta`, `stop_reason: tool_use`); the Responses API `function_call` item,
//! or, when the host offers its MCP tools only as deferred namespaces behind a code-mode
//! `exec` tool (Codex), a `custom_tool_call` of `exec` whose JavaScript calls
//! `tools.<namespace>__<tool>(...)` and returns its result; Gemini `functionCall` parts.

use super::{event, responses_object, Protocol};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Each call gets an id of its own (hosts match results to calls by it).
static CALLS: AtomicUsize = AtomicUsize::new(0);

fn call_id(prefix: &str) -> String {
    format!("{prefix}_fake{}", CALLS.fetch_add(1, Ordering::Relaxed))
}

/// One turn of the scripted model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// Call the tool whose name ends in this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// The call's arguments (`{{last.id}}` is replaced as described above).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub arguments: Value,
    /// Or answer with this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub say: Option<String>,
}

impl Action {
    /// Call the tool whose name ends in `suffix` with `arguments`.
    pub fn call(suffix: &str, arguments: Value) -> Action {
        Action {
            call: Some(suffix.to_owned()),
            arguments,
            say: None,
        }
    }

    /// Answer with `text`.
    pub fn say(text: &str) -> Action {
        Action {
            call: None,
            arguments: Value::Null,
            say: Some(text.to_owned()),
        }
    }
}

/// Every tool name a request offers (its tool list, at any depth), plus the tools of the
/// namespaces it names as deferred (`mcp__server`), spelled `mcp__server__`.
pub fn tool_names(protocol: Protocol, body: &Value) -> Vec<String> {
    let mut names = Vec::new();
    match protocol {
        Protocol::Anthropic | Protocol::OpenAi | Protocol::Ollama => {
            for tool in body["tools"].as_array().into_iter().flatten() {
                let name = tool["name"].as_str().or(tool["function"]["name"].as_str());
                names.extend(name.map(str::to_owned));
            }
        }
        Protocol::Gemini => {
            for tool in body["tools"].as_array().into_iter().flatten() {
                for declaration in tool["functionDeclarations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    names.extend(declaration["name"].as_str().map(str::to_owned));
                }
            }
        }
        Protocol::Responses => {
            walk_tools(&body["tools"], &mut names);
            for item in body["input"].as_array().into_iter().flatten() {
                if item["type"] == "additional_tools" {
                    walk_tools(&item["tools"], &mut names);
                }
            }
        }
    }
    names
}

/// Names of tools and namespaces, at any depth (`{"type": "namespace", "tools": [...]}`).
fn walk_tools(tools: &Value, names: &mut Vec<String>) {
    for tool in tools.as_array().into_iter().flatten() {
        if let Some(name) = tool["name"].as_str() {
            if tool["type"] == "namespace" {
                walk_tools(&tool["tools"], names);
            } else {
                names.push(name.to_owned());
            }
        }
    }
}

/// The namespaces a request names as deferred (Codex: "Deferred tool namespaces:\n-
/// mcp__advisord: ...").
fn deferred_namespaces(body: &Value) -> Vec<String> {
    let text = body.to_string();
    let mut found = Vec::new();
    let Some(at) = text.find("Deferred tool namespaces:") else {
        return found;
    };
    for line in text[at..].split("\\n").skip(1) {
        let Some(rest) = line.strip_prefix("- ") else {
            break;
        };
        if let Some((name, _)) = rest.split_once(':') {
            found.push(name.to_owned());
        }
    }
    found
}

/// The text of every tool result a request carries, in order.
pub fn tool_results(protocol: Protocol, body: &Value) -> Vec<String> {
    let text_of = |content: &Value| -> String {
        match content {
            Value::String(s) => s.clone(),
            Value::Array(items) => items
                .iter()
                .map(|item| {
                    item["text"]
                        .as_str()
                        .map_or_else(|| item.to_string(), str::to_owned)
                })
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        }
    };
    let mut results = Vec::new();
    match protocol {
        Protocol::Anthropic => {
            for message in body["messages"].as_array().into_iter().flatten() {
                for block in message["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" {
                        results.push(text_of(&block["content"]));
                    }
                }
            }
        }
        Protocol::Responses => {
            for item in body["input"].as_array().into_iter().flatten() {
                if matches!(
                    item["type"].as_str(),
                    Some("function_call_output" | "custom_tool_call_output")
                ) {
                    results.push(text_of(&item["output"]));
                }
            }
        }
        Protocol::Gemini => {
            for content in body["contents"].as_array().into_iter().flatten() {
                for part in content["parts"].as_array().into_iter().flatten() {
                    if let Some(response) = part.get("functionResponse") {
                        results.push(response["response"].to_string());
                    }
                }
            }
        }
        Protocol::OpenAi | Protocol::Ollama => {
            for message in body["messages"].as_array().into_iter().flatten() {
                if message["role"] == "tool" {
                    results.push(text_of(&message["content"]));
                }
            }
        }
    }
    results
}

/// The first ULID (26 characters of Crockford base32, starting with `0`) in `text`.
fn first_ulid(text: &str) -> Option<String> {
    const ALPHABET: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let bytes = text.as_bytes();
    let mut start = 0;
    while start + 26 <= bytes.len() {
        let run = bytes[start..]
            .iter()
            .take_while(|b| ALPHABET.as_bytes().contains(b))
            .count();
        if run == 26 && bytes[start] == b'0' {
            return Some(text[start..start + 26].to_owned());
        }
        start += run.max(1);
    }
    None
}

/// `arguments` with `{{last.id}}` replaced by the first id of `last`.
fn fill(arguments: &Value, last: Option<&str>) -> Value {
    match arguments {
        Value::String(s) if s.contains("{{last.id}}") => {
            let id = last.and_then(first_ulid).unwrap_or_default();
            Value::String(s.replace("{{last.id}}", &id))
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, last)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, last)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What the model does for a request: a text, or a call of a tool by its full name.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Answer with text.
    Say(String),
    /// Call `name` with `arguments`.
    Call {
        /// The tool's full name as the host offers it.
        name: String,
        /// The arguments.
        arguments: Value,
    },
    /// Call a deferred tool through the host's code-mode `exec` tool with this source.
    Exec(String),
}

/// The turn `actions` take for a request carrying `body`.
pub fn turn(protocol: Protocol, body: &Value, actions: &[Action]) -> Turn {
    let results = tool_results(protocol, body);
    let Some(action) = actions.get(results.len()) else {
        return Turn::Say("Done.".to_owned());
    };
    let Some(suffix) = &action.call else {
        return Turn::Say(action.say.clone().unwrap_or_else(|| "Done.".to_owned()));
    };
    let arguments = fill(&action.arguments, results.last().map(String::as_str));
    let names = tool_names(protocol, body);
    let matches = |name: &str| {
        name == suffix
            || name.ends_with(&format!("__{suffix}"))
            || name.ends_with(&format!("_{suffix}"))
    };
    if let Some(name) = names.iter().find(|n| matches(n)) {
        return Turn::Call {
            name: name.clone(),
            arguments,
        };
    }
    if names.iter().any(|n| n == "exec") {
        if let Some(namespace) = deferred_namespaces(body).first() {
            let source = format!(
                "const result = await tools.{namespace}__{suffix}({arguments});\n\
                 text(JSON.stringify(result));\n"
            );
            return Turn::Exec(source);
        }
    }
    Turn::Say(format!(
        "no tool ending in `{suffix}` was offered; the tools were: {}",
        names.join(", ")
    ))
}

/// A non-streamed reply calling a tool.
pub fn call_body(protocol: Protocol, model: &str, turn: &Turn) -> Value {
    match (protocol, turn) {
        (Protocol::Anthropic, Turn::Call { name, arguments }) => json!({
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "tool_use", "id": call_id("toolu"), "name": name, "input": arguments}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }),
        (Protocol::Gemini, Turn::Call { name, arguments }) => json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": name, "args": arguments}}]},
                "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
            "modelVersion": model,
        }),
        (Protocol::Responses, _) => {
            let mut response = responses_object(model, "", 10, 10, "completed");
            response["output"] = json!([responses_item(turn)]);
            response
        }
        (_, Turn::Call { name, arguments }) => json!({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_fake", "type": "function",
                    "function": {"name": name, "arguments": arguments.to_string()}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }),
        (_, _) => json!({"error": "this protocol has no code-mode tool"}),
    }
}

/// The Responses API output item of a call.
fn responses_item(turn: &Turn) -> Value {
    let call_id = call_id("call");
    match turn {
        Turn::Exec(source) => json!({
            "type": "custom_tool_call", "id": format!("ctc_{call_id}"), "call_id": call_id,
            "name": "exec", "input": source, "status": "completed",
        }),
        Turn::Call { name, arguments } => json!({
            "type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
            "name": name, "arguments": arguments.to_string(), "status": "completed",
        }),
        Turn::Say(_) => json!({}),
    }
}

/// The events of a streamed reply calling a tool.
pub fn call_events(protocol: Protocol, model: &str, turn: &Turn) -> Vec<String> {
    match (protocol, turn) {
        (Protocol::Anthropic, Turn::Call { name, arguments }) => vec![
            event(
                Some("message_start"),
                &json!({"type": "message_start", "message": {
                    "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                    "content": [], "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            ),
            event(
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": 0, "content_block": {
                    "type": "tool_use", "id": call_id("toolu"), "name": name, "input": {}}}),
            ),
            event(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": 0, "delta": {
                    "type": "input_json_delta", "partial_json": arguments.to_string()}}),
            ),
            event(
                Some("content_block_stop"),
                &json!({"type": "content_block_stop", "index": 0}),
            ),
            event(
                Some("message_delta"),
                &json!({"type": "message_delta",
                        "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                        "usage": {"output_tokens": 10}}),
            ),
            event(Some("message_stop"), &json!({"type": "message_stop"})),
        ],
        (Protocol::Gemini, Turn::Call { .. }) => {
            vec![event(None, &call_body(protocol, model, turn))]
        }
        (Protocol::Responses, _) => {
            let mut sequence = 0u64;
            let mut next = |name: &str, mut data: Value| {
                data["type"] = json!(name);
                data["sequence_number"] = json!(sequence);
                sequence += 1;
                event(Some(name), &data)
            };
            let item = responses_item(turn);
            let mut partial = item.clone();
            partial["status"] = json!("in_progress");
            let (delta_kind, delta, whole) = match turn {
                Turn::Exec(source) => {
                    partial["input"] = json!("");
                    ("custom_tool_call_input", source.clone(), "input")
                }
                _ => {
                    partial["arguments"] = json!("");
                    (
                        "function_call_arguments",
                        item["arguments"].as_str().unwrap_or_default().to_owned(),
                        "arguments",
                    )
                }
            };
            let item_id = item["id"].clone();
            let mut completed = responses_object(model, "", 10, 10, "completed");
            completed["output"] = json!([item.clone()]);
            vec![
                next(
                    "response.created",
                    json!({"response": responses_object(model, "", 0, 0, "in_progress")}),
                ),
                next(
                    "response.output_item.added",
                    json!({"output_index": 0, "item": partial}),
                ),
                next(
                    &format!("response.{delta_kind}.delta"),
                    json!({"item_id": item_id, "output_index": 0, "delta": delta}),
                ),
                next(
                    &format!("response.{delta_kind}.done"),
                    json!({"item_id": item_id, "output_index": 0, whole: delta}),
                ),
                next(
                    "response.output_item.done",
                    json!({"output_index": 0, "item": item}),
                ),
                next("response.completed", json!({"response": completed})),
            ]
        }
        (_, _) => vec![
            event(None, &call_body(protocol, model, turn)),
            "data: [DONE]\n\n".to_owned(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tool_is_found_by_its_suffix_and_the_turn_by_the_results_carried() {
        let actions = [
            Action::call("consult", json!({"record": {"subject": "s"}})),
            Action::call("job", json!({"id": "{{last.id}}", "wait": true})),
            Action::say("all in"),
        ];
        let first = json!({"tools": [{"name": "Bash"}, {"name": "mcp__advisord__consult"}],
                           "messages": [{"role": "user", "content": "go"}]});
        assert_eq!(
            turn(Protocol::Anthropic, &first, &actions),
            Turn::Call {
                name: "mcp__advisord__consult".into(),
                arguments: json!({"record": {"subject": "s"}})
            }
        );
        let second = json!({"tools": [{"name": "mcp__advisord__job"}],
            "messages": [{"role": "user", "content": [{"type": "tool_result",
                "content": [{"type": "text", "text": "{\"id\": \"01JABCDEFGHJKMNPQRSTVWXYZ0\", \"state\": \"running\"}"}]}]}]});
        assert_eq!(
            turn(Protocol::Anthropic, &second, &actions),
            Turn::Call {
                name: "mcp__advisord__job".into(),
                arguments: json!({"id": "01JABCDEFGHJKMNPQRSTVWXYZ0", "wait": true})
            }
        );
        let gemini = json!({"tools": [{"functionDeclarations": [{"name": "mcp_advisord_consult"}]}],
            "contents": [{"role": "user", "parts": [{"text": "go"}]}]});
        assert!(
            matches!(turn(Protocol::Gemini, &gemini, &actions), Turn::Call { name, .. } if name == "mcp_advisord_consult")
        );
        let codex = json!({"input": [{"type": "additional_tools", "tools": [{"type": "namespace",
            "name": "functions", "tools": [{"type": "custom", "name": "exec"}]}]},
            {"type": "message", "content": [{"type": "input_text",
             "text": "<tools>\nDeferred tool namespaces:\n- mcp__advisord: Record it\n</tools>"}]}]});
        match turn(Protocol::Responses, &codex, &actions) {
            Turn::Exec(source) => assert!(
                source.contains("tools.mcp__advisord__consult({\"record\""),
                "{source}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
