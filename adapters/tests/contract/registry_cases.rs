//! The registry against the shipped catalogue: every entry of `share/advisors.yaml` names a
//! registered adapter whose settings it satisfies, and a broken entry is refused naming the
//! field.

use advisord_adapters::contract::AdvisorSpec;
use advisord_adapters::registry::Registry;
use serde_json::{Map, Value};

fn shipped() -> Vec<Map<String, Value>> {
    let text = include_str!("../../../share/advisors.yaml");
    let file: Map<String, Value> = serde_yaml_ng::from_str(text).expect("the catalogue parses");
    let advisors = file
        .get("advisors")
        .and_then(Value::as_array)
        .expect("an `advisors` list");
    advisors
        .iter()
        .map(|a| a.as_object().expect("an advisor mapping").clone())
        .collect()
}

fn spec(entry: &Map<String, Value>) -> AdvisorSpec {
    AdvisorSpec::from_mapping(entry)
}

#[test]
fn every_shipped_advisor_is_accepted() {
    let registry = Registry::builtin();
    let advisors = shipped();
    assert!(!advisors.is_empty());
    for entry in &advisors {
        let advisor = spec(entry);
        assert_eq!(
            registry.validate(&advisor),
            Ok(()),
            "advisor `{}`",
            advisor.id
        );
    }
}

#[test]
fn a_broken_entry_is_refused_naming_the_field() {
    let registry = Registry::builtin();
    let mut by_adapter = std::collections::BTreeMap::new();
    for entry in shipped() {
        let advisor = spec(&entry);
        by_adapter.entry(advisor.adapter.clone()).or_insert(advisor);
    }
    for (adapter, advisor) in &by_adapter {
        let mut unknown = advisor.clone();
        unknown.adapter = format!("{adapter}-nope");
        let (field, message) = registry.validate(&unknown).unwrap_err();
        assert_eq!(field, "adapter");
        assert!(
            message.contains(&format!("`{adapter}`")),
            "accepted names listed: {message}"
        );

        let mut stray = advisor.clone();
        stray
            .settings
            .insert("no_such_setting".into(), Value::from(1));
        let refused = registry.validate(&stray);
        assert!(refused.is_err(), "`{adapter}` accepted an unknown setting");
    }
}
