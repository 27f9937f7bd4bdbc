//! The policy: mode, budget, greedy explained selection, local review, reuse.
//!
//! Every function here is pure: the plan is a function of the assessment, the task's
//! records, the catalogue, the mode and an availability snapshot taken by the caller.

use std::collections::{BTreeMap, BTreeSet};

use crate::core::catalogue::{AdvisorEntry, Catalogue, DEFAULT_CAPABILITY};
use crate::core::records::{
    AdvisorAvailability, Assessment, Body, Confidence, LeftOut, Materiality, Mode, Plan, Record,
    Selected, Status,
};

/// What computing a plan needs besides the assessment and the task's records.
pub struct PlanEnv<'a> {
    /// The catalogue in force.
    pub catalogue: &'a Catalogue,
    /// The mode in force.
    pub mode: Mode,
    /// Each advisor's availability now, in catalogue order.
    pub availability: Vec<AdvisorAvailability>,
    /// Why a total spending limit leaves out every advisor with a marginal cost, if one
    /// does: a plan that then selects nobody for material doubt says so in its local review.
    pub budget_exhausted: Option<String>,
    /// Who asked, when the asker named itself (an agent host, through MCP): advisors of
    /// its own vendor are ranked after every other.
    pub asker: Option<Asker>,
}

/// The asking agent host as it named itself, and the vendor behind its model, spelt as the
/// catalogue's `references` spell vendors and providers. Which host is which vendor is
/// decided at the edge; the policy only compares the key with each advisor's references.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Asker {
    /// The host's name for itself (MCP `clientInfo.name`).
    pub host: String,
    /// Its vendor key, when the host is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
}

impl Asker {
    /// Whether `entry` is of the asker's own vendor: its `references.vendor`, else its
    /// `references.provider`, equals the asker's vendor key (case and surrounding
    /// whitespace ignored).
    pub fn owns(&self, entry: &AdvisorEntry) -> bool {
        let Some(vendor) = self
            .vendor
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
        else {
            return false;
        };
        let references = &entry.references;
        references
            .vendor
            .as_deref()
            .or(references.provider.as_deref())
            .is_some_and(|own| own.trim().eq_ignore_ascii_case(vendor))
    }

    /// The clause a reason adds for an advisor of the asker's vendor.
    fn clause(&self) -> String {
        format!(
            "of the asker's own vendor (`{}`, asked by `{}`), ranked after every other advisor \
             so that the session is not reviewed by its own vendor",
            self.vendor.as_deref().unwrap_or_default(),
            self.host
        )
    }
}

/// The steps of the structured local review, carried by a plan that selects nobody for
/// material doubt: the executor performs them instead of asking.
pub const LOCAL_REVIEW: [&str; 5] = [
    "State the hypothesis and the strongest alternative that would also explain the facts.",
    "List every assumption next to the evidence that supports it, and mark the ones with none.",
    "Name the observation that would prove the hypothesis wrong.",
    "Run the smallest experiment whose result tells the hypothesis and the alternative apart.",
    "Record the conclusion, citing that experiment's result as evidence.",
];

/// The `left_out` reason of every advisor when a standing conclusion is reused.
pub const REUSE_REASON: &str = "a standing conclusion answers this assessment";

/// An `ADVISORD_MODE` that names no mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown mode `{given}`; accepted: `ci`, `fast`, `standard`, `offline`, `strict` \
     (unset it to use the catalogue's mode or `standard`)"
)]
pub struct ModeError {
    /// The text given (control characters escaped).
    pub given: String,
}

/// The mode named `name` (surrounding whitespace and case ignored).
pub fn parse_mode(name: &str) -> Result<Mode, ModeError> {
    Mode::parse(&name.trim().to_ascii_lowercase()).ok_or_else(|| ModeError {
        given: name.escape_debug().to_string(),
    })
}

/// The mode in force: `ADVISORD_MODE`, else `ci` when `CI` is set and non-empty, else the
/// catalogue's `mode:`, else `standard`. An empty `ADVISORD_MODE` counts as unset.
pub fn resolve_mode(
    env_mode: Option<&str>,
    ci: Option<&str>,
    catalogue_mode: Option<Mode>,
) -> Result<Mode, String> {
    if let Some(name) = env_mode.filter(|m| !m.trim().is_empty()) {
        return parse_mode(name).map_err(|e| e.to_string());
    }
    if ci.is_some_and(|v| !v.is_empty()) {
        return Ok(Mode::Ci);
    }
    Ok(catalogue_mode.unwrap_or_default())
}

