//! The OpenAPI 3.1 document of the daemon's HTTP API (`GET /api/v1/openapi.json`,
//! checked in as `share/openapi.json`): one operation per row of the one table
//! ([`super::ROUTES`], through [`super::visit`]) and of [`super::PAGES`]. Everything about
//! a verb is derived: its summary and success status from its row, its parameters from its
//! request's JSON Schema as [`super::wire::Shape`] carries it (the fields in the query,
//! the `{id}` in the path, the context's query parameters from [`ContextQuery`], the
//! paging from [`PageQuery`]), its body and reply schemas from its types (`schemars`).
//! Written by hand: the pages, the two event streams' content, both authentications of
//! the TCP listener and the unix socket's peer check.

use super::wire::Shape;
use super::*;
use crate::core::views::Page;
use schemars::gen::{SchemaGenerator, SchemaSettings};
use schemars::schema::Schema;
use serde_json::{json, Map, Value};
use std::sync::OnceLock;

/// The document as pretty JSON with a final newline, made once.
pub fn document_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let mut text = serde_json::to_string_pretty(&document()).unwrap_or_default();
        text.push('\n');
        text
    })
}

/// What one operation takes and gives.
struct Operation {
    summary: &'static str,
    params: Vec<Value>,
    body: Option<Value>,
    /// Status and content of the success reply.
    ok: (u16, Value),
}

fn json_content(schema: Value) -> Value {
    json!({ "application/json": { "schema": schema } })
}

fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    let schema: Schema = generator.subschema_for::<T>();
    serde_json::to_value(schema).unwrap_or_default()
}

/// The query parameters of every field of `T` (its doc comments their descriptions).
fn fields_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Vec<Value> {
    let root = serde_json::to_value(generator.root_schema_for::<T>()).unwrap_or_default();
    let required: Vec<&str> = root["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let empty = Map::new();
    root["properties"]
        .as_object()
        .unwrap_or(&empty)
        .iter()
        .map(|(name, property)| {
            parameter(name, "query", required.contains(&name.as_str()), property)
        })
        .collect()
}

/// One parameter: its description taken out of its schema, `null` taken out of its type
/// (an optional parameter is one that can be left out).
fn parameter(name: &str, place: &str, required: bool, property: &Value) -> Value {
    let mut schema = property.clone();
    let description = schema
        .as_object_mut()
        .and_then(|s| s.remove("description"))
        .unwrap_or(Value::Null);
    if schema["default"].is_null() {
        if let Some(object) = schema.as_object_mut() {
            object.remove("default");
        }
    }
    if let Some(types) = schema["type"].as_array() {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        schema["type"] = match kept.as_slice() {
            [one] => one.clone(),
            _ => Value::Array(kept),
        };
    }
    if let Some(list) = schema.get_mut("anyOf").and_then(Value::as_array_mut) {
        list.retain(|s| s["type"] != "null");
        if list.len() == 1 {
            schema = list[0].clone();
        }
    }
    if let Some(list) = schema["allOf"].as_array() {
        if list.len() == 1 && schema.as_object().is_some_and(|s| s.len() == 1) {
            schema = list[0].clone();
        }
    }
    let mut value = json!({ "name": name, "in": place, "required": required });
    if !description.is_null() {
        value["description"] = description;
    }
    value["schema"] = schema;
    value
}

/// The parameters of `V`'s request as [`Shape`] carries it: the path's `{id}`, the
/// request's query fields, the paging when it pages, the context's query parameters.
fn params_of<V: Verb>(generator: &mut SchemaGenerator, paged: bool) -> Vec<Value> {
    let shape = Shape::of::<V>();
    let root = serde_json::to_value(generator.root_schema_for::<V>()).unwrap_or_default();
    let mut params = Vec::new();
    if shape.path_id {
        params.push(parameter("id", "path", true, &root["properties"]["id"]));
    }
    for field in &shape.query {
        params.push(parameter(
            &field.name,
            "query",
            field.required,
            &root["properties"][&field.name],
        ));
    }
    if paged {
        params.extend(fields_of::<PageQuery>(generator));
    }
    if shape.context && !shape.body {
        params.extend(fields_of::<ContextQuery>(generator));
    }
    params
}

fn context_body(generator: &mut SchemaGenerator) -> Value {
    let context = schema::<RequestContext>(generator);
    json!({
        "required": false,
        "description": "The asking process's context (instead of `root` and `task`).",
        "content": json_content(json!({
            "type": "object",
            "properties": {"context": context},
            "required": ["context"],
            "additionalProperties": false,
        })),
    })
}

/// The body of `V`, a `POST`: the request, less the `id` its path carries.
fn request_body<V: Verb>(generator: &mut SchemaGenerator, shape: &Shape) -> Value {
    let schema = if shape.path_id {
        let mut root = serde_json::to_value(generator.root_schema_for::<V>()).unwrap_or_default();
        if let Some(object) = root.as_object_mut() {
            object.remove("$schema");
            object.remove("title");
            object.remove("definitions");
        }
        if let Some(properties) = root["properties"].as_object_mut() {
            properties.remove("id");
        }
        if let Some(required) = root["required"].as_array_mut() {
            required.retain(|r| r != "id");
        }
        root
    } else {
        schema::<V>(generator)
    };
    json!({ "required": true, "content": json_content(schema) })
}

/// The `Last-Event-ID` header of an event stream.
fn last_event_id(description: &str) -> Value {
    json!({
        "name": "Last-Event-ID", "in": "header", "required": false,
        "description": description,
        "schema": {"type": "string"},
    })
}

/// Each row's operation. The parameters' schemas come from a generator of their own
/// (`params`), whose definitions join the document's after every other's, so that
/// deriving them does not reorder the document's schemas.
struct Operations<'g> {
    generator: &'g mut SchemaGenerator,
    params: &'g mut SchemaGenerator,
}

