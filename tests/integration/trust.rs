//! A repository's own catalogue runs nothing until the user trusts it, as it is: a cloned
//! repository whose catalogue names a command must not have it run by a consultation, nor
//! replace the user's catalogue, until `advisor-consult trust`; one changed byte revokes it.

use crate::support::client as client_support;

use client_support::World;
use std::path::Path;

/// A catalogue whose one process advisor runs `sh -c` and leaves `marker` behind.
fn runs_a_command(marker: &Path) -> String {
    let answer = r#"{"conclusion": "the repository approves of itself", "stance": "supports"}"#;
    let command = format!(
        "touch {}; cat > /dev/null; echo '{answer}'",
        marker.display()
    );
    format!(
        "mode: standard\nadvisors:\n  - id: repo-runner\n    title: The repository's own\n    \
         transport: process\n    adapter: process\n    executable: sh\n    \
         capabilities: [independent_reasoning, code_review]\n    \
         args: [\"-c\", '{}']\n",
        command.replace('\'', "''")
    )
}

#[test]
fn a_repository_catalogue_runs_nothing_until_trusted_and_a_changed_byte_revokes_it() {
    let world = World::new(&[]);
    let marker = world.tmp().join("ran");
    let file = world.root().join(".advisord/advisors.yaml");
    std::fs::write(&file, runs_a_command(&marker)).expect("write the catalogue");
    let assessment = world.assessment();

    // Untrusted: not used at all, and the verbs say why and what to run.
    let listed = world
        .run(&["advisors"])
        .expect_exit(0)
        .expect_stderr("is not trusted")
        .expect_stderr("advisor-consult trust");
    assert!(!listed.stdout.contains("repo-runner"), "{}", listed.stdout);
    world
        .run(&["plan", "--materiality", "high"])
        .expect_stderr("is not trusted")
        .expect_stderr("advisor-consult trust");
    let consulted = world
        .run(&["--assessment", &assessment])
        .expect_stderr("is not trusted");
    assert!(!marker.exists(), "nothing ran: {}", consulted.stderr);

    // Trusted: it is the catalogue in force, and its advisor runs.
    world
        .run(&["trust"])
        .expect_exit(0)
        .expect_stdout("trusted")
        .expect_stdout("repo-runner: sh -c");
    let listed = world.run(&["advisors"]).expect_exit(0);
    assert!(listed.stdout.contains("repo-runner"), "{}", listed.stdout);
    assert!(!listed.stderr.contains("not trusted"), "{}", listed.stderr);
    world.run(&["--assessment", &assessment]).expect_exit(0);
    assert!(marker.exists(), "the trusted advisor ran");

    // One byte more: trust is revoked.
    std::fs::remove_file(&marker).expect("remove the marker");
    let mut changed = std::fs::read(&file).expect("read");
    changed.push(b'\n');
    std::fs::write(&file, changed).expect("change one byte");
    world
        .run(&["advisors"])
        .expect_exit(0)
        .expect_stderr("is not trusted");
    world
        .run(&["--assessment", &assessment])
        .expect_stderr("is not trusted");
    assert!(!marker.exists(), "nothing ran after the change");
}

#[test]
fn trust_without_a_repository_catalogue_says_so() {
    let world = World::new(&[]);
    std::fs::remove_file(world.root().join(".advisord/advisors.yaml")).expect("remove");
    world
        .run(&["trust"])
        .expect_exit(2)
        .expect_stderr("no readable repository catalogue");
}