/// Advisors a plan may select for `materiality` in `mode`, after the high-confidence rule.
pub fn budget(mode: Mode, materiality: Materiality, confidence: Confidence) -> u32 {
    use Materiality::{Critical, High, Low, Material, Trivial};
    let table: u32 = match (mode, materiality) {
        (_, Trivial | Low) | (Mode::Ci, _) => 0,
        (Mode::Fast, Material) => 0,
        (Mode::Fast, High | Critical) => 1,
        (Mode::Standard | Mode::Offline | Mode::Strict, Material) => 1,
        (Mode::Standard | Mode::Offline, High | Critical) => 2,
        (Mode::Strict, High) => 2,
        (Mode::Strict, Critical) => 3,
    };
    if confidence == Confidence::High {
        table.saturating_sub(1)
    } else {
        table
    }
}

/// The capabilities a plan requests: those given, once each, or `independent_reasoning`.
pub fn requested_capabilities(given: &[String]) -> Vec<String> {
    let mut requested: Vec<String> = Vec::with_capacity(given.len().max(1));
    for capability in given {
        if !requested.contains(capability) {
            requested.push(capability.clone());
        }
    }
    if requested.is_empty() {
        requested.push(DEFAULT_CAPABILITY.to_string());
    }
    requested
}

/// Compute the plan for `assessment` (stored as `assessment_id`) given the task's records
/// (for reuse of a standing conclusion) and the environment.
pub fn compute_plan(
    assessment_id: &str,
    assessment: &Assessment,
    task_records: &[Record],
    env: &PlanEnv,
) -> Plan {
    let reuse = if assessment.new_evidence {
        None
    } else {
        standing_conclusion(task_records, &assessment.subject).map(|c| c.id().to_string())
    };
    plan_with_reuse(assessment_id, assessment, reuse, env)
}

/// The plan for `assessment` when the caller already knows which standing conclusion, if
/// any, it reuses (the writer looks it up in its index, so a plan costs the same whatever
/// the task's size; `reuse` must be `None` for an assessment declaring new evidence).
pub fn plan_with_reuse(
    assessment_id: &str,
    assessment: &Assessment,
    reuse: Option<String>,
    env: &PlanEnv,
) -> Plan {
    plan(
        assessment_id,
        Doubt {
            materiality: assessment.materiality,
            confidence: assessment.confidence,
            capabilities: &assessment.capabilities,
        },
        reuse,
        env,
    )
}

/// A plan for doubt that is not recorded (`assessment` is empty): what `plan` previews.
pub fn preview(
    materiality: Materiality,
    confidence: Confidence,
    capabilities: &[String],
    env: &PlanEnv,
) -> Plan {
    let doubt = Doubt {
        materiality,
        confidence,
        capabilities,
    };
    plan("", doubt, None, env)
}

/// The standing (not superseded) conclusion whose assessment's normalised subject equals
/// `subject`'s, if any; the newest when several stand.
pub fn standing_conclusion<'r>(task_records: &'r [Record], subject: &str) -> Option<&'r Record> {
    let wanted = normalise_subject(subject);
    let matching: BTreeSet<&str> = task_records
        .iter()
        .filter_map(|r| match &r.body {
            Body::Assessment(a) if normalise_subject(&a.subject) == wanted => Some(r.id()),
            _ => None,
        })
        .collect();
    if matching.is_empty() {
        return None;
    }
    let superseded = superseded_ids(task_records);
    task_records
        .iter()
        .filter(|r| match &r.body {
            Body::Conclusion(c) => matching.contains(c.assessment.as_str()),
            _ => false,
        })
        .filter(|r| !superseded.contains(r.id()))
        .max_by_key(|r| r.envelope.sequence)
}

/// The ids of conclusions that a later conclusion names in `supersedes`.
pub fn superseded_ids(task_records: &[Record]) -> BTreeSet<String> {
    let conclusions: BTreeMap<&str, u64> = task_records
        .iter()
        .filter(|r| matches!(r.body, Body::Conclusion(_)))
        .map(|r| (r.id(), r.envelope.sequence))
        .collect();
    task_records
        .iter()
        .filter_map(|r| match &r.body {
            Body::Conclusion(c) => {
                let old = c.supersedes.as_deref()?;
                let old_sequence = *conclusions.get(old)?;
                (old_sequence < r.envelope.sequence).then(|| old.to_string())
            }
            _ => None,
        })
        .collect()
}

/// A subject case-folded with whitespace collapsed, for reuse matching.
pub fn normalise_subject(subject: &str) -> String {
    subject
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// What the budget and the selection depend on, whether the doubt is recorded or not.
struct Doubt<'a> {
    materiality: Materiality,
    confidence: Confidence,
    capabilities: &'a [String],
}

/// An available advisor offering at least one requested capability.
struct Candidate<'a> {
    entry: &'a AdvisorEntry,
    /// The requested capabilities it offers, in request order.
    covers: Vec<String>,
}

