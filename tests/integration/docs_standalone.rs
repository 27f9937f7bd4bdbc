//! The docs stand alone: they cite no specification outside the repository, and the rules
//! they state (the budget table, the modes, the circuit's cooldowns, the adapters'
//! cancellation token) are the code's.

use advisord::core::availability::{AUTH_COOLDOWN_S, RATE_LIMIT_COOLDOWN_S, TRANSIENT_COOLDOWN_S};
use advisord::core::policy::budget;
use advisord::core::records::{Confidence, Materiality, Mode};
use std::path::{Path, PathBuf};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(repo().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            files_under(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| e == "md" || e == "rs" || e == "yaml" || e == "service")
        {
            out.push(path);
        }
    }
}

#[test]
fn nothing_cites_a_specification_outside_the_repository() {
    let mut files = vec![repo().join("README.md")];
    for dir in ["docs", "src", "adapters/src", "fakes/src", "share"] {
        files_under(&repo().join(dir), &mut files);
    }
    // Built so that this file does not find itself.
    let needles = [
        format!("SPEC{}", ".md"),
        format!("SPEC {}", '§'),
        "§".to_string(),
        format!("../{}", "shared/"),
    ];
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a file");
        for (n, line) in text.lines().enumerate() {
            if needles.iter().any(|needle| line.contains(needle.as_str())) {
                found.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "references to an outside spec:\n{}",
        found.join("\n")
    );
}

/// The budget table of docs/POLICY.md, row by row, is `policy::budget`.
#[test]
fn the_documented_budget_table_is_the_policys() {
    let doc = read("docs/POLICY.md");
    let header = "| mode | trivial | low | material | high | critical |";
    let table = doc
        .split_once(header)
        .expect("docs/POLICY.md has the budget table")
        .1;
    let mut rows = 0;
    for line in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let mode = Mode::ALL
            .into_iter()
            .find(|m| cells[0] == format!("`{}`", m.as_str()))
            .unwrap_or_else(|| panic!("unknown mode in {line}"));
        for (cell, materiality) in cells[1..].iter().zip(Materiality::ALL) {
            let documented: u32 = cell.parse().expect("a number");
            assert_eq!(
                documented,
                budget(mode, materiality, Confidence::Medium),
                "{} × {}",
                mode.as_str(),
                materiality.as_str()
            );
            assert_eq!(
                budget(mode, materiality, Confidence::High),
                documented.saturating_sub(1),
                "high confidence lowers by one"
            );
        }
        rows += 1;
    }
    assert_eq!(rows, Mode::ALL.len(), "one row per mode");
}

#[test]
fn the_documented_cooldowns_are_the_circuits() {
    let doc = read("docs/POLICY.md");
    for expected in [
        format!("+ {} minutes", RATE_LIMIT_COOLDOWN_S / 60),
        format!("+ {} hour", AUTH_COOLDOWN_S / 3600),
        format!("+ {} minutes", TRANSIENT_COOLDOWN_S / 60),
    ] {
        assert!(doc.contains(&expected), "docs/POLICY.md lacks `{expected}`");
    }
    for mode in Mode::ALL {
        assert!(
            doc.contains(&format!("| `{}` |", mode.as_str())),
            "mode {}",
            mode.as_str()
        );
    }
}

/// docs/ADAPTERS.md and the contract say the same about the cancellation token: the
/// adapter gets the caller's own token and never cancels it.
#[test]
fn the_adapters_doc_and_the_contract_agree_on_the_token() {
    let doc = read("docs/ADAPTERS.md");
    let section = doc
        .split_once("### Cancellation")
        .expect("a cancellation section")
        .1
        .split("\n### ")
        .next()
        .unwrap_or_default();
    let code = read("adapters/src/contract.rs");
    assert!(
        code.contains("cancel: io.cancel.clone()"),
        "the contract hands the adapter the caller's token"
    );
    assert!(
        section.contains("the caller's cancellation token itself"),
        "{section}"
    );
    assert!(!section.contains("child of the caller"), "{section}");
}
