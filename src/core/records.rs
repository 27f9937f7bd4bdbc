//! The typed records of a task: the envelope and the nine kinds.
//!
//! Every type here derives `Serialize`, so it is part of the on-disk contract. A change
//! that alters the JSON shape bumps [`SCHEMA_VERSION`] and regenerates `share/schema/`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The vocabulary shared with the adapters, written once in `advisord-core` and part of
/// the same on-disk contract: the assessment's scales, an outcome's failure kind, stance
/// and usage.
pub use advisord_core::{Confidence, FailureKind, Materiality, Stance, Usage};

/// The schema version written into every record's envelope: 2 since records carry `prev`
/// (the hash chain); records of schema 1 predate it and still read.
pub const SCHEMA_VERSION: u32 = 2;

/// The largest `showed` an evidence reference may carry, in characters.
pub const MAX_SHOWED_CHARS: usize = 500;

/// The largest `output` a validation may carry, in characters.
pub const MAX_VALIDATION_OUTPUT_CHARS: usize = 2000;

/// A stored record: the envelope followed by the fields of its kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Record {
    /// Identity, order and provenance assigned by the writer.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// The kind tag and the kind's fields.
    #[serde(flatten)]
    pub body: Body,
}

/// The fields every record carries, all assigned by the writer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Envelope {
    /// A ULID, unique across tasks.
    pub id: String,
    /// The task the record belongs to.
    pub task: String,
    /// Monotonic within the task, never reused.
    pub sequence: u64,
    /// When the writer stored it, RFC 3339 UTC.
    pub created_at: String,
    /// The record schema version ([`SCHEMA_VERSION`]).
    pub schema: u32,
    /// Names of the secret shapes removed from the caller's strings, possibly empty.
    pub redacted: Vec<String>,
    /// The hash chain: `sha256:<hex>` of the previous record's stored bytes, or
    /// [`crate::core::chain::GENESIS`] for a task's first record. Absent on records
    /// written before the chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
}

/// The kind of a record with its fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    /// A session's statement of doubt with its evidence.
    Assessment(Assessment),
    /// The policy's computed decision of whom to consult.
    Plan(Plan),
    /// One advisor's normalised outcome for one plan.
    Consultation(Consultation),
    /// Positions that diverge on one assessment.
    Disagreement(Disagreement),
    /// The experiment that settled a disagreement.
    Resolution(Resolution),
    /// The session's decision, with its computed review.
    Conclusion(Conclusion),
    /// A check run against a conclusion.
    Validation(Validation),
    /// Something tried that failed, and what it taught.
    Attempt(Attempt),
    /// A task-scope invariant added, narrowed or removed.
    Invariant(Invariant),
}

/// The name of each kind, as written in `kind`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// See [`Assessment`].
    Assessment,
    /// See [`Plan`].
    Plan,
    /// See [`Consultation`].
    Consultation,
    /// See [`Disagreement`].
    Disagreement,
    /// See [`Resolution`].
    Resolution,
    /// See [`Conclusion`].
    Conclusion,
    /// See [`Validation`].
    Validation,
    /// See [`Attempt`].
    Attempt,
    /// See [`Invariant`].
    Invariant,
}

impl Kind {
    /// Every kind, in the order a task's records usually flow.
    pub const ALL: [Kind; 9] = [
        Kind::Assessment,
        Kind::Plan,
        Kind::Consultation,
        Kind::Disagreement,
        Kind::Resolution,
        Kind::Conclusion,
        Kind::Validation,
        Kind::Attempt,
        Kind::Invariant,
    ];

    /// The name written in a record's `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Assessment => "assessment",
            Kind::Plan => "plan",
            Kind::Consultation => "consultation",
            Kind::Disagreement => "disagreement",
            Kind::Resolution => "resolution",
            Kind::Conclusion => "conclusion",
            Kind::Validation => "validation",
            Kind::Attempt => "attempt",
            Kind::Invariant => "invariant",
        }
    }

    /// The kind named `name`, if any.
    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Body {
    /// The kind of this body.
    pub fn kind(&self) -> Kind {
        match self {
            Body::Assessment(_) => Kind::Assessment,
            Body::Plan(_) => Kind::Plan,
            Body::Consultation(_) => Kind::Consultation,
            Body::Disagreement(_) => Kind::Disagreement,
            Body::Resolution(_) => Kind::Resolution,
            Body::Conclusion(_) => Kind::Conclusion,
            Body::Validation(_) => Kind::Validation,
            Body::Attempt(_) => Kind::Attempt,
            Body::Invariant(_) => Kind::Invariant,
        }
    }
}