impl Visit for Operations<'_> {
    type Out = Operation;

    fn call<V: Call>(self) -> Operation {
        let shape = Shape::of::<V>();
        let body = if shape.body {
            Some(request_body::<V>(self.generator, &shape))
        } else if shape.context {
            Some(context_body(self.generator))
        } else {
            None
        };
        Operation {
            summary: V::SUMMARY,
            params: params_of::<V>(self.params, V::PAGED),
            body,
            ok: (V::OK, json_content(schema::<V::Response>(self.generator))),
        }
    }

    fn stream<V: Verb>(self) -> Operation {
        let generator = self.generator;
        let mut params = params_of::<V>(self.params, false);
        let event = schema::<Event>(generator);
        if V::NAME == VerbName::Events {
            params.push(last_event_id(
                "Server-sent events: the `id` of the last event seen (its position); the \
                 stream resumes after it.",
            ));
            return Operation {
                summary: V::SUMMARY,
                params,
                body: None,
                ok: (
                    200,
                    json!({
                        NDJSON: {"schema": event.clone()},
                        EVENT_STREAM: {
                            "schema": {"type": "string"},
                            "description": "Server-sent events: `id:` the event's position \
                                in the job's stream (1 for the first), `event:` its kind \
                                (`plan`, `started`, `finished`, `recorded`, `disagreement`, \
                                `done`), `data:` the event as JSON (the `Event` schema); \
                                keep-alive comments while idle.",
                            "x-advisord-data": event,
                        },
                    }),
                ),
            };
        }
        let record = schema::<Record>(generator);
        let advisors = schema::<AdvisorsView>(generator);
        params.push(last_event_id(
            "The `id` of the last event seen (`EPOCH-SEQ`): the stream resumes after it, or \
             sends `reset` first when it cannot.",
        ));
        Operation {
            summary: V::SUMMARY,
            params,
            body: None,
            ok: (
                200,
                json!({
                    EVENT_STREAM: {
                        "schema": {"type": "string"},
                        "description": "Server-sent events, `id:` `EPOCH-SEQ`. `event: \
                            job` (data: a job's `Event`), `event: record` (data: the \
                            `Record` written), `event: advisors` (data: the \
                            `AdvisorsView` after it changed), `event: reset` (the \
                            events after `Last-Event-ID` are gone: reload), `event: \
                            dropped` (the subscriber fell behind; the last event). \
                            Keep-alive comments while idle.",
                        "x-advisord-data": {
                            "job": event, "record": record, "advisors": advisors,
                        },
                    },
                }),
            ),
        }
    }
}

