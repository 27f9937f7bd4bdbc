//! Plain and table text of `tree`: an indented tree with full ids, ready to paste into
//! `explain`.

use super::status::plural;
use super::text::{truncate, Out, Table};
use super::{Render, WIDTH};
use crate::core::views::tree::{TreeNode, TreeView};

impl Render for TreeView {
    fn plain(&self) -> String {
        let mut out = Out::new();
        let Some(task) = &self.task else {
            out.line("no records in this task yet: record an assessment with `record --file`");
            return out.finish();
        };
        out.line(&format!("task {task}"));
        if let Some(chain) = &self.chain {
            super::status::chain_plain(&mut out, chain);
        }
        for node in &self.nodes {
            out.line(&node_line("", node));
            children_plain(&mut out, "", node);
        }
        if self.hidden_superseded > 0 {
            out.para(
                0,
                2,
                &format!(
                    "{} superseded conclusion{} hidden; `--show-superseded` shows {}",
                    self.hidden_superseded,
                    plural(self.hidden_superseded),
                    if self.hidden_superseded == 1 {
                        "it"
                    } else {
                        "them"
                    }
                ),
            );
        }
        out.finish()
    }

    fn table(&self) -> String {
        let mut table = Table::new(&["record", "seq", "id", "label"]);
        fn walk(table: &mut Table, node: &TreeNode, level: usize) {
            table.row(&[
                format!("{}{}", "  ".repeat(level), node.kind),
                node.sequence.to_string(),
                node.id.clone(),
                label(node),
            ]);
            for child in &node.children {
                walk(table, child, level + 1);
            }
        }
        for node in &self.nodes {
            walk(&mut table, node, 0);
        }
        table.render()
    }
}

fn children_plain(out: &mut Out, prefix: &str, node: &TreeNode) {
    let count = node.children.len();
    for (i, child) in node.children.iter().enumerate() {
        let last = i + 1 == count && node.hidden_children == 0;
        let (branch, next) = if last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        out.line(&node_line(&format!("{prefix}{branch}"), child));
        children_plain(out, &format!("{prefix}{next}"), child);
    }
    if node.hidden_children > 0 {
        out.line(&format!(
            "{prefix}└─ … {} more below (raise `--depth`)",
            node.hidden_children
        ));
    }
}

/// `kind #sequence id label`, the label cut so the line fits the width.
fn node_line(prefix: &str, node: &TreeNode) -> String {
    let head = format!("{prefix}{} #{} {}", node.kind, node.sequence, node.id);
    let room = WIDTH.saturating_sub(head.chars().count() + 1);
    format!("{head} {}", truncate(&label(node), room))
}

fn label(node: &TreeNode) -> String {
    let unverified = if node.unverified { "[UNVERIFIED] " } else { "" };
    let superseded = if node.superseded { "[superseded] " } else { "" };
    match &node.cost {
        Some(cost) => format!(
            "{unverified}{superseded}{} (cost {})",
            node.label,
            cost.display()
        ),
        None => format!("{unverified}{superseded}{}", node.label),
    }
}