fn plan(assessment_id: &str, doubt: Doubt, reuse: Option<String>, env: &PlanEnv) -> Plan {
    let capabilities = requested_capabilities(doubt.capabilities);
    let budget = budget(env.mode, doubt.materiality, doubt.confidence);
    let (selected, left_out) = match &reuse {
        Some(_) => (
            Vec::new(),
            env.catalogue
                .advisors
                .iter()
                .map(|a| LeftOut {
                    advisor: a.id.clone(),
                    reason: REUSE_REASON.to_string(),
                })
                .collect(),
        ),
        None => select(&capabilities, budget, &doubt, env),
    };
    let local_review = if selected.is_empty()
        && reuse.is_none()
        && doubt.materiality.needs_evidence()
    {
        env.budget_exhausted
            .iter()
            .map(|reason| {
                format!("No advisor was consulted because {reason}: review locally, step by step.")
            })
            .chain(LOCAL_REVIEW.iter().map(|s| s.to_string()))
            .collect()
    } else {
        Vec::new()
    };
    let uncovered_capabilities = uncovered(&capabilities, env);
    Plan {
        assessment: assessment_id.to_string(),
        mode: env.mode,
        budget,
        capabilities,
        selected,
        left_out,
        availability: env.availability.clone(),
        reuse,
        local_review,
        uncovered_capabilities,
        question: None,
        prior_opinion: None,
        prompt_bytes: None,
        prompt_sha256: None,
    }
}

/// The requested capabilities no available advisor offers, in request order.
fn uncovered(requested: &[String], env: &PlanEnv) -> Vec<String> {
    let available: BTreeSet<&str> = env
        .availability
        .iter()
        .filter(|a| a.status == Status::Available)
        .map(|a| a.advisor.as_str())
        .collect();
    requested
        .iter()
        .filter(|capability| {
            !env.catalogue
                .advisors
                .iter()
                .any(|a| available.contains(a.id.as_str()) && a.capabilities.contains(capability))
        })
        .cloned()
        .collect()
}

/// Greedy selection: each next advisor covers the most requested capabilities not yet
/// covered, then is reached through an adapter not yet used, then is declared first.
fn select(
    requested: &[String],
    budget: u32,
    doubt: &Doubt,
    env: &PlanEnv,
) -> (Vec<Selected>, Vec<LeftOut>) {
    let status: BTreeMap<&str, &AdvisorAvailability> = env
        .availability
        .iter()
        .map(|a| (a.advisor.as_str(), a))
        .collect();
    let mut left_out: BTreeMap<&str, String> = BTreeMap::new();
    let mut candidates: Vec<Candidate> = Vec::new();
    for entry in &env.catalogue.advisors {
        let covers: Vec<String> = requested
            .iter()
            .filter(|c| entry.capabilities.contains(c))
            .cloned()
            .collect();
        match status.get(entry.id.as_str()) {
            None => {
                left_out.insert(&entry.id, "its availability was not assessed".to_string());
            }
            Some(a) if a.status != Status::Available => {
                left_out.insert(&entry.id, format!("{}: {}", a.status.as_str(), a.reason));
            }
            Some(_) if covers.is_empty() => {
                left_out.insert(
                    &entry.id,
                    format!(
                        "offers none of the requested capabilities: {}",
                        requested.join(", ")
                    ),
                );
            }
            Some(_) => candidates.push(Candidate { entry, covers }),
        }
    }

    let own_vendor = |c: &Candidate| env.asker.as_ref().is_some_and(|a| a.owns(c.entry));
    let mut selected: Vec<Selected> = Vec::new();
    let mut covered: BTreeSet<String> = BTreeSet::new();
    let mut adapters: BTreeSet<&str> = BTreeSet::new();
    while (selected.len() as u32) < budget && !candidates.is_empty() {
        let rank = |c: &Candidate| {
            let new = c
                .covers
                .iter()
                .filter(|x| !covered.contains(x.as_str()))
                .count();
            (
                !own_vendor(c),
                new,
                !adapters.contains(c.entry.adapter.as_str()),
            )
        };
        // `candidates` is in declaration order, so the first of the best rank wins.
        let best_rank = candidates.iter().map(rank).max().unwrap_or_default();
        let best = candidates
            .iter()
            .position(|c| rank(c) == best_rank)
            .unwrap_or_default();
        let tied: Vec<&str> = candidates[best + 1..]
            .iter()
            .filter(|c| rank(c) == best_rank)
            .map(|c| c.entry.id.as_str())
            .collect();
        let chosen = candidates.remove(best);
        let mut why = explain_choice(&chosen, &covered, &adapters, selected.is_empty(), &tied);
        if let Some(asker) = env.asker.as_ref().filter(|a| a.owns(chosen.entry)) {
            // No advisor of another vendor was left to ask.
            why = format!(
                "{} It is {}, chosen as no advisor of another vendor remained.",
                why,
                asker.clause()
            );
        }
        covered.extend(chosen.covers.iter().cloned());
        adapters.insert(chosen.entry.adapter.as_str());
        selected.push(Selected {
            advisor: chosen.entry.id.clone(),
            adapter: chosen.entry.adapter.clone(),
            covers: chosen.covers,
            why,
        });
    }
    for candidate in &candidates {
        let mut reason = format!(
            "budget of {budget} reached (mode {}, materiality {}, confidence {})",
            env.mode.as_str(),
            doubt.materiality.as_str(),
            doubt.confidence.as_str()
        );
        if let Some(asker) = env.asker.as_ref().filter(|a| a.owns(candidate.entry)) {
            reason.push_str("; ");
            reason.push_str(&asker.clause());
        }
        left_out.insert(&candidate.entry.id, reason);
    }
    let left_out = env
        .catalogue
        .advisors
        .iter()
        .filter_map(|a| {
            left_out.get(a.id.as_str()).map(|reason| LeftOut {
                advisor: a.id.clone(),
                reason: reason.clone(),
            })
        })
        .collect();
    (selected, left_out)
}

