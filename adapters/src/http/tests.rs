//! Pure parts of the HTTP adapters: settings, statuses, `Retry-After`, reply shapes.

use super::*;
use serde_json::json;

fn settings(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("settings are an object")
}

#[test]
fn settings_are_checked_field_by_field() {
    fn check(input: Value, expected: Result<(&str, &str), (&str, &str)>) {
        let got = HttpSettings::parse(&settings(input.clone()));
        match (got, expected) {
            (Ok(got), Ok((endpoint, model))) => {
                assert_eq!(
                    (got.endpoint.as_str(), got.model.as_str()),
                    (endpoint, model)
                );
            }
            (Err((field, message)), Err((want_field, want_words))) => {
                assert_eq!(field, want_field, "{input}: {message}");
                assert!(
                    message.contains(want_words),
                    "{input}: `{message}` lacks `{want_words}`"
                );
            }
            (got, expected) => panic!("{input}: got {got:?}, expected {expected:?}"),
        }
    }
    let ok = |endpoint, model| Ok((endpoint, model));
    check(
        json!({"endpoint": "http://h:1/v1/", "model": "m"}),
        ok("http://h:1/v1", "m"),
    );
    check(
        json!({"endpoint": "https://h", "model": " m ", "max_tokens": 5}),
        ok("https://h", "m"),
    );
    check(
        json!({"endpoint": "https://h", "model": "m", "temperature": 0.2}),
        ok("https://h", "m"),
    );
    check(json!({"model": "m"}), Err(("endpoint", "required")));
    check(
        json!({"endpoint": 3, "model": "m"}),
        Err(("endpoint", "http or https")),
    );
    check(
        json!({"endpoint": "not a url", "model": "m"}),
        Err(("endpoint", "not a URL")),
    );
    check(
        json!({"endpoint": "ftp://h", "model": "m"}),
        Err(("endpoint", "http or https")),
    );
    check(
        json!({"endpoint": "http://u:p@h", "model": "m"}),
        Err(("endpoint", "credential")),
    );
    check(
        json!({"endpoint": "http://h?key=1", "model": "m"}),
        Err(("endpoint", "query")),
    );
    check(json!({"endpoint": "http://h"}), Err(("model", "required")));
    check(
        json!({"endpoint": "http://h", "model": ""}),
        Err(("model", "non-empty")),
    );
    check(
        json!({"endpoint": "http://h", "model": "m", "max_tokens": 0}),
        Err(("max_tokens", "1")),
    );
    check(
        json!({"endpoint": "http://h", "model": "m", "max_tokens": "9"}),
        Err(("max_tokens", "whole")),
    );
    check(
        json!({"endpoint": "http://h", "model": "m", "temperature": 3}),
        Err(("temperature", "0 to 2")),
    );
    check(
        json!({"endpoint": "http://h", "model": "m", "args": []}),
        Err(("args", "accepted: endpoint")),
    );
}

#[test]
fn statuses_map_to_failure_kinds() {
    fn check(status: u16, expected: FailureKind) {
        let status = StatusCode::from_u16(status).expect("a status");
        assert_eq!(kind_for_status(status), expected, "{status}");
    }
    check(401, FailureKind::AuthFailed);
    check(403, FailureKind::AuthFailed);
    check(429, FailureKind::RateLimited);
    check(408, FailureKind::Error);
    check(400, FailureKind::Error);
    check(404, FailureKind::Error);
    check(500, FailureKind::Error);
    check(503, FailureKind::Error);
    check(529, FailureKind::Error);
    check(302, FailureKind::Error);
}

#[test]
fn retry_after_reads_seconds_and_dates() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    fn check(now: SystemTime, header: Option<&str>, expected: Option<u64>) {
        let mut headers = HeaderMap::new();
        if let Some(value) = header {
            headers.insert(RETRY_AFTER, value.parse().expect("a header value"));
        }
        assert_eq!(retry_after(&headers, now), expected, "{header:?}");
    }
    let in_90s = httpdate::fmt_http_date(now + Duration::from_secs(90));
    let past = httpdate::fmt_http_date(now - Duration::from_secs(90));
    check(now, None, None);
    check(now, Some("30"), Some(30));
    check(now, Some(" 0 "), Some(0));
    check(now, Some("1.5"), Some(2));
    check(now, Some(&in_90s), Some(90));
    check(now, Some(&past), Some(0));
    check(now, Some("soon"), None);
    check(now, Some("-3"), None);
}

