//! The context's tests: resolution, catalogues, credentials, presence, budgets.
use super::catalogue::*;
use super::*;
use std::collections::BTreeSet;

/// Test catalogues name a made-up adapter `x`, as a daemon's own registry would.
fn test_registry() -> Registry {
    let mut registry = Registry::builtin();
    registry.insert(
        "x",
        std::sync::Arc::new(advisord_fakes::scripted::ScriptedAdapter::new(vec![])),
    );
    registry
}

/// The locations the command line `args` names (`--root X --task Y ...`).
fn flags(args: &[&str]) -> Locations {
    let mut flags = Locations::default();
    for pair in args.chunks(2) {
        let value = pair[1].to_string();
        match pair[0] {
            "--root" => flags.root = Some(value.into()),
            "--state-dir" => flags.state_dir = Some(value.into()),
            "--task" => flags.task = Some(value),
            "--catalogue" => flags.catalogue = Some(value.into()),
            other => panic!("not a location flag: {other}"),
        }
    }
    flags
}

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

fn context(root: &Path) -> RequestContext {
    let flags = flags(&["--root", root.to_str().expect("utf-8 path")]);
    RequestContext::from_parts(&flags, root, &env_of(&[]))
}

#[test]
fn relative_flags_become_absolute_against_the_working_directory() {
    let cwd = Path::new("/work/here");
    let ctx = RequestContext::from_parts(
        &flags(&["--root", "r", "--state-dir", "s", "--catalogue", "c.yaml"]),
        cwd,
        &env_of(&[]),
    );
    assert_eq!(ctx.root, cwd.join("r"));
    assert_eq!(ctx.state_dir, Some(cwd.join("s")));
    assert_eq!(ctx.catalogue_path, Some(cwd.join("c.yaml")));
}

#[test]
fn flags_win_over_the_environment_and_empty_variables_are_unset() {
    let env = env_of(&[
        (ENV_TASK, "from-env"),
        (ENV_CATALOGUE, "/env.yaml"),
        (ENV_MODE, "fast"),
        ("PATH", "/bin"),
    ]);
    let cwd = Path::new("/w");
    let ctx = RequestContext::from_parts(&flags(&[]), cwd, &env);
    assert_eq!(ctx.task.as_deref(), Some("from-env"));
    assert_eq!(ctx.catalogue_path, Some(PathBuf::from("/env.yaml")));
    assert_eq!(ctx.mode.as_deref(), Some("fast"));
    assert_eq!(ctx.path.as_deref(), Some("/bin"));
    let ctx = RequestContext::from_parts(
        &flags(&["--task", "flag", "--catalogue", "/flag.yaml"]),
        cwd,
        &env,
    );
    assert_eq!(ctx.task.as_deref(), Some("flag"));
    assert_eq!(ctx.catalogue_path, Some(PathBuf::from("/flag.yaml")));
    let empty = env_of(&[(ENV_TASK, ""), (ENV_CATALOGUE, "")]);
    let ctx = RequestContext::from_parts(&flags(&[]), cwd, &empty);
    assert_eq!((ctx.task, ctx.catalogue_path), (None, None));
}

#[test]
fn the_root_is_the_nearest_ancestor_holding_git() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("project");
    let deep = root.join("a/b");
    std::fs::create_dir_all(&deep).expect("mkdir");
    std::fs::create_dir(root.join(".git")).expect("mkdir .git");
    let ctx = RequestContext::from_parts(&flags(&[]), &deep, &env_of(&[]));
    assert_eq!(ctx.root, root);
    let elsewhere = dir.path().join("loose");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let ctx = RequestContext::from_parts(&flags(&[]), &elsewhere, &env_of(&[]));
    assert_eq!(ctx.root, elsewhere);
}

