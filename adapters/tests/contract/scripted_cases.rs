//! The in-process scripted adapter through the table, and the contract's own rules that
//! only a scripted adapter can pin exactly (which failure wins, what is called, what is
//! kept).

use crate::{
    advisor, check, Case, Expect, Rig, Scenario, Setup, ANSWER, LONG_TIMEOUT, MALFORMED_ANSWER,
    PROMPT, RETRY_AFTER_S, SLACK, SLOW_DELAY, USAGE,
};
use advisord_adapters::contract::{consult, FailureKind, Io, STOP_GRACE};
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

/// The scripted adapter: each scenario is one script.
pub struct ScriptedRig;

impl Rig for ScriptedRig {
    fn prepare(&self, scenario: Scenario) -> BoxFuture<'_, Setup> {
        let script = match scenario {
            Scenario::Answer => Script::answer(ANSWER).with_usage(12, 34),
            Scenario::SlowAnswer => Script::answer(ANSWER).with_usage(12, 34).after(SLOW_DELAY),
            Scenario::Empty => Script::answer(" \n\t "),
            Scenario::Malformed => Script::answer(MALFORMED_ANSWER),
            Scenario::RateLimited => Script::fail(FailureKind::RateLimited, "429 slow down")
                .with_retry_after(RETRY_AFTER_S),
            Scenario::AuthFailed => Script::fail(FailureKind::AuthFailed, "401 bad key"),
            Scenario::Unavailable => Script::fail(FailureKind::Unavailable, "connection refused"),
            Scenario::Error => Script::fail(FailureKind::Error, "500 internal\n"),
            Scenario::Deadline | Scenario::Cancellation => Script::hang(),
        };
        let stopped = matches!(scenario, Scenario::Deadline | Scenario::Cancellation);
        let fake = Arc::new(ScriptedAdapter::new(vec![script]));
        let probe = Arc::clone(&fake);
        let setup = Setup::new(
            fake,
            advisor("scripted-1", "scripted", serde_json::json!({})),
        )
        // Called once, and dropped exactly when the contract had to stop it.
        .released(move || probe.calls() == 1 && probe.dropped() == usize::from(stopped));
        Box::pin(async move { setup })
    }
}

contract_rig!(scripted, ScriptedRig);

fn one(script: Script) -> (Arc<ScriptedAdapter>, Setup) {
    let fake = Arc::new(ScriptedAdapter::new(vec![script]));
    let setup = Setup::new(
        fake.clone(),
        advisor("scripted-1", "scripted", serde_json::json!({})),
    );
    (fake, setup)
}

#[tokio::test]
async fn an_adapters_own_failure_at_its_deadline_is_kept() {
    // A well-behaved adapter sees the caller's deadline and reports what it knows within
    // STOP_GRACE of it.
    let (fake, setup) = one(Script::fail_when_stopped(
        FailureKind::RateLimited,
        "attempt 3: status 429",
    ));
    let timeout = Duration::from_millis(500);
    let case = Case {
        timeout,
        cancel_after: None,
        expect: Expect::Failed {
            kind: FailureKind::RateLimited,
            retry_after_s: None,
            diagnostic_contains: Some("status 429".into()),
        },
    };
    let outcome = check("own failure", setup, case).await;
    assert!(
        Duration::from_millis(outcome.duration_ms) < timeout + STOP_GRACE,
        "{outcome:?}"
    );
    assert_eq!(fake.dropped(), 0, "the adapter returned by itself");
}

#[tokio::test]
async fn a_cancellation_is_cancelled_whatever_the_adapter_says() {
    let (fake, setup) = one(Script::fail_when_stopped(
        FailureKind::Error,
        "killed group 4242",
    ));
    let case = Case {
        timeout: LONG_TIMEOUT,
        cancel_after: Some(Duration::from_millis(100)),
        expect: Expect::Failed {
            kind: FailureKind::Cancelled,
            retry_after_s: None,
            diagnostic_contains: Some("killed group 4242".into()),
        },
    };
    check("cooperative cancel", setup, case).await;
    assert_eq!(fake.dropped(), 0, "it returned within the grace");
}

#[tokio::test]
async fn an_answer_after_the_deadline_is_a_timeout() {
    let timeout = Duration::from_millis(300);
    let (fake, setup) = one(Script::answer(ANSWER).after(timeout + Duration::from_millis(300)));
    let case = Case {
        timeout,
        cancel_after: None,
        expect: Expect::failed(FailureKind::Timeout),
    };
    let outcome = check("late answer", setup, case).await;
    assert_eq!(fake.dropped(), 1);
    let diagnostic = outcome.result.unwrap_err().diagnostic;
    assert!(
        diagnostic.contains("no answer within the deadline of"),
        "{diagnostic}"
    );
}

