//! The writer admits only what `verify` accepts. Records of every kind are built from the
//! writer's own field table (the shapes `record --template` shows), mutated (fields
//! dropped, blanked, made of control characters only, oversize, of the wrong type, huge
//! numbers, unusual unicode, secrets) and passed through [`admit`]; every record it
//! stores is chained as the store chains it, and the walk `verify` does
//! ([`Depth::Rules`]) must find nothing in the task they make.
//!
//! Deterministic: a small seeded generator, so a failure names the seed and the input.

use super::fields::{fields, Shape};
use super::*;
use crate::core::catalogue::CAPABILITIES;
use crate::core::chain::{self, Depth, Entry};
use crate::core::policy;
use crate::core::records::{EvidenceKind, Mode, Plan, Selected};
use serde_json::json;

/// How many inputs each run generates.
const CASES: usize = 2_000;

/// xorshift64*: enough randomness to explore, the same sequence for the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

/// Text a caller might send: plain, unicode, and with escape codes inside.
const TEXTS: &[&str] = &[
    "keep the queue in SQLite",
    "naïve café ✓ 東京 🦀",
    "e\u{301}t\u{301}e\u{301} \u{202e}reversed\u{202c}",
    "tabs\tand  spaces ",
    "\u{1b}[31mred\u{1b}[0m text",
    "bell\u{7} and nul\u{0} inside",
    "\u{feff}zero width\u{200b}joined",
    "line one\nline two",
    "carriage\rreturn",
    "next line\u{85}here",
    "separator\u{2028}there",
    "key sk-ant-abcdefghijklmnopqrstuvwxyz0123456789 leaked",
    "Authorization: Bearer abcDEF123456ghiJKL789xyz",
    "the value s3cr3t-value-123 inside",
    "[redacted:api_key_sk] already",
];

/// Text that cleans to nothing.
const BLANKS: &[&str] = &[
    "",
    "   ",
    "\u{1b}[0m",
    "\u{7}\u{1b}]0;title\u{7}",
    " \u{9b}31m \u{0}",
    "\u{1b}P+q\u{1b}\\",
    "\t\n",
];

/// Values of the wrong type for most fields.
fn odd_values() -> Vec<Value> {
    vec![
        json!(1),
        json!(true),
        json!([]),
        json!({}),
        Value::Null,
        json!("text"),
        json!(1.5),
        json!(-1),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(1e300),
        json!(-0.0),
        json!(1e-320),
        json!(["a", 1]),
        json!([{"kind": "file"}]),
    ]
}

/// The task so far: what the writer stored, chained as the store chains it.
struct Task {
    name: TaskName,
    records: Vec<Record>,
    digests: Vec<String>,
    inputs: Vec<Value>,
}

impl Task {
    fn ids(&self, kind: Kind) -> Vec<String> {
        self.records
            .iter()
            .filter(|r| r.kind() == kind)
            .map(|r| r.id().to_string())
            .collect()
    }

    fn prev(&self) -> String {
        self.digests
            .last()
            .cloned()
            .unwrap_or_else(|| chain::GENESIS.to_string())
    }

    fn store(&mut self, record: Record, input: Value) {
        let mut bytes = serde_json::to_vec_pretty(&record).expect("serialises");
        bytes.push(b'\n');
        let read: Record = serde_json::from_slice(&bytes).expect("reads back");
        assert_eq!(read, record, "a stored record reads back as written");
        self.digests.push(chain::digest(&bytes));
        self.records.push(record);
        self.inputs.push(input);
    }

