//! How HTTP carries a verb's request, read from the one table's route and the request's
//! own JSON Schema, so that no verb's arguments are written down twice: the daemon decodes
//! with it (`crate::daemon::http`) and the OpenAPI document lists its parameters with it
//! (`super::openapi`); [`super::HttpCall::of`] is the encoding side of the same rule.
//!
//! The rule: a path's `{id}` is the request's `id`; a `POST` carries the rest as its JSON
//! body; any other method carries `context` as the body `{"context": ...}` (or, without
//! one, [`super::ContextQuery`] builds it) and every other field of the request as a query
//! parameter, read as the field's schema says (an integer, a number, a boolean, or text).

use super::{route_of, Verb, VerbName};
use serde_json::{Map, Value};

/// What a query value is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// Text, as it is (strings, paths, ids, names of an enum).
    Text,
}

/// One field of a request carried in the query string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its name (the query parameter's).
    pub name: String,
    /// What its value is read as.
    pub kind: Kind,
    /// Whether the request cannot do without it.
    pub required: bool,
    /// What stands for its value in a message (`ID`, or `RECORD_ID` for a field whose
    /// schema refers to the type `RecordId`).
    pub placeholder: String,
}

/// How one verb's request travels over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The verb.
    pub verb: VerbName,
    /// Whether the path has an `{id}` (the request's `id`).
    pub path_id: bool,
    /// Whether the request is the JSON body (a `POST`).
    pub body: bool,
    /// Whether the request has a `context`.
    pub context: bool,
    /// The fields carried in the query string, in the request's order.
    pub query: Vec<Field>,
}

impl Shape {
    /// The shape of `V`'s request.
    pub fn of<V: Verb>() -> Shape {
        let route = route_of(V::NAME);
        let schema = serde_json::to_value(schemars::schema_for!(V)).unwrap_or_default();
        let path_id = route.path.contains("{id}");
        let body = route.method == "POST";
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let empty = Map::new();
        let properties = schema["properties"].as_object().unwrap_or(&empty);
        let query = if body {
            Vec::new()
        } else {
            properties
                .iter()
                .filter(|(name, _)| *name != "context" && !(path_id && *name == "id"))
                .map(|(name, property)| Field {
                    name: name.clone(),
                    kind: kind_of(property, &schema["definitions"]),
                    required: required.contains(&name.as_str()),
                    placeholder: placeholder(name, property),
                })
                .collect()
        };
        Shape {
            verb: V::NAME,
            path_id,
            body,
            context: properties.contains_key("context"),
            query,
        }
    }

    /// The request's fields among `pairs` (a query string's, decoded), each read as its
    /// kind; other parameters (`root`, `task`, paging) are not the request's and are left.
    pub fn read_query(&self, pairs: &[(String, String)]) -> Result<Map<String, Value>, String> {
        let mut fields = Map::new();
        for (name, text) in pairs {
            let Some(field) = self.query.iter().find(|f| &f.name == name) else {
                continue;
            };
            if fields.contains_key(name) {
                return Err(format!("`{name}` is given twice; give it once"));
            }
            let value = match field.kind {
                Kind::Text => Value::String(text.clone()),
                Kind::Boolean => match text.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    _ => return Err(not_a(name, text, "`true` or `false`")),
                },
                Kind::Integer => text
                    .parse::<u64>()
                    .map(Value::from)
                    .or_else(|_| text.parse::<i64>().map(Value::from))
                    .map_err(|_| not_a(name, text, "a whole number"))?,
                Kind::Number => text
                    .parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .ok_or_else(|| not_a(name, text, "a number"))?,
            };
            fields.insert(name.clone(), value);
        }
        Ok(fields)
    }

    /// The first required query field `fields` lacks.
    pub fn missing(&self, fields: &Map<String, Value>) -> Option<&Field> {
        self.query
            .iter()
            .find(|f| f.required && !fields.contains_key(&f.name))
    }
}

