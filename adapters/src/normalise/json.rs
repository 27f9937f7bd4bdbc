//! A JSON value read from an answer, borrowing its strings where it can.

use serde::de::{self, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;

/// A JSON value read from an answer. Like [`serde_json::Value`], but its strings borrow
/// from the answer where they hold no escape, and an object is its entries in order (it
/// has a handful, looked up by synonym, never by exact key), so reading an answer does not
/// allocate a string per key and value or hash every key.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Json<'a> {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Object<'a>),
}

/// An object's entries in the order written; a repeated key keeps its first place and its
/// last value, as in a [`serde_json::Map`].
pub(super) type Object<'a> = Vec<(Cow<'a, str>, Json<'a>)>;

/// From this many entries on, a repeated key is found through a hash index, so that an
/// object with very many keys costs linear time.
pub(super) const INDEXED_OBJECT: usize = 32;

impl<'a> Json<'a> {
    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub(super) fn as_object(&self) -> Option<&Object<'a>> {
        match self {
            Json::Object(object) => Some(object),
            _ => None,
        }
    }

    pub(super) fn is_string(&self) -> bool {
        matches!(self, Json::String(_))
    }

    /// The value with nothing borrowed (for an object parsed from a repaired copy).
    pub(super) fn into_owned(self) -> Json<'static> {
        match self {
            Json::Null => Json::Null,
            Json::Bool(b) => Json::Bool(b),
            Json::Number(n) => Json::Number(n),
            Json::String(s) => Json::String(Cow::Owned(s.into_owned())),
            Json::Array(items) => Json::Array(items.into_iter().map(Json::into_owned).collect()),
            Json::Object(object) => Json::Object(owned_object(object)),
        }
    }

    /// A number or a boolean as JSON writes it.
    pub(super) fn scalar_text(&self) -> Option<String> {
        match self {
            Json::Number(n) => Some(Value::Number(n.clone()).to_string()),
            Json::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
}

pub(super) fn owned_object(object: Object<'_>) -> Object<'static> {
    object
        .into_iter()
        .map(|(key, value)| (Cow::Owned(key.into_owned()), value.into_owned()))
        .collect()
}

/// Parse `text` as one JSON object (the whole text), borrowing from it.
pub(super) fn parse_object(text: &str) -> Option<Object<'_>> {
    match serde_json::from_str::<Json<'_>>(text) {
        Ok(Json::Object(object)) => Some(object),
        _ => None,
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

/// Builds a [`Json`] the way `serde_json` builds a [`Value`] (same numbers, same nulls, same
/// repeated-key rule), keeping strings borrowed when the parser can lend them.
pub(super) struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Json<'de>, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Json<'de>, E> {
        let de = de::value::I128Deserializer::new(value);
        serde_json::Number::deserialize(de).map(Json::Number)
    }

    fn visit_u64<E>(self, value: u64) -> Result<Json<'de>, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Json<'de>, E> {
        let de = de::value::U128Deserializer::new(value);
        serde_json::Number::deserialize(de).map(Json::Number)
    }

    fn visit_f64<E>(self, value: f64) -> Result<Json<'de>, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Json::Null, Json::Number))
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(value)))
    }

    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Json<'de>, D::Error> {
        Deserialize::deserialize(deserializer)
    }

    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        // Room for an answer's usual handful of keys, so that it grows at most rarely.
        let mut entries: Object<'de> = Vec::with_capacity(8);
        let mut index: Option<HashMap<Cow<'de, str>, usize>> = None;
        while let Some(Key(key)) = map.next_key()? {
            let value: Json<'de> = map.next_value()?;
            let repeated = match &index {
                Some(index) => index.get(&key).copied(),
                None => entries.iter().position(|(k, _)| *k == key),
            };
            match repeated {
                Some(at) => entries[at].1 = value,
                None => {
                    if let Some(index) = &mut index {
                        index.insert(key.clone(), entries.len());
                    }
                    entries.push((key, value));
                    if index.is_none() && entries.len() >= INDEXED_OBJECT {
                        let built = entries.iter().enumerate();
                        index = Some(built.map(|(at, (k, _))| (k.clone(), at)).collect());
                    }
                }
            }
        }
        Ok(Json::Object(entries))
    }
}

/// An object key, borrowed from the answer when it holds no escape.
pub(super) struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

pub(super) struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(value)))
    }
}