#[tokio::test]
async fn nothing_is_called_when_already_cancelled_or_late() {
    let fake = ScriptedAdapter::new(vec![]);
    let spec = advisor("scripted-1", "scripted", serde_json::json!({}));
    let cancelled = Io::with_timeout(LONG_TIMEOUT);
    cancelled.cancel.cancel();
    let late = Io::with_timeout(Duration::ZERO);
    for (io, kind) in [
        (cancelled, FailureKind::Cancelled),
        (late, FailureKind::Timeout),
    ] {
        let outcome = consult(&fake, &spec, PROMPT, &io).await;
        assert_eq!(outcome.result.unwrap_err().kind, kind);
    }
    assert_eq!(fake.calls(), 0, "an over-call would have panicked too");
}

#[tokio::test]
async fn diagnostics_are_cleaned_and_never_empty() {
    let cases: &[(&str, &str)] = &[
        (
            "stack line 1\n\u{1b}[1;31mError:\u{1b}[0m quota exceeded\r\n",
            "Error: quota exceeded",
        ),
        ("", "the adapter reported `error` without a diagnostic"),
    ];
    for (raw, want) in cases {
        let (_, setup) = one(Script::fail(FailureKind::Error, raw));
        let case = Case {
            timeout: LONG_TIMEOUT,
            cancel_after: None,
            expect: Expect::failed(FailureKind::Error),
        };
        let outcome = check("diagnostic", setup, case).await;
        assert_eq!(outcome.result.unwrap_err().diagnostic, *want);
    }
}

#[tokio::test]
async fn usage_is_kept_for_unreadable_answers_and_the_prompt_passed_through() {
    let (fake, setup) = one(Script::answer("Yes.").with_usage(5, 1));
    let case = Case {
        timeout: LONG_TIMEOUT,
        cancel_after: None,
        expect: Expect::failed(FailureKind::Malformed),
    };
    let outcome = check("trivial answer", setup, case).await;
    assert_eq!(outcome.usage.map(|u| u.input_tokens), Some(5));
    assert_eq!(fake.prompts(), [PROMPT]);
}

#[tokio::test]
async fn duration_is_measured() {
    let (_, setup) = one(Script::answer(ANSWER).with_usage(12, 34).after(SLOW_DELAY));
    let expect = Scenario::SlowAnswer.expect(&setup);
    let case = Case {
        timeout: LONG_TIMEOUT,
        cancel_after: None,
        expect,
    };
    let outcome = check("duration", setup, case).await;
    let took = Duration::from_millis(outcome.duration_ms);
    assert!(took >= SLOW_DELAY && took < SLOW_DELAY + SLACK, "{took:?}");
    assert_eq!(outcome.usage, Some(USAGE));
}

#[tokio::test]
async fn a_hang_is_dropped_within_the_grace_of_a_cancellation() {
    let (fake, setup) = one(Script::hang());
    let after = Duration::from_millis(50);
    let case = Case {
        timeout: LONG_TIMEOUT,
        cancel_after: Some(after),
        expect: Expect::failed(FailureKind::Cancelled),
    };
    let outcome = check("hang cancelled", setup, case).await;
    let took = Duration::from_millis(outcome.duration_ms);
    assert!(
        took >= after + STOP_GRACE - Duration::from_millis(5),
        "grace given: {took:?}"
    );
    assert_eq!(fake.dropped(), 1);
}

#[tokio::test]
#[should_panic(expected = "called 2 times but only 1 outcomes were scripted")]
async fn an_over_called_script_fails_loudly() {
    let fake = ScriptedAdapter::new(vec![Script::answer(ANSWER)]);
    let spec = advisor("scripted-1", "scripted", serde_json::json!({}));
    let io = Io::with_timeout(LONG_TIMEOUT);
    let _ = consult(&fake, &spec, PROMPT, &io).await;
    let _ = consult(&fake, &spec, PROMPT, &io).await;
}

#[tokio::test]
async fn an_answer_handed_back_after_the_deadline_is_not_kept() {
    // The grace after the deadline is for reporting a failure, never for an answer.
    let timeout = Duration::from_millis(300);
    let (fake, setup) = one(Script::answer(ANSWER).after(timeout + STOP_GRACE / 2));
    let case = Case {
        timeout,
        cancel_after: None,
        expect: Expect::failed(FailureKind::Timeout),
    };
    check("answer in the grace", setup, case).await;
    assert_eq!(
        fake.dropped(),
        0,
        "the adapter returned by itself, too late"
    );
}
