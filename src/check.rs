//! `check`: provider independence and CI credential findings.
//!
//! A repository declares itself in `<root>/.advisord/project.yaml`:
//!
//! ```yaml
//! project:
//!   advisors-are-optional: true
//!   provider-independent: [src/core, src/store.rs]
//! ```
//!
//! Only a repository that declares `advisors-are-optional: true` is checked, for two rules:
//! every file under a `provider-independent` path must not name, as a whole word and
//! ignoring case, any advisor id, executable, provider, vendor or model of the catalogue
//! (`provider_independence`); and no CI workflow or gate file may name a credential
//! variable of the catalogue (`ci_credential`), since a gate that needs an advisor's key
//! makes the advisor mandatory. This module is the edge: it reads files.

use crate::core::catalogue::Catalogue;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Where a repository declares itself, relative to its root.
pub const PROJECT_FILE: &str = ".advisord/project.yaml";

/// The rule a finding breaks.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// A provider-independent file names an advisor, executable, provider, vendor or model.
    ProviderIndependence,
    /// A CI workflow or gate file names a catalogue credential variable.
    CiCredential,
    /// The project declaration itself cannot be read or declares a path outside the root.
    Declaration,
    /// A record file breaks its task's hash chain or the writer's rules (`verify`).
    RecordChain,
}

impl Rule {
    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::ProviderIndependence => "provider_independence",
            Rule::CiCredential => "ci_credential",
            Rule::Declaration => "declaration",
            Rule::RecordChain => "record_chain",
        }
    }
}

/// One finding: a rule broken at a file and line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    /// The rule broken.
    pub rule: Rule,
    /// The file, relative to the root, with `/` separators.
    pub file: String,
    /// The line, from 1.
    pub line: usize,
    /// The word found (empty for a declaration finding).
    pub word: String,
    /// What is wrong and what to do.
    pub message: String,
}

/// What `check` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckReport {
    /// Whether the repository declares `project.advisors-are-optional: true`.
    pub declared: bool,
    /// The `--path` the scan was restricted to, relative to the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// How many files were read.
    pub files_scanned: usize,
    /// Information that is not a finding (what was not checked and why).
    pub notes: Vec<String>,
    /// The findings, by file and line.
    pub findings: Vec<Finding>,
}

impl CheckReport {
    /// No finding: `check` exits 0.
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }

    /// Add what `verify` found, one finding per record file (line 1: a record is one
    /// object), its path relative to `root` where it lies under it.
    pub fn add_verify(&mut self, root: &Path, report: &crate::core::chain::VerifyReport) {
        for task in &report.tasks {
            let dir = Path::new(&task.dir);
            let dir = dir.strip_prefix(root).unwrap_or(dir);
            for f in &task.findings {
                self.findings.push(Finding {
                    rule: Rule::RecordChain,
                    file: dir.join(&f.file).display().to_string(),
                    line: 1,
                    word: f.problem.as_str().to_string(),
                    message: format!(
                        "{}; `advisor-consult verify --all` lists every finding",
                        f.message
                    ),
                });
            }
        }
    }
}

