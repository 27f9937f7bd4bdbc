//! The OpenAPI 3.1 document of the daemon's HTTP API (`GET /api/v1/openapi.json`,
//! checked in as `share/openapi.json`): one operation per row of [`super::ROUTES`] and of
//! [`super::PAGES`], its
//! request and response schemas generated from the protocol's types (`schemars`), both
//! authentications of the TCP listener, the unix socket's peer check, and both event
//! streams.

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

fn query(name: &str, required: bool, schema: Value, description: &str) -> Value {
    json!({
        "name": name, "in": "query", "required": required,
        "description": description, "schema": schema,
    })
}

/// `root` and `task` of a GET without a body.
fn context_params() -> Vec<Value> {
    vec![
        query(
            "root",
            false,
            json!({"type": "string"}),
            "The project root (absolute), when no `{\"context\": {...}}` body is sent; the \
             rest of the context then comes from the daemon's own environment.",
        ),
        query(
            "task",
            false,
            json!({"type": "string"}),
            "The task (default: the root's current one).",
        ),
    ]
}

fn page_params() -> Vec<Value> {
    vec![
        query(
            "offset",
            false,
            json!({"type": "integer", "minimum": 0}),
            "Skip this many (paging).",
        ),
        query(
            "limit",
            false,
            json!({"type": "integer", "minimum": 0}),
            "At most this many (paging); the reply's `page` says which slice it holds.",
        ),
    ]
}

fn job_id_param(what: &str) -> Value {
    json!({
        "name": "id", "in": "path", "required": true,
        "description": what, "schema": {"type": "string"},
    })
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

fn request_body<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    json!({ "required": true, "content": json_content(schema::<T>(generator)) })
}

