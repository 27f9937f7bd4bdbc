//! The normaliser's table-driven cases.

use super::json::{parse_object, Json, INDEXED_OBJECT};
use super::keys::{memberships_of, KEY_SETS, MAX_KEY_BYTES};
use super::text::is_printable_ascii;
use super::*;
use serde_json::json;
use serde_json::Value;

/// What a case should come to: the fields that matter to it, or the error's variant.
#[derive(Debug)]
enum Want {
    Fields {
        conclusion: &'static str,
        stance: Stance,
        risks: &'static [&'static str],
        falsifiers: &'static [&'static str],
        confidence: Option<f64>,
    },
    Empty,
    NoConclusion,
    Unparseable,
    TrivialProse,
}

fn ok(conclusion: &'static str, stance: Stance, confidence: Option<f64>) -> Want {
    Want::Fields {
        conclusion,
        stance,
        risks: &[],
        falsifiers: &[],
        confidence,
    }
}

fn check(name: &str, input: &str, want: &Want) {
    let got = normalise(input);
    match (&want, &got) {
        (
            Want::Fields {
                conclusion,
                stance,
                risks,
                falsifiers,
                confidence,
            },
            Ok(n),
        ) => {
            assert_eq!(n.conclusion, *conclusion, "{name}: conclusion");
            assert_eq!(n.stance, *stance, "{name}: stance");
            assert_eq!(n.confidence, *confidence, "{name}: confidence");
            if !risks.is_empty() {
                assert_eq!(n.risks, *risks, "{name}: risks");
            }
            if !falsifiers.is_empty() {
                assert_eq!(n.falsifiers, *falsifiers, "{name}: falsifiers");
            }
        }
        (Want::Empty, Err(NormaliseError::Empty))
        | (Want::NoConclusion, Err(NormaliseError::NoConclusion { .. }))
        | (Want::Unparseable, Err(NormaliseError::Unparseable { .. }))
        | (Want::TrivialProse, Err(NormaliseError::TrivialProse { .. })) => {}
        _ => panic!("{name}: wanted {want:?}, got {got:?}"),
    }
}

