//! `tree`: a task's records as a tree that follows their references.
//!
//! Each record hangs under the record it refers to: plans, disagreements, conclusions and
//! attempts under their assessment; consultations under their plan; resolutions under
//! their disagreement; validations under their conclusion. Children come in sequence
//! order, so an assessment reads as the flow it went through: plan → consultations,
//! disagreement → resolution, conclusion → validations. A record whose reference names
//! nothing in the task becomes a root of its own.
//!
//! Superseded conclusions, with their validations, are left out unless asked for; the view
//! counts what it left out so a reader knows to ask.

use super::{parent_id, Index};
use crate::core::chain::{ChainState, Trust};
use crate::core::records::{Kind, Record};
use serde::{Deserialize, Serialize};

/// The tree of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TreeView {
    /// The task (from the records; `None` when it has none).
    pub task: Option<String>,
    /// The deepest level shown (1 is assessments only); `None` is unlimited.
    pub depth: Option<usize>,
    /// Whether superseded conclusions are shown.
    pub show_superseded: bool,
    /// Superseded conclusions left out (with their validations).
    pub hidden_superseded: usize,
    /// The hash chain of the task; absent when it was not walked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainState>,
    /// The roots: assessments, in sequence order.
    pub nodes: Vec<TreeNode>,
    /// The slice of the roots this reply holds, when paged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<super::Page>,
}

impl TreeView {
    /// Keep only the roots `offset..offset + limit`.
    pub fn page(&mut self, offset: usize, limit: usize) {
        self.page = Some(super::Page::slice(&mut self.nodes, offset, limit));
    }
}

/// One record in the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TreeNode {
    /// Its kind.
    pub kind: Kind,
    /// Its sequence.
    pub sequence: u64,
    /// Its full id.
    pub id: String,
    /// One line saying what it is about.
    pub label: String,
    /// A consultation's cost (derived by [`crate::core::views::priced::price_tree`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::core::cost::Cost>,
    /// A conclusion that another conclusion supersedes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superseded: bool,
    /// After a break in the hash chain: shown, not believed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unverified: bool,
    /// Children not shown because of the depth limit.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hidden_children: usize,
    /// The records that refer to it, in sequence order.
    pub children: Vec<TreeNode>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The tree of the task's `records` (any order). `depth` limits the levels shown (`None`
/// or `Some(0)`: unlimited); `show_superseded` keeps superseded conclusions.
pub fn tree(
    records: &[Record],
    depth: Option<usize>,
    show_superseded: bool,
    trust: &Trust,
) -> TreeView {
    let index = Index::new(records);
    let depth = depth.filter(|&d| d > 0);
    let mut builder = Builder {
        index: &index,
        trust,
        depth,
        show_superseded,
        hidden_superseded: 0,
    };
    let mut nodes = Vec::new();
    for &record in &index.ordered {
        let is_root = !parent_id(record).is_some_and(|p| index.by_id.contains_key(p));
        if is_root {
            if let Some(node) = builder.node(record, 1) {
                nodes.push(node);
            }
        }
    }
    TreeView {
        task: index.ordered.first().map(|r| r.envelope.task.clone()),
        depth,
        show_superseded,
        hidden_superseded: builder.hidden_superseded,
        chain: trust.state.clone(),
        nodes,
        page: None,
    }
}

struct Builder<'i, 'r> {
    index: &'i Index<'r>,
    trust: &'i Trust,
    depth: Option<usize>,
    show_superseded: bool,
    hidden_superseded: usize,
}

impl Builder<'_, '_> {
    fn is_superseded(&self, record: &Record) -> bool {
        record.kind() == Kind::Conclusion && self.index.superseded_by.contains_key(record.id())
    }