fn operation(verb: VerbName, generator: &mut SchemaGenerator) -> Operation {
    use VerbName as V;
    let ok = |status: u16, schema: Value| (status, json_content(schema));
    match verb {
        V::Health => Operation {
            summary: "The daemon's version, pid, uptime, jobs by state, mesh and TCP listener.",
            params: vec![],
            body: None,
            ok: ok(200, schema::<Health>(generator)),
        },
        V::Advisors => Operation {
            summary: "Every advisor of the context's catalogue, its status and why; capacity per capability.",
            params: context_params(),
            body: Some(context_body(generator)),
            ok: ok(200, schema::<AdvisorsView>(generator)),
        },
        V::Plan => Operation {
            summary: "A plan preview for a materiality, confidence and capabilities (not recorded).",
            params: vec![],
            body: Some(request_body::<PlanRequest>(generator)),
            ok: ok(200, schema::<Plan>(generator)),
        },
        V::Record => Operation {
            summary: "The one writer: store a record (`kind` plus the caller's fields).",
            params: vec![],
            body: Some(request_body::<RecordRequest>(generator)),
            ok: ok(201, schema::<Record>(generator)),
        },
        V::Status => Operation {
            summary: "The task's derived status: each assessment and where it stands, a timeline, tokens and spend.",
            params: [context_params(), page_params()].concat(),
            body: Some(context_body(generator)),
            ok: ok(200, schema::<StatusView>(generator)),
        },
        V::Spend => Operation {
            summary: "Spend per advisor, task and day, and every budget's state.",
            params: context_params(),
            body: Some(context_body(generator)),
            ok: ok(200, schema::<SpendView>(generator)),
        },
        V::Explain => Operation {
            summary: "The provenance chain of one record.",
            params: [
                vec![
                    query(
                        "id",
                        true,
                        json!({"type": "string"}),
                        "The record explained.",
                    ),
                    query(
                        "downstream",
                        false,
                        json!({"type": "boolean"}),
                        "Also list what rests on it.",
                    ),
                ],
                context_params(),
            ]
            .concat(),
            body: Some(context_body(generator)),
            ok: ok(200, schema::<ExplainView>(generator)),
        },
        V::Tree => Operation {
            summary: "The task's records as a tree (assessment → plan → consultations → ...).",
            params: [
                vec![
                    query(
                        "depth",
                        false,
                        json!({"type": "integer", "minimum": 1}),
                        "How deep (1: assessments only).",
                    ),
                    query(
                        "show_superseded",
                        false,
                        json!({"type": "boolean"}),
                        "Also show superseded conclusions.",
                    ),
                ],
                page_params(),
                context_params(),
            ]
            .concat(),
            body: Some(context_body(generator)),
            ok: ok(200, schema::<TreeView>(generator)),
        },
        V::Check => Operation {
            summary: "Provider-independence and CI-credential findings.",
            params: [
                vec![query(
                    "path",
                    false,
                    json!({"type": "string"}),
                    "Check only this directory or file.",
                )],
                context_params(),
            ]
            .concat(),
            body: Some(context_body(generator)),
            ok: ok(200, schema::<CheckReport>(generator)),
        },
        V::Verify => Operation {
            summary: "Walk the task's hash chain (or every task's).",
            params: [
                vec![query(
                    "all",
                    false,
                    json!({"type": "boolean"}),
                    "Every task of the state directory.",
                )],
                context_params(),
            ]
            .concat(),
            body: Some(context_body(generator)),
            ok: ok(200, schema::<VerifyReport>(generator)),
        },
        V::Tasks => Operation {
            summary: "The tasks of the context's state directory.",
            params: context_params(),
            body: Some(context_body(generator)),
            ok: ok(200, schema::<TaskList>(generator)),
        },
        V::Consult => Operation {
            summary: "Queue a consultation job for an assessment; answered once it is journaled.",
            params: vec![],
            body: Some(request_body::<ConsultRequest>(generator)),
            ok: ok(202, schema::<Job>(generator)),
        },
        V::Jobs => Operation {
            summary: "The jobs kept (unfinished and recently finished), oldest first.",
            params: vec![
                query("root", false, json!({"type": "string"}), "Only the jobs of this root."),
                query("task", false, json!({"type": "string"}), "Only the jobs of this task."),
                query(
                    "state",
                    false,
                    schema::<JobState>(generator),
                    "Only the jobs in this state.",
                ),
            ],
            body: None,
            ok: ok(200, schema::<JobList>(generator)),
        },
        V::Job => Operation {
            summary: "One job as it stands.",
            params: vec![job_id_param("The job.")],
            body: None,
            ok: ok(200, schema::<Job>(generator)),
        },
        V::Cancel => Operation {
            summary: "Cancel a job: 200 once it ended, 202 while it is still stopping.",
            params: vec![job_id_param("The job.")],
            body: None,
            ok: ok(200, schema::<Job>(generator)),
        },
        V::Events => {
            let event = schema::<Event>(generator);
            Operation {
                summary: "A job's events, past then live, ending after `done`: NDJSON, or \
                          server-sent events when `Accept` names `text/event-stream`.",
                params: vec![
                    job_id_param("The job."),
                    query(
                        "from",
                        false,
                        json!({"type": "integer", "minimum": 0}),
                        "Skip the events already seen.",
                    ),
                    json!({
                        "name": "Last-Event-ID", "in": "header", "required": false,
                        "description": "Server-sent events: the `id` of the last event seen \
                                        (its position); the stream resumes after it.",
                        "schema": {"type": "string"},
                    }),
                ],
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
            }
        }
        V::Feed => {
            let event = schema::<Event>(generator);
            let record = schema::<Record>(generator);
            let advisors = schema::<AdvisorsView>(generator);
            Operation {
                summary: "Follow a root (and one task, or all) as server-sent events: job \
                          events, records written, advisors' status changes.",
                params: vec![
                    query(
                        "root",
                        true,
                        json!({"type": "string"}),
                        "The project root (absolute).",
                    ),
                    query(
                        "task",
                        false,
                        json!({"type": "string"}),
                        "Only this task (default: every task of the root).",
                    ),
                    json!({
                        "name": "Last-Event-ID", "in": "header", "required": false,
                        "description": "The `id` of the last event seen (`EPOCH-SEQ`): the \
                                        stream resumes after it, or sends `reset` first when \
                                        it cannot.",
                        "schema": {"type": "string"},
                    }),
                ],
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
        V::Reviews => Operation {
            summary: "The reviews waiting in this daemon's mesh inbox.",
            params: vec![],
            body: None,
            ok: ok(200, schema::<ReviewList>(generator)),
        },
        V::ReviewAnswer => Operation {
            summary: "Answer a waiting review; the answer goes to the daemon that asked.",
            params: vec![job_id_param("The review.")],
            body: Some(request_body::<ReviewAnswer>(generator)),
            ok: ok(200, schema::<ReviewAnswered>(generator)),
        },
    }
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
            params: vec![job_id_param("The file's name.")],
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
    let mut generator = SchemaGenerator::new(settings);
    let error = schema::<ErrorBody>(&mut generator);
    let _ = schema::<Page>(&mut generator);
    let mut paths = Map::new();
    for route in ROUTES {
        let op = operation(route.verb, &mut generator);
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
    let schemas: Map<String, Value> = generator
        .take_definitions()
        .into_iter()
        .map(|(name, schema)| (name, serde_json::to_value(schema).unwrap_or_default()))
        .collect();
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
