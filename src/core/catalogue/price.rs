//! Prices and budgets: an advisor's `price:` and `budget:`, the catalogue's total `budget:`.
//!
//! ```yaml
//! price:                       # per million tokens, in one currency, dated
//!   currency: USD
//!   input_per_million: 3.00
//!   output_per_million: 15.00
//!   as_of: 2026-12-01
//! price: flat_rate             # a subscription: no marginal cost, usage still counted
//! budget:                      # in the catalogue's currency; either or both windows
//!   per_day: 5.00
//!   per_task: 1.00
//! ```
//!
//! Every number is a plain non-negative number in the catalogue's one currency: `"5 USD"`,
//! `"$5"` or `-1` are errors naming the advisor and the field, never a silent zero.

use super::error::{At, CatalogueError};
use super::suggest::did_you_mean;
use super::yaml::{describe, quoted_list, scalar_text};
use serde::{Deserialize, Serialize};
use serde_yaml_ng::Value as Yaml;

/// What one advisor's consultations cost at the margin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "basis", rename_all = "snake_case")]
pub enum Pricing {
    /// Charged per token, at this price.
    Metered(Price),
    /// On a subscription: zero marginal cost; its usage is still counted.
    FlatRate,
}

impl Pricing {
    /// Whether a consultation costs nothing at the margin (flat rate, or a price of zero).
    pub fn is_free_at_margin(&self) -> bool {
        match self {
            Pricing::FlatRate => true,
            Pricing::Metered(p) => p.input_per_million == 0.0 && p.output_per_million == 0.0,
        }
    }
}

/// A list price per million tokens, in one currency, taken on one day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// An ISO 4217 code such as `USD` or `EUR`.
    pub currency: String,
    /// Per million input tokens.
    pub input_per_million: f64,
    /// Per million output tokens.
    pub output_per_million: f64,
    /// The day the price was taken, `YYYY-MM-DD`.
    pub as_of: String,
}

// The parser admits only finite, non-negative numbers, so no price or limit is NaN and
// equality is total: a catalogue entry can be compared whole (mesh peers are matched so).
impl Eq for Price {}
impl Eq for Pricing {}
impl Eq for Limits {}

/// Spending limits in the catalogue's currency: per local calendar day and per task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// The most spent in one day of the user's time zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_day: Option<f64>,
    /// The most spent in one task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_task: Option<f64>,
}

impl Limits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.per_day.is_none() && self.per_task.is_none()
    }

    /// `self`, with each limit `over` sets replacing it.
    pub fn overridden_by(self, over: Limits) -> Limits {
        Limits {
            per_day: over.per_day.or(self.per_day),
            per_task: over.per_task.or(self.per_task),
        }
    }

    /// `self`, with each limit `over` sets applied only where it is stricter: the lower of
    /// two limits holds, and a limit `over` sets where `self` has none is added.
    pub fn tightened_by(self, over: Limits) -> Limits {
        let lower = |mine: Option<f64>, theirs: Option<f64>| match (mine, theirs) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Limits {
            per_day: lower(self.per_day, over.per_day),
            per_task: lower(self.per_task, over.per_task),
        }
    }
}

/// The keys of a `price:` mapping.
const PRICE_KEYS: &[&str] = &[
    "currency",
    "input_per_million",
    "output_per_million",
    "as_of",
];

/// The keys of a `budget:` mapping.
pub(crate) const LIMIT_KEYS: &[&str] = &["per_day", "per_task"];

/// The word for a subscription price.
const FLAT_RATE: &str = "flat_rate";

