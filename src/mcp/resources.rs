//! The read-only resources, all under the `advisord://` scheme: the advisors, a task's
//! status, a record (with its provenance chain) and a job (with its outcomes).

use rmcp::model::{Resource as McpResource, ResourceTemplate};

/// The scheme of every resource.
pub const SCHEME: &str = "advisord://";

/// A resource a URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    /// `advisord://advisors`.
    Advisors,
    /// `advisord://status` (the server's task) or `advisord://status/{task}`.
    Status(Option<String>),
    /// `advisord://record/{id}`, in the server's task.
    Record(String),
    /// `advisord://job/{id}`.
    Job(String),
}

/// The fixed resources.
pub fn list() -> Vec<McpResource> {
    vec![
        McpResource::new("advisord://advisors", "advisors")
            .with_description("Every advisor, its status and why")
            .with_mime_type("application/json"),
        McpResource::new("advisord://status", "status")
            .with_description("The server's task: each assessment and where it stands")
            .with_mime_type("application/json"),
    ]
}

/// The templates.
pub fn templates() -> Vec<ResourceTemplate> {
    let template = |uri: &str, name: &str, description: &str| {
        let mut t = ResourceTemplate::new(uri, name);
        t.description = Some(description.to_string());
        t.mime_type = Some("application/json".to_string());
        t
    };
    vec![
        template(
            "advisord://status/{task}",
            "task status",
            "A task's assessments and where each stands",
        ),
        template(
            "advisord://record/{id}",
            "record",
            "A record of the server's task with its provenance chain",
        ),
        template(
            "advisord://job/{id}",
            "job",
            "A consultation job with every outcome so far",
        ),
    ]
}

/// The resource `uri` names, or why it names none.
pub fn parse(uri: &str) -> Result<Resource, String> {
    let unknown = || {
        format!(
            "no resource `{uri}`; accepted: advisord://advisors, advisord://status, \
             advisord://status/{{task}}, advisord://record/{{id}}, advisord://job/{{id}}"
        )
    };
    let rest = uri.strip_prefix(SCHEME).ok_or_else(unknown)?;
    let (kind, arg) = match rest.split_once('/') {
        Some((kind, arg)) => (kind, Some(arg)),
        None => (rest, None),
    };
    let arg = match arg {
        Some(a) if a.is_empty() || a.contains('/') => return Err(unknown()),
        other => other.map(str::to_string),
    };
    match (kind, arg) {
        ("advisors", None) => Ok(Resource::Advisors),
        ("status", task) => Ok(Resource::Status(task)),
        ("record", Some(id)) => Ok(Resource::Record(id)),
        ("job", Some(id)) => Ok(Resource::Job(id)),
        _ => Err(unknown()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_one_resource_or_none() {
        assert_eq!(parse("advisord://advisors"), Ok(Resource::Advisors));
        assert_eq!(parse("advisord://status"), Ok(Resource::Status(None)));
        assert_eq!(
            parse("advisord://status/feature-x"),
            Ok(Resource::Status(Some("feature-x".into())))
        );
        assert_eq!(
            parse("advisord://record/01J"),
            Ok(Resource::Record("01J".into()))
        );
        assert_eq!(parse("advisord://job/01J"), Ok(Resource::Job("01J".into())));
        for bad in [
            "advisord://record",
            "advisord://record/",
            "advisord://job/a/b",
            "advisord://nothing",
            "file:///etc/passwd",
            "advisord://advisors/x",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(
                err.contains("accepted: advisord://advisors"),
                "{bad}: {err}"
            );
        }
    }
}
