//! Cost: what consultations cost, derived from their recorded usage and the catalogue's
//! price, never stored; and budgets, whose state is a function of the records, the
//! catalogue, the limits, the clock and the user's UTC offset, like the circuit.
//!
//! A cost is `unknown` when the usage or the price is missing, never zero; a flat-rate
//! advisor costs nothing at the margin but its usage is still counted. A sum says how
//! many of its consultations had an unknown cost. Budgets count the known amounts only.

mod budget;
mod spend;

pub use budget::{
    day_window, offset_text, spent_at, BudgetInput, BudgetLine, BudgetState, Window, TASK_RESET,
};
pub use spend::{spend, SpendRow, SpendView};

use crate::core::catalogue::{Catalogue, Pricing};
use crate::core::records::{Consultation, Usage};
use serde::{Deserialize, Serialize};

/// What one consultation cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "basis", rename_all = "snake_case")]
pub enum Cost {
    /// Usage times the price in force.
    Metered {
        /// In `currency`.
        amount: f64,
        /// The catalogue's currency.
        currency: String,
    },
    /// The advisor is on a subscription: nothing at the margin.
    FlatRate,
    /// The usage or the price is missing.
    Unknown {
        /// Which one, in words.
        reason: String,
    },
}

/// Why a cost is unknown: the consultation recorded no usage.
pub const NO_USAGE: &str = "no usage recorded";
/// Why a cost is unknown: the advisor has no price in the catalogue.
pub const NO_PRICE: &str = "no price in the catalogue";
/// Why a cost is unknown: the advisor is not in the catalogue.
pub const NOT_IN_CATALOGUE: &str = "advisor not in the catalogue";

/// The cost of `usage` at `pricing`.
pub fn cost_of(usage: Option<&Usage>, pricing: Option<&Pricing>) -> Cost {
    match (pricing, usage) {
        (Some(Pricing::FlatRate), _) => Cost::FlatRate,
        (None, _) => Cost::Unknown {
            reason: NO_PRICE.to_string(),
        },
        (Some(Pricing::Metered(_)), None) => Cost::Unknown {
            reason: NO_USAGE.to_string(),
        },
        (Some(Pricing::Metered(price)), Some(usage)) => Cost::Metered {
            amount: (usage.input_tokens as f64 * price.input_per_million
                + usage.output_tokens as f64 * price.output_per_million)
                / 1_000_000.0,
            currency: price.currency.clone(),
        },
    }
}

/// The cost of a recorded consultation at the catalogue's price for its advisor.
pub fn consultation_cost(consultation: &Consultation, catalogue: &Catalogue) -> Cost {
    advisor_cost(
        &consultation.advisor,
        consultation.usage.as_ref(),
        catalogue,
    )
}

/// The cost of `usage` by advisor `advisor` at the catalogue's price.
pub fn advisor_cost(advisor: &str, usage: Option<&Usage>, catalogue: &Catalogue) -> Cost {
    match catalogue.get(advisor) {
        Some(entry) => cost_of(usage, entry.price.as_ref()),
        None => Cost::Unknown {
            reason: NOT_IN_CATALOGUE.to_string(),
        },
    }
}

impl Cost {
    /// The cost in words: `0.0123 USD`, `flat rate`, `unknown (no usage recorded)`.
    pub fn display(&self) -> String {
        match self {
            Cost::Metered { amount, currency } => format!("{} {currency}", money(*amount)),
            Cost::FlatRate => "flat rate".to_string(),
            Cost::Unknown { reason } => format!("unknown ({reason})"),
        }
    }
}

/// An amount as shown: at least four decimals (a consultation often costs less than a
/// cent), and below a tenth of a cent as many more as keep three significant digits, so
/// that 0.00033 is not shown as the 0.0003 it exceeds.
pub fn money(amount: f64) -> String {
    Money(amount).to_string()
}

/// An amount shown as [`money`] does, written where it is formatted.
pub struct Money(pub f64);

