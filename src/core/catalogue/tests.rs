//! Refused catalogues name the place and say what is wrong; the embedded one parses.

use super::*;

/// A valid advisor entry, indented to sit under `advisors:`.
const GOOD: &str = "
  - id: alpha
    title: Alpha
    transport: process
    adapter: process
    executable: alpha-bin
    capabilities: [independent_reasoning, code_review]
";

fn parse(text: &str) -> Result<Catalogue, CatalogueError> {
    Catalogue::parse(text, "test.yaml", &accept_any_settings)
}

/// One refused catalogue: the error must name the place and say what is wrong.
fn check(case: &str, text: &str, location: &str, fragments: &[&str]) {
    let error = match parse(text) {
        Ok(c) => panic!("{case}: accepted {c:?}"),
        Err(e) => e,
    };
    assert_eq!(error.source_name, "test.yaml", "{case}");
    assert_eq!(error.location, location, "{case}: {error}");
    let line = error.to_string();
    assert!(line.starts_with("test.yaml: "), "{case}: {line}");
    assert!(!line.contains('\n'), "{case}: not one line: {line}");
    assert!(
        !line.contains("sk-123"),
        "{case}: echoes a would-be secret: {line}"
    );
    for fragment in fragments {
        assert!(
            line.contains(fragment),
            "{case}: `{fragment}` not in: {line}"
        );
    }
}

/// `GOOD` with `line` appended to its mapping.
fn good_with(line: &str) -> String {
    format!("advisors:{GOOD}    {line}\n")
}

/// A second entry under `advisors:` built from `fields` (indented by the helper).
fn entry(fields: &[&str]) -> String {
    let mut out = String::from("\n  - ");
    out.push_str(&fields.join("\n    "));
    out.push('\n');
    out
}

