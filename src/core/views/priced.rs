//! The views priced: each consultation's cost and a task's spend at the catalogue's
//! prices, added to a view after it is derived (the views own their shapes; `cost` owns
//! what money is, and imports no view).

use crate::core::catalogue::Catalogue;
use crate::core::cost::{advisor_cost, consultation_cost, Cost};
use crate::core::records::{Body, Record};
use crate::core::views::explain::ExplainView;
use crate::core::views::status::{ConsultationLine, StatusIndex, StatusView, TaskSpend};
use crate::core::views::tree::{TreeNode, TreeView};

/// Give each consultation line of `view` its cost and the view its spend per advisor and
/// in total, at the catalogue's prices.
pub fn price_status(view: &mut StatusView, catalogue: &Catalogue) {
    let mut spend = TaskSpend::default();
    for assessment in &mut view.assessments {
        for line in &mut assessment.consultations {
            let cost = advisor_cost(&line.advisor, line.usage.as_ref(), catalogue);
            count(&mut spend, line, &cost);
            line.cost = Some(cost);
        }
    }
    view.spend = Some(spend);
}

/// [`price_status`] for a view of `index` (every assessment or a page of them): each
/// consultation line of the view gets its cost, and the view the whole task's spend, which
/// the index keeps while neither the prices of its advisors nor its consultations change,
/// so a page costs its own lines.
pub fn price_status_of(index: &mut StatusIndex<'_>, view: &mut StatusView, catalogue: &Catalogue) {
    let prices = index
        .advisors()
        .map(|advisor| catalogue.get(advisor).map(|entry| entry.price.clone()))
        .collect();
    let spend = index.spend_at(prices, |assessments| {
        let mut spend = TaskSpend::default();
        for line in assessments.iter().flat_map(|a| &a.consultations) {
            let cost = advisor_cost(&line.advisor, line.usage.as_ref(), catalogue);
            count(&mut spend, line, &cost);
        }
        spend
    });
    view.spend = Some(spend.clone());
    for line in view
        .assessments
        .iter_mut()
        .flat_map(|a| &mut a.consultations)
    {
        line.cost = Some(advisor_cost(&line.advisor, line.usage.as_ref(), catalogue));
    }
}

/// Count consultation `line`, costing `cost`, in `spend`.
fn count(spend: &mut TaskSpend, line: &ConsultationLine, cost: &Cost) {
    // Looked up before inserting: a task has thousands of consultations and few
    // advisors, so the key is copied once per advisor.
    match spend.advisors.get_mut(&line.advisor) {
        Some(sum) => sum.add(line.usage.as_ref(), cost),
        None => spend
            .advisors
            .entry(line.advisor.clone())
            .or_default()
            .add(line.usage.as_ref(), cost),
    }
    spend.total.add(line.usage.as_ref(), cost);
}

/// Give each plan of `view` its consultations' costs, at the catalogue's prices.
pub fn price_explain(view: &mut ExplainView, catalogue: &Catalogue) {
    for chain in &mut view.plans {
        chain.costs = chain
            .consultations
            .iter()
            .map(|c| consultation_cost(&c.fields, catalogue))
            .collect();
    }
}

/// Give each consultation node of `view` its cost; `records` are the task's.
pub fn price_tree(view: &mut TreeView, records: &[Record], catalogue: &Catalogue) {
    let costs: std::collections::HashMap<&str, Cost> = records
        .iter()
        .filter_map(|r| match &r.body {
            Body::Consultation(c) => Some((r.id(), consultation_cost(c, catalogue))),
            _ => None,
        })
        .collect();
    fn walk(nodes: &mut [TreeNode], costs: &std::collections::HashMap<&str, Cost>) {
        for node in nodes {
            node.cost = costs.get(node.id.as_str()).cloned();
            walk(&mut node.children, costs);
        }
    }
    walk(&mut view.nodes, &costs);
}
