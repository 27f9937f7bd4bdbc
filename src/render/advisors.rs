//! Plain and table text of `advisors`.

use super::text::{Out, Table};
use super::Render;
use crate::core::views::advisors::{AdvisorRow, AdvisorsView};

impl Render for AdvisorsView {
    fn plain(&self) -> String {
        let mut out = Out::new();
        out.line(&format!("mode {}", self.mode.as_str()));
        let files = catalogue_files(self);
        if !files.is_empty() {
            out.list(0, "catalogue files, in order", &files);
        }
        if let Some(mesh) = &self.mesh {
            out.para(0, 2, &mesh.line());
        }
        for row in &self.advisors {
            out.blank();
            out.line(&format!("{}: {}", row.id, status(row)));
            out.para(
                2,
                2,
                &format!(
                    "{} ({} via {}{})",
                    row.title,
                    transport(row),
                    row.adapter,
                    if row.local { ", local" } else { "" }
                ),
            );
            out.para(2, 2, &row.reason);
            out.field(2, "capabilities", &row.capabilities.join(", "));
            out.field(2, "track record", &row.track_record.summary());
        }
        out.blank();
        if self.former.is_empty() {
            out.para(0, 2, super::track::note());
        } else {
            // The section ends with the note.
            super::track::section(
                &mut out,
                "track records of advisors no longer in the catalogue",
                self.former.iter().map(|f| (f.id.as_str(), &f.track_record)),
                false,
            );
        }
        out.blank();
        out.line("capacity (available advisors per capability)");
        for (capability, n) in &self.capacity {
            out.line(&format!("  {capability}: {n}"));
        }
        if self
            .capacity
            .get(crate::core::catalogue::DEFAULT_CAPABILITY)
            == Some(&0)
        {
            out.para(
                0,
                2,
                "no advisor is available: plans select nobody and material doubt gets a \
                 structured local review",
            );
        }
        out.finish()
    }

    fn table(&self) -> String {
        let mut advisors = Table::new(&["id", "status", "adapter", "track record", "reason"]);
        for row in &self.advisors {
            let mut status = row.status.as_str().to_string();
            if row.recovering {
                status.push_str(" (recovering)");
            }
            let reason = match &row.until {
                Some(until) => format!("until {until}: {}", row.reason),
                None => row.reason.clone(),
            };
            advisors.row(&[
                row.id.clone(),
                status,
                row.adapter.clone(),
                super::track::cell(&row.track_record),
                reason,
            ]);
        }
        for former in &self.former {
            advisors.row(&[
                former.id.clone(),
                "former".to_string(),
                String::new(),
                super::track::cell(&former.track_record),
                String::new(),
            ]);
        }
        let mut capacity = Table::new(&["capability", "available"]);
        for (capability, n) in &self.capacity {
            capacity.row(&[capability.clone(), n.to_string()]);
        }
        let mesh = self
            .mesh
            .as_ref()
            .map(|m| format!("{}\n", m.line()))
            .unwrap_or_default();
        let files: String = catalogue_files(self)
            .iter()
            .map(|f| format!("catalogue file: {f}\n"))
            .collect();
        format!(
            "mode {}\n{files}{mesh}\n{}{}\n\n{}",
            self.mode.as_str(),
            advisors.render(),
            super::track::note(),
            capacity.render()
        )
    }
}

fn status(row: &AdvisorRow) -> String {
    let mut status = row.status.as_str().to_string();
    if row.recovering {
        status.push_str(", recovering");
    }
    if let Some(until) = &row.until {
        status.push_str(&format!(" until {until}"));
    }
    status
}

fn transport(row: &AdvisorRow) -> &'static str {
    match row.transport {
        crate::core::catalogue::Transport::Process => "process",
        crate::core::catalogue::Transport::Http => "http",
        crate::core::catalogue::Transport::Mesh => "mesh",
    }
}

/// Each catalogue file read, in order, and how it entered the catalogue.
fn catalogue_files(view: &AdvisorsView) -> Vec<String> {
    view.catalogue_files
        .iter()
        .enumerate()
        .map(|(i, layer)| match (i, layer.how.as_str()) {
            (0, _) => format!("{} ({})", layer.source, layer.how),
            (_, "extends") => format!("{} (extends the above)", layer.source),
            _ => format!("{} (replaces the above)", layer.source),
        })
        .collect()
}