fn query(name: &str, required: bool, schema: Value, description: &str) -> Value {
    json!({
        "name": name, "in": "query", "required": required,
        "description": description, "schema": schema,
    })
}

fn path_param(what: &str) -> Value {
    json!({
        "name": "id", "in": "path", "required": true,
        "description": what, "schema": {"type": "string"},
    })
}

/// The replies of every operation: its success, the TCP listener's 401 and 403, errors.
fn responses(ok: (u16, Value), error: &Value) -> Value {
    json!({
        ok.0.to_string(): {"description": "Done.", "content": ok.1},
        "401": {"description": "TCP only: no token, or a wrong one (nothing else is said).", "content": json_content(error.clone())},
        "403": {"description": "TCP only: the `Host` or `Origin` is not the listener's own, or the request names what a token holder may not choose (a `context` in the body; a `catalogue` or `state_dir` the user's own processes did not name through the socket).", "content": json_content(error.clone())},
        "default": {"description": "An error: `{\"error\": CODE, \"message\": ...}` (400 bad input, 404, 405, 409, 413 a body over 1 MiB, 422 refused by the writer, 500, 503).", "content": json_content(error.clone())},
    })
}

/// What a page gives (a page takes no body).
fn page_operation(page: PageName) -> Operation {
    use PageName as P;
    match page {
        P::OpenApi => Operation {
            summary: "This document.",
            params: vec![],
            body: None,
            ok: (200, json_content(json!({"type": "object"}))),
        },
        P::Cockpit => Operation {
            summary: "The cockpit page. On TCP, `?token=` is traded for the cookie (303 to \
                      the same page without it).",
            params: vec![
                query(
                    "token",
                    false,
                    json!({"type": "string"}),
                    "The listener's token, traded for an `HttpOnly; SameSite=Strict` cookie.",
                ),
                query("root", false, json!({"type": "string"}), "The root shown."),
                query("task", false, json!({"type": "string"}), "The task shown."),
            ],
            body: None,
            ok: (200, json!({"text/html": {"schema": {"type": "string"}}})),
        },
        P::CockpitFile => Operation {
            summary: "One of the cockpit page's embedded files (`cockpit.js`, `cockpit.css`).",
            params: vec![path_param("The file's name.")],
            body: None,
            ok: (
                200,
                json!({
                    "text/javascript": {"schema": {"type": "string"}},
                    "text/css": {"schema": {"type": "string"}},
                }),
            ),
        },
    }
}