impl Record {
    /// The record's id.
    pub fn id(&self) -> &str {
        &self.envelope.id
    }

    /// The record's kind.
    pub fn kind(&self) -> Kind {
        self.body.kind()
    }
}

/// What kind of thing an evidence reference points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// A file, optionally with a line range.
    File,
    /// A test by name.
    Test,
    /// An architecture decision record.
    Adr,
    /// A project rule.
    Rule,
    /// A commit.
    Commit,
    /// A command that was run.
    Command,
    /// Something observed at run time.
    Observation,
    /// Another record of the task.
    Record,
}

impl EvidenceKind {
    /// Every value, as accepted in `--evidence KIND:REF`.
    pub const ALL: [EvidenceKind; 8] = [
        EvidenceKind::File,
        EvidenceKind::Test,
        EvidenceKind::Adr,
        EvidenceKind::Rule,
        EvidenceKind::Commit,
        EvidenceKind::Command,
        EvidenceKind::Observation,
        EvidenceKind::Record,
    ];

    /// The name used in records.
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceKind::File => "file",
            EvidenceKind::Test => "test",
            EvidenceKind::Adr => "adr",
            EvidenceKind::Rule => "rule",
            EvidenceKind::Commit => "commit",
            EvidenceKind::Command => "command",
            EvidenceKind::Observation => "observation",
            EvidenceKind::Record => "record",
        }
    }
}

/// A reference to evidence, never a copy of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// What it points at.
    pub kind: EvidenceKind,
    /// Where it is: a path, a test name, a commit, a command line...
    #[serde(rename = "ref")]
    pub reference: String,
    /// What it showed, at most [`MAX_SHOWED_CHARS`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub showed: Option<String>,
}

/// A session's statement of doubt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Assessment {
    /// One line naming the decision.
    pub subject: String,
    /// How much a wrong decision costs.
    pub materiality: Materiality,
    /// The executor's confidence in its hypothesis.
    #[serde(default)]
    pub confidence: Confidence,
    /// What the executor currently believes (an opinion).
    pub hypothesis: String,
    /// What is known.
    #[serde(default)]
    pub facts: Vec<String>,
    /// What is taken for granted.
    #[serde(default)]
    pub assumptions: Vec<String>,
    /// What is open.
    #[serde(default)]
    pub questions: Vec<String>,
    /// References to the evidence.
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    /// Requested capabilities; empty means `independent_reasoning`.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// The assessment brings evidence a standing conclusion did not have.
    #[serde(default)]
    pub new_evidence: bool,
}

/// The mode a plan was computed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// A CI runner: no advisor at all.
    Ci,
    /// Only high and critical doubt is reviewed, by one advisor.
    Fast,
    /// The default.
    #[default]
    Standard,
    /// Only advisors running on this machine.
    Offline,
    /// Critical doubt may ask three.
    Strict,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 5] = [
        Mode::Ci,
        Mode::Fast,
        Mode::Standard,
        Mode::Offline,
        Mode::Strict,
    ];

    /// The name used in records, the catalogue and `ADVISORD_MODE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ci => "ci",
            Mode::Fast => "fast",
            Mode::Standard => "standard",
            Mode::Offline => "offline",
            Mode::Strict => "strict",
        }
    }

    /// The mode named `name`, if any.
    pub fn parse(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

/// One advisor a plan selected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Selected {
    /// The advisor id.
    pub advisor: String,
    /// The adapter that reaches it.
    pub adapter: String,
    /// The requested capabilities it covers.
    pub covers: Vec<String>,
    /// Why it was chosen, in one sentence.
    pub why: String,
}

/// One advisor a plan did not select, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LeftOut {
    /// The advisor id.
    pub advisor: String,
    /// Why it was left out, in one sentence.
    pub reason: String,
}

