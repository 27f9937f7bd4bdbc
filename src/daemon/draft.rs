//! What a job asks the writer to store, drafted from values: a consultation from an
//! exchange's outcome, and a disagreement from the completed consultations of a plan.
//! Pure functions, so every rule here is tested without a daemon.

use crate::core::records::{Assessment, Body, ConsultationStatus, Record, EXECUTOR};
use advisord_adapters::contract::Outcome;
use serde_json::{json, Map, Value};

/// The longest text the daemon drafts into one field, in characters (under the writer's
/// bound, so a long answer never gets a drafted record refused).
const MAX_DRAFT_CHARS: usize = 2000;

/// The most assumptions a drafted disagreement lists.
const MAX_DIVERGENT_ASSUMPTIONS: usize = 20;

/// The most falsifiers a discriminating question quotes.
const MAX_FALSIFIERS_QUOTED: usize = 3;

fn cap(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// What produced a completed `outcome`'s answer: the outcome's own source, when its
/// adapter reported one, else the catalogue's `source` of the advisor; `None` for a
/// failure. The store writes it into the consultation ([`crate::store::Provenance`]); no
/// caller can name it.
pub fn answer_source(catalogue: Option<&str>, outcome: &Outcome) -> Option<String> {
    outcome
        .result
        .as_ref()
        .ok()
        .and(outcome.source.as_deref().or(catalogue))
        .map(|source| cap(source, 200))
}

/// The consultation record input for `advisor`'s `outcome` under `plan` (what produced the
/// answer is [`answer_source`], handed to the store beside it).
pub fn consultation_input(plan: &str, advisor: &str, outcome: &Outcome) -> Value {
    let mut fields = Map::new();
    fields.insert("kind".into(), json!("consultation"));
    fields.insert("plan".into(), json!(plan));
    fields.insert("advisor".into(), json!(advisor));
    match &outcome.result {
        Ok(answer) => {
            fields.insert("status".into(), json!("completed"));
            fields.insert("conclusion".into(), json!(answer.conclusion));
            fields.insert("stance".into(), json!(answer.stance.as_str()));
            fields.insert("assumptions".into(), json!(answer.assumptions));
            fields.insert("risks".into(), json!(answer.risks));
            fields.insert("actions".into(), json!(answer.actions));
            fields.insert("falsifiers".into(), json!(answer.falsifiers));
            if let Some(confidence) = answer.confidence {
                fields.insert("confidence".into(), json!(confidence));
            }
            if !answer.invariants.is_empty() {
                fields.insert("invariants".into(), json!(answer.invariants));
            }
        }
        Err(failure) => {
            fields.insert("status".into(), json!("failed"));
            fields.insert("failure".into(), json!(failure.kind.as_str()));
            if !failure.diagnostic.trim().is_empty() {
                fields.insert("diagnostic".into(), json!(failure.diagnostic));
            }
            if let Some(retry) = failure.retry_after_s {
                fields.insert("retry_after_s".into(), json!(retry));
            }
        }
    }
    fields.insert("duration_ms".into(), json!(outcome.duration_ms));
    if let Some(usage) = outcome.usage {
        fields.insert(
            "usage".into(),
            json!({"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}),
        );
    }
    Value::Object(fields)
}

/// The disagreement to record for `assessment` (id `assessment_id`) given the job's
/// consultation records, or `None` when no completed consultation diverges.
///
/// Positions: the executor's hypothesis, then each completed consultation's conclusion in
/// plan order. Divergent assumptions: those the diverging consultations name. The
/// discriminating question quotes the advisors' falsifiers, diverging ones first.
pub fn disagreement_input(
    assessment_id: &str,
    assessment: &Assessment,
    consultations: &[Record],
) -> Option<Value> {
    let completed: Vec<(&str, &crate::core::records::Consultation)> = consultations
        .iter()
        .filter_map(|r| match &r.body {
            Body::Consultation(c) if c.status == ConsultationStatus::Completed => Some((r.id(), c)),
            _ => None,
        })
        .collect();
    let diverges = |c: &crate::core::records::Consultation| c.stance.is_some_and(|s| s.diverges());
    if !completed.iter().any(|(_, c)| diverges(c)) {
        return None;
    }
    let mut positions = vec![json!({
        "source": EXECUTOR,
        "position": cap(&assessment.hypothesis, MAX_DRAFT_CHARS),
    })];
    for (id, c) in &completed {
        let conclusion = c.conclusion.as_deref().unwrap_or_default();
        positions.push(json!({"source": id, "position": cap(conclusion, MAX_DRAFT_CHARS)}));
    }
    let mut assumptions: Vec<String> = Vec::new();
    for (_, c) in completed.iter().filter(|(_, c)| diverges(c)) {
        for assumption in &c.assumptions {
            let assumption = cap(assumption, MAX_DRAFT_CHARS);
            let seen = assumptions
                .iter()
                .any(|a| a.to_lowercase() == assumption.to_lowercase());
            if !assumption.is_empty() && !seen && assumptions.len() < MAX_DIVERGENT_ASSUMPTIONS {
                assumptions.push(assumption);
            }
        }
    }
    let divergent_first = completed
        .iter()
        .filter(|(_, c)| diverges(c))
        .chain(completed.iter().filter(|(_, c)| !diverges(c)));
    let mut falsifiers: Vec<&str> = Vec::new();
    for (_, c) in divergent_first {
        for f in &c.falsifiers {
            let f = f.trim();
            if !f.is_empty() && !falsifiers.contains(&f) {
                falsifiers.push(f);
            }
        }
    }
    Some(json!({
        "kind": "disagreement",
        "assessment": assessment_id,
        "positions": positions,
        "divergent_assumptions": assumptions,
        "discriminating_question": discriminating_question(assessment, &falsifiers),
    }))
}

/// One question whose answer decides between the positions.
fn discriminating_question(assessment: &Assessment, falsifiers: &[&str]) -> String {
    let hypothesis = cap(&assessment.hypothesis, 300);
    let question = if falsifiers.is_empty() {
        format!(
            "What is the smallest experiment whose result would show whether the hypothesis \
             \"{hypothesis}\" holds, rather than the advisors' diverging position?"
        )
    } else {
        let quoted: Vec<String> = falsifiers
            .iter()
            .take(MAX_FALSIFIERS_QUOTED)
            .enumerate()
            .map(|(i, f)| format!("({}) {}", i + 1, cap(f, 400)))
            .collect();
        format!(
            "Does any of these observations hold: {}? Each would falsify a position; check \
             them against the hypothesis \"{hypothesis}\" before concluding.",
            quoted.join("; ")
        )
    };
    cap(&question, MAX_DRAFT_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::records::{Consultation, Envelope, Materiality, Stance};
    use advisord_adapters::contract::{Failure, FailureKind, Usage};
    use advisord_adapters::normalise::{Normalised, Stance as AnswerStance};

    fn assessment() -> Assessment {
        serde_json::from_value(json!({
            "subject": "cache the catalogue",
            "materiality": "material",
            "hypothesis": "caching is safe",
        }))
        .unwrap()
    }

    fn consultation(id: &str, stance: Option<Stance>, falsifiers: &[&str]) -> Record {
        let completed = stance.is_some();
        Record {
            envelope: Envelope {
                id: id.into(),
                task: "t".into(),
                sequence: 1,
                created_at: "2026-01-01T00:00:00Z".into(),
                schema: 1,
                redacted: vec![],
                prev: None,
            },
            body: Body::Consultation(Consultation {
                plan: "P".into(),
                advisor: format!("adv-{id}"),
                status: if completed {
                    ConsultationStatus::Completed
                } else {
                    ConsultationStatus::Failed
                },
                failure: None,
                diagnostic: None,
                conclusion: completed.then(|| format!("conclusion of {id}")),
                stance,
                assumptions: vec![format!("assumption of {id}"), "shared".into()],
                risks: vec![],
                actions: vec![],
                falsifiers: falsifiers.iter().map(|f| f.to_string()).collect(),
                confidence: None,
                duration_ms: None,
                usage: None,
                retry_after_s: None,
                invariants: Vec::new(),
                source: None,
                finished_at: "2026-01-01T00:00:00Z".into(),
                attestation: None,
            }),
        }
    }

    fn check(records: &[Record], expected_sources: Option<&[&str]>) {
        let drafted = disagreement_input("A", &assessment(), records);
        let sources: Option<Vec<String>> = drafted.as_ref().map(|d| {
            d["positions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["source"].as_str().unwrap().to_string())
                .collect()
        });
        let expected: Option<Vec<String>> =
            expected_sources.map(|s| s.iter().map(|x| x.to_string()).collect());
        assert_eq!(sources, expected);
    }

    #[test]
    fn a_disagreement_only_when_a_completed_consultation_diverges() {
        use Stance::*;
        check(&[], None);
        check(&[consultation("C1", Some(Supports), &[])], None);
        check(&[consultation("C1", Some(Inconclusive), &[])], None);
        check(&[consultation("C1", None, &[])], None);
        check(
            &[consultation("C1", Some(Opposes), &[])],
            Some(&["executor", "C1"]),
        );
        check(
            &[
                consultation("C1", Some(Supports), &[]),
                consultation("C2", None, &[]),
                consultation("C3", Some(Alternative), &[]),
            ],
            Some(&["executor", "C1", "C3"]),
        );
    }

    #[test]
    fn the_question_quotes_diverging_falsifiers_first() {
        let records = [
            consultation("C1", Some(Stance::Supports), &["agreeing falsifier"]),
            consultation(
                "C2",
                Some(Stance::Opposes),
                &["opposing falsifier", "second"],
            ),
        ];
        let drafted = disagreement_input("A", &assessment(), &records).unwrap();
        let question = drafted["discriminating_question"].as_str().unwrap();
        let first = question.find("opposing falsifier").unwrap();
        let later = question.find("agreeing falsifier").unwrap();
        assert!(first < later, "{question}");
        assert_eq!(
            drafted["divergent_assumptions"],
            json!(["assumption of C2", "shared"])
        );
        assert_eq!(drafted["assessment"], "A");
        assert_eq!(drafted["positions"][0]["position"], "caching is safe");
        let none = disagreement_input(
            "A",
            &assessment(),
            &[consultation("C2", Some(Stance::Opposes), &[])],
        )
        .unwrap();
        assert!(none["discriminating_question"]
            .as_str()
            .unwrap()
            .contains("smallest experiment"));
        assert_eq!(assessment().materiality, Materiality::Material);
    }

    #[test]
    fn consultation_inputs_for_answers_and_failures() {
        let answered = Outcome {
            result: Ok(Normalised {
                conclusion: "use a lock".into(),
                stance: AnswerStance::Alternative,
                assumptions: vec!["one writer".into()],
                risks: vec![],
                actions: vec![],
                falsifiers: vec!["two writers race".into()],
                confidence: Some(0.7),
                invariants: vec![],
            }),
            usage: Some(Usage {
                input_tokens: 10,
                output_tokens: 5,
            }),
            duration_ms: 12,
            source: None,
            vouched: true,
        };
        let v = consultation_input("P", "a1", &answered);
        assert_eq!(v["status"], "completed");
        assert_eq!(v["stance"], "alternative");
        assert_eq!(v["confidence"], 0.7);
        assert_eq!(v["usage"]["output_tokens"], 5);
        // What produced it is the store's to write, never part of the drafted input.
        assert!(v.get("source").is_none());
        assert_eq!(
            answer_source(Some("v/m"), &answered).as_deref(),
            Some("v/m")
        );
        let reported = Outcome {
            source: Some("mesh peer".into()),
            ..answered.clone()
        };
        assert_eq!(
            answer_source(Some("v/m"), &reported).as_deref(),
            Some("mesh peer")
        );
        assert!(v.get("failure").is_none());
        let failed = Outcome {
            result: Err(Failure {
                kind: FailureKind::RateLimited,
                diagnostic: "slow down".into(),
                retry_after_s: Some(30),
                usage: None,
            }),
            usage: None,
            duration_ms: 3,
            source: None,
            vouched: true,
        };
        assert_eq!(answer_source(Some("v/m"), &failed), None);
        let v = consultation_input("P", "a1", &failed);
        assert_eq!(v["status"], "failed");
        assert_eq!(v["failure"], "rate_limited");
        assert_eq!(v["retry_after_s"], 30);
        assert!(v.get("conclusion").is_none());
        let silent = Outcome {
            result: Err(Failure {
                kind: FailureKind::Cancelled,
                diagnostic: " ".into(),
                retry_after_s: None,
                usage: None,
            }),
            usage: None,
            duration_ms: 3,
            source: None,
            vouched: true,
        };
        assert!(consultation_input("P", "a1", &silent)
            .get("diagnostic")
            .is_none());
        // An answer of only whitespace is `empty`, and its tokens are still recorded.
        let spent = Usage {
            input_tokens: 7,
            output_tokens: 1,
        };
        let empty = Outcome {
            result: Err(Failure::new(FailureKind::Empty, "no text").with_usage(Some(spent))),
            usage: Some(spent),
            duration_ms: 3,
            source: None,
            vouched: true,
        };
        let v = consultation_input("P", "a1", &empty);
        assert_eq!(v["failure"], "empty");
        assert_eq!(v["usage"]["input_tokens"], 7);
    }

    #[test]
    fn long_text_is_capped() {
        let long = "x".repeat(MAX_DRAFT_CHARS + 50);
        let capped = cap(&long, MAX_DRAFT_CHARS);
        assert_eq!(capped.chars().count(), MAX_DRAFT_CHARS);
        assert!(capped.ends_with('…'));
        assert_eq!(cap(" short ", 10), "short");
    }
}