    /// The node of `record` at `level` (1 for roots), or `None` when it is hidden.
    fn node(&mut self, record: &Record, level: usize) -> Option<TreeNode> {
        let superseded = self.is_superseded(record);
        if superseded && !self.show_superseded {
            self.hidden_superseded += 1;
            return None;
        }
        let children = self.index.children_of(record.id());
        let (shown, hidden_children) = if self.depth.is_some_and(|d| level >= d) {
            let shown = children
                .iter()
                .filter(|c| self.show_superseded || !self.is_superseded(c));
            (Vec::new(), shown.count())
        } else {
            let shown = children
                .iter()
                .filter_map(|child| self.node(child, level + 1))
                .collect();
            (shown, 0)
        };
        Some(TreeNode {
            kind: record.kind(),
            sequence: record.envelope.sequence,
            id: record.id().to_string(),
            label: self.index.summary(record),
            cost: None,
            superseded,
            unverified: !self.trust.is_verified(record.id()),
            hidden_children,
            children: shown,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Task;
    use super::*;

    fn flow() -> Task {
        let mut t = Task::new();
        let a = t.assessment("subject");
        let p = t.plan(&a, &["x", "y"]);
        let cx = t.completed(&p, "x", "supports");
        let cy = t.completed(&p, "y", "opposes");
        let d = t.disagreement(&a, &cy);
        t.resolution(&d);
        let c = t.conclusion(&a, &[&cx, &cy], None);
        t.validation(&c, true);
        let a2 = t.assessment("subject");
        t.conclusion(&a2, &[], Some(&c));
        t
    }

    /// The tree as `kind#sequence` lines indented two spaces per level.
    fn outline(view: &TreeView) -> Vec<String> {
        fn walk(node: &TreeNode, level: usize, out: &mut Vec<String>) {
            out.push(format!(
                "{}{}#{}",
                "  ".repeat(level),
                node.kind,
                node.sequence
            ));
            for child in &node.children {
                walk(child, level + 1, out);
            }
        }
        let mut out = Vec::new();
        for node in &view.nodes {
            walk(node, 0, &mut out);
        }
        out
    }

    fn check(depth: Option<usize>, show_superseded: bool, expected: &[&str]) {
        let view = tree(&flow().records, depth, show_superseded, &Trust::default());
        assert_eq!(outline(&view), expected);
    }

    #[test]
    fn superseded_conclusions_and_their_validations_are_hidden() {
        check(
            None,
            false,
            &[
                "assessment#1",
                "  plan#2",
                "    consultation#3",
                "    consultation#4",
                "  disagreement#5",
                "    resolution#6",
                "assessment#9",
                "  conclusion#10",
            ],
        );
        assert_eq!(
            tree(&flow().records, None, false, &Trust::default()).hidden_superseded,
            1
        );
    }

    #[test]
    fn show_superseded_keeps_them() {
        check(
            Some(0),
            true,
            &[
                "assessment#1",
                "  plan#2",
                "    consultation#3",
                "    consultation#4",
                "  disagreement#5",
                "    resolution#6",
                "  conclusion#7",
                "    validation#8",
                "assessment#9",
                "  conclusion#10",
            ],
        );
        let view = tree(&flow().records, None, true, &Trust::default());
        assert!(view.nodes[0].children[2].superseded);
        assert!(!view.nodes[1].children[0].superseded);
    }

    #[test]
    fn depth_limits_the_levels() {
        check(Some(1), true, &["assessment#1", "assessment#9"]);
        check(
            Some(2),
            true,
            &[
                "assessment#1",
                "  plan#2",
                "  disagreement#5",
                "  conclusion#7",
                "assessment#9",
                "  conclusion#10",
            ],
        );
        let view = tree(&flow().records, Some(1), true, &Trust::default());
        assert_eq!(view.nodes[0].hidden_children, 3);
        assert_eq!(view.depth, Some(1));
    }

    #[test]
    fn labels_ids_and_an_empty_task() {
        let view = tree(&flow().records, None, false, &Trust::default());
        let node = &view.nodes[0];
        assert_eq!(node.id.len(), 26, "the full id, ready to paste");
        assert_eq!(node.label, "[high] subject");
        assert_eq!(node.children[0].label, "standard, budget 2: x, y");
        let empty = tree(&[], None, false, &Trust::default());
        assert!(empty.nodes.is_empty() && empty.task.is_none());
    }
}