fn not_a(name: &str, text: &str, accepted: &str) -> String {
    format!("`{name}={text}` is not accepted: `{name}` is {accepted}")
}

/// What a property's schema reads as (a reference followed into `definitions`; an
/// optional value is what it holds).
fn kind_of(schema: &Value, definitions: &Value) -> Kind {
    if let Some(name) = schema["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
        return kind_of(&definitions[name], definitions);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(inner) = schema[key]
            .as_array()
            .and_then(|list| list.iter().find(|s| s["type"] != "null"))
        {
            return kind_of(inner, definitions);
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.contains(&"boolean") {
        Kind::Boolean
    } else if types.contains(&"integer") {
        Kind::Integer
    } else if types.contains(&"number") {
        Kind::Number
    } else {
        Kind::Text
    }
}

/// `RECORD_ID` for a field of type `RecordId`, else the field's name in capitals.
fn placeholder(name: &str, schema: &Value) -> String {
    let type_name = schema["$ref"]
        .as_str()
        .or_else(|| schema["allOf"][0]["$ref"].as_str())
        .and_then(|r| r.rsplit('/').next());
    match type_name {
        Some(type_name) => {
            let mut out = String::new();
            for (i, c) in type_name.chars().enumerate() {
                if c.is_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
            }
            out
        }
        None => name.to_uppercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{EventsRequest, ExplainRequest, JobsRequest, TreeRequest};

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Each row's shape, and whether its request has an `id` field.
    struct Shapes;

    impl crate::protocol::Visit for Shapes {
        type Out = (Shape, bool);
        fn call<V: crate::protocol::Call>(self) -> (Shape, bool) {
            Self::stream::<V>(self)
        }
        fn stream<V: Verb>(self) -> (Shape, bool) {
            let schema = serde_json::to_value(schemars::schema_for!(V)).unwrap();
            (Shape::of::<V>(), schema["properties"]["id"].is_object())
        }
    }

    #[test]
    fn every_row_of_the_table_can_be_carried() {
        for route in crate::protocol::ROUTES {
            let (shape, has_id) = crate::protocol::visit(route.verb, Shapes);
            assert_eq!(shape.verb, route.verb);
            // A path's `{id}` is filled from the request's `id`.
            assert!(!shape.path_id || has_id, "{:?}", route.verb);
            // A body is a POST's; the context is never a query parameter.
            assert_eq!(shape.body, route.method == "POST", "{:?}", route.verb);
            assert!(
                shape.query.iter().all(|f| f.name != "context"),
                "{:?}",
                route.verb
            );
            if shape.body {
                assert!(shape.query.is_empty(), "{:?}", route.verb);
            }
        }
    }

    #[test]
    fn the_query_is_read_as_each_field_of_the_request_says() {
        let tree = Shape::of::<TreeRequest>();
        assert!(tree.context && !tree.body && !tree.path_id);
        let fields = tree
            .read_query(&pairs(&[
                ("depth", "2"),
                ("show_superseded", "true"),
                ("root", "/r"),
                ("offset", "1"),
            ]))
            .unwrap();
        assert_eq!(
            Value::Object(fields),
            serde_json::json!({"depth": 2, "show_superseded": true})
        );
        let err = tree.read_query(&pairs(&[("depth", "deep")])).unwrap_err();
        assert!(
            err.contains("depth") && err.contains("whole number"),
            "{err}"
        );

        let explain = Shape::of::<ExplainRequest>();
        let missing = explain.missing(&Map::new()).expect("id is required");
        assert_eq!(
            (missing.name.as_str(), missing.placeholder.as_str()),
            ("id", "ID")
        );

        let jobs = Shape::of::<JobsRequest>();
        assert!(!jobs.context);
        let fields = jobs.read_query(&pairs(&[("state", "done")])).unwrap();
        assert_eq!(fields["state"], "done");

        let events = Shape::of::<EventsRequest>();
        assert!(events.path_id);
        assert_eq!(
            events
                .query
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>(),
            ["from"]
        );
    }
}