    /// A plan selecting some advisors, as the policy would compute one.
    fn plan(&mut self, rng: &mut Rng) {
        let Some(assessment) = rng.pick(&self.ids(Kind::Assessment)).cloned() else {
            return;
        };
        let advisors = ["alpha", "beta", "gamma"];
        let selected = advisors
            .iter()
            .filter(|_| rng.chance(60))
            .map(|a| Selected {
                advisor: a.to_string(),
                adapter: "process".into(),
                covers: vec!["independent_reasoning".into()],
                why: "covers the request".into(),
            })
            .collect();
        let sequence = self.records.len() as u64 + 1;
        let record = Record {
            envelope: Envelope {
                id: format!("R{sequence:05}"),
                task: self.name.to_string(),
                sequence,
                created_at: timestamp(NOW),
                schema: SCHEMA_VERSION,
                redacted: vec![],
                prev: Some(self.prev()),
            },
            body: Body::Plan(Plan {
                assessment,
                mode: Mode::Standard,
                budget: 3,
                capabilities: vec!["independent_reasoning".into()],
                selected,
                left_out: vec![],
                availability: vec![],
                reuse: None,
                local_review: vec![],
                uncovered_capabilities: vec![],
                question: None,
                prior_opinion: None,
                prompt_bytes: None,
                prompt_sha256: None,
            }),
        };
        self.store(record, json!({"kind": "plan"}));
    }
}

/// The invariant names the generated records use: few, so that removals find additions.
const INVARIANT_NAMES: &[&str] = &["no-core-io", "reversible", "one-writer"];

const NOW: time::OffsetDateTime = time::macros::datetime!(2026-03-01 12:00:00.250 UTC);

/// A value of `shape`, mostly well-formed, naming records of the task.
fn value_of(shape: Shape, task: &Task, rng: &mut Rng) -> Value {
    let text = |rng: &mut Rng| json!(rng.pick(TEXTS).copied().unwrap_or("t"));
    match shape {
        Shape::Text(_) | Shape::Line(_) => text(rng),
        Shape::Texts => Value::Array((0..rng.below(3)).map(|_| text(rng)).collect()),
        Shape::Capabilities => Value::Array(
            CAPABILITIES
                .iter()
                .filter(|_| rng.chance(30))
                .map(|c| json!(c))
                .collect(),
        ),
        Shape::Evidence => Value::Array(
            (0..rng.below(3))
                .map(|_| {
                    let kind = rng.pick(&EvidenceKind::ALL).map_or("file", |k| k.as_str());
                    let mut evidence = json!({"kind": kind, "ref": text(rng)});
                    if rng.chance(50) {
                        evidence["showed"] = text(rng);
                    }
                    evidence
                })
                .collect(),
        ),
        Shape::Positions => {
            let consultations = task.ids(Kind::Consultation);
            let source = rng.pick(&consultations).cloned().unwrap_or_default();
            json!([{"source": "executor", "position": text(rng)},
                   {"source": source, "position": text(rng)}])
        }
        Shape::Choice(choices) => json!(rng.pick(&choices()).copied().unwrap_or("")),
        Shape::Bool => json!(rng.chance(50)),
        Shape::Fraction => json!(rng.below(1001) as f64 / 1000.0),
        Shape::Count => json!(rng.next() >> rng.below(64)),
        Shape::Usage => json!({"input_tokens": rng.below(100_000),
            "output_tokens": rng.below(10_000)}),
        Shape::Ref(kind) => json!(rng.pick(&task.ids(kind)).cloned().unwrap_or_default()),
        Shape::InvariantName => json!(rng.pick(INVARIANT_NAMES).copied().unwrap_or("a")),
        Shape::InvariantAnswers => Value::Array(
            (0..rng.below(3))
                .map(|_| {
                    let name = rng.pick(INVARIANT_NAMES).copied().unwrap_or("a");
                    let holds = match rng.below(3) {
                        0 => json!(true),
                        1 => json!(false),
                        _ => Value::Null,
                    };
                    json!({"name": name, "holds": holds, "note": text(rng)})
                })
                .collect(),
        ),
        Shape::InvariantChecks => Value::Array(
            (0..rng.below(3))
                .map(|_| {
                    let name = rng.pick(INVARIANT_NAMES).copied().unwrap_or("a");
                    let mut check = json!({"name": name, "holds": rng.chance(70)});
                    if rng.chance(70) {
                        check["evidence"] = json!([{"kind": "test", "ref": text(rng)}]);
                    }
                    match rng.below(6) {
                        0 => check["change"] = json!("remove"),
                        1 => {
                            check["change"] = json!("narrow");
                            check["description"] = text(rng);
                        }
                        _ => {}
                    }
                    check
                })
                .collect(),
        ),
        Shape::Refs(kind) => {
            let ids = task.ids(kind);
            Value::Array(
                (0..rng.below(3))
                    .filter_map(|_| rng.pick(&ids).cloned())
                    .map(Value::String)
                    .collect(),
            )
        }
    }
}