#[test]
fn google_style_bodies_name_the_retry_delay() {
    let body = json!({"error": {"code": 429, "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure"},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "41s"}
    ]}});
    assert_eq!(body_retry_delay(body.to_string().as_bytes()), Some(41));
    assert_eq!(body_retry_delay(b"{}"), None);
    assert_eq!(body_retry_delay(b"not json"), None);
}

#[test]
fn error_bodies_give_their_message() {
    fn check(body: &str, expected: &str) {
        assert_eq!(error_body_message(body.as_bytes()), expected, "{body}");
    }
    check(
        r#"{"error": {"message": "bad key", "type": "x"}}"#,
        "bad key",
    );
    check(
        r#"{"type": "error", "error": {"type": "e", "message": "overloaded"}}"#,
        "overloaded",
    );
    check(
        r#"[{"error": {"code": 403, "message": "denied"}}]"#,
        "denied",
    );
    check(r#"{"error": "model not found"}"#, "model not found");
    check(r#"{"message": "plain"}"#, "plain");
    check(r#"{"detail": "nope"}"#, "nope");
    check("<html>Bad Gateway</html>", "<html>Bad Gateway</html>");
    check(r#"{"other": 1}"#, r#"{"other": 1}"#);
}

#[test]
fn diagnostics_keep_the_whole_body_on_one_clean_line_of_at_most_300_characters() {
    fn check(input: &str, expected: &str) {
        assert_eq!(
            failure(FailureKind::Error, input).diagnostic,
            expected,
            "{input:?}"
        );
    }
    check("plain", "plain");
    check("{\n  \"error\": \"two\"\r\n}\n", "{ \"error\": \"two\" }");
    check("\u{1b}[31mred\u{1b}[0m and \u{7}bell", "red and bell");
    check("  spaced\t\tout  ", "spaced out");
    let long = failure(FailureKind::Error, &"é".repeat(400)).diagnostic;
    assert_eq!(long.chars().count(), crate::contract::MAX_DIAGNOSTIC_CHARS);
    assert!(long.ends_with('…'), "{long}");
}

/// What reading a reply gave: the text and usage, or the failure kind.
type Read = Result<(String, Option<(u64, u64)>), FailureKind>;

fn check_read<W: Wire>(reply: Value, expected: Read) {
    let got = W::read(&reply).map(|answer| {
        (
            answer.text,
            answer
                .usage
                .map(|usage| (usage.input_tokens, usage.output_tokens)),
        )
    });
    match (&got, &expected) {
        (Ok(got), Ok(want)) => assert_eq!(got, want, "{reply}"),
        (Err(failure), Err(kind)) => {
            assert_eq!(failure.kind, *kind, "{reply}: {}", failure.diagnostic);
            assert!(!failure.diagnostic.is_empty(), "{reply}");
        }
        _ => panic!("{}: {reply}: got {got:?}, expected {expected:?}", W::NAME),
    }
}

#[test]
fn chat_completion_replies_are_read() {
    let check = check_read::<openai::OpenAi>;
    check(
        json!({"choices": [{"message": {"content": "hi"}}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 4}}),
        Ok(("hi".into(), Some((3, 4)))),
    );
    check(
        json!({"choices": [{"message": {"content": "hi"}}]}),
        Ok(("hi".into(), None)),
    );
    check(
        json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"},
               {"type": "text", "text": "b"}]}}]}),
        Ok(("ab".into(), None)),
    );
    check(
        json!({"choices": [{"message": {"content": null}}]}),
        Err(FailureKind::Empty),
    );
    check(
        json!({"choices": [{"message": {"content": "  "}}]}),
        Err(FailureKind::Empty),
    );
    check(json!({"choices": []}), Err(FailureKind::Empty));
    check(
        json!({"choices": [{"message": {"content": 7}}]}),
        Err(FailureKind::Malformed),
    );
    check(json!({"id": "x"}), Err(FailureKind::Malformed));
}

#[test]
fn messages_replies_are_read() {
    let check = check_read::<anthropic::Anthropic>;
    check(
        json!({"content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "yes"}],
               "usage": {"input_tokens": 10, "output_tokens": 2}}),
        Ok(("yes".into(), Some((10, 2)))),
    );
    check(
        json!({"content": [], "stop_reason": "max_tokens"}),
        Err(FailureKind::Empty),
    );
    check(json!({"content": "text"}), Err(FailureKind::Malformed));
    check(json!({}), Err(FailureKind::Malformed));
}