/// One sentence saying which rule picked `chosen`.
fn explain_choice(
    chosen: &Candidate,
    covered: &BTreeSet<String>,
    adapters: &BTreeSet<&str>,
    first: bool,
    tied: &[&str],
) -> String {
    let new: Vec<&str> = chosen
        .covers
        .iter()
        .filter(|c| !covered.contains(*c))
        .map(String::as_str)
        .collect();
    let mut clauses = Vec::new();
    clauses.push(match (new.is_empty(), first) {
        (false, true) => format!("covers {}", new.join(", ")),
        (false, false) => format!("covers {}, not yet covered", new.join(", ")),
        (true, _) => format!(
            "adds an independent opinion on {}, which is already covered",
            chosen.covers.join(", ")
        ),
    });
    let adapter = &chosen.entry.adapter;
    if !first {
        clauses.push(if adapters.contains(adapter.as_str()) {
            format!(
                "reached through adapter `{adapter}`, already used, as no advisor on another \
                 adapter covers as much"
            )
        } else {
            format!("reached through adapter `{adapter}`, not yet used by this plan")
        });
    }
    if !tied.is_empty() {
        let others: Vec<String> = tied.iter().map(|id| format!("`{id}`")).collect();
        clauses.push(format!(
            "declared before {} in the catalogue's order of preference",
            others.join(", ")
        ));
    }
    let sentence = clauses.join("; ");
    let mut chars = sentence.chars();
    match chars.next() {
        Some(c) => format!("{}{}.", c.to_uppercase(), chars.as_str()),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::availability::tests::{advisor, record};
    use crate::core::records::{Conclusion, Evidence, EvidenceKind};
    use Materiality::{Critical, High, Low, Material, Trivial};

    #[test]
    fn budget_table() {
        // (mode, materiality, [low, medium, high] confidence), every cell of the budget table.
        #[rustfmt::skip]
        let table: &[(Mode, Materiality, [u32; 3])] = &[
            (Mode::Ci, Trivial, [0, 0, 0]),
            (Mode::Ci, Low, [0, 0, 0]),
            (Mode::Ci, Material, [0, 0, 0]),
            (Mode::Ci, High, [0, 0, 0]),
            (Mode::Ci, Critical, [0, 0, 0]),
            (Mode::Fast, Trivial, [0, 0, 0]),
            (Mode::Fast, Low, [0, 0, 0]),
            (Mode::Fast, Material, [0, 0, 0]),
            (Mode::Fast, High, [1, 1, 0]),
            (Mode::Fast, Critical, [1, 1, 0]),
            (Mode::Standard, Trivial, [0, 0, 0]),
            (Mode::Standard, Low, [0, 0, 0]),
            (Mode::Standard, Material, [1, 1, 0]),
            (Mode::Standard, High, [2, 2, 1]),
            (Mode::Standard, Critical, [2, 2, 1]),
            (Mode::Offline, Trivial, [0, 0, 0]),
            (Mode::Offline, Low, [0, 0, 0]),
            (Mode::Offline, Material, [1, 1, 0]),
            (Mode::Offline, High, [2, 2, 1]),
            (Mode::Offline, Critical, [2, 2, 1]),
            (Mode::Strict, Trivial, [0, 0, 0]),
            (Mode::Strict, Low, [0, 0, 0]),
            (Mode::Strict, Material, [1, 1, 0]),
            (Mode::Strict, High, [2, 2, 1]),
            (Mode::Strict, Critical, [3, 3, 2]),
        ];
        assert_eq!(table.len(), Mode::ALL.len() * Materiality::ALL.len());
        let check = |mode: Mode, materiality: Materiality, confidence: Confidence, want: u32| {
            assert_eq!(
                budget(mode, materiality, confidence),
                want,
                "{} {} {}",
                mode.as_str(),
                materiality.as_str(),
                confidence.as_str()
            );
        };
        for (mode, materiality, by_confidence) in table {
            for (confidence, want) in Confidence::ALL.into_iter().zip(by_confidence) {
                check(*mode, *materiality, confidence, *want);
            }
        }
    }

    #[test]
    fn mode_resolution() {
        let check =
            |env: Option<&str>, ci: Option<&str>, file: Option<Mode>, want: Result<Mode, &str>| {
                let got = resolve_mode(env, ci, file);
                match (&got, want) {
                    (Ok(got), Ok(want)) => assert_eq!(*got, want, "{env:?} {ci:?} {file:?}"),
                    (Err(message), Err(fragment)) => {
                        assert!(message.contains(fragment), "{message}");
                        assert!(message.contains("`strict`"), "{message}");
                    }
                    _ => panic!("{env:?} {ci:?} {file:?}: got {got:?}"),
                }
            };
        check(None, None, None, Ok(Mode::Standard));
        check(None, None, Some(Mode::Fast), Ok(Mode::Fast));
        check(None, Some("true"), Some(Mode::Fast), Ok(Mode::Ci));
        check(None, Some(""), Some(Mode::Fast), Ok(Mode::Fast));
        check(
            Some("strict"),
            Some("1"),
            Some(Mode::Fast),
            Ok(Mode::Strict),
        );
        check(Some(" Offline "), None, None, Ok(Mode::Offline));
        check(Some(""), Some("1"), None, Ok(Mode::Ci));
        check(
            Some("turbo"),
            None,
            Some(Mode::Fast),
            Err("unknown mode `turbo`"),
        );
        assert!(parse_mode("fastest").is_err());
    }

    #[test]
    fn requested_capabilities_default_and_dedupe() {
        let own = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(requested_capabilities(&[]), own(&[DEFAULT_CAPABILITY]));
        assert_eq!(
            requested_capabilities(&own(&["debugging", "architecture", "debugging"])),
            own(&["debugging", "architecture"])
        );
    }

    /// An availability snapshot: `available` lists who is available, the rest are
    /// unavailable with a reason naming them.
    fn snapshot(catalogue: &Catalogue, available: &[&str]) -> Vec<AdvisorAvailability> {
        catalogue
            .advisors
            .iter()
            .map(|a| {
                let up = available.contains(&a.id.as_str());
                AdvisorAvailability {
                    advisor: a.id.clone(),
                    status: if up {
                        Status::Available
                    } else {
                        Status::Unavailable
                    },
                    reason: if up {
                        "ready".into()
                    } else {
                        format!("`{}-bin` is not on PATH", a.id)
                    },
                    recovering: false,
                    until: None,
                }
            })
            .collect()
    }

    fn catalogue(advisors: &[(&str, &str, &[&str])]) -> Catalogue {
        Catalogue {
            mode: None,
            budget: Default::default(),
            advisors: advisors
                .iter()
                .map(|(id, adapter, caps)| advisor(id, adapter, caps))
                .collect(),
        }
    }

    fn own(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// One selection: the advisors picked, in order, for `requested` under `budget`-giving
    /// doubt (`materiality` in `standard`/`strict` mode, medium confidence).
    fn check_selection(
        case: &str,
        advisors: &[(&str, &str, &[&str])],
        available: &[&str],
        requested: &[&str],
        (mode, materiality): (Mode, Materiality),
        want: &[&str],
    ) -> Plan {
        let catalogue = catalogue(advisors);
        let env = PlanEnv {
            catalogue: &catalogue,
            mode,
            availability: snapshot(&catalogue, available),
            budget_exhausted: None,
            asker: None,
        };
        let plan = preview(materiality, Confidence::Medium, &own(requested), &env);
        let got: Vec<&str> = plan.selected.iter().map(|s| s.advisor.as_str()).collect();
        assert_eq!(got, want, "{case}: {:#?}", plan.selected);
        // Every advisor appears exactly once, selected or left out.
        let mut everyone: Vec<&str> = got.clone();
        everyone.extend(plan.left_out.iter().map(|l| l.advisor.as_str()));
        everyone.sort_unstable();
        let mut ids: Vec<&str> = catalogue.advisors.iter().map(|a| a.id.as_str()).collect();
        ids.sort_unstable();
        assert_eq!(everyone, ids, "{case}");
        for selected in &plan.selected {
            assert!(
                selected.why.ends_with('.') && !selected.why.contains('\n'),
                "{case}"
            );
        }
        plan
    }

    const IR: &str = "independent_reasoning";
    const CR: &str = "code_review";
    const AR: &str = "architecture";

    #[test]
    fn advisors_of_the_askers_own_vendor_are_ranked_after_every_other() {
        // `own-api` is declared first and covers the most, yet the host of its vendor
        // asked: the other vendors' advisors are asked first, and it only when none is left.
        let mut catalogue = catalogue(&[
            ("own-api", "http-x", &[IR, CR]),
            ("other-cli", "process", &[IR]),
            ("third-api", "http-y", &[IR]),
        ]);
        catalogue.advisors[0].references.vendor = Some("Vendor-A".into());
        catalogue.advisors[1].references.vendor = Some("vendor-b".into());
        // No vendor named: its provider stands for it.
        catalogue.advisors[2].references.provider = Some("vendor-c".into());
        let asker = Asker {
            host: "host-of-a".into(),
            vendor: Some("vendor-a".into()),
        };
        let plan_for = |asker: Option<Asker>, mode, materiality| {
            let env = PlanEnv {
                catalogue: &catalogue,
                mode,
                availability: snapshot(&catalogue, &["own-api", "other-cli", "third-api"]),
                budget_exhausted: None,
                asker,
            };
            preview(materiality, Confidence::Medium, &own(&[IR, CR]), &env)
        };
        let ids = |plan: &Plan| -> Vec<String> {
            plan.selected.iter().map(|s| s.advisor.clone()).collect()
        };
        // Without an asker, declaration order and coverage decide.
        let plan = plan_for(None, Mode::Standard, Material);
        assert_eq!(ids(&plan), ["own-api"]);
        // The asker's vendor goes last; the reason says so where it is left out.
        let plan = plan_for(Some(asker.clone()), Mode::Standard, Material);
        assert_eq!(ids(&plan), ["other-cli"]);
        let reason = &plan
            .left_out
            .iter()
            .find(|l| l.advisor == "own-api")
            .expect("own-api left out")
            .reason;
        assert!(
            reason.starts_with("budget of 1 reached")
                && reason.contains("of the asker's own vendor (`vendor-a`, asked by `host-of-a`)"),
            "{reason}"
        );
        let third = &plan
            .left_out
            .iter()
            .find(|l| l.advisor == "third-api")
            .unwrap()
            .reason;
        assert!(!third.contains("own vendor"), "{third}");
        // With room for everyone, it is asked last, and its reason says why it is there.
        let plan = plan_for(Some(asker.clone()), Mode::Strict, Critical);
        assert_eq!(ids(&plan), ["other-cli", "third-api", "own-api"]);
        assert!(
            plan.selected[2]
                .why
                .contains("no advisor of another vendor remained"),
            "{}",
            plan.selected[2].why
        );
        assert!(
            !plan.selected[0].why.contains("vendor"),
            "{}",
            plan.selected[0].why
        );
        // A host of no known vendor changes nothing.
        let unknown = Asker {
            host: "some-inspector".into(),
            vendor: None,
        };
        let plan = plan_for(Some(unknown), Mode::Standard, Material);
        assert_eq!(ids(&plan), ["own-api"]);
    }

    #[test]
    fn a_capability_no_available_advisor_offers_is_uncovered() {
        let advisors: &[(&str, &str, &[&str])] = &[("a", "x", &[CR]), ("b", "y", &[CR, AR])];
        let check = |available: &[&str], requested: &[&str], want: &[&str], mode| {
            let plan = check_selection(
                "uncovered",
                advisors,
                available,
                requested,
                (mode, High),
                &[],
            );
            assert_eq!(
                plan.uncovered_capabilities,
                own(want),
                "{available:?} {requested:?}"
            );
        };
        // Budget 0 in `ci`: nobody is selected, yet only what nobody offers is uncovered.
        check(&["a", "b"], &[CR, AR], &[], Mode::Ci);
        check(&["a"], &[CR, AR], &[AR], Mode::Ci);
        check(
            &["a"],
            &[AR, "security_review", CR],
            &[AR, "security_review"],
            Mode::Ci,
        );
        check(&[], &[CR], &[CR], Mode::Ci);
        let plan = check_selection(
            "selected",
            advisors,
            &["a"],
            &[CR, AR],
            (Mode::Standard, High),
            &["a"],
        );
        assert_eq!(plan.uncovered_capabilities, own(&[AR]));
    }

    #[test]
    fn selection_tie_breaks() {
        let standard_high = (Mode::Standard, High);
        let strict_critical = (Mode::Strict, Critical);
        let plan = check_selection(
            "coverage beats declaration order",
            &[("a", "x", &[CR]), ("b", "y", &[CR, AR])],
            &["a", "b"],
            &[CR, AR],
            standard_high,
            &["b", "a"],
        );
        assert_eq!(plan.selected[0].covers, own(&[CR, AR]));
        assert_eq!(plan.selected[0].why, "Covers code_review, architecture.");
        assert_eq!(
            plan.selected[1].why,
            "Adds an independent opinion on code_review, which is already covered; reached \
             through adapter `x`, not yet used by this plan."
        );
        let plan = check_selection(
            "a different adapter beats declaration order",
            &[("a", "x", &[IR]), ("b", "x", &[IR]), ("c", "y", &[IR])],
            &["a", "b", "c"],
            &[IR],
            standard_high,
            &["a", "c"],
        );
        assert_eq!(
            plan.selected[0].why,
            "Covers independent_reasoning; declared before `b`, `c` in the catalogue's order \
             of preference."
        );
        assert!(
            plan.selected[1].why.contains("adapter `y`, not yet used"),
            "{plan:?}"
        );
        assert_eq!(
            plan.left_out[0].reason,
            "budget of 2 reached (mode standard, materiality high, confidence medium)"
        );
        check_selection(
            "declaration order among equals",
            &[("a", "x", &[IR]), ("b", "y", &[IR])],
            &["a", "b"],
            &[IR],
            (Mode::Standard, Material),
            &["a"],
        );
        check_selection(
            "declaration order among equals, reversed",
            &[("b", "y", &[IR]), ("a", "x", &[IR])],
            &["a", "b"],
            &[IR],
            (Mode::Standard, Material),
            &["b"],
        );
        let plan = check_selection(
            "new coverage beats a new adapter",
            &[
                ("a", "x", &[CR]),
                ("b", "x", &[CR]),
                ("c", "x", &[AR]),
                ("d", "y", &[CR]),
            ],
            &["a", "b", "c", "d"],
            &[CR, AR],
            strict_critical,
            &["a", "c", "d"],
        );
        assert!(
            plan.selected[1].why.starts_with(
                "Covers architecture, not yet covered; reached \
             through adapter `x`, already used"
            ),
            "{:?}",
            plan.selected[1]
        );
        check_selection(
            "the same adapter when no other is left",
            &[("a", "x", &[IR]), ("b", "x", &[IR])],
            &["a", "b"],
            &[IR],
            standard_high,
            &["a", "b"],
        );
    }

    #[test]
    fn left_out_reasons() {
        let plan = check_selection(
            "reasons",
            &[
                ("down", "x", &[IR]),
                ("other", "y", &[AR]),
                ("first", "z", &[IR]),
                ("second", "w", &[IR]),
            ],
            &["other", "first", "second"],
            &[IR],
            (Mode::Standard, Material),
            &["first"],
        );
        let reasons: Vec<(&str, &str)> = plan
            .left_out
            .iter()
            .map(|l| (l.advisor.as_str(), l.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            [
                ("down", "unavailable: `down-bin` is not on PATH"),
                (
                    "other",
                    "offers none of the requested capabilities: independent_reasoning"
                ),
                (
                    "second",
                    "budget of 1 reached (mode standard, materiality material, confidence medium)"
                ),
            ]
        );
        // An advisor the snapshot does not mention is never selected.
        let catalogue = catalogue(&[("ghost", "x", &[IR])]);
        let env = PlanEnv {
            catalogue: &catalogue,
            mode: Mode::Standard,
            availability: Vec::new(),
            budget_exhausted: None,
            asker: None,
        };
        let plan = preview(High, Confidence::Low, &[], &env);
        assert!(plan.selected.is_empty());
        assert_eq!(plan.left_out[0].reason, "its availability was not assessed");
    }

    #[test]
    fn local_review_when_nobody_is_selected_for_material_doubt() {
        let advisors: &[(&str, &str, &[&str])] = &[("a", "x", &[IR])];
        /// (case, who is available, mode, materiality, confidence, local review expected)
        type Case<'a> = (&'a str, &'a [&'a str], Mode, Materiality, Confidence, bool);
        let cases: &[Case] = &[
            (
                "nobody available, material",
                &[],
                Mode::Standard,
                Material,
                Confidence::Medium,
                true,
            ),
            (
                "nobody available, critical",
                &[],
                Mode::Strict,
                Critical,
                Confidence::Low,
                true,
            ),
            (
                "nobody available, low",
                &[],
                Mode::Standard,
                Low,
                Confidence::Medium,
                false,
            ),
            (
                "nobody available, trivial",
                &[],
                Mode::Strict,
                Trivial,
                Confidence::Low,
                false,
            ),
            (
                "budget 0 by confidence",
                &["a"],
                Mode::Standard,
                Material,
                Confidence::High,
                true,
            ),
            (
                "budget 0 in ci",
                &["a"],
                Mode::Ci,
                Critical,
                Confidence::Low,
                true,
            ),
            (
                "someone selected",
                &["a"],
                Mode::Standard,
                Material,
                Confidence::Medium,
                false,
            ),
        ];
        let catalogue = catalogue(advisors);
        for (case, available, mode, materiality, confidence, want) in cases {
            let env = PlanEnv {
                catalogue: &catalogue,
                mode: *mode,
                availability: snapshot(&catalogue, available),
                budget_exhausted: None,
                asker: None,
            };
            let plan = preview(*materiality, *confidence, &[], &env);
            assert_eq!(!plan.local_review.is_empty(), *want, "{case}: {plan:?}");
            if *want {
                assert_eq!(plan.local_review.len(), LOCAL_REVIEW.len(), "{case}");
            }
            assert_eq!(plan.assessment, "", "{case}");
            assert_eq!(plan.capabilities, own(&[IR]), "{case}");
            assert_eq!(plan.availability, env.availability, "{case}");
        }
    }

    fn assessment(subject: &str, new_evidence: bool) -> Assessment {
        Assessment {
            subject: subject.into(),
            materiality: High,
            confidence: Confidence::Medium,
            hypothesis: "h".into(),
            facts: Vec::new(),
            assumptions: Vec::new(),
            questions: Vec::new(),
            evidence: vec![Evidence {
                kind: EvidenceKind::File,
                reference: "src/lib.rs".into(),
                showed: None,
            }],
            capabilities: Vec::new(),
            new_evidence,
        }
    }

    fn conclusion(id: &str, sequence: u64, on: &str, supersedes: Option<&str>) -> Record {
        record(
            id,
            sequence,
            Body::Conclusion(Conclusion {
                assessment: on.into(),
                decision: "d".into(),
                rationale: "r".into(),
                evidence: Vec::new(),
                consultations: Vec::new(),
                rejected_alternatives: Vec::new(),
                risks: Vec::new(),
                validation_plan: Some("v".into()),
                supersedes: supersedes.map(str::to_string),
                invariants: Vec::new(),
                reviewed_by: Vec::new(),
                independent_review_count: 0,
            }),
        )
    }

    /// A task where `A1` was concluded by `C1`, then re-assessed with new evidence as `A2`
    /// and concluded by `C2`, which supersedes `C1`; `A3` on another subject is concluded.
    fn task() -> Vec<Record> {
        vec![
            record(
                "A1",
                1,
                Body::Assessment(assessment("Use  SQLite for the cache", false)),
            ),
            conclusion("C1", 2, "A1", None),
            record(
                "A2",
                3,
                Body::Assessment(assessment("use sqlite for the CACHE", true)),
            ),
            conclusion("C2", 4, "A2", Some("C1")),
            record(
                "A3",
                5,
                Body::Assessment(assessment("Split the daemon", false)),
            ),
            conclusion("C3", 6, "A3", None),
        ]
    }

    #[test]
    fn standing_conclusions_and_supersession() {
        let records = task();
        assert_eq!(superseded_ids(&records), BTreeSet::from(["C1".to_string()]));
        let standing = |subject: &str| standing_conclusion(&records, subject).map(|r| r.id());
        assert_eq!(standing("USE SQLITE  for the cache "), Some("C2"));
        assert_eq!(standing("split\tthe daemon"), Some("C3"));
        assert_eq!(standing("something new"), None);
        // Before C2 existed, C1 stood.
        assert_eq!(
            standing_conclusion(&records[..3], "use sqlite for the cache").map(|r| r.id()),
            Some("C1")
        );
        // A `supersedes` naming a later conclusion (impossible through the writer) is ignored.
        let odd = vec![
            record("A1", 1, Body::Assessment(assessment("x", false))),
            conclusion("C1", 2, "A1", Some("C2")),
            conclusion("C2", 3, "A1", None),
        ];
        assert!(superseded_ids(&odd).is_empty());
        assert_eq!(normalise_subject("  A\n b\tC "), "a b c");
    }

    #[test]
    fn reuse_of_a_standing_conclusion_unless_new_evidence() {
        let catalogue = catalogue(&[("a", "x", &[IR]), ("b", "y", &[IR])]);
        let env = PlanEnv {
            catalogue: &catalogue,
            mode: Mode::Standard,
            availability: snapshot(&catalogue, &["a", "b"]),
            budget_exhausted: None,
            asker: None,
        };
        let records = task();
        let same = assessment("Use SQLite for the cache", false);
        let plan = compute_plan("A4", &same, &records, &env);
        assert_eq!(plan.assessment, "A4");
        assert_eq!(plan.reuse.as_deref(), Some("C2"));
        assert!(plan.selected.is_empty());
        assert!(
            plan.local_review.is_empty(),
            "a reused conclusion is already decided"
        );
        assert_eq!(plan.left_out.len(), 2);
        assert!(plan.left_out.iter().all(|l| l.reason == REUSE_REASON));
        assert_eq!(plan.budget, 2);

        let renewed = assessment("Use SQLite for the cache", true);
        let plan = compute_plan("A4", &renewed, &records, &env);
        assert_eq!(plan.reuse, None);
        let got: Vec<&str> = plan.selected.iter().map(|s| s.advisor.as_str()).collect();
        assert_eq!(got, ["a", "b"]);

        let fresh = assessment("Something else entirely", false);
        assert_eq!(compute_plan("A4", &fresh, &records, &env).reuse, None);
        // A preview never reuses: it has no subject.
        assert_eq!(preview(High, Confidence::Medium, &[], &env).reuse, None);
    }
}
