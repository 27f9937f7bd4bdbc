//! `verify` of a large task, its work spread over threads in contiguous chunks, gives the
//! verdicts of one walk in order: a record broken in the middle is found and reported with
//! the same message, whatever the number of workers, and a record citing one in another
//! chunk is admitted.

#[path = "../../benches/support/flow.rs"]
mod flow;

use advisord::core::chain::{self, Depth, Entry, Problem};
use advisord::core::records::{Body, Record, TaskName};
use advisord::store::file_name;

fn id(sequence: usize) -> String {
    format!("01JPAR{sequence:020}")
}

/// A task of `flows` whole flows, stored as the writer stores them, with `change` applied
/// to each body before it is stored (by sequence) and `edit` to each file's bytes after
/// the next record linked to them.
fn task(
    flows: usize,
    change: impl Fn(usize, &mut Body),
    edit: impl Fn(usize, &mut Vec<u8>),
) -> Vec<(String, u64, Vec<u8>)> {
    let mut files: Vec<(String, u64, Vec<u8>)> = Vec::new();
    let mut prev = chain::GENESIS.to_string();
    let mut sequence = 0;
    for i in 0..flows {
        for mut body in flow::flow(i, id, format!("decision {i}"), true) {
            sequence += 1;
            change(sequence, &mut body);
            let (record, bytes) = flow::chained("par", id(sequence), sequence, &mut prev, body);
            files.push((file_name(&record), sequence as u64, bytes));
        }
    }
    for (at, (_, _, bytes)) in files.iter_mut().enumerate() {
        edit(at + 1, bytes);
    }
    files
}

#[test]
fn verify_in_parallel_chunks_finds_a_broken_record_in_the_middle_as_one_walk_does() {
    // 751 flows: 3,004 records, so two workers split a flow between them.
    let flows = 751;
    let broken = 4 * 400 + 4; // a conclusion, in the second half
    let edited = 4 * 200 + 4; // a conclusion, in the first half
    let late_plan = 4 * 700 + 2; // a plan of the task's first assessment, in the last chunk
    let files = task(
        flows,
        |sequence, body| match body {
            Body::Conclusion(c) if sequence == broken => c.assessment = id(999_999),
            Body::Plan(p) if sequence == late_plan => p.assessment = id(1),
            _ => {}
        },
        |sequence, bytes| {
            if sequence == edited {
                let text = String::from_utf8(bytes.clone()).expect("text");
                *bytes = text.replace("keep it", "keep it all").into_bytes();
            }
        },
    );
    let views: Vec<chain::File> = files
        .iter()
        .map(|(name, sequence, bytes)| chain::File {
            name,
            sequence: *sequence,
            bytes,
        })
        .collect();
    let t = TaskName::new("par").expect("a task");

    // One walk in order, each record admitted as the walk reaches it.
    let parsed: Vec<(String, Result<Record, String>)> = files
        .iter()
        .map(|(_, _, bytes)| {
            (
                chain::digest(bytes),
                serde_json::from_slice(bytes).map_err(|e: serde_json::Error| e.to_string()),
            )
        })
        .collect();
    let entries: Vec<Entry> = files
        .iter()
        .zip(&parsed)
        .map(|((name, sequence, _), (digest, record))| Entry {
            file: Some(name),
            sequence: *sequence,
            digest,
            record: record.as_ref().map_err(String::as_str),
        })
        .collect();
    let in_order = chain::walk(&t, &entries, Depth::Rules);

    for workers in [1, 2, 3, 4] {
        let mut told = Vec::new();
        let verified = chain::verify_task_by(
            &t,
            String::new(),
            &views,
            Some(workers),
            &mut |walked, records| told.push((walked, records)),
        );
        let report = verified.report;
        assert_eq!(report.findings, in_order.findings, "{workers} worker(s)");
        assert_eq!(report.state, in_order.state, "{workers} worker(s)");
        assert_eq!(verified.records.len(), files.len());
        assert_eq!(told.last(), Some(&(files.len(), files.len())), "{told:?}");
        assert!(told.windows(2).all(|w| w[0].0 <= w[1].0), "{told:?}");
    }
    // The findings themselves: the refused conclusion in the middle, with its rule's
    // message, and the edited one. The late plan of the first assessment (in the first
    // chunk) is admitted, and the conclusion of its flow is refused for citing a
    // consultation that is, through that plan, of the first assessment: a lookup across
    // chunks.
    let findings = &in_order.findings;
    assert_eq!(findings.len(), 3, "{findings:#?}");
    assert_eq!(findings[0].sequence, edited as u64);
    assert_eq!(findings[0].problem, Problem::Changed);
    assert_eq!(findings[1].sequence, broken as u64);
    assert_eq!(findings[1].problem, Problem::Rule);
    assert!(
        findings[1]
            .message
            .starts_with("the writer refuses it today: ")
            && findings[1].message.contains(&id(999_999)),
        "{}",
        findings[1].message
    );
    assert_eq!(
        findings[1].reason.as_deref(),
        Some("unknown_reference"),
        "{:?}",
        findings[1]
    );
    assert_eq!(findings[2].sequence, late_plan as u64 + 2);
    assert_eq!(findings[2].problem, Problem::Rule);
    assert!(
        findings[2]
            .message
            .contains(&format!("is not of assessment `{}`", id(late_plan - 1))),
        "{}",
        findings[2].message
    );
    assert_eq!(in_order.state.broken_at, Some(edited as u64));
}