#[test]
fn refusals_name_file_advisor_and_field() {
    let minimal = |extra: &[&str]| {
        let mut fields = vec![
            "id: beta",
            "title: Beta",
            "transport: http",
            "adapter: some-http",
            "capabilities: [independent_reasoning]",
        ];
        fields.extend_from_slice(extra);
        entry(&fields)
    };
    let without = |field: &str| {
        let fields: Vec<&str> = [
            "id: beta",
            "title: Beta",
            "transport: http",
            "adapter: some-http",
            "capabilities: [independent_reasoning]",
        ]
        .into_iter()
        .filter(|f| !f.starts_with(field))
        .collect();
        format!("advisors:{GOOD}{}", entry(&fields))
    };
    let cases: Vec<(&str, String, &str, Vec<&str>)> = vec![
        (
            "not a mapping",
            "- a\n- b\n".into(),
            "",
            vec!["a mapping", "a list"],
        ),
        ("empty file", "".into(), "", vec!["`advisors:`"]),
        (
            "no advisors",
            "mode: fast\n".into(),
            "",
            vec!["no `advisors:` list"],
        ),
        (
            "top-level key that is not a name",
            format!("advisors:{GOOD}7: x\n"),
            "",
            vec!["unknown top-level key `7`; accepted: `advisors`, `mode`"],
        ),
        (
            "advisors not a list",
            "advisors: {a: 1}\n".into(),
            "field `advisors`: ",
            vec!["a list of advisors"],
        ),
        (
            "unknown top-level key",
            format!("advisor:{GOOD}"),
            "",
            vec![
                "unknown top-level key `advisor`",
                "did you mean `advisors`?",
                "`mode`",
            ],
        ),
        (
            "unknown mode",
            format!("mode: turbo\nadvisors:{GOOD}"),
            "field `mode`: ",
            vec![
                "unknown mode `turbo`",
                "`ci`",
                "`fast`",
                "`standard`",
                "`strict`",
            ],
        ),
        (
            "entry not a mapping",
            format!("advisors:{GOOD}  - just-a-name\n"),
            "advisors[1]: ",
            vec!["a mapping with `id`", "a string"],
        ),
        (
            "missing id",
            without("id:"),
            "advisors[1], field `id`: ",
            vec!["missing"],
        ),
        (
            "missing title",
            without("title:"),
            "advisor `beta`, field `title`: ",
            vec!["missing"],
        ),
        (
            "missing transport",
            without("transport:"),
            "advisor `beta`, field `transport`: ",
            vec!["missing", "process, http, mesh"],
        ),
        (
            "missing adapter",
            without("adapter:"),
            "advisor `beta`, field `adapter`: ",
            vec!["missing"],
        ),
        (
            "missing capabilities",
            without("capabilities:"),
            "advisor `beta`, field `capabilities`: ",
            vec!["missing", "`independent_reasoning`"],
        ),
        (
            "duplicate id",
            format!("advisors:{GOOD}{GOOD}"),
            "advisors[1], field `id`: ",
            vec!["`alpha` is declared twice"],
        ),
        (
            "id with capitals",
            format!("advisors:{}", entry(&["id: Beta", "title: B"])),
            "advisors[0], field `id`: ",
            vec!["`Beta` is not an accepted id", "lowercase"],
        ),
        (
            "id starting with a dash",
            format!("advisors:{}", entry(&["id: -beta"])),
            "advisors[0], field `id`: ",
            vec!["`-beta`"],
        ),
        (
            "id not a string",
            format!("advisors:{}", entry(&["id: [a]"])),
            "advisors[0], field `id`: ",
            vec!["a list"],
        ),
        (
            "unknown transport",
            format!(
                "advisors:{}",
                minimal(&[]).replace("transport: http", "transport: htp")
            ),
            "advisor `beta`, field `transport`: ",
            vec![
                "unknown transport `htp`",
                "did you mean `http`?",
                "`process`, `http`, `mesh`",
            ],
        ),
        (
            "unknown capability",
            format!(
                "advisors:{}",
                minimal(&[]).replace("[independent_reasoning]", "[code_reveiw]")
            ),
            "advisor `beta`, field `capabilities`: ",
            vec![
                "unknown capability `code_reveiw`",
                "did you mean `code_review`?",
                "`security_review`",
            ],
        ),
        (
            "capability far from any",
            format!(
                "advisors:{}",
                minimal(&[]).replace("[independent_reasoning]", "[poetry]")
            ),
            "advisor `beta`, field `capabilities`: ",
            vec!["unknown capability `poetry`; accepted:"],
        ),
        (
            "capability listed twice",
            format!(
                "advisors:{}",
                minimal(&[]).replace("[independent_reasoning]", "[debugging, debugging]")
            ),
            "advisor `beta`, field `capabilities`: ",
            vec!["`debugging` is listed twice"],
        ),
        (
            "empty capabilities",
            format!(
                "advisors:{}",
                minimal(&[]).replace("[independent_reasoning]", "[]")
            ),
            "advisor `beta`, field `capabilities`: ",
            vec!["is empty"],
        ),
        (
            "max_concurrent zero",
            good_with("max_concurrent: 0"),
            "advisor `alpha`, field `max_concurrent`: ",
            vec!["`0` is not accepted", "at least 1"],
        ),
        (
            "max_concurrent not a number",
            good_with("max_concurrent: many"),
            "advisor `alpha`, field `max_concurrent`: ",
            vec!["`many`"],
        ),
        (
            "local not a boolean",
            good_with("local: sometimes"),
            "advisor `alpha`, field `local`: ",
            vec!["`true` or `false`"],
        ),
        (
            "references not a mapping",
            good_with("references: somebody"),
            "advisor `alpha`, field `references`: ",
            vec!["must be a mapping {provider, vendor, model}"],
        ),
        (
            "references with an unknown key",
            good_with("references: { provder: x }"),
            "advisor `alpha`, field `references`: ",
            vec!["unknown key `provder`", "did you mean `provider`?"],
        ),
        (
            "process without executable",
            format!(
                "advisors:{}",
                GOOD.replace("    executable: alpha-bin\n", "")
            ),
            "advisor `alpha`, field `executable`: ",
            vec!["is missing", "`process` advisor"],
        ),
        (
            "credential that is a value, not a name",
            good_with("credential: sk-123"),
            "advisor `alpha`, field `credential`: ",
            vec!["is not an environment variable name"],
        ),
        (
            "yaml syntax error",
            "advisors:\n  - id: a\n    title: [unclosed\n  - id: b\n".into(),
            "",
            vec!["is not valid YAML", "line "],
        ),
        (
            "yaml duplicate key",
            format!("advisors:{GOOD}    title: Again\n"),
            "",
            vec!["is not valid YAML", "duplicate"],
        ),
    ];
    for (case, text, location, fragments) in &cases {
        check(case, text, location, fragments);
    }
}