#[derive(Deserialize)]
struct ProjectFile {
    #[serde(default)]
    project: Option<Project>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Project {
    #[serde(default)]
    advisors_are_optional: bool,
    #[serde(default)]
    provider_independent: Vec<String>,
}

/// Run `check` on the repository at `root` against `catalogue`, restricted to `path`
/// (relative to `root`, or absolute inside it) when given.
pub fn run(root: &Path, catalogue: &Catalogue, path: Option<&Path>) -> CheckReport {
    let mut report = CheckReport {
        declared: false,
        scope: None,
        files_scanned: 0,
        notes: Vec::new(),
        findings: Vec::new(),
    };
    let scope = match path.map(|p| scope_of(root, p)) {
        None => None,
        Some(Ok(scope)) => {
            report.scope = Some(display(&scope));
            Some(scope)
        }
        Some(Err(note)) => {
            report.notes.push(note);
            return report;
        }
    };
    let Some(project) = read_project(root, &mut report) else {
        return report;
    };
    if !project.advisors_are_optional {
        report.notes.push(format!(
            "`{PROJECT_FILE}` does not declare `project.advisors-are-optional: true`, so \
             provider independence and CI credentials are not checked"
        ));
        return report;
    }
    report.declared = true;
    let in_scope = |rel: &Path| scope.as_deref().is_none_or(|s| rel.starts_with(s));

    let provider_terms = provider_terms(catalogue);
    for declared in &project.provider_independent {
        let rel = match relative_inside(Path::new(declared)) {
            Some(rel) => rel,
            None => {
                report.findings.push(Finding {
                    rule: Rule::Declaration,
                    file: PROJECT_FILE.to_string(),
                    line: line_of(root, declared),
                    word: String::new(),
                    message: format!(
                        "`{declared}` is not a path inside the repository; declare \
                         provider-independent paths relative to the root, without `..`"
                    ),
                });
                continue;
            }
        };
        // A declared path that does not exist (yet) is skipped: declarations may run ahead.
        for file in files_under(root, &rel) {
            if in_scope(&file) {
                scan(
                    root,
                    &file,
                    &provider_terms,
                    Rule::ProviderIndependence,
                    &mut report,
                );
            }
        }
    }

    let credential_terms = credential_terms(catalogue);
    for file in ci_files(root) {
        if in_scope(&file) {
            scan(
                root,
                &file,
                &credential_terms,
                Rule::CiCredential,
                &mut report,
            );
        }
    }
    report.findings.sort_by(|a, b| {
        (a.file.as_str(), a.line, a.rule, a.word.as_str()).cmp(&(
            b.file.as_str(),
            b.line,
            b.rule,
            b.word.as_str(),
        ))
    });
    report.findings.dedup();
    report
}

/// `--path` as a path relative to the root, or a note saying why nothing was scanned.
/// The part of the root `--path` names, relative to it; why not when it is outside the
/// root or missing.
pub fn scope_of(root: &Path, path: &Path) -> Result<PathBuf, String> {
    let rel = if path.is_absolute() {
        match path.strip_prefix(root) {
            Ok(rel) => rel.to_path_buf(),
            Err(_) => {
                return Err(format!(
                    "`--path {}` is outside the root `{}`: nothing was scanned",
                    path.display(),
                    root.display()
                ))
            }
        }
    } else {
        path.to_path_buf()
    };
    let rel = relative_inside(&rel).ok_or_else(|| {
        format!(
            "`--path {}` leaves the root `{}`: nothing was scanned",
            path.display(),
            root.display()
        )
    })?;
    if !root.join(&rel).exists() {
        return Err(format!(
            "`--path {}` does not exist under `{}`: nothing was scanned",
            path.display(),
            root.display()
        ));
    }
    Ok(rel)
}

/// The project declaration, or `None` with a note or a finding saying why there is none.
fn read_project(root: &Path, report: &mut CheckReport) -> Option<Project> {
    let text = match std::fs::read_to_string(root.join(PROJECT_FILE)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            report.notes.push(format!(
                "no `{PROJECT_FILE}`: this repository does not declare \
                 `project.advisors-are-optional`, so nothing is checked"
            ));
            return None;
        }
        Err(e) => {
            report
                .findings
                .push(declaration_finding(1, format!("cannot be read: {e}")));
            return None;
        }
    };
    match serde_yaml_ng::from_str::<ProjectFile>(&text) {
        Ok(ProjectFile {
            project: Some(project),
        }) => Some(project),
        Ok(ProjectFile { project: None }) => {
            report.notes.push(format!(
                "`{PROJECT_FILE}` has no `project:` mapping, so nothing is checked"
            ));
            None
        }
        Err(e) => {
            let line = e.location().map_or(1, |l| l.line());
            report.findings.push(declaration_finding(
                line,
                format!(
                    "does not parse: {e}; expected `project: {{advisors-are-optional: true, \
                     provider-independent: [PATH, ...]}}`"
                ),
            ));
            None
        }
    }
}

fn declaration_finding(line: usize, what: String) -> Finding {
    Finding {
        rule: Rule::Declaration,
        file: PROJECT_FILE.to_string(),
        line,
        word: String::new(),
        message: format!("`{PROJECT_FILE}` {what}"),
    }
}

/// The line of the project file that mentions `needle` (1 when none does).
fn line_of(root: &Path, needle: &str) -> usize {
    std::fs::read_to_string(root.join(PROJECT_FILE))
        .ok()
        .and_then(|text| text.lines().position(|l| l.contains(needle)))
        .map_or(1, |i| i + 1)
}

