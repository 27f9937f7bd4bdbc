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

#[test]
fn prices_and_budgets_refused_name_advisor_and_field() {
    let p = |rest: &str| good_with(&format!("price: {{{rest}}}"));
    let full = "currency: USD, input_per_million: 3, output_per_million: 15";
    let at = "advisor `alpha`, field `price.as_of`: ";
    let cases: Vec<(&str, String, &str, &[&str])> = vec![
        ("no date", p(full), at, &["is missing", "YYYY-MM-DD"]),
        (
            "not a day",
            p(&format!("{full}, as_of: 2026-13-40")),
            at,
            &["not a day"],
        ),
        (
            "negative input",
            p("currency: USD, input_per_million: -1, output_per_million: 15, as_of: 2026-12-01"),
            "advisor `alpha`, field `price.input_per_million`: ",
            &["negative"],
        ),
        (
            "a unit in the amount",
            p("currency: USD, input_per_million: 3, output_per_million: '15 USD', as_of: 2026-12-01"),
            "advisor `alpha`, field `price.output_per_million`: ",
            &["not a plain number", "no unit"],
        ),
        (
            "a currency sign",
            p("currency: USD, input_per_million: $3, output_per_million: 15, as_of: 2026-12-01"),
            "advisor `alpha`, field `price.input_per_million`: ",
            &["not a plain number"],
        ),
        (
            "a per-thousand unit",
            p("currency: USD, input_per_1k: 3, output_per_million: 15, as_of: 2026-12-01"),
            "advisor `alpha`, field `price`: ",
            &["unknown key `input_per_1k`", "per million tokens"],
        ),
        (
            "no currency",
            p("input_per_million: 3, output_per_million: 15, as_of: 2026-12-01"),
            "advisor `alpha`, field `price.currency`: ",
            &["is missing"],
        ),
        (
            "a currency name, not a code",
            p("currency: dollars, input_per_million: 3, output_per_million: 15, as_of: 2026-12-01"),
            "advisor `alpha`, field `price.currency`: ",
            &["not a currency code"],
        ),
        (
            "a price that is a number",
            good_with("price: 3"),
            "advisor `alpha`, field `price`: ",
            &["`flat_rate` or a mapping"],
        ),
        (
            "a negative budget",
            good_with("budget: {per_day: -5}"),
            "advisor `alpha`, field `budget.per_day`: ",
            &["negative"],
        ),
        (
            "a budget with a unit",
            good_with("budget: {per_task: 5 EUR}"),
            "advisor `alpha`, field `budget.per_task`: ",
            &["not a plain number"],
        ),
        (
            "a budget per month",
            good_with("budget: {per_month: 5}"),
            "advisor `alpha`, field `budget`: ",
            &["unknown key `per_month`", "`per_day`, `per_task`"],
        ),
        (
            "a total budget that is negative",
            format!("budget: {{per_day: -1}}\nadvisors:{GOOD}"),
            "field `budget.per_day`: ",
            &["negative"],
        ),
        (
            "two currencies",
            format!(
                "advisors:{GOOD}    price: {{currency: USD, input_per_million: 1, output_per_million: 2, as_of: 2026-12-01}}\n{}",
                entry(&[
                    "id: beta",
                    "title: Beta",
                    "transport: http",
                    "adapter: some-http",
                    "capabilities: [independent_reasoning]",
                    "price: {currency: EUR, input_per_million: 1, output_per_million: 2, as_of: 2026-12-01}",
                ])
            ),
            "advisor `beta`, field `price.currency`: ",
            &["`EUR` differs from `USD` used by advisor `alpha`", "one currency"],
        ),
    ];
    for (case, text, location, fragments) in &cases {
        check(case, text, location, fragments);
    }
}