/// Availability of an advisor at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// It may be consulted.
    Available,
    /// Its executable is not on `PATH`.
    Unavailable,
    /// Its credential variable is unset or empty.
    NotConfigured,
    /// The mode or the disable list leaves it out.
    Disabled,
    /// Its newest counted outcome was a rate limit.
    RateLimited,
    /// Its circuit is open after auth or transient failures.
    TemporarilyFailed,
    /// A spending limit on it, or on every advisor together, is exhausted.
    OverBudget,
}

impl Status {
    /// The name used in records and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Available => "available",
            Status::Unavailable => "unavailable",
            Status::NotConfigured => "not_configured",
            Status::Disabled => "disabled",
            Status::RateLimited => "rate_limited",
            Status::TemporarilyFailed => "temporarily_failed",
            Status::OverBudget => "over_budget",
        }
    }
}

/// One advisor's availability as a plan saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AdvisorAvailability {
    /// The advisor id.
    pub advisor: String,
    /// Its status.
    pub status: Status,
    /// Why, in one sentence.
    pub reason: String,
    /// A cooldown has passed and no completed answer has come since.
    #[serde(default)]
    pub recovering: bool,
    /// When a cooldown ends, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

/// The policy's decision for one assessment; every field but `assessment` is computed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    /// The assessment planned for.
    pub assessment: String,
    /// The mode in force.
    pub mode: Mode,
    /// How many advisors it could select.
    pub budget: u32,
    /// The capabilities requested (defaulted).
    pub capabilities: Vec<String>,
    /// Who will be consulted, in consultation order.
    pub selected: Vec<Selected>,
    /// Everyone else, with a reason.
    pub left_out: Vec<LeftOut>,
    /// The availability snapshot the plan was made against.
    pub availability: Vec<AdvisorAvailability>,
    /// A standing conclusion that already answers the assessment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse: Option<String>,
    /// The structured local review to perform when nobody is selected for material doubt.
    #[serde(default)]
    pub local_review: Vec<String>,
    /// The requested capabilities that no available advisor offers, in request order: no
    /// selection, whatever the budget, could have covered them.
    #[serde(default)]
    pub uncovered_capabilities: Vec<String>,
    /// The question asked besides the assessment's own (`--question`), as the job gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The opinion already given (`--prior-opinion`), as the job gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior_opinion: Option<String>,
    /// The size in bytes of the prompt every selected advisor was sent (absent when
    /// nobody was selected, or the plan was not recorded by a job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_bytes: Option<u64>,
    /// The SHA-256 of that prompt, lowercase hex; the prompt itself is not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_sha256: Option<String>,
}

/// Whether an exchange produced an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConsultationStatus {
    /// An answer with a conclusion.
    Completed,
    /// A typed failure.
    Failed,
}

/// One advisor's normalised outcome for one plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Consultation {
    /// The plan that selected the advisor.
    pub plan: String,
    /// The advisor id.
    pub advisor: String,
    /// Completed or failed.
    pub status: ConsultationStatus,
    /// Why it failed (failed only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureKind>,
    /// The last line of the advisor's error output, cleaned, at most 300 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostic: Option<String>,
    /// The advisor's conclusion (completed only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
    /// Its stance on the executor's hypothesis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stance: Option<Stance>,
    /// Assumptions it named.
    #[serde(default)]
    pub assumptions: Vec<String>,
    /// Risks it named.
    #[serde(default)]
    pub risks: Vec<String>,
    /// Actions it proposed.
    #[serde(default)]
    pub actions: Vec<String>,
    /// Observations that would prove it wrong.
    #[serde(default)]
    pub falsifiers: Vec<String>,
    /// Its confidence, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// How long the exchange took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Tokens the adapter reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Seconds the advisor asked to wait (rate limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u64>,
    /// What the advisor said of each invariant the question listed, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invariants: Vec<AdvisorInvariant>,
    /// What produced the answer (`vendor/model`, or what a mesh peer named): a
    /// conclusion's `independent_review_count` counts distinct sources. Absent in older
    /// records, whose advisor id stands in for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When the outcome was recorded (computed), RFC 3339 UTC.
    pub finished_at: String,
    /// The daemon's word that one of its jobs wrote it (computed): without a valid one the
    /// consultation is `unattested` and never counts as a review. Absent in records written
    /// before attestations, and in any written outside a job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attestation: Option<Box<Attestation>>,
}