#[test]
fn generate_content_replies_are_read() {
    let check = check_read::<gemini::Gemini>;
    check(
        json!({"candidates": [{"content": {"parts": [{"text": "thinking", "thought": true},
               {"text": "a"}, {"text": "b"}]}}],
               "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 6,
                                 "thoughtsTokenCount": 1}}),
        Ok(("ab".into(), Some((5, 7)))),
    );
    check(
        json!({"candidates": [{"content": {"parts": [{"text": "a"}]}}],
               "usageMetadata": {"promptTokenCount": 5}}),
        Ok(("a".into(), Some((5, 0)))),
    );
    check(
        json!({"promptFeedback": {"blockReason": "SAFETY"}}),
        Err(FailureKind::Empty),
    );
    check(
        json!({"candidates": [{"finishReason": "SAFETY"}]}),
        Err(FailureKind::Empty),
    );
    check(json!({"candidates": {}}), Err(FailureKind::Malformed));
    check(json!({"nothing": true}), Err(FailureKind::Malformed));
}

#[test]
fn ollama_chat_replies_are_read() {
    let check = check_read::<ollama::Ollama>;
    check(
        json!({"message": {"role": "assistant", "content": "ok"}, "done": true,
               "prompt_eval_count": 8, "eval_count": 9}),
        Ok(("ok".into(), Some((8, 9)))),
    );
    check(
        json!({"message": {"content": ""}, "done_reason": "length"}),
        Err(FailureKind::Empty),
    );
    check(
        json!({"message": {"content": ["x"]}}),
        Err(FailureKind::Malformed),
    );
    check(json!({"message": "ok"}), Err(FailureKind::Malformed));
}

#[test]
fn an_error_inside_a_success_reply_is_reported_as_that_error() {
    fn check(body: Value, expected: FailureKind) {
        let failure = decode::<openai::OpenAi>(body.to_string().as_bytes()).expect_err("a failure");
        assert_eq!(failure.kind, expected, "{body}");
        assert!(
            failure.diagnostic.contains("upstream says no"),
            "{}",
            failure.diagnostic
        );
    }
    check(
        json!({"error": {"message": "upstream says no", "code": 429}}),
        FailureKind::RateLimited,
    );
    check(
        json!({"error": {"message": "upstream says no", "code": 401}}),
        FailureKind::AuthFailed,
    );
    check(
        json!({"error": {"message": "upstream says no"}}),
        FailureKind::Error,
    );
}

#[test]
fn a_reply_that_is_not_json_is_malformed() {
    let failure = decode::<ollama::Ollama>(b"{\"message\": {").expect_err("a failure");
    assert_eq!(failure.kind, FailureKind::Malformed);
}

#[test]
fn request_bodies_follow_each_format() {
    let settings = HttpSettings {
        endpoint: "http://h".into(),
        model: "m".into(),
        max_tokens: Some(100),
        temperature: Some(0.5),
    };
    assert_eq!(openai::OpenAi::url(&settings), "http://h/chat/completions");
    assert_eq!(anthropic::Anthropic::url(&settings), "http://h/v1/messages");
    assert_eq!(
        gemini::Gemini::url(&settings),
        "http://h/v1beta/models/m:generateContent"
    );
    assert_eq!(ollama::Ollama::url(&settings), "http://h/api/chat");
    let user = json!([{"role": "user", "content": "p"}]);
    assert_eq!(
        openai::OpenAi::body(&settings, "p"),
        json!({"model": "m", "messages": user, "max_tokens": 100, "temperature": 0.5})
    );
    assert_eq!(
        anthropic::Anthropic::body(&settings, "p"),
        json!({"model": "m", "max_tokens": 100, "messages": user, "temperature": 0.5})
    );
    assert_eq!(
        gemini::Gemini::body(&settings, "p"),
        json!({"contents": [{"role": "user", "parts": [{"text": "p"}]}],
               "generationConfig": {"maxOutputTokens": 100, "temperature": 0.5}})
    );
    assert_eq!(
        ollama::Ollama::body(&settings, "p"),
        json!({"model": "m", "messages": user, "stream": false,
               "options": {"num_predict": 100, "temperature": 0.5}})
    );
    let bare = HttpSettings {
        max_tokens: None,
        temperature: None,
        ..settings
    };
    assert_eq!(
        openai::OpenAi::body(&bare, "p"),
        json!({"model": "m", "messages": user})
    );
    assert_eq!(
        anthropic::Anthropic::body(&bare, "p")["max_tokens"],
        json!(4096)
    );
}

#[test]
fn a_reply_of_only_whitespace_is_empty_and_keeps_its_usage() {
    let spent = Some(Usage {
        input_tokens: 9,
        output_tokens: 1,
    });
    let failure = super::answer(" \n\t".to_owned(), spent, || "no text".to_owned())
        .expect_err("only whitespace is empty");
    assert_eq!(failure.kind, FailureKind::Empty);
    assert_eq!(failure.usage, spent, "the tokens were spent");
}