/// `path` normalised as a relative path that stays inside the root, if it does.
fn relative_inside(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Each term (lower-cased) with what it is in the catalogue.
type Terms = BTreeMap<String, String>;

fn provider_terms(catalogue: &Catalogue) -> Terms {
    let mut terms = Terms::new();
    let mut add = |term: Option<&str>, what: String| {
        if let Some(term) = term.map(str::trim).filter(|t| !t.is_empty()) {
            terms.entry(term.to_ascii_lowercase()).or_insert(what);
        }
    };
    for entry in &catalogue.advisors {
        let id = &entry.id;
        add(Some(id), format!("the id of advisor `{id}`"));
        let executable = entry.executable.as_deref().map(|e| {
            // An absolute path names its executable by its file name.
            Path::new(e)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or(e)
        });
        add(executable, format!("the executable of advisor `{id}`"));
        let refs = &entry.references;
        add(
            refs.provider.as_deref(),
            format!("the provider of advisor `{id}`"),
        );
        add(
            refs.vendor.as_deref(),
            format!("the vendor of advisor `{id}`"),
        );
        add(
            refs.model.as_deref(),
            format!("the model of advisor `{id}`"),
        );
    }
    terms
}

fn credential_terms(catalogue: &Catalogue) -> Terms {
    let mut terms = Terms::new();
    for entry in &catalogue.advisors {
        if let Some(var) = entry.credential.as_deref().filter(|v| !v.is_empty()) {
            terms
                .entry(var.to_ascii_lowercase())
                .or_insert_with(|| format!("the credential variable of advisor `{}`", entry.id));
        }
    }
    terms
}

/// Every regular file under `rel` (a file or a directory), relative to the root, sorted.
/// Symbolic links are not followed, so the scan stays inside the tree it was given.
fn files_under(root: &Path, rel: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![rel.to_path_buf()];
    while let Some(rel) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(root.join(&rel)) else {
            continue;
        };
        if meta.is_file() {
            out.push(rel);
        } else if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(root.join(&rel)) {
                for entry in entries.flatten() {
                    stack.push(rel.join(entry.file_name()));
                }
            }
        }
    }
    out.sort();
    out
}

/// The CI workflow and gate files of the repository, relative to the root.
fn ci_files(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = files_under(root, Path::new(".github/workflows"))
        .into_iter()
        .filter(|p| {
            // GitHub reads only the files directly in `.github/workflows`.
            p.parent() == Some(Path::new(".github/workflows"))
                && matches!(p.extension().and_then(|e| e.to_str()), Some("yml" | "yaml"))
        })
        .collect();
    for single in [
        ".gitlab-ci.yml",
        ".circleci/config.yml",
        "Jenkinsfile",
        "azure-pipelines.yml",
    ] {
        out.extend(files_under(root, Path::new(single)));
    }
    out.extend(files_under(root, Path::new(".ci")));
    out.sort();
    out.dedup();
    out
}

/// Scan one file for whole-word, case-insensitive `terms`, adding a finding per line and
/// term.
fn scan(root: &Path, rel: &Path, terms: &Terms, rule: Rule, report: &mut CheckReport) {
    let message = match rule {
        Rule::CiCredential => credential_message,
        _ => provider_message,
    };
    let Ok(bytes) = std::fs::read(root.join(rel)) else {
        return;
    };
    if bytes.iter().take(8192).any(|&b| b == 0) {
        return; // A binary file spells no source.
    }
    report.files_scanned += 1;
    let text = String::from_utf8_lossy(&bytes);
    let file = display(rel);
    for (number, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        for (term, what) in terms {
            if let Some(at) = find_word(&lower, term) {
                // Quote it as the file spells it (`OPENAI_API_KEY`, not its lower case):
                // ASCII lower-casing keeps every byte where it was.
                let spelled = line.get(at..at + term.len()).unwrap_or(term);
                report.findings.push(Finding {
                    rule,
                    file: file.clone(),
                    line: number + 1,
                    word: spelled.to_string(),
                    message: message(spelled, what),
                });
            }
        }
    }
}

fn provider_message(term: &str, what: &str) -> String {
    format!(
        "a provider-independent file names `{term}` ({what} in the catalogue); name a \
         capability instead, or move the advisor-specific part into an adapter or the catalogue"
    )
}

fn credential_message(term: &str, what: &str) -> String {
    format!(
        "a CI file names `{term}` ({what}); advisors are optional, so a gate must pass \
         without any advisor's credential: remove it and let the gate decide locally"
    )
}