#[test]
fn prices_and_budgets_are_read() {
    let text = format!(
        "budget: {{per_day: 10, per_task: 2.5}}\nadvisors:{GOOD}    price: {{currency: EUR, input_per_million: 0.5, output_per_million: 2, as_of: 2026-11-30}}\n    budget: {{per_day: 1}}\n{}",
        entry(&[
            "id: beta",
            "title: Beta",
            "transport: process",
            "adapter: process",
            "executable: beta-bin",
            "capabilities: [independent_reasoning]",
            "price: flat_rate",
        ])
    );
    let catalogue = parse(&text).expect("valid");
    assert_eq!(catalogue.currency(), Some("EUR"));
    assert_eq!(catalogue.budget.per_day, Some(10.0));
    assert_eq!(catalogue.budget.per_task, Some(2.5));
    let alpha = catalogue.get("alpha").expect("alpha");
    assert_eq!(
        alpha.price,
        Some(Pricing::Metered(Price {
            currency: "EUR".into(),
            input_per_million: 0.5,
            output_per_million: 2.0,
            as_of: "2026-11-30".into(),
        }))
    );
    assert!(
        alpha.settings.get("price").is_none(),
        "price is not a setting"
    );
    assert_eq!(
        catalogue.get("beta").expect("beta").price,
        Some(Pricing::FlatRate)
    );
    let budgets = catalogue.budgets();
    assert_eq!(budgets.of("alpha").per_day, Some(1.0));
    assert!(budgets.of("beta").is_empty());
    // The embedded catalogue prices its HTTP entries, dated, and the local model at zero.
    let embedded = Catalogue::embedded();
    for advisor in embedded
        .advisors
        .iter()
        .filter(|a| a.transport == Transport::Http)
    {
        match &advisor.price {
            Some(Pricing::Metered(p)) => assert!(!p.as_of.is_empty(), "{}", advisor.id),
            other => panic!("`{}` has no list price: {other:?}", advisor.id),
        }
    }
    assert!(embedded
        .advisors
        .iter()
        .filter(|a| a.local)
        .all(|a| a.price.as_ref().is_some_and(Pricing::is_free_at_margin)));
}

#[test]
fn project_budgets_are_read_and_refused_by_name() {
    let budgets = project_budgets(
        "project: {advisors-are-optional: true}\nbudget:\n  per_day: 4\n  advisors:\n    alpha: {per_task: 0.5}\n",
        "project.yaml",
    )
    .expect("valid");
    assert_eq!(budgets.total.per_day, Some(4.0));
    assert_eq!(budgets.of("alpha").per_task, Some(0.5));
    assert_eq!(
        project_budgets("project: {}\n", "project.yaml").expect("none"),
        Budgets::default()
    );
    let error = project_budgets(
        "budget:\n  advisors:\n    alpha: {per_day: ten}\n",
        "project.yaml",
    )
    .expect_err("a word");
    assert_eq!(error.location, "advisor `alpha`, field `budget.per_day`: ");
    // Layering: a later source replaces only the limits it sets.
    let catalogue = Budgets {
        total: Limits {
            per_day: Some(10.0),
            per_task: Some(3.0),
        },
        ..Budgets::default()
    };
    let layered = catalogue.overridden_by(&budgets);
    assert_eq!(layered.total.per_day, Some(4.0));
    assert_eq!(layered.total.per_task, Some(3.0));
}

#[test]
fn a_project_file_can_lower_a_budget_but_never_raise_it() {
    let user = Budgets {
        total: Limits {
            per_day: Some(5.0),
            per_task: None,
        },
        advisors: [(
            "alpha".to_string(),
            Limits {
                per_day: Some(1.0),
                per_task: Some(0.5),
            },
        )]
        .into(),
    };
    let project = project_budgets(
        "budget:\n  per_day: 1000\n  per_task: 2\n  advisors:\n    alpha: {per_day: 0.25, per_task: 9}\n    beta: {per_day: 3}\n",
        "project.yaml",
    )
    .expect("valid");
    let held = user.tightened_by(&project);
    // The repository asked for 1000 a day: the user's 5 holds.
    assert_eq!(held.total.per_day, Some(5.0));
    // A limit the user left open is added.
    assert_eq!(held.total.per_task, Some(2.0));
    // Per advisor: the lower of the two, in each window.
    assert_eq!(held.of("alpha").per_day, Some(0.25));
    assert_eq!(held.of("alpha").per_task, Some(0.5));
    assert_eq!(held.of("beta").per_day, Some(3.0));
}