#[test]
fn every_untidy_shape_is_read() {
    use Stance::*;
    let cases: &[(&str, &str, Want)] = &[
        (
            "bare json",
            r#"{"conclusion": "Use a lock.", "stance": "supports", "confidence": 0.8}"#,
            ok("Use a lock.", Supports, Some(0.8)),
        ),
        (
            "fenced block after prose",
            "Let me think.\n\n```json\n{\"conclusion\": \"Cache is stale.\", \
                 \"stance\": \"disagree\", \"confidence\": \"80%\"}\n```\n",
            ok("Cache is stale.", Opposes, Some(0.8)),
        ),
        (
            "json embedded in prose",
            "My answer is {\"conclusion\": \"Retry is fine\", \"stance\": \"agree\"} as said.",
            ok("Retry is fine", Supports, None),
        ),
        (
            "prose braces before the json",
            "The closure { x } matters. {\"conclusion\": \"Closure leaks\", \"stance\": \
                 \"partially\"}",
            ok("Closure leaks", Alternative, None),
        ),
        (
            "unclosed brace in prose before the json",
            "A map like { a: 1 is odd.\n```json\n{\"conclusion\": \"Odd map\", \
                 \"confidence\": \"8/10\"}\n```",
            ok("Odd map", Inconclusive, Some(0.8)),
        ),
        (
            "trailing commas",
            "{\"conclusion\": \"Fine\", \"risks\": [\"a\", \"b\",], \"stance\": \"yes\",}",
            Want::Fields {
                conclusion: "Fine",
                stance: Supports,
                risks: &["a", "b"],
                falsifiers: &[],
                confidence: None,
            },
        ),
        (
            "single quotes and python literals",
            "{'conclusion': 'It holds', 'stance': 'correct', 'agrees': True, \
                 'confidence': 'high'}",
            ok("It holds", Supports, Some(0.85)),
        ),
        (
            "last conclusion wins",
            "{\"conclusion\": \"first draft\"}\nOn reflection:\n{\"conclusion\": \"final\", \
                 \"stance\": \"against\"}",
            ok("final", Opposes, None),
        ),
        (
            "wrapped once",
            r#"{"consultation": {"summary": "Wrapped", "stance": "unclear"}}"#,
            ok("Wrapped", Inconclusive, None),
        ),
        (
            "key synonyms and case",
            r#"{"Verdict": "The index is unused", "Stance": "Disagrees", "Certainty": 80}"#,
            ok("The index is unused", Opposes, Some(0.8)),
        ),
        (
            "verdict is a bare stance word",
            r#"{"verdict": "agree", "reasoning": "The test covers it"}"#,
            ok("The test covers it", Supports, None),
        ),
        (
            "stance as boolean",
            r#"{"conclusion": "It does not hold", "agrees": false}"#,
            ok("It does not hold", Opposes, None),
        ),
        (
            "negated agreement",
            r#"{"conclusion": "c", "stance": "I don't agree"}"#,
            ok("c", Opposes, None),
        ),
        (
            "different approach",
            r#"{"conclusion": "c", "stance": "a different approach"}"#,
            ok("c", Alternative, None),
        ),
        (
            "unknown stance word",
            r#"{"conclusion": "c", "stance": "banana"}"#,
            ok("c", Inconclusive, None),
        ),
        (
            "lists as strings, objects and synonyms",
            "{\"conclusion\": \"c\", \"risks\": \"- one\\n- two\\n  continued\\n\", \
                 \"counterargument\": [{\"text\": \"three\"}, \"  \", \"one\"], \
                 \"falsifying_experiment\": \"1. run it\\n2) measure\"}",
            Want::Fields {
                conclusion: "c",
                stance: Inconclusive,
                risks: &["one", "two continued", "three"],
                falsifiers: &["run it", "measure"],
                confidence: None,
            },
        ),
        (
            "placeholder echoed then answer",
            "{\"conclusion\": \"<one paragraph>\"}\n{\"conclusion\": \"Real\"}",
            ok("Real", Inconclusive, None),
        ),
        (
            "prose answer",
            "The lock is not needed because the writer is single-threaded.",
            ok(
                "The lock is not needed because the writer is single-threaded.",
                Inconclusive,
                None,
            ),
        ),
        (
            "ansi and control characters",
            "{\"conclusion\": \"\\u001b[31mred\\u001b[0m\\u0007 text\"}",
            ok("red text", Inconclusive, None),
        ),
        ("empty", " \n\t ", Want::Empty),
        (
            "json without conclusion",
            r#"{"stance": "agree", "risks": []}"#,
            Want::NoConclusion,
        ),
        ("empty object", "{}", Want::NoConclusion),
        (
            "truncated json",
            "{\"conclusion\": \"cut off",
            Want::Unparseable,
        ),
        (
            "fence with garbage",
            "```json\nnot json at all\n```",
            Want::Unparseable,
        ),
        (
            "prose in a plain fence",
            "```\nThe lock is redundant here.\n```",
            ok("The lock is redundant here.", Inconclusive, None),
        ),
        (
            "conclusion as an object",
            r#"{"conclusion": {"text": "Nested text"}, "stance": "yes"}"#,
            ok("Nested text", Supports, None),
        ),
        ("trivial prose", "Agree.", Want::TrivialProse),
        (
            "prose with a stray object",
            "Yes {\"a\": 1}",
            Want::TrivialProse,
        ),
    ];
    for (name, input, want) in cases {
        check(name, input, want);
    }
}

#[test]
fn confidence_shapes() {
    let cases: &[(Value, Option<f64>)] = &[
        (json!(0.8), Some(0.8)),
        (json!("0.8"), Some(0.8)),
        (json!(80), Some(0.8)),
        (json!("80%"), Some(0.8)),
        (json!("80 %"), Some(0.8)),
        (json!("8/10"), Some(0.8)),
        (json!("8 out of 10"), Some(0.8)),
        (json!("High"), Some(0.85)),
        (json!("medium confidence"), Some(0.6)),
        (json!("low"), Some(0.3)),
        (json!("very high"), Some(0.95)),
        (json!(1), Some(1.0)),
        (json!(0), Some(0.0)),
        (json!(-3), Some(0.0)),
        (json!(250), Some(1.0)),
        (json!("3/0"), None),
        (json!("sure"), None),
        (json!(true), None),
        (json!(null), None),
    ];
    for (input, want) in cases {
        assert_eq!(parse_confidence(input), *want, "confidence of {input}");
    }
}