#[test]
fn a_context_for_a_root_reads_the_given_environment() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Named by the environment (a repository's own would need trusting first).
    let file = dir.path().join("c.yaml");
    std::fs::write(
        &file,
        "advisors:\n- {id: e, title: E, transport: http, adapter: x, credential: MY_KEY, \
         capabilities: [independent_reasoning], local: true}\n",
    )
    .expect("write");
    let file = file.display().to_string();
    let env = env_of(&[
        (ENV_CATALOGUE, file.as_str()),
        ("MY_KEY", "k"),
        ("UNRELATED", "u"),
        (ENV_MODE, "offline"),
        ("PATH", "/bin"),
    ]);
    let ctx = RequestContext::for_root(dir.path().to_path_buf(), Some("t".into()), &env);
    assert_eq!(ctx.root, dir.path());
    assert_eq!(ctx.task.as_deref(), Some("t"));
    assert_eq!(ctx.mode.as_deref(), Some("offline"));
    assert_eq!(ctx.path.as_deref(), Some("/bin"));
    assert_eq!(
        ctx.credentials.iter().collect::<Vec<_>>(),
        vec![(&"MY_KEY".to_string(), &"k".to_string())]
    );
    let resolved = Resolved::resolve(&ctx, &test_registry()).expect("resolves");
    assert_eq!(resolved.mode, Mode::Offline);
    assert!(resolved.presence.credentials.contains("MY_KEY"));
}

#[test]
fn debug_output_never_shows_a_credential_value() {
    let mut ctx = context(Path::new("/"));
    ctx.credentials
        .insert("SOME_API_KEY".into(), "sk-very-secret-value".into());
    let shown = format!("{ctx:?} {ctx:#?}");
    assert!(shown.contains("SOME_API_KEY"), "{shown}");
    assert!(!shown.contains("sk-very-secret-value"), "{shown}");
}

fn check_branch(head: &str, expected: Option<&str>) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join(".git")).expect("mkdir .git");
    std::fs::write(dir.path().join(".git/HEAD"), head).expect("write HEAD");
    let task = resolve_task(None, dir.path()).expect("a task");
    assert_eq!(
        git_branch(dir.path()).and_then(|b| TaskName::from_branch(&b)),
        expected.map(|e| TaskName::new(e).expect("valid")),
        "{head:?}"
    );
    assert_eq!(task.as_str(), expected.unwrap_or(DEFAULT_TASK), "{head:?}");
}

#[test]
fn the_task_comes_from_the_git_branch_when_nothing_names_it() {
    check_branch("ref: refs/heads/feature/x\n", Some("feature-x"));
    check_branch("ref: refs/heads/main\n", Some("main"));
    check_branch("ref: refs/heads/fix bug#1\n", Some("fix-bug-1"));
    // Detached: no branch, the default task.
    check_branch("8d1f0c2e6c1c1b0e6a3c2d7f1b2a3c4d5e6f7a8b\n", None);
    check_branch("ref: refs/heads/..\n", None);
    check_branch("", None);
}

#[test]
fn a_worktree_follows_its_gitdir_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let git_dir = dir.path().join("main/.git/worktrees/wt");
    std::fs::create_dir_all(&git_dir).expect("mkdir");
    std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/topic/y\n").expect("HEAD");
    let worktree = dir.path().join("wt");
    std::fs::create_dir(&worktree).expect("mkdir");
    std::fs::write(
        worktree.join(".git"),
        format!("gitdir: {}\n", git_dir.display()),
    )
    .expect(".git file");
    assert_eq!(git_branch(&worktree).as_deref(), Some("topic/y"));
    std::fs::write(worktree.join(".git"), "gitdir: ../main/.git/worktrees/wt\n")
        .expect(".git file");
    assert_eq!(git_branch(&worktree).as_deref(), Some("topic/y"));
}

#[test]
fn a_given_task_is_validated() {
    let root = Path::new("/");
    assert_eq!(
        resolve_task(Some("ok-1"), root).expect("valid").as_str(),
        "ok-1"
    );
    for bad in ["", "..", "a/b", "../../etc"] {
        assert!(
            matches!(resolve_task(Some(bad), root), Err(Error::InvalidTask(_))),
            "{bad}"
        );
    }
}

