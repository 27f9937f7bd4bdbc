//! Sample records of every kind, as the writer stored them, must still read: a change to
//! the record types that would make an old record unreadable, or silently drop one of its
//! fields, fails here. The samples form one task's chain, so they also still admit.

use advisord::core::chain::{self, GENESIS};
use advisord::core::records::{Body, Kind, Record, TaskName, SCHEMA_VERSION};
use advisord::core::writer::{admit, WriteEnv};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/records")
}

/// Every sample, as its raw JSON and as read, in sequence order.
fn samples() -> Vec<(PathBuf, Value, Record)> {
    let mut samples: Vec<(PathBuf, Value, Record)> = std::fs::read_dir(fixture_dir())
        .expect("tests/fixtures/records exists")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("readable");
            let raw: Value = serde_json::from_str(&text).expect("valid JSON");
            let record: Record = serde_json::from_value(raw.clone())
                .unwrap_or_else(|e| panic!("`{}` no longer reads: {e}", path.display()));
            (path, raw, record)
        })
        .collect();
    samples.sort_by_key(|(_, _, r)| r.envelope.sequence);
    samples
}

#[test]
fn a_sample_of_every_kind_still_reads() {
    let samples = samples();
    let kinds: Vec<Kind> = samples.iter().map(|(_, _, r)| r.kind()).collect();
    for kind in Kind::ALL {
        assert!(kinds.contains(&kind), "no sample of kind `{kind}`");
    }
    for (path, _, record) in &samples {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let kind = record.kind().as_str();
        assert!(
            stem == kind || stem.starts_with(&format!("{kind}-")),
            "`{}` is named after its kind `{kind}`",
            path.display()
        );
        assert!(record.envelope.schema <= SCHEMA_VERSION);
    }
}

#[test]
fn reading_a_sample_loses_none_of_its_fields() {
    for (path, raw, record) in samples() {
        let again = serde_json::to_value(&record).expect("serialises");
        let Value::Object(fields) = raw else {
            panic!("`{}` is not an object", path.display())
        };
        for (key, value) in fields {
            assert_eq!(
                again.get(&key),
                Some(&value),
                "`{}`: field `{key}` does not survive a read",
                path.display()
            );
        }
    }
}

#[test]
fn the_samples_still_admit_in_order() {
    // Each sample's caller fields, admitted against the samples before it, give the same
    // record back: the writer's rules still accept what they once stored. Plans are the
    // policy's, computed against a catalogue and a clock of their day, so they are taken
    // as stored.
    let task = TaskName::new("feature-retry-uploads").expect("valid task");
    let mut earlier: Vec<Record> = Vec::new();
    for (path, raw, record) in samples() {
        if let Body::Plan(_) = record.body {
            earlier.push(record);
            continue;
        }
        let mut input = raw.clone();
        let object = input.as_object_mut().expect("an object");
        for computed in [
            "id",
            "task",
            "sequence",
            "created_at",
            "schema",
            "redacted",
            "prev",
            "reviewed_by",
            "independent_review_count",
            "finished_at",
        ] {
            object.remove(computed);
        }
        let now = time::OffsetDateTime::parse(
            &record.envelope.created_at,
            &time::format_description::well_known::Rfc3339,
        )
        .expect("created_at is RFC 3339");
        let env = WriteEnv {
            task: &task,
            now,
            id: record.envelope.id.clone(),
            sequence: record.envelope.sequence,
            plan_env: None,
            prev: record
                .envelope
                .prev
                .clone()
                .unwrap_or_else(|| GENESIS.to_string()),
            trust: None,
            secrets: &[],
            daemon: true,
            invariants: &[],
        };
        let mut again = admit(&earlier, &input, &env)
            .unwrap_or_else(|r| panic!("`{}` is refused now: {}", path.display(), r.message));
        // Redaction already happened when the sample was stored; what it named stays.
        again.envelope.redacted = record.envelope.redacted.clone();
        // Samples from before the hash chain carry schema 1 and no `prev`.
        if record.envelope.prev.is_none() {
            again.envelope.prev = None;
            again.envelope.schema = record.envelope.schema;
        }
        if let Body::Consultation(c) = &mut again.body {
            if let Body::Consultation(stored) = &record.body {
                c.finished_at = stored.finished_at.clone();
            }
        }
        assert_eq!(
            again,
            record,
            "`{}` admits to the same record",
            path.display()
        );
        earlier.push(record);
    }
}

#[test]
fn the_samples_verify_as_one_chain() {
    // The samples before the chain carry no `prev`; the first that does commits to the
    // stored bytes of the one before it, so the walk finds nothing and says where the chain
    // starts.
    let task = TaskName::new("feature-retry-uploads").expect("valid task");
    let mut files: Vec<(String, u64, Vec<u8>)> = samples()
        .into_iter()
        .map(|(path, _, record)| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (
                name,
                record.envelope.sequence,
                std::fs::read(&path).unwrap(),
            )
        })
        .collect();
    files.sort_by_key(|f| f.1);
    let files: Vec<chain::File> = files
        .iter()
        .map(|(name, sequence, bytes)| chain::File {
            name,
            sequence: *sequence,
            bytes,
        })
        .collect();
    let report = chain::verify_task(&task, "tests/fixtures/records".into(), &files);
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    let chained: Vec<u64> = samples()
        .iter()
        .filter(|(_, _, r)| r.envelope.prev.is_some())
        .map(|(_, _, r)| r.envelope.sequence)
        .collect();
    assert!(!chained.is_empty(), "a sample carries `prev`");
    assert_eq!(report.state.chained_from, chained.first().copied());
    assert_eq!(report.state.broken_at, None);
}
