//! `adopt`: the user accepts a task this machine never wrote (or one rewritten behind its
//! writers' backs) as its own, by anchoring its current head in the data directory.
//!
//! A local verb, like `trust`: it writes only the user's own data directory, so it needs no
//! daemon route; the daemon reads the anchor afresh on its next look at the task.

use crate::context::Resolved;
use crate::core::chain::{self, Head, TaskTrust};
use crate::core::records::Body;
use crate::error::Error;
use crate::machine::attest::Verdict;
use crate::protocol::RequestContext;
use crate::render::Format;
use crate::store::Store;
use advisord_adapters::registry::Registry;
use serde::Serialize;

/// What adopting one task accepted.
#[derive(Debug, Serialize)]
pub struct Adopted {
    /// The task.
    pub task: String,
    /// Its record files.
    pub records: usize,
    /// The head anchored now.
    pub head: Head,
    /// What it was before: `foreign`, or `local` (adopting again changes nothing).
    pub was: TaskTrust,
    /// The first sequence its chain does not vouch for, if broken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken_at: Option<u64>,
    /// Its consultations, and how many of them carry no valid attestation of this
    /// machine's key (adopting does not make those count).
    pub consultations: usize,
    /// Of which unattested.
    pub unattested: usize,
}

/// `advisor-consult adopt`: anchor the head of the task named with `--task` (`named`), or
/// of every task (`all`), and say what that accepts.
pub fn run(ctx: &RequestContext, named: bool, all: bool, format: Format) -> anyhow::Result<i32> {
    if all == named {
        return Err(Error::Usage(if all {
            "`--all` adopts every task; drop `--task`, or drop `--all` to adopt one".into()
        } else {
            "name the task to adopt with `--task NAME`, or adopt every task of the state \
             directory with `--all`"
                .into()
        })
        .into());
    }
    let machine = crate::machine::installed().ok_or_else(|| {
        Error::Usage(
            "cannot name this machine's data directory, where adopted heads are kept: set \
             `ADVISORD_DATA_DIR` or `HOME`"
                .into(),
        )
    })?;
    let resolved = Resolved::resolve(ctx, &Registry::builtin())?;
    let store = Store::open(&resolved.state_dir);
    let tasks = if all {
        store.tasks()?
    } else {
        vec![resolved.task.clone()]
    };
    let anchors = machine.anchors(&resolved.state_dir);
    let key = machine.key();
    let pins = machine.pins();
    let mut adopted = Vec::new();
    for task in &tasks {
        // One walk of the task, as `verify` makes it: each record file read, hashed and
        // parsed once. Files that are not records (strays) are never a head, nor counted.
        let (named, parsed) = store.parsed_files(task)?;
        let files = chain::files_named(&named);
        let verified =
            chain::verify_parsed(task, String::new(), &files, parsed, None, &mut |_, _| {});
        let Some((sequence, hash)) = verified.digests.last().cloned() else {
            if !all {
                let strays = verified.report.state.strays.len();
                return Err(Error::NotFound(format!(
                    "task `{task}` has no records in `{}`{}; there is nothing to adopt",
                    resolved.state_dir.display(),
                    if strays == 0 {
                        String::new()
                    } else {
                        format!(
                            " ({strays} file{} there {} not a record: `advisor-consult verify` \
                             names {})",
                            if strays == 1 { "" } else { "s" },
                            if strays == 1 { "is" } else { "are" },
                            if strays == 1 { "it" } else { "them" }
                        )
                    }
                ))
                .into());
            }
            continue;
        };
        let head = Head { sequence, hash };
        let anchored = anchors.head(task);
        let was = TaskTrust::of(
            chain::foreign_by_digests(task, anchored.as_ref(), &verified.digests).as_deref(),
        );
        let (mut consultations, mut unattested) = (0, 0);
        for record in &verified.records {
            if matches!(record.body, Body::Consultation(_)) {
                consultations += 1;
                let attested = !matches!(
                    crate::machine::attest::verdict(record, &key, &pins),
                    Verdict::Unattested(_)
                );
                unattested += usize::from(!attested);
            }
        }
        let report = verified.report;
        let records = verified.digests.len();
        anchors.set(task, &head).map_err(|e| {
            Error::Usage(format!(
                "cannot anchor task `{task}` in `{}`: {e}; check that the data directory is \
                 yours and writable",
                machine.data_dir().display()
            ))
        })?;
        adopted.push(Adopted {
            task: task.to_string(),
            records,
            head,
            was,
            broken_at: report.state.broken_at,
            consultations,
            unattested,
        });
    }
    if format == Format::Json {
        let value = serde_json::json!({ "adopted": adopted });
        super::print_stdout(&serde_json::to_string_pretty(&value)?)?;
        return Ok(0);
    }
    if adopted.is_empty() {
        println!(
            "no task with records in `{}`: nothing was adopted",
            resolved.state_dir.display()
        );
    }
    for a in &adopted {
        println!("{}", describe(a));
    }
    Ok(0)
}

/// What adopting a task accepted, in plain words.
fn describe(a: &Adopted) -> String {
    let mut text = format!(
        "adopted task `{}` ({}): its {} record{} up to #{} ({}) are now this machine's own; \
         plans may reuse its standing conclusions",
        a.task,
        match a.was {
            TaskTrust::Foreign => "was foreign",
            TaskTrust::Local => "already this machine's",
        },
        a.records,
        if a.records == 1 { "" } else { "s" },
        a.head.sequence,
        a.head.hash
    );
    if a.consultations > 0 {
        text.push_str(&format!(
            ", and its consultations attested by this machine's daemon count as reviews ({} of \
             {} carry no valid attestation and still never count)",
            a.unattested, a.consultations
        ));
    }
    if let Some(at) = a.broken_at {
        text.push_str(&format!(
            "; its chain is broken at #{at}: records from it on stay unverified \
             (`advisor-consult verify` says why)"
        ));
    }
    text.push('.');
    text
}