/// An advisor's `price:`, if given.
pub(super) fn price(value: Option<&Yaml>, at: &At) -> Result<Option<Pricing>, CatalogueError> {
    let map = match value {
        None | Some(Yaml::Null) => return Ok(None),
        Some(Yaml::String(s)) if s == FLAT_RATE => return Ok(Some(Pricing::FlatRate)),
        Some(Yaml::Mapping(map)) => map,
        Some(other) => {
            return Err(at.error(
                Some("price"),
                format!(
                    "must be `flat_rate` or a mapping with `currency`, `input_per_million`, \
                     `output_per_million` and `as_of`, but it is {}",
                    scalar_text(other)
                ),
            ))
        }
    };
    for key in map.keys() {
        let name = key.as_str().unwrap_or_default();
        if !PRICE_KEYS.contains(&name) {
            let hint = did_you_mean(name, PRICE_KEYS)
                .map(|s| format!("did you mean `{s}`? "))
                .unwrap_or_default();
            return Err(at.error(
                Some("price"),
                format!(
                    "unknown key {}; {hint}accepted: {} (prices are per million tokens)",
                    scalar_text(key),
                    quoted_list(PRICE_KEYS)
                ),
            ));
        }
    }
    let currency = match map.get("currency") {
        Some(Yaml::String(code)) if is_currency_code(code) => code.clone(),
        None | Some(Yaml::Null) => {
            return Err(at.error(
                Some("price.currency"),
                "is missing; name the currency as an ISO 4217 code such as `USD` or `EUR`",
            ))
        }
        Some(other) => {
            return Err(at.error(
                Some("price.currency"),
                format!(
                    "{} is not a currency code; give three capital letters such as `USD` \
                     or `EUR`",
                    scalar_text(other)
                ),
            ))
        }
    };
    let input_per_million = amount(map.get("input_per_million"), "price.input_per_million", at)?
        .ok_or_else(|| missing_amount("price.input_per_million", at))?;
    let output_per_million = amount(
        map.get("output_per_million"),
        "price.output_per_million",
        at,
    )?
    .ok_or_else(|| missing_amount("price.output_per_million", at))?;
    let as_of = match map.get("as_of") {
        Some(Yaml::String(day)) if is_day(day) => day.clone(),
        None | Some(Yaml::Null) => {
            return Err(at.error(
                Some("price.as_of"),
                "is missing; a price says the day it was taken, as `YYYY-MM-DD`",
            ))
        }
        Some(other) => {
            return Err(at.error(
                Some("price.as_of"),
                format!(
                    "{} is not a day; write the day the price was taken as `YYYY-MM-DD`",
                    scalar_text(other)
                ),
            ))
        }
    };
    Ok(Some(Pricing::Metered(Price {
        currency,
        input_per_million,
        output_per_million,
        as_of,
    })))
}

fn missing_amount(field: &str, at: &At) -> CatalogueError {
    at.error(
        Some(field),
        "is missing; give the price per million tokens as a number such as `3` or `0.25` \
         (`0` for a free local model)",
    )
}

/// A `budget:` mapping (an advisor's, the catalogue's or the project's).
pub(super) fn limits(value: Option<&Yaml>, at: &At) -> Result<Limits, CatalogueError> {
    let map = match value {
        None | Some(Yaml::Null) => return Ok(Limits::default()),
        Some(Yaml::Mapping(map)) => map,
        Some(other) => {
            return Err(at.error(
                Some("budget"),
                format!(
                    "must be a mapping with `per_day` and/or `per_task`, but it is {}",
                    describe(other)
                ),
            ))
        }
    };
    for key in map.keys() {
        let name = key.as_str().unwrap_or_default();
        if !LIMIT_KEYS.contains(&name) {
            let hint = did_you_mean(name, LIMIT_KEYS)
                .map(|s| format!("did you mean `{s}`? "))
                .unwrap_or_default();
            return Err(at.error(
                Some("budget"),
                format!(
                    "unknown key {}; {hint}accepted: {}",
                    scalar_text(key),
                    quoted_list(LIMIT_KEYS)
                ),
            ));
        }
    }
    Ok(Limits {
        per_day: amount(map.get("per_day"), "budget.per_day", at)?,
        per_task: amount(map.get("per_task"), "budget.per_task", at)?,
    })
}

/// A non-negative, finite plain number, or `None` when absent.
fn amount(value: Option<&Yaml>, field: &str, at: &At) -> Result<Option<f64>, CatalogueError> {
    match value {
        None | Some(Yaml::Null) => Ok(None),
        Some(Yaml::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            Some(x) if x < 0.0 => Err(at.error(
                Some(field),
                format!("`{n}` is negative; give an amount of 0 or more"),
            )),
            _ => Err(at.error(Some(field), format!("`{n}` is not a finite number"))),
        },
        Some(other) => Err(at.error(
            Some(field),
            format!(
                "{} is not a plain number; write the amount alone, such as `2.50`, in the \
                 catalogue's one currency (no unit or currency sign)",
                scalar_text(other)
            ),
        )),
    }
}

/// Three capital ASCII letters.
fn is_currency_code(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}

/// A real calendar day written `YYYY-MM-DD`.
fn is_day(text: &str) -> bool {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    text.len() == 10 && time::Date::parse(text, &format).is_ok()
}