#[test]
fn the_cooldown_override() {
    assert_eq!(parse_cooldown(None).expect("unset"), None);
    assert_eq!(parse_cooldown(Some("")).expect("empty"), None);
    assert_eq!(parse_cooldown(Some("60")).expect("60"), Some(60));
    assert_eq!(parse_cooldown(Some(" 0 ")).expect("0"), Some(0));
    for bad in ["-1", "1.5", "ten"] {
        let message = parse_cooldown(Some(bad)).expect_err(bad).to_string();
        assert!(message.contains(ENV_COOLDOWN), "{message}");
    }
}

#[test]
fn presence_is_probed_on_the_asking_path_and_credentials() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let make = |name: &str, mode: u32| {
        let path = bin.join(name);
        std::fs::write(&path, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    };
    make("on-path", 0o755);
    make("not-executable", 0o644);
    let absolute = make("absolute", 0o755);
    let yaml = format!(
        "advisors:\n\
         - {{id: a, title: A, transport: process, adapter: process, executable: on-path, capabilities: [independent_reasoning]}}\n\
         - {{id: b, title: B, transport: process, adapter: process, executable: not-executable, capabilities: [independent_reasoning]}}\n\
         - {{id: c, title: C, transport: process, adapter: process, executable: {}, capabilities: [independent_reasoning]}}\n\
         - {{id: d, title: D, transport: process, adapter: process, executable: missing, capabilities: [independent_reasoning]}}\n\
         - {{id: e, title: E, transport: http, adapter: x, credential: SET_KEY, capabilities: [independent_reasoning]}}\n\
         - {{id: f, title: F, transport: http, adapter: x, credential: EMPTY_KEY, capabilities: [independent_reasoning]}}\n\
         - {{id: g, title: G, transport: http, adapter: x, credential: UNSET_KEY, capabilities: [independent_reasoning]}}\n",
        absolute.display()
    );
    let catalogue = Catalogue::parse(&yaml, "test.yaml", &validate_settings(&test_registry()))
        .expect("catalogue");
    let mut ctx = context(dir.path());
    ctx.path = Some(bin.display().to_string());
    ctx.credentials.insert("SET_KEY".into(), "v".into());
    ctx.credentials.insert("EMPTY_KEY".into(), String::new());
    let presence = probe_presence(&catalogue, &ctx, dir.path());
    let names = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&presence.executables),
        vec![absolute.display().to_string(), "on-path".to_string()]
    );
    assert_eq!(names(&presence.credentials), vec!["SET_KEY".to_string()]);
    ctx.path = None;
    let presence = probe_presence(&catalogue, &ctx, dir.path());
    assert_eq!(
        names(&presence.executables),
        vec![absolute.display().to_string()]
    );
}

#[test]
fn credentials_are_collected_for_the_catalogue_in_force_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("c.yaml");
    std::fs::write(
        &file,
        "advisors:\n- {id: e, title: E, transport: process, adapter: process, \
         executable: e, credential: MY_KEY, pass_env: [PASSED, UNSET], \
         capabilities: [independent_reasoning]}\n",
    )
    .expect("write");
    let mut ctx = context(dir.path());
    ctx.catalogue_path = Some(file);
    let env = env_of(&[
        ("MY_KEY", "secret"),
        ("PASSED", "p"),
        ("OTHER_KEY", "other"),
    ]);
    let credentials = credentials_for(&ctx, &env);
    assert_eq!(
        credentials.into_iter().collect::<Vec<_>>(),
        vec![
            ("MY_KEY".to_string(), "secret".to_string()),
            ("PASSED".to_string(), "p".to_string())
        ]
    );
    ctx.catalogue_path = Some(dir.path().join("missing.yaml"));
    assert!(credentials_for(&ctx, &env).is_empty());
}

