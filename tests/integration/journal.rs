//! Sharing records beyond one checkout (docs/JOURNAL.md): worktrees of one repository on
//! one machine share one state directory with no bus at all.

use super::support::cli::Project;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// Run the real `git` in `dir`; panics with its output when it fails.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn assessment(subject: &str) -> Value {
    json!({"kind": "assessment", "subject": subject, "materiality": "high",
        "hypothesis": "one writer is enough",
        "evidence": [{"kind": "file", "ref": "src/queue.rs", "showed": "one writer"}]})
}

#[test]
fn two_worktrees_of_one_repository_share_one_task_with_no_bus() {
    let project = Project::new();
    let main = project.root();
    git(&main, &["init", "-q", "-b", "main"]);
    std::fs::write(main.join("README"), "x\n").expect("write");
    git(&main, &["add", "README"]);
    git(
        &main,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "first",
        ],
    );
    let wt = project.outside().join("wt");
    git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "topic",
            wt.to_str().expect("utf-8"),
        ],
    );

    // Each worktree resolves its own root and, with no `--state-dir`, the same state.
    let in_dir = |dir: &Path, args: &[&str], stdin: Option<&Value>| {
        let mut cli = project
            .cli()
            .without_root()
            .without_state_dir()
            .current_dir(dir)
            .args(args.iter().copied())
            .args(["--task", "shared", "--format", "json"]);
        if let Some(input) = stdin {
            cli = cli.stdin(&input.to_string());
        }
        cli.run()
    };
    let first = in_dir(&wt, &["record", "--file", "-"], Some(&assessment("queue")))
        .expect_exit(0)
        .json();
    let second = in_dir(
        &main,
        &["record", "--file", "-"],
        Some(&assessment("cache")),
    )
    .expect_exit(0)
    .json();
    assert_eq!(first["sequence"], 1, "{first}");
    assert_eq!(
        second["sequence"], 2,
        "the main checkout appends to the worktree's chain"
    );

    let mut heads = Vec::new();
    for dir in [&main, &wt] {
        let status = in_dir(dir, &["status"], None).expect_exit(0).json();
        assert_eq!(status["task"], "shared", "{status}");
        assert_eq!(status["records"], 2, "{status}");
        let subjects: Vec<&str> = status["assessments"]
            .as_array()
            .expect("assessments")
            .iter()
            .filter_map(|a| a["subject"].as_str())
            .collect();
        assert_eq!(subjects.len(), 2, "{} sees both: {status}", dir.display());
        let verify = in_dir(dir, &["verify"], None).expect_exit(0).json();
        heads.push(verify["tasks"][0]["head"]["hash"].clone());
    }
    assert_eq!(heads[0], heads[1], "one chain, one head");
    assert!(
        main.join(advisord::paths::DEFAULT_STATE_DIR)
            .join("shared")
            .is_dir(),
        "records live under the main checkout"
    );
    assert!(
        !wt.join(advisord::paths::DEFAULT_STATE_DIR).exists(),
        "nothing under the worktree"
    );
}