/// `Err` naming the advisor and field when `price` is in a currency other than `currency`
/// (the first one the catalogue used, by `first`).
pub(super) fn same_currency(
    pricing: Option<&Pricing>,
    currency: &mut Option<(String, String)>,
    advisor: &str,
    at: &At,
) -> Result<(), CatalogueError> {
    let Some(Pricing::Metered(price)) = pricing else {
        return Ok(());
    };
    match currency {
        None => {
            *currency = Some((price.currency.clone(), advisor.to_string()));
            Ok(())
        }
        Some((code, _)) if *code == price.currency => Ok(()),
        Some((code, first)) => Err(at.error(
            Some("price.currency"),
            format!(
                "`{}` differs from `{code}` used by advisor `{first}`; a catalogue prices \
                 every advisor in one currency (convert this price to `{code}`)",
                price.currency
            ),
        )),
    }
}

/// Spending limits on every advisor together and on each advisor, from one source (the
/// catalogue, the project's config or the environment) or layered from all of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// On every advisor's spend together.
    #[serde(default)]
    pub total: Limits,
    /// On each advisor's own spend, by id.
    #[serde(default)]
    pub advisors: std::collections::BTreeMap<String, Limits>,
}

impl Budgets {
    /// `self`, with each limit that `over` sets replacing it.
    pub fn overridden_by(mut self, over: &Budgets) -> Budgets {
        self.total = self.total.overridden_by(over.total);
        for (id, limits) in &over.advisors {
            let mine = self.advisors.entry(id.clone()).or_default();
            *mine = mine.overridden_by(*limits);
        }
        self
    }

    /// `self`, with each limit `over` sets applied only where it is stricter. A
    /// repository's own config goes through this: whatever it says, it can lower what the
    /// user allowed, never raise it.
    pub fn tightened_by(mut self, over: &Budgets) -> Budgets {
        self.total = self.total.tightened_by(over.total);
        for (id, limits) in &over.advisors {
            let mine = self.advisors.entry(id.clone()).or_default();
            *mine = mine.tightened_by(*limits);
        }
        self
    }

    /// Whether no limit is set anywhere.
    pub fn is_empty(&self) -> bool {
        self.total.is_empty() && self.advisors.values().all(Limits::is_empty)
    }

    /// The limits on advisor `id` (none set: empty).
    pub fn of(&self, id: &str) -> Limits {
        self.advisors.get(id).copied().unwrap_or_default()
    }
}

/// The `budget:` of a project's config file (`text`, named `source_name` in errors):
///
/// ```yaml
/// budget:
///   per_day: 10          # every advisor together
///   per_task: 2
///   advisors:
///     some-advisor: {per_day: 1}
/// ```
///
/// Other top-level keys are the file's other readers' business. A file without `budget:`
/// sets no limit.
pub fn project_budgets(text: &str, source_name: &str) -> Result<Budgets, CatalogueError> {
    let at = At {
        source_name,
        advisor: String::new(),
    };
    let root: Yaml = serde_yaml_ng::from_str(text)
        .map_err(|e| at.error(None, format!("is not valid YAML: {e}; fix the syntax")))?;
    let Some(budget) = root.get("budget").filter(|v| !v.is_null()) else {
        return Ok(Budgets::default());
    };
    let Yaml::Mapping(map) = budget else {
        return Err(at.error(
            Some("budget"),
            format!(
                "must be a mapping with `per_day`, `per_task` and `advisors`, but it is {}",
                describe(budget)
            ),
        ));
    };
    let mut total = Yaml::Mapping(map.clone());
    let advisors_value = match &mut total {
        Yaml::Mapping(m) => m.remove("advisors"),
        _ => None,
    };
    let total = limits(Some(&total), &at)?;
    let mut advisors = std::collections::BTreeMap::new();
    match advisors_value {
        None | Some(Yaml::Null) => {}
        Some(Yaml::Mapping(each)) => {
            for (id, value) in &each {
                let Some(id) = id.as_str() else {
                    return Err(at.error(
                        Some("budget.advisors"),
                        format!("a key is {}; key each budget by advisor id", describe(id)),
                    ));
                };
                let at = At {
                    source_name,
                    advisor: format!("advisor `{id}`"),
                };
                advisors.insert(id.to_string(), limits(Some(value), &at)?);
            }
        }
        Some(other) => {
            return Err(at.error(
                Some("budget.advisors"),
                format!(
                    "must map advisor ids to `{{per_day, per_task}}`, but it is {}",
                    describe(&other)
                ),
            ))
        }
    }
    Ok(Budgets { total, advisors })
}