/// What an advisor said of one invariant it was asked about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdvisorInvariant {
    /// The invariant's name, as the question listed it.
    pub name: String,
    /// Whether the hypothesis keeps it, in the advisor's view; `null` when it could not tell.
    #[serde(default)]
    pub holds: Option<bool>,
    /// Why, in its words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What the daemon writes into each consultation a job records: a MAC, with a key kept
/// outside the repository, over the record's stored content (see `docs/records.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Attestation {
    /// The job that produced the consultation.
    pub job: String,
    /// Which key made the MAC: `sha256:` and the first 16 hex digits of the key's SHA-256.
    pub key: String,
    /// Whether it may count as a review: `false` when the transport did not vouch for who
    /// answered (a mesh peer whose identity is not pinned).
    pub counts: bool,
    /// `hmac-sha256:` and the lower-case hex HMAC-SHA256 of the record serialised compactly
    /// with this field's value empty.
    pub mac: String,
    /// The mesh runtime id of the daemon that ran the job, when it had one: the runtime
    /// whose key made `signature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// That runtime's public key (`U...`), to which `runtime` is bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_key: Option<String>,
    /// `ed25519:` and the lower-case hex ed25519 signature, under the runtime's key, of the
    /// record serialised compactly with this field and `mac` empty: what another machine
    /// checks against the key it pinned for `runtime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// One side of a disagreement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Position {
    /// `executor`, or the id of a completed consultation.
    pub source: String,
    /// The position in one or a few sentences.
    pub position: String,
}

/// The `source` of the executor's own position.
pub const EXECUTOR: &str = "executor";

/// The `favours` of a resolution that favours no position.
pub const NEITHER: &str = "neither";

/// Positions that diverge on one assessment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Disagreement {
    /// The assessment disputed.
    pub assessment: String,
    /// At least two positions.
    pub positions: Vec<Position>,
    /// The assumptions the positions divide on.
    #[serde(default)]
    pub divergent_assumptions: Vec<String>,
    /// The question whose answer decides.
    pub discriminating_question: String,
}

/// The experiment that settled a disagreement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Resolution {
    /// The disagreement settled.
    pub disagreement: String,
    /// What was run.
    pub experiment: String,
    /// What it showed.
    pub observed: String,
    /// A position's source, or `neither`.
    pub favours: String,
    /// References to what the experiment produced.
    pub evidence: Vec<Evidence>,
}

/// The session's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Conclusion {
    /// The assessment decided.
    pub assessment: String,
    /// What was decided.
    pub decision: String,
    /// Why.
    pub rationale: String,
    /// References to the evidence.
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    /// The consultations weighed (ids).
    #[serde(default)]
    pub consultations: Vec<String>,
    /// Alternatives considered and rejected.
    #[serde(default)]
    pub rejected_alternatives: Vec<String>,
    /// Risks that remain.
    #[serde(default)]
    pub risks: Vec<String>,
    /// How the decision will be validated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_plan: Option<String>,
    /// The standing conclusion this one replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    /// How the decision keeps each invariant in force (one entry per invariant on
    /// material, high and critical doubt); absent in records written before invariants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invariants: Vec<InvariantCheck>,
    /// The distinct advisors of the completed consultations cited (computed).
    pub reviewed_by: Vec<String>,
    /// How many distinct advisors reviewed it (computed).
    pub independent_review_count: u32,
}

/// A check run against a conclusion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Validation {
    /// The conclusion checked.
    pub conclusion: String,
    /// What was checked.
    pub check: String,
    /// The command that checked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Whether it passed.
    pub passed: bool,
    /// What it printed, at most [`MAX_VALIDATION_OUTPUT_CHARS`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// Something tried that failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Attempt {
    /// The assessment it was tried under.
    pub assessment: String,
    /// What was tried.
    pub tried: String,
    /// The failure observed.
    pub failure_observed: String,
    /// The assumption it invalidated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidated_assumption: Option<String>,
    /// The hypothesis now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_hypothesis: Option<String>,
}