/// The whole document.
pub fn document() -> Value {
    let mut settings = SchemaSettings::draft2019_09();
    settings.definitions_path = "#/components/schemas/".to_string();
    settings.meta_schema = None;
    let mut generator = SchemaGenerator::new(settings.clone());
    let mut params = SchemaGenerator::new(settings);
    let error = schema::<ErrorBody>(&mut generator);
    let _ = schema::<Page>(&mut generator);
    let mut paths = Map::new();
    for route in ROUTES {
        let op = visit(
            route.verb,
            Operations {
                generator: &mut generator,
                params: &mut params,
            },
        );
        let mut value = json!({
            "operationId": format!("{:?}", route.verb),
            "summary": op.summary,
            "responses": responses(op.ok, &error),
        });
        if !op.params.is_empty() {
            value["parameters"] = Value::Array(op.params);
        }
        if let Some(body) = op.body {
            value["requestBody"] = body;
        }
        let path = route.path.to_string();
        let entry = paths.entry(path).or_insert_with(|| json!({}));
        entry[route.method.to_lowercase()] = value;
    }
    for route in PAGES {
        let op = page_operation(route.page);
        let mut value = json!({
            "operationId": format!("{:?}", route.page),
            "summary": op.summary,
            "responses": responses(op.ok, &error),
        });
        if !op.params.is_empty() {
            value["parameters"] = Value::Array(op.params);
        }
        let entry = paths
            .entry(route.path.to_string())
            .or_insert_with(|| json!({}));
        entry["get"] = value;
    }
    let mut schemas: Map<String, Value> = generator
        .take_definitions()
        .into_iter()
        .map(|(name, schema)| (name, serde_json::to_value(schema).unwrap_or_default()))
        .collect();
    for (name, schema) in params.take_definitions() {
        if !schemas.contains_key(&name) {
            let schema = serde_json::to_value(schema).unwrap_or_default();
            schemas.insert(name, schema);
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "advisord",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The daemon's HTTP API, served on its unix socket and, with \
                `advisord --listen ADDR:PORT`, on TCP. Generated from the protocol's types; \
                do not edit by hand.\n\nOn the unix socket (`curl --unix-socket`) no token \
                is needed: the socket and its directory are the user's alone, and a peer of \
                another uid is refused before a byte is read. On TCP every request needs the \
                listener's token (bearer or cookie), and a `Host` or `Origin` that is not the \
                listener's own is refused with 403. Over TCP the daemon builds every request's \
                context itself from the query (`root`, `task`, `catalogue`, `state_dir`): a \
                `context` in the body is refused with 403, and so is a `catalogue` or \
                `state_dir` the user's own processes did not name through the socket (the \
                root's own state directory, the daemon's `ADVISORD_CATALOGUE` and trusted \
                repository catalogues excepted). No CORS header is ever sent. Bodies over \
                1 MiB get 413; malformed JSON gets 400 naming the problem.",
        },
        "servers": [
            {"url": "http://127.0.0.1:7433", "description": "The TCP listener (`advisord --listen 127.0.0.1:7433`): token required."},
            {"url": "http://localhost", "description": "The unix socket (`curl --unix-socket SOCKET http://localhost/...`): the peer-uid check instead of a token."},
        ],
        "security": [{"bearer": []}, {"cookie": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http", "scheme": "bearer",
                    "description": "TCP: `Authorization: Bearer TOKEN`, the token kept in the daemon's data directory (`cockpit.token`, mode 0600).",
                },
                "cookie": {
                    "type": "apiKey", "in": "cookie", "name": "advisord_token",
                    "description": "TCP: the cookie `GET /cockpit?token=TOKEN` sets (`HttpOnly; SameSite=Strict`).",
                },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_an_operation_with_a_reply() {
        let doc = document();
        for route in ROUTES {
            let op = &doc["paths"][route.path][route.method.to_lowercase()];
            assert!(op.is_object(), "{} {}", route.method, route.path);
            assert!(op["responses"]["default"].is_object());
        }
        let events = &doc["paths"]["/api/v1/consultations/{id}/events"]["get"];
        assert!(events["responses"]["200"]["content"][EVENT_STREAM].is_object());
        assert!(events["responses"]["200"]["content"][NDJSON].is_object());
        let feed = &doc["paths"]["/api/v1/events"]["get"];
        assert!(feed["responses"]["200"]["content"][EVENT_STREAM].is_object());
        // Every reference resolves.
        let text = doc.to_string();
        for piece in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &piece[..piece.find('"').unwrap()];
            assert!(
                doc["components"]["schemas"][name].is_object(),
                "a dangling reference to `{name}`"
            );
        }
    }
}