#[test]
fn a_catalogue_read_lately_is_reused_for_the_same_texts_and_adapters_only() {
    let entry = |id: &str| {
        format!(
            "advisors:\n- {{id: {id}, title: T, transport: http, adapter: x, \
             credential: K, capabilities: [independent_reasoning]}}\n"
        )
    };
    let files = |text: &str| vec![("c.yaml".to_string(), text.to_string())];
    let registry = test_registry();
    let first = layer_files(files(&entry("memo-a")), Judge::Registry(&registry)).expect("reads");
    let again = layer_files(files(&entry("memo-a")), Judge::Registry(&registry)).expect("reads");
    assert!(
        Arc::ptr_eq(&first, &again),
        "the same texts are not parsed again"
    );
    // A clone holds the same adapters, so it judges alike.
    let clone = registry.clone();
    let cloned = layer_files(files(&entry("memo-a")), Judge::Registry(&clone)).expect("reads");
    assert!(Arc::ptr_eq(&first, &cloned));
    // One byte more is another catalogue.
    let edited = layer_files(files(&entry("memo-b")), Judge::Registry(&registry)).expect("reads");
    assert!(!Arc::ptr_eq(&first, &edited));
    assert!(edited.layered.catalogue.get("memo-b").is_some());
    assert!(edited.layered.catalogue.get("memo-a").is_none());
    // Adapters that refuse the entry are asked, not answered from what others accepted.
    let without_x = Registry::builtin();
    let refused = layer_files(files(&entry("memo-a")), Judge::Registry(&without_x))
        .err()
        .expect("`x` is unknown to the builtin adapters");
    assert!(
        refused.to_string().contains("unknown adapter `x`"),
        "{refused}"
    );
    // So are adapters changed since: an insert makes another registry.
    let mut changed = registry.clone();
    changed.insert(
        "x",
        std::sync::Arc::new(advisord_fakes::scripted::ScriptedAdapter::new(vec![])),
    );
    let rejudged = layer_files(files(&entry("memo-a")), Judge::Registry(&changed)).expect("reads");
    assert!(!Arc::ptr_eq(&first, &rejudged));
}

#[test]
fn an_unreadable_catalogue_is_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ctx = context(dir.path());
    ctx.catalogue_path = Some(dir.path().join("missing.yaml"));
    let err = load_catalogue(&ctx, Judge::NamesOnly).expect_err("missing file");
    let message = err.to_string();
    assert!(message.contains("missing.yaml"), "{message}");
    assert_eq!(err.exit_code(), 2);
}

#[test]
fn a_symlink_below_the_root_on_the_way_to_the_task_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("root");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(root.join(".ai/local/state")).expect("mkdir");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let resolve = |task: &str| {
        let mut ctx = context(&root);
        ctx.task = Some(task.into());
        Resolved::resolve(&ctx, &test_registry())
    };
    assert!(resolve("t").is_ok(), "no link: fine");
    // The state directory itself is a link.
    std::os::unix::fs::symlink(&elsewhere, root.join(paths::DEFAULT_STATE_DIR)).expect("link");
    let err = resolve("t").expect_err("a linked state directory");
    assert!(err.to_string().contains("is a symbolic link"), "{err}");
    assert!(err.to_string().contains("reasoning"), "{err}");
    assert_eq!(err.exit_code(), 2);
    // A task's directory is a link.
    std::fs::remove_file(root.join(paths::DEFAULT_STATE_DIR)).expect("unlink");
    std::fs::create_dir(root.join(paths::DEFAULT_STATE_DIR)).expect("mkdir");
    std::os::unix::fs::symlink(&elsewhere, root.join(paths::DEFAULT_STATE_DIR).join("t"))
        .expect("link");
    assert!(resolve("t").is_err(), "a linked task directory");
    assert!(resolve("other").is_ok());
    assert_eq!(std::fs::read_dir(&elsewhere).expect("read").count(), 0);
}

#[test]
fn the_root_must_be_an_absolute_existing_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    assert!(check_root(dir.path()).is_ok());
    assert!(check_root(Path::new("relative")).is_err());
    assert!(check_root(&dir.path().join("missing")).is_err());
    let file = dir.path().join("f");
    std::fs::write(&file, "").expect("write");
    assert!(check_root(&file).is_err());
}
