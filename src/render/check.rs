//! Plain and table text of `check`.

use super::status::plural;
use super::text::{Out, Table};
use super::Render;
use crate::check::CheckReport;

impl Render for CheckReport {
    fn plain(&self) -> String {
        let mut out = Out::new();
        for note in &self.notes {
            out.para(0, 2, &format!("note: {note}"));
        }
        for f in &self.findings {
            out.para(
                0,
                4,
                &format!("{}:{}: {}: {}", f.file, f.line, f.rule.as_str(), f.message),
            );
        }
        out.line(&summary(self));
        out.finish()
    }

    fn table(&self) -> String {
        let mut table = Table::new(&["file", "line", "rule", "word"]);
        for f in &self.findings {
            table.row(&[
                f.file.clone(),
                f.line.to_string(),
                f.rule.as_str().to_string(),
                f.word.clone(),
            ]);
        }
        let notes: String = self.notes.iter().map(|n| format!("note: {n}\n")).collect();
        format!("{notes}{}{}\n", table.render(), summary(self))
    }
}

fn summary(report: &CheckReport) -> String {
    let scope = match &report.scope {
        Some(scope) => format!(" under `{scope}`"),
        None => String::new(),
    };
    let files = format!(
        "{} file{}",
        report.files_scanned,
        plural(report.files_scanned)
    );
    match (report.declared, report.findings.len()) {
        (false, 0) => "check: nothing checked".to_string(),
        (true, 0) => format!("check: no findings in {files}{scope}"),
        (_, n) => format!("check: {n} finding{} in {files}{scope}", plural(n)),
    }
}