#[test]
fn stance_synonyms() {
    use Stance::*;
    let cases: &[(&str, Option<Stance>)] = &[
        ("supports", Some(Supports)),
        ("Agree", Some(Supports)),
        ("agrees", Some(Supports)),
        ("support", Some(Supports)),
        ("yes", Some(Supports)),
        ("correct", Some(Supports)),
        ("disagree", Some(Opposes)),
        ("oppose", Some(Opposes)),
        ("against", Some(Opposes)),
        ("no", Some(Opposes)),
        ("incorrect", Some(Opposes)),
        ("does not support", Some(Opposes)),
        ("partially", Some(Alternative)),
        ("partly agree", Some(Alternative)),
        ("alternative", Some(Alternative)),
        ("different approach", Some(Alternative)),
        ("mixed", Some(Alternative)),
        ("unsure", Some(Inconclusive)),
        ("unknown", Some(Inconclusive)),
        ("unclear", Some(Inconclusive)),
        ("inconclusive", Some(Inconclusive)),
        ("neutral", Some(Inconclusive)),
        ("", None),
        ("banana", None),
    ];
    for (input, want) in cases {
        assert_eq!(parse_stance(input), *want, "stance of {input:?}");
    }
}

#[test]
fn records_are_exact_and_capped() {
    let long = "x".repeat(MAX_CONCLUSION_CHARS + 50);
    let items: Vec<String> = (0..MAX_ITEMS + 5).map(|i| format!("risk {i}")).collect();
    let answer = json!({
        "conclusion": format!("  {long}  "),
        "risks": items,
        "assumptions": ["same", "same", "", "  spaced   out  "],
        "actions": "y".repeat(MAX_ITEM_CHARS + 10),
    });
    let n = normalise(&answer.to_string()).expect("a conclusion");
    assert_eq!(n.conclusion.chars().count(), MAX_CONCLUSION_CHARS);
    assert!(n.conclusion.ends_with('…'));
    assert_eq!(n.risks.len(), MAX_ITEMS);
    assert_eq!(n.assumptions, ["same", "spaced out"]);
    assert_eq!(n.actions[0].chars().count(), MAX_ITEM_CHARS);
}

#[test]
fn hostile_input_is_bounded() {
    let floods = [
        "{".repeat(300_000),
        "{\"a\":".repeat(50_000),
        "}{".repeat(200_000),
        // Tens of thousands of keys, each looked for among the ones before it.
        format!(
            "{{{}}}",
            (0..15_000)
                .map(|i| format!("\"k{i}\":{i}"))
                .collect::<Vec<_>>()
                .join(",")
        ),
    ];
    for flood in &floods {
        let started = std::time::Instant::now();
        let result = normalise(flood);
        assert!(result.is_err(), "a flood has no conclusion");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "took too long"
        );
    }
}

#[test]
fn arbitrary_text_never_panics() {
    // Deterministic xorshift over an alphabet of the characters the parser cares about.
    let alphabet: Vec<char> = "{}[]\"\\,:'\u{201c}\u{201d}é🙂\n -*1.)(%/aconclusiTrueNn\u{1b}"
        .chars()
        .collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let len = (next() % 120) as usize;
        let text: String = (0..len)
            .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
            .collect();
        let with_key = format!("{{\"conclusion\": {text}");
        for input in [&text, &with_key] {
            if let Ok(n) = normalise(input) {
                assert!(!n.conclusion.is_empty(), "{input:?}");
                assert!(
                    n.confidence.is_none_or(|c| (0.0..=1.0).contains(&c)),
                    "{input:?}"
                );
            }
        }
    }
}