/// Whether `haystack` contains `word` with no letter, digit or `_` on either side.
pub fn contains_word(haystack: &str, word: &str) -> bool {
    find_word(haystack, word).is_some()
}

/// Where `haystack` first contains `word` as a whole word (byte offset).
pub fn find_word(haystack: &str, word: &str) -> Option<usize> {
    if word.is_empty() {
        return None;
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(found) = haystack[from..].find(word) {
        let start = from + found;
        let end = start + word.len();
        let before = haystack[..start].chars().next_back();
        let after = haystack[end..].chars().next();
        if !before.is_some_and(is_word) && !after.is_some_and(is_word) {
            return Some(start);
        }
        // Step one character so overlapping occurrences are still tried.
        from = start + haystack[start..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// A relative path with `/` separators.
fn display(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalogue() -> Catalogue {
        serde_json::from_value(json!({"advisors": [
            {"id": "acme-cli", "title": "Acme", "transport": "process", "adapter": "process",
             "executable": "/opt/bin/acmebot",
             "references": {"provider": "acmecorp", "vendor": "acmelabs", "model": "acme-2.5"},
             "capabilities": ["independent_reasoning"]},
            {"id": "wile-api", "title": "Wile", "transport": "http", "adapter": "x",
             "credential": "WILE_API_KEY", "capabilities": ["independent_reasoning"]},
        ]}))
        .unwrap()
    }

    fn check_word(haystack: &str, word: &str, expected: bool) {
        assert_eq!(
            contains_word(haystack, word),
            expected,
            "{word:?} in {haystack:?}"
        );
    }

    #[test]
    fn whole_words_only() {
        check_word("uses acmecorp here", "acmecorp", true);
        check_word("acmecorp", "acmecorp", true);
        check_word("(acmecorp)", "acmecorp", true);
        check_word("acmecorp-cli", "acmecorp", true);
        check_word("acmecorpx", "acmecorp", false);
        check_word("my_acmecorp", "acmecorp", false);
        check_word("acme-2.5 model", "acme-2.5", true);
        check_word("acme-2.50", "acme-2.5", false);
        check_word("xacme-2.5 acme-2.5", "acme-2.5", true);
        check_word("é acmecorp", "acmecorp", true);
        check_word("", "acmecorp", false);
    }

    struct Repo(tempfile::TempDir);

    impl Repo {
        fn new(project: &str) -> Repo {
            let repo = Repo(tempfile::tempdir().unwrap());
            repo.write(PROJECT_FILE, project);
            repo
        }
        fn write(&self, rel: &str, text: &str) {
            let path = self.0.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        fn run(&self, path: Option<&str>) -> CheckReport {
            run(self.0.path(), &catalogue(), path.map(Path::new))
        }
    }

    const DECLARED: &str =
        "project:\n  advisors-are-optional: true\n  provider-independent: [core, lib.rs, gone]\n";

    fn found(report: &CheckReport) -> Vec<(Rule, String, usize, String)> {
        report
            .findings
            .iter()
            .map(|f| (f.rule, f.file.clone(), f.line, f.word.clone()))
            .collect()
    }

    #[test]
    fn every_catalogue_term_is_found_in_declared_files() {
        let repo = Repo::new(DECLARED);
        repo.write("core/a.rs", "fine\nAcmeCorp here\nacmelabs and ACME-2.5\n");
        repo.write("core/deep/b.rs", "the acmebot binary\nwile-api\n");
        repo.write("lib.rs", "acme-cli\n");
        repo.write("other.rs", "acmecorp is allowed outside declared paths\n");
        let report = repo.run(None);
        assert!(report.declared);
        let pi = Rule::ProviderIndependence;
        assert_eq!(
            found(&report),
            [
                // Quoted as the file spells them.
                (pi, "core/a.rs".into(), 2, "AcmeCorp".into()),
                (pi, "core/a.rs".into(), 3, "ACME-2.5".into()),
                (pi, "core/a.rs".into(), 3, "acmelabs".into()),
                (pi, "core/deep/b.rs".into(), 1, "acmebot".into()),
                (pi, "core/deep/b.rs".into(), 2, "wile-api".into()),
                (pi, "lib.rs".into(), 1, "acme-cli".into()),
            ]
        );
        assert_eq!(report.files_scanned, 3);
        assert!(report.findings[0]
            .message
            .contains("the provider of advisor `acme-cli`"));
    }

    #[test]
    fn ci_files_naming_a_credential_are_findings() {
        let repo = Repo::new(DECLARED);
        repo.write(
            ".github/workflows/ci.yml",
            "env:\n  KEY: ${{ secrets.WILE_API_KEY }}\n",
        );
        repo.write(".github/workflows/notes.md", "WILE_API_KEY\n");
        repo.write(".github/workflows/nested/x.yml", "WILE_API_KEY\n");
        repo.write(".ci/run", "#!/bin/sh\nexport WILE_API_KEY=x\n");
        repo.write("Jenkinsfile", "wile_api_key\n");
        repo.write(".gitlab-ci.yml", "MY_WILE_API_KEY: x\n");
        repo.write("README.md", "set WILE_API_KEY to use it\n");
        let report = repo.run(None);
        let ci = Rule::CiCredential;
        assert_eq!(
            found(&report),
            [
                (ci, ".ci/run".into(), 2, "WILE_API_KEY".into()),
                (
                    ci,
                    ".github/workflows/ci.yml".into(),
                    2,
                    "WILE_API_KEY".into()
                ),
                (ci, "Jenkinsfile".into(), 1, "wile_api_key".into()),
            ]
        );
    }

    #[test]
    fn path_restricts_the_scan() {
        let repo = Repo::new(DECLARED);
        repo.write("core/a/x.rs", "acmecorp\n");
        repo.write("core/b/y.rs", "acmecorp\n");
        repo.write(".ci/run", "WILE_API_KEY\n");
        let report = repo.run(Some("core/b"));
        assert_eq!(report.scope.as_deref(), Some("core/b"));
        let files: Vec<&str> = report.findings.iter().map(|f| f.file.as_str()).collect();
        assert_eq!(files, ["core/b/y.rs"]);
        let absolute = repo.0.path().join("core/a");
        let report = run(repo.0.path(), &catalogue(), Some(&absolute));
        assert_eq!(report.findings.len(), 1);
        assert_eq!(report.findings[0].file, "core/a/x.rs");
    }

    #[test]
    fn a_path_outside_or_missing_scans_nothing_and_says_why() {
        let repo = Repo::new(DECLARED);
        repo.write("core/x.rs", "acmecorp\n");
        for path in ["../elsewhere", "/definitely/not/here", "core/missing"] {
            let report = repo.run(Some(path));
            assert!(report.findings.is_empty(), "{path}");
            assert_eq!(report.notes.len(), 1, "{path}");
            assert!(report.notes[0].contains("nothing was scanned"), "{path}");
        }
    }

    #[test]
    fn an_undeclared_repository_is_information_only() {
        for project in [
            "project:\n  advisors-are-optional: false\n  provider-independent: [core]\n",
            "project:\n  provider-independent: [core]\n",
            "other: 1\n",
        ] {
            let repo = Repo::new(project);
            repo.write("core/x.rs", "acmecorp\n");
            repo.write(".ci/run", "WILE_API_KEY\n");
            let report = repo.run(None);
            assert!(!report.declared && report.passed(), "{project}");
            assert_eq!(report.notes.len(), 1, "{project}");
        }
        let bare = Repo(tempfile::tempdir().unwrap());
        let report = bare.run(None);
        assert!(report.passed() && report.notes[0].contains("no `.advisord/project.yaml`"));
    }

    #[test]
    fn a_bad_declaration_is_a_finding() {
        let repo = Repo::new("project:\n  advisors-are-optional: true\n  independent: [x]\n");
        let report = repo.run(None);
        assert_eq!(report.findings.len(), 1);
        assert_eq!(report.findings[0].rule, Rule::Declaration);
        assert!(report.findings[0].message.contains("does not parse"));

        let repo = Repo::new(
            "project:\n  advisors-are-optional: true\n  provider-independent:\n    - ../up\n",
        );
        let report = repo.run(None);
        assert_eq!(
            found(&report),
            [(Rule::Declaration, PROJECT_FILE.into(), 4, "".into())]
        );
    }

    #[test]
    fn binary_files_are_skipped() {
        let repo = Repo::new(DECLARED);
        repo.write("core/blob.bin", "\0\0acmecorp");
        let report = repo.run(None);
        assert!(report.passed());
        assert_eq!(report.files_scanned, 0);
    }
}