/// The consultations of every plan of `assessment`.
fn consultations_of<'t>(task: &'t Task, assessment: &str) -> Vec<&'t Record> {
    let plans: Vec<&str> = task
        .records
        .iter()
        .filter(|r| matches!(&r.body, Body::Plan(p) if p.assessment == assessment))
        .map(Record::id)
        .collect();
    task.records
        .iter()
        .filter(|r| matches!(&r.body, Body::Consultation(c) if plans.contains(&c.plan.as_str())))
        .collect()
}

/// A record of `kind` built from its fields, nudged toward what the rules accept so that
/// many are stored.
fn well_formed(kind: Kind, task: &Task, rng: &mut Rng) -> Value {
    let mut object = Map::new();
    object.insert("kind".into(), json!(kind.as_str()));
    for field in fields(kind) {
        if field.required || rng.chance(50) {
            object.insert(field.name.into(), value_of(field.shape, task, rng));
        }
    }
    match kind {
        Kind::Assessment if rng.chance(70) => {
            object.insert("materiality".into(), json!("low"));
        }
        Kind::Consultation => {
            // An advisor the plan selected, completed with an answer or failed without.
            let plan = object
                .get("plan")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let plan = plan.as_str();
            let selected = task.records.iter().find_map(|r| match &r.body {
                Body::Plan(p) if r.id() == plan => Some(p.selected.clone()),
                _ => None,
            });
            if let Some(s) = selected.as_deref().and_then(|s| rng.pick(s)) {
                object.insert("advisor".into(), json!(s.advisor));
            }
            if rng.chance(70) {
                object.insert("status".into(), json!("completed"));
                object.remove("failure");
                object.insert("conclusion".into(), json!("it holds"));
            } else {
                object.insert("status".into(), json!("failed"));
                object.insert("failure".into(), json!("timeout"));
                object.remove("conclusion");
            }
        }
        Kind::Disagreement => {
            // A position from a completed consultation of the assessment.
            let assessment = object
                .get("assessment")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let answered: Vec<String> = consultations_of(task, &assessment)
                .into_iter()
                .filter(|r| {
                    matches!(&r.body, Body::Consultation(c)
                        if c.status == crate::core::records::ConsultationStatus::Completed)
                })
                .map(|r| r.id().to_string())
                .collect();
            if let Some(source) = rng.pick(&answered) {
                object.insert(
                    "positions".into(),
                    json!([{"source": "executor", "position": "mine"},
                           {"source": source, "position": "theirs"}]),
                );
            }
        }
        Kind::Resolution => {
            if rng.chance(70) {
                object.insert("favours".into(), json!("neither"));
            }
            object.insert(
                "evidence".into(),
                json!([{"kind": "command", "ref": "run it"}]),
            );
        }
        Kind::Conclusion => {
            // Cite every consultation of the assessment, as the rules ask.
            let assessment = object
                .get("assessment")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let assessment = assessment.as_str();
            let cited: Vec<&str> = consultations_of(task, assessment)
                .into_iter()
                .map(Record::id)
                .collect();
            object.insert("consultations".into(), json!(cited));
            let standing = task
                .records
                .iter()
                .rev()
                .find(|r| matches!(&r.body, Body::Conclusion(c) if c.assessment == assessment));
            match standing {
                Some(standing) => {
                    object.insert("supersedes".into(), json!(standing.id()));
                }
                None => {
                    object.remove("supersedes");
                }
            }
        }
        _ => {}
    }
    Value::Object(object)
}

