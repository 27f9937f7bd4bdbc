//! Plain and table text of `verify`.

use super::status::{chain_plain, plural, trust_plain};
use super::text::{Out, Table};
use super::Render;
use crate::core::chain::VerifyReport;

impl Render for VerifyReport {
    fn plain(&self) -> String {
        let mut out = Out::new();
        for task in &self.tasks {
            out.para(
                0,
                2,
                &format!(
                    "task {}: {} record{} in `{}`",
                    task.task,
                    task.state.records,
                    plural(task.state.records),
                    task.dir
                ),
            );
            chain_plain(&mut out, &task.state);
            trust_plain(&mut out, task.foreign.as_deref(), 0);
            for f in &task.findings {
                out.para(
                    2,
                    4,
                    &format!("{}: {}: {}", f.file, f.problem.as_str(), f.message),
                );
            }
        }
        out.line(&summary(self));
        out.finish()
    }

    fn table(&self) -> String {
        let mut table = Table::new(&["task", "file", "problem", "message"]);
        for task in &self.tasks {
            if let Some(why) = &task.foreign {
                table.row(&[task.task.as_str(), "", "foreign", why.as_str()]);
            }
            for f in &task.findings {
                table.row(&[
                    task.task.as_str(),
                    f.file.as_str(),
                    f.problem.as_str(),
                    f.message.as_str(),
                ]);
            }
        }
        format!("{}{}\n", table.render(), summary(self))
    }
}

fn summary(report: &VerifyReport) -> String {
    let tasks = report.tasks.len();
    let records: usize = report.tasks.iter().map(|t| t.state.records).sum();
    let foreign = report.tasks.iter().filter(|t| t.foreign.is_some()).count();
    let line = summary_of_findings(report, tasks, records);
    if foreign == 0 {
        return line;
    }
    format!(
        "{line}; {foreign} task{} FOREIGN (accept with `advisor-consult adopt`)",
        plural(foreign)
    )
}

fn summary_of_findings(report: &VerifyReport, tasks: usize, records: usize) -> String {
    match report.findings() {
        0 => format!(
            "verify: no findings in {tasks} task{}, {records} record{}",
            plural(tasks),
            plural(records)
        ),
        n => format!(
            "verify: {n} finding{} in {tasks} task{}, {records} record{}",
            plural(n),
            plural(tasks),
            plural(records)
        ),
    }
}
