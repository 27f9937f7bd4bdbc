//! Plain and table text of `spend`.

use super::text::{Out, Table};
use super::Render;
use crate::core::cost::{money, BudgetLine, SpendRow, SpendView, TASK_RESET};

impl Render for SpendView {
    fn plain(&self) -> String {
        let mut out = Out::new();
        let currency = self
            .currency
            .as_deref()
            .unwrap_or("no currency: no advisor is priced");
        out.line(&format!(
            "spend ({currency}; days in {}, today {})",
            self.utc_offset, self.today
        ));
        out.line(&format!("  total: {}", row_text(&self.total)));
        for (title, rows) in [
            ("per advisor", &self.advisors),
            ("per task", &self.tasks),
            ("per day", &self.days),
        ] {
            out.line(title);
            if rows.is_empty() {
                out.line("  no consultation recorded");
            }
            for row in rows {
                out.line(&format!("  {}: {}", row.name, row_text(&row.spend)));
            }
        }
        out.line("budgets");
        if self.budgets.lines.is_empty() {
            out.line("  no budget set");
        }
        for line in &self.budgets.lines {
            out.para(2, 4, &format!("{}: {}", budget_name(line), line.reason));
        }
        out.finish()
    }

    fn table(&self) -> String {
        let mut table = Table::new(&["by", "name", "consultations", "input", "output", "cost"]);
        let mut push = |by: &str, row: &SpendRow| {
            table.row(&[
                by.to_string(),
                row.name.clone(),
                row.spend.consultations.to_string(),
                row.spend.input_tokens.to_string(),
                row.spend.output_tokens.to_string(),
                row.spend.display(),
            ]);
        };
        for (by, rows) in [
            ("advisor", &self.advisors),
            ("task", &self.tasks),
            ("day", &self.days),
        ] {
            for row in rows {
                push(by, row);
            }
        }
        push(
            "total",
            &SpendRow {
                name: "-".to_string(),
                spend: self.total.clone(),
            },
        );
        let mut budgets = Table::new(&["budget", "limit", "spent", "state", "resets"]);
        for line in &self.budgets.lines {
            budgets.row(&[
                budget_name(line),
                money(line.limit),
                money(line.spent),
                if line.exhausted { "over_budget" } else { "ok" }.to_string(),
                line.resets_at
                    .clone()
                    .unwrap_or_else(|| TASK_RESET.to_string()),
            ]);
        }
        format!("{}\n{}", table.render(), budgets.render())
    }
}

fn row_text(spend: &crate::core::cost::Spend) -> String {
    format!(
        "{} ({} consultation{}, {} in, {} out)",
        spend.display(),
        spend.consultations,
        if spend.consultations == 1 { "" } else { "s" },
        spend.input_tokens,
        spend.output_tokens
    )
}

fn budget_name(line: &BudgetLine) -> String {
    let who = line.advisor.as_deref().unwrap_or("total");
    format!("{who} {}", line.window.key().replace('_', "-"))
}