/// One mutation of `input`: a field dropped, blanked, oversize, of the wrong type...
fn mutate(input: &mut Value, kind: Kind, rng: &mut Rng) {
    let Value::Object(object) = input else { return };
    let known = fields(kind);
    let Some(field) = rng.pick(known) else { return };
    let name = field.name.to_string();
    match rng.below(9) {
        0 => {
            object.remove(&name);
        }
        1 => {
            object.insert(name, json!(rng.pick(BLANKS).copied().unwrap_or("")));
        }
        2 => {
            let max = match field.shape {
                Shape::Text(max) | Shape::Line(max) => max,
                _ => MAX_TEXT_CHARS,
            };
            let long = match rng.below(4) {
                0 => "y".repeat(max + 1),
                1 => format!("{}\u{1b}[0m", "y".repeat(max)),
                2 => "s3cr3t-value-123 ".repeat(max / 17),
                _ => "é".repeat(max),
            };
            object.insert(name, json!(long));
        }
        3 => {
            let odd = odd_values();
            object.insert(name, rng.pick(&odd).cloned().unwrap_or(Value::Null));
        }
        4 => {
            let huge = [
                json!(u64::MAX),
                json!(MAX_TOKENS),
                json!(MAX_TOKENS + 1),
                json!(1e300),
            ];
            let tokens = rng.pick(&huge).cloned().unwrap_or(Value::Null);
            let key = if rng.chance(50) {
                "input_tokens"
            } else {
                "output_tokens"
            };
            let mut usage = json!({"input_tokens": 1, "output_tokens": 1});
            usage[key] = tokens.clone();
            if kind == Kind::Consultation {
                object.insert("usage".into(), usage);
            } else {
                object.insert(name, tokens);
            }
        }
        5 => {
            let unicode = [
                "\u{2028}",
                "x\u{85}y",
                "a\rb",
                "🦀🦀",
                "\u{202e}",
                "\u{fffd}",
                "\u{10ffff}",
            ];
            let text = rng.pick(&unicode).copied().unwrap_or("");
            object.insert(name, json!(text));
        }
        6 => {
            object.insert("unknown_field".into(), json!("x"));
        }
        7 => {
            // Inside a nested object: evidence, positions, usage.
            if let Some(Value::Array(items)) = object.get_mut(&name) {
                if let Some(Value::Object(item)) = items.first_mut() {
                    let key = item.keys().next().cloned().unwrap_or_default();
                    let odd = [json!(""), json!("\u{1b}[0m"), json!(7), Value::Null];
                    item.insert(key, rng.pick(&odd).cloned().unwrap_or(Value::Null));
                }
            }
        }
        _ => {
            let caller = ["source", "failure", "retry_after_s", "duration_ms"];
            let key = rng.pick(&caller).copied().unwrap_or("source");
            let odd = odd_values();
            object.insert(key.into(), rng.pick(&odd).cloned().unwrap_or(Value::Null));
        }
    }
}

/// Generate, mutate and admit `CASES` inputs from `seed`; return the task they made and
/// the reason codes of the refusals seen.
fn run(seed: u64) -> (Task, BTreeSet<&'static str>) {
    let mut rng = Rng(seed);
    let mut task = Task {
        name: TaskName::new("fuzz").expect("a task"),
        records: Vec::new(),
        digests: Vec::new(),
        inputs: Vec::new(),
    };
    let secrets = ["s3cr3t-value-123".to_string()];
    let kinds: Vec<Kind> = Kind::ALL
        .iter()
        .copied()
        .filter(|k| *k != Kind::Plan)
        .collect();
    let mut refused = BTreeSet::new();
    for case in 0..CASES {
        if case % 12 == 0 {
            task.plan(&mut rng);
        }
        let kind = if task.records.is_empty() {
            Kind::Assessment
        } else {
            *rng.pick(&kinds).expect("kinds")
        };
        let mut input = well_formed(kind, &task, &mut rng);
        for _ in 0..rng.below(3) {
            mutate(&mut input, kind, &mut rng);
        }
        let sequence = task.records.len() as u64 + 1;
        let env = WriteEnv {
            task: &task.name,
            now: NOW,
            id: format!("R{sequence:05}"),
            sequence,
            plan_env: None,
            prev: task.prev(),
            trust: None,
            secrets: if rng.chance(50) { &secrets } else { &[] },
            invariants: &[],
            // Consultations come only from the daemon's path: judge what it may write.
            daemon: true,
        };
        match admit(&task.records, &input, &env) {
            Ok(record) => task.store(record, input),
            Err(refusal) => {
                refused.insert(refusal.reason.as_str());
            }
        }
    }
    (task, refused)
}