/// The most decimals an amount is shown with (a millionth of a millionth).
const MAX_DECIMALS: usize = 12;

impl std::fmt::Display for Money {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let magnitude = self.0.abs();
        if !magnitude.is_finite() || magnitude == 0.0 || magnitude >= 0.001 {
            return write!(f, "{:.4}", self.0);
        }
        // Three significant digits: 0.00033 has its first digit at the 4th decimal.
        let first = (-magnitude.log10()).ceil() as usize;
        let decimals = (first + 2).clamp(4, MAX_DECIMALS);
        let text = format!("{:.*}", decimals, self.0);
        // Trailing zeros past the fourth decimal say nothing.
        let dot = text.find('.').unwrap_or(text.len());
        let keep = text.trim_end_matches('0').len().max(dot + 5);
        f.write_str(&text[..keep])
    }
}

/// What several consultations cost together.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spend {
    /// Consultations counted.
    pub consultations: u64,
    /// Tokens sent, over the consultations that reported usage.
    pub input_tokens: u64,
    /// Tokens received, likewise.
    pub output_tokens: u64,
    /// The sum of the known metered costs.
    pub amount: f64,
    /// Their currency (`None` when none was metered).
    pub currency: Option<String>,
    /// Consultations whose cost is unknown (not in `amount`).
    pub unknown: u64,
    /// Consultations of flat-rate advisors.
    pub flat_rate: u64,
}

impl Spend {
    /// Count one consultation of `usage` costing `cost`.
    pub fn add(&mut self, usage: Option<&Usage>, cost: &Cost) {
        // Saturating: records stored before token counts were bounded may hold any
        // number, and a sum must never wrap around to a small one.
        self.consultations = self.consultations.saturating_add(1);
        if let Some(u) = usage {
            self.input_tokens = self.input_tokens.saturating_add(u.input_tokens);
            self.output_tokens = self.output_tokens.saturating_add(u.output_tokens);
        }
        match cost {
            Cost::Metered { amount, currency } => {
                self.amount += amount;
                if self.currency.is_none() {
                    self.currency = Some(currency.clone());
                }
            }
            Cost::FlatRate => self.flat_rate = self.flat_rate.saturating_add(1),
            Cost::Unknown { .. } => self.unknown = self.unknown.saturating_add(1),
        }
    }

    /// How many consultations had a metered cost.
    pub fn metered(&self) -> u64 {
        self.consultations
            .saturating_sub(self.unknown)
            .saturating_sub(self.flat_rate)
    }