#[test]
fn serde_names_are_snake_case() {
    assert_eq!(
        serde_json::to_value(Stance::Alternative).unwrap(),
        json!("alternative")
    );
    let n = normalise(r#"{"conclusion": "c", "stance": "opposes"}"#).unwrap();
    let v = serde_json::to_value(&n).unwrap();
    assert_eq!(v["stance"], json!("opposes"));
    assert_eq!(v["falsifiers"], json!([]));
}

/// The value `serde_json` would have built, to compare the two readings.
fn as_value(json: &Json<'_>) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => Value::Number(n.clone()),
        Json::String(s) => Value::String(s.to_string()),
        Json::Array(items) => Value::Array(items.iter().map(as_value).collect()),
        Json::Object(object) => Value::Object(
            object
                .iter()
                .map(|(k, v)| (k.to_string(), as_value(v)))
                .collect(),
        ),
    }
}

#[test]
fn objects_read_as_serde_json_reads_them() {
    let many_keys = (0..INDEXED_OBJECT * 3)
        .map(|i| format!("\"k{}\": {i}", i % (INDEXED_OBJECT + 5)))
        .collect::<Vec<_>>()
        .join(", ");
    let cases = [
        r#"{"a": 1, "b": 2, "a": 3}"#.to_string(),
        r#"{"x": {"y": [1, -2, 3.5, 1e3, -0, 18446744073709551616]}, "x": null}"#.into(),
        r#"{"esc\"aped": "line\nbreak \u00e9 \ud83d\ude42", "plain": "é🙂"}"#.into(),
        r#"{"t": true, "f": false, "n": null, "e": [], "o": {}}"#.into(),
        format!("{{{many_keys}}}"),
        r#"{"a": 1e400}"#.into(),
        r#"{"a": 1} trailing"#.into(),
        r#"[1, 2]"#.into(),
    ];
    for text in &cases {
        let ours = serde_json::from_str::<Json<'_>>(text)
            .map(|j| as_value(&j))
            .ok();
        let theirs = serde_json::from_str::<Value>(text).ok();
        assert_eq!(ours, theirs, "reading {text}");
        if let Some(Value::Object(map)) = &theirs {
            let keys: Vec<&str> = map.keys().map(String::as_str).collect();
            let object = parse_object(text).expect("an object");
            let ours: Vec<&str> = object.iter().map(|(k, _)| &**k).collect();
            assert_eq!(ours, keys, "key order of {text}");
        }
    }
}

#[test]
fn every_synonym_is_found_by_its_canonical_spellings() {
    for (set, keys) in KEY_SETS.iter().enumerate() {
        for (rank, key) in keys.iter().enumerate() {
            assert!(
                key.len() <= MAX_KEY_BYTES,
                "`{key}` is longer than MAX_KEY_BYTES"
            );
            assert!(
                key.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "`{key}` is not canonical"
            );
            assert_eq!(
                keys.iter().position(|k| k == key),
                Some(rank),
                "`{key}` is repeated"
            );
            let spellings = [
                key.to_string(),
                key.to_uppercase(),
                format!("  {} ", key.replace('_', "-")),
                key.replace('_', " "),
            ];
            for spelling in &spellings {
                let memberships =
                    memberships_of(spelling).unwrap_or_else(|| panic!("{spelling:?}"));
                assert_eq!(
                    memberships.rank_in(set).map(usize::from),
                    Some(rank),
                    "{spelling:?} in set {set}"
                );
            }
        }
    }
    for stranger in [
        "conclusión",
        "conclusions",
        "",
        "x".repeat(MAX_KEY_BYTES + 1).as_str(),
    ] {
        assert!(memberships_of(stranger).is_none(), "{stranger:?}");
    }
}

#[test]
fn the_wide_printable_scan_agrees_with_the_plain_one() {
    let naive = |bytes: &[u8]| bytes.iter().all(|&b| (0x20..0x7f).contains(&b));
    for len in [1, 7, 8, 9, 16, 23] {
        for at in 0..len {
            for byte in 0..=u8::MAX {
                let mut bytes = vec![b'a'; len];
                bytes[at] = byte;
                assert_eq!(
                    is_printable_ascii(&bytes),
                    naive(&bytes),
                    "byte {byte:#x} at {at} of {len}"
                );
                bytes[len - 1 - at] = 0x1f;
                assert!(!is_printable_ascii(&bytes), "two bytes, {byte:#x} at {at}");
            }
        }
    }
    assert!(is_printable_ascii(b""));
}