#[test]
fn every_record_the_writer_stores_is_one_verify_accepts() {
    for seed in [0x5eed_0001_u64, 0xfeed_beef_cafe] {
        let (task, refused) = run(seed);
        let stored = task.records.len();
        assert!(stored > 200, "seed {seed:#x}: only {stored} records stored");
        for code in ["invalid_field", "unknown_reference"] {
            assert!(refused.contains(code), "seed {seed:#x}: no `{code}` seen");
        }
        let kinds: BTreeSet<&str> = task.records.iter().map(|r| r.kind().as_str()).collect();
        assert_eq!(
            kinds.len(),
            Kind::ALL.len(),
            "seed {seed:#x}: kinds {kinds:?}"
        );
        let entries: Vec<Entry> = task
            .records
            .iter()
            .zip(&task.digests)
            .map(|(record, digest)| Entry {
                file: None,
                sequence: record.envelope.sequence,
                digest,
                record: Ok(record),
            })
            .collect();
        let walk = chain::walk(&task.name, &entries, Depth::Rules);
        if let Some(finding) = walk.findings.first() {
            let at = finding.sequence as usize - 1;
            let cut = |text: String| text.chars().take(600).collect::<String>();
            panic!(
                "seed {seed:#x}: the writer stored what `verify` refuses: {} {} ({:?})\n\
                 input: {}\nstored: {}",
                finding.file,
                finding.message,
                finding.problem,
                cut(task.inputs[at].to_string()),
                cut(serde_json::to_string(&task.records[at]).unwrap_or_default())
            );
        }
    }
}

/// The rules' index gives what scanning the records gives, over the task the generator
/// makes: every assessment's consultations, standing conclusion and standing conclusion
/// on its subject.
#[test]
fn the_rules_index_finds_what_a_scan_finds() {
    let (task, _) = run(0x1dea_5eed);
    let rules = rules::Task::new(&task.records, &task.name, None);
    let superseded = policy::superseded_ids(&task.records);
    for record in &task.records {
        let Body::Assessment(a) = &record.body else {
            continue;
        };
        let id = record.id();
        let scanned = policy::standing_conclusion(&task.records, &a.subject).map(Record::id);
        assert_eq!(
            rules.standing_on_subject(&a.subject).map(Record::id),
            scanned,
            "{id}"
        );
        let standing = task.records.iter().rev().find(|r| {
            matches!(&r.body, Body::Conclusion(c) if c.assessment == id)
                && !superseded.contains(r.id())
        });
        assert_eq!(
            rules.standing_on(id).map(Record::id),
            standing.map(Record::id)
        );
        let plans: Vec<&str> = task
            .records
            .iter()
            .filter(|r| matches!(&r.body, Body::Plan(p) if p.assessment == id))
            .map(Record::id)
            .collect();
        let consultations: Vec<&str> = task
            .records
            .iter()
            .filter(
                |r| matches!(&r.body, Body::Consultation(c) if plans.contains(&c.plan.as_str())),
            )
            .map(Record::id)
            .collect();
        let indexed: Vec<&str> = rules
            .consultations_of(id)
            .into_iter()
            .map(|(r, _)| r.id())
            .collect();
        assert_eq!(indexed, consultations, "{id}");
    }
}