    /// The sum in words: `0.0123 USD`, `0.0123 USD + 2 unknown`, `unknown (2)`,
    /// `flat rate`, or `none` when nothing was consulted. Never a zero that hides an
    /// unknown.
    pub fn display(&self) -> String {
        let metered = self.metered();
        let currency = self.currency.as_deref().unwrap_or("");
        match (metered, self.unknown) {
            _ if self.consultations == 0 => "none".to_string(),
            (0, 0) => "flat rate".to_string(),
            (0, unknown) => format!("unknown ({unknown})"),
            (_, 0) => format!("{} {currency}", money(self.amount)),
            (_, unknown) => format!("{} {currency} + {unknown} unknown", money(self.amount)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::catalogue::Price;

    #[test]
    fn money_keeps_what_distinguishes_a_spend_from_its_limit() {
        for (amount, shown) in [
            (5.0312, "5.0312"),
            (0.0, "0.0000"),
            (0.01, "0.0100"),
            (0.0003, "0.0003"),
            (0.00033, "0.00033"),
            (0.000999, "0.000999"),
            (0.0001234, "0.000123"),
            (-0.00033, "-0.00033"),
            (1e-15, "0.0000"),
        ] {
            assert_eq!(money(amount), shown, "{amount}");
        }
        assert_ne!(money(0.00033), money(0.0003));
    }

    fn metered(input: f64, output: f64) -> Pricing {
        Pricing::Metered(Price {
            currency: "USD".to_string(),
            input_per_million: input,
            output_per_million: output,
            as_of: "2026-12-01".to_string(),
        })
    }

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
        }
    }

    #[test]
    fn cost_derivation_table() {
        let cases: &[(&str, Option<Usage>, Option<Pricing>, &str)] = &[
            (
                "metered",
                Some(usage(1_000_000, 0)),
                Some(metered(3.0, 15.0)),
                "3.0000 USD",
            ),
            (
                "both sides",
                Some(usage(2_000, 1_000)),
                Some(metered(3.0, 15.0)),
                "0.0210 USD",
            ),
            (
                "output only",
                Some(usage(0, 1_000_000)),
                Some(metered(3.0, 15.0)),
                "15.0000 USD",
            ),
            (
                "free local",
                Some(usage(5_000, 5_000)),
                Some(metered(0.0, 0.0)),
                "0.0000 USD",
            ),
            (
                "zero usage",
                Some(usage(0, 0)),
                Some(metered(3.0, 15.0)),
                "0.0000 USD",
            ),
            (
                "flat rate",
                Some(usage(9, 9)),
                Some(Pricing::FlatRate),
                "flat rate",
            ),
            (
                "flat rate, no usage",
                None,
                Some(Pricing::FlatRate),
                "flat rate",
            ),
            (
                "no usage",
                None,
                Some(metered(3.0, 15.0)),
                "unknown (no usage recorded)",
            ),
            (
                "no price",
                Some(usage(10, 10)),
                None,
                "unknown (no price in the catalogue)",
            ),
            ("neither", None, None, "unknown (no price in the catalogue)"),
        ];
        for (case, usage, pricing, want) in cases {
            let cost = cost_of(usage.as_ref(), pricing.as_ref());
            assert_eq!(cost.display(), *want, "{case}");
        }
    }

    #[test]
    fn a_sum_never_hides_an_unknown_behind_zero() {
        let priced = metered(1.0, 1.0);
        type Items<'p> = &'p [(Option<Usage>, Option<&'p Pricing>)];
        let cases: &[(&str, Items, &str)] = &[
            ("nothing", &[], "none"),
            (
                "one known",
                &[(Some(usage(500_000, 500_000)), Some(&priced))],
                "1.0000 USD",
            ),
            (
                "known and unknown",
                &[
                    (Some(usage(500_000, 0)), Some(&priced)),
                    (None, Some(&priced)),
                ],
                "0.5000 USD + 1 unknown",
            ),
            (
                "only unknown",
                &[(None, Some(&priced)), (Some(usage(1, 1)), None)],
                "unknown (2)",
            ),
            (
                "only flat",
                &[(None, Some(&Pricing::FlatRate))],
                "flat rate",
            ),
            (
                "flat and unknown",
                &[(None, Some(&Pricing::FlatRate)), (None, None)],
                "unknown (1)",
            ),
        ];
        for (case, items, want) in cases {
            let mut spend = Spend::default();
            for (usage, pricing) in items.iter() {
                spend.add(usage.as_ref(), &cost_of(usage.as_ref(), *pricing));
            }
            assert_eq!(spend.display(), *want, "{case}");
            assert_eq!(spend.consultations, items.len() as u64, "{case}");
        }
    }

    /// A sum of token counts never wraps around: the largest count and two more is still
    /// the largest, not 1.
    #[test]
    fn token_sums_never_wrap_around() {
        let mut spend = Spend::default();
        spend.add(Some(&usage(u64::MAX, 0)), &Cost::FlatRate);
        spend.add(Some(&usage(2, u64::MAX)), &Cost::FlatRate);
        spend.add(Some(&usage(0, 3)), &Cost::FlatRate);
        assert_eq!(
            (spend.input_tokens, spend.output_tokens, spend.consultations),
            (u64::MAX, u64::MAX, 3)
        );
    }
}