#[test]
fn the_settings_validator_judges_adapter_keys() {
    let validator = |entry: &AdvisorEntry| match entry.settings.keys().find(|k| *k != "args") {
        Some(key) => Err((
            key.clone(),
            format!("unknown key `{key}`; accepted: `args`"),
        )),
        None => Ok(()),
    };
    let text = good_with("args: [-p]");
    let catalogue = Catalogue::parse(&text, "test.yaml", &validator).unwrap();
    assert_eq!(
        catalogue.advisors[0].settings["args"],
        serde_json::json!(["-p"])
    );
    let error =
        Catalogue::parse(&good_with("capabilites: [x]"), "test.yaml", &validator).unwrap_err();
    assert_eq!(
        error.to_string(),
        "test.yaml: advisor `alpha`, field `capabilites`: unknown key `capabilites`; \
             accepted: `args`"
    );
}

#[test]
fn a_valid_catalogue_keeps_order_defaults_and_settings() {
    let text = format!(
        "mode: strict\nadvisors:{GOOD}{}",
        entry(&[
            "id: beta.2",
            "title: Beta",
            "transport: http",
            "adapter: some-http",
            "references: { provider: p, vendor: v, model: m }",
            "credential: BETA_TOKEN",
            "capabilities: [architecture]",
            "local: true",
            "max_concurrent: 1",
            "endpoint: http://127.0.0.1:1",
            "retries: 3",
            "extra: { nested: [1, 2.5, true, null] }",
        ])
    );
    let catalogue = parse(&text).unwrap();
    assert_eq!(catalogue.mode, Some(Mode::Strict));
    let ids: Vec<&str> = catalogue.advisors.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["alpha", "beta.2"]);
    let alpha = &catalogue.advisors[0];
    assert_eq!(alpha.max_concurrent, 2);
    assert!(!alpha.local);
    assert!(alpha.settings.is_empty());
    let beta = catalogue.get("beta.2").unwrap();
    assert_eq!(beta.transport, Transport::Http);
    assert_eq!(beta.references.vendor.as_deref(), Some("v"));
    assert_eq!(beta.max_concurrent, 1);
    assert!(beta.local);
    assert_eq!(
        serde_json::Value::Object(beta.settings.clone()),
        serde_json::json!({
            "endpoint": "http://127.0.0.1:1",
            "retries": 3,
            "extra": {"nested": [1, 2.5, true, null]}
        })
    );
    assert_eq!(
        catalogue.credential_vars().into_iter().collect::<Vec<_>>(),
        ["BETA_TOKEN"]
    );
    assert_eq!(
        catalogue.executables().into_iter().collect::<Vec<_>>(),
        ["alpha-bin"]
    );
    assert_eq!(parse("advisors: []\n").unwrap().advisors.len(), 0);
}

#[test]
fn the_embedded_catalogue_parses() {
    let catalogue = Catalogue::parse(EMBEDDED, EMBEDDED_SOURCE, &accept_any_settings)
        .expect("embedded catalogue");
    assert_eq!(catalogue, Catalogue::embedded());
    assert!(catalogue.advisors.len() >= 3);
    assert!(
        catalogue.advisors.iter().any(|a| a.local),
        "a local advisor"
    );
    assert!(!catalogue.credential_vars().is_empty());
    assert!(!catalogue.executables().is_empty());
    for transport in [Transport::Process, Transport::Http] {
        assert!(catalogue.advisors.iter().any(|a| a.transport == transport));
    }
}

#[test]
fn suggestions_are_near_misses_only() {
    let cases = [
        ("kitten", "sitting", 3),
        ("", "abc", 3),
        ("abc", "abc", 0),
        ("code_reveiw", "code_review", 2),
    ];
    for (a, b, distance) in cases {
        assert_eq!(edit_distance(a, b), distance, "{a} → {b}");
    }
    assert_eq!(did_you_mean("debuging", CAPABILITIES), Some("debugging"));
    assert_eq!(did_you_mean("zzz", CAPABILITIES), None);
}

#[test]
fn a_file_that_is_not_a_catalogue_is_never_quoted() {
    for text in [
        "password=hunter2-secret-value: x\n",
        "MY_SERVICE_KEY: sk-not-a-catalogue-0123456789\n",
        "[default]\n",
    ] {
        let message = parse(text).expect_err(text).to_string();
        assert!(!message.contains("hunter2"), "{message}");
        assert!(!message.contains("sk-not"), "{message}");
        assert!(!message.contains("MY_SERVICE"), "{message}");
    }
    let message = parse("password=hunter2-secret-value: x\n")
        .expect_err("not a catalogue")
        .to_string();
    assert!(message.contains("not an advisor catalogue"), "{message}");
}