/// Whether a conclusion keeps one invariant, and with what evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InvariantCheck {
    /// The invariant's name.
    pub name: String,
    /// Whether the decision keeps it.
    pub holds: bool,
    /// References showing that it holds (or where it breaks).
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    /// The decision to remove or narrow the invariant, taken by this conclusion: what
    /// lets an entry say `holds: false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<InvariantChange>,
    /// The narrower invariant's text (with `change: narrow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// What a conclusion decides about an invariant it does not keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InvariantChange {
    /// The invariant no longer holds in this task.
    Remove,
    /// A narrower invariant replaces it in this task.
    Narrow,
}

impl InvariantChange {
    /// Every change.
    pub const ALL: [InvariantChange; 2] = [InvariantChange::Remove, InvariantChange::Narrow];

    /// The name used in records.
    pub fn as_str(self) -> &'static str {
        match self {
            InvariantChange::Remove => "remove",
            InvariantChange::Narrow => "narrow",
        }
    }
}

/// What an `invariant` record does to the task's invariants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InvariantAction {
    /// A new task-scope invariant (replacing a project or global one of the same name).
    Add,
    /// Remove a task-scope invariant the task added.
    Remove,
    /// Give a task-scope invariant the task added a narrower text.
    Narrow,
}

impl InvariantAction {
    /// Every action.
    pub const ALL: [InvariantAction; 3] = [
        InvariantAction::Add,
        InvariantAction::Remove,
        InvariantAction::Narrow,
    ];

    /// The name used in records.
    pub fn as_str(self) -> &'static str {
        match self {
            InvariantAction::Add => "add",
            InvariantAction::Remove => "remove",
            InvariantAction::Narrow => "narrow",
        }
    }
}

/// A task-scope invariant added, narrowed or removed: the task's invariants are the
/// history of these records (and of conclusions that remove or narrow one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Invariant {
    /// The invariant's name (see [`crate::core::invariants::check_name`]).
    pub name: String,
    /// Add, remove or narrow.
    pub action: InvariantAction,
    /// The constraint, in one or a few sentences (add and narrow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Why it was added, removed or narrowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A valid task name: `[A-Za-z0-9._-]{1,64}`, not `.` or `..`.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(try_from = "String", into = "String")]
pub struct TaskName(String);

/// Why a task name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("task name `{name}` is not accepted: a task is 1 to 64 of `A-Z a-z 0-9 . _ -`, and not `.` or `..`")]
pub struct InvalidTask {
    /// The name refused (control characters escaped).
    pub name: String,
}

impl TaskName {
    /// Accept `name` if it is a valid task name.
    pub fn new(name: &str) -> Result<TaskName, InvalidTask> {
        let ok = !name.is_empty()
            && name.len() <= 64
            && name != "."
            && name != ".."
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(TaskName(name.to_string()))
        } else {
            Err(InvalidTask {
                name: name.escape_debug().to_string(),
            })
        }
    }

    /// A git branch name made into a task: every character outside `[A-Za-z0-9._-]`
    /// becomes `-` (`feature/x` → `feature-x`); `None` when that is still not valid.
    pub fn from_branch(branch: &str) -> Option<TaskName> {
        let cleaned: String = branch
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        TaskName::new(&cleaned).ok()
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TaskName {
    type Error = InvalidTask;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        TaskName::new(&value)
    }
}

impl From<TaskName> for String {
    fn from(value: TaskName) -> String {
        value.0
    }
}

impl std::fmt::Display for TaskName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_names() {
        for ok in ["default", "feature-x", "a.b_c-1", &"x".repeat(64)] {
            assert!(TaskName::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", &"x".repeat(65), "ä", "a\nb"] {
            assert!(TaskName::new(bad).is_err(), "{bad}");
        }
        assert_eq!(
            TaskName::from_branch("feature/x").unwrap().as_str(),
            "feature-x"
        );
    }

    #[test]
    fn body_round_trips_with_kind_tag() {
        let json = serde_json::json!({
            "id": "01J00000000000000000000000", "task": "t", "sequence": 1,
            "created_at": "2026-01-01T00:00:00Z", "schema": 1, "redacted": [],
            "kind": "attempt", "assessment": "A", "tried": "x", "failure_observed": "y"
        });
        let rec: Record = serde_json::from_value(json).unwrap();
        assert_eq!(rec.kind(), Kind::Attempt);
        let back = serde_json::to_value(&rec).unwrap();
        assert_eq!(back["kind"], "attempt");
    }
}
