//! The one exit path: every error of a verb becomes an exit status and a message here,
//! and nowhere else.
//!
//! - A refusal (exit 3) is the verb's answer: printed on standard output, as
//!   `{"refused": true, "reason", "message"}` in `json` and `yaml`, else as one sentence.
//! - Any other error is printed on standard error as `error: ...` with its cause chain;
//!   with `--format json|yaml` its `{"error": CODE, "code": CODE, "message"}` also goes to
//!   standard output, so a program reading the typed shape always gets one object with a
//!   `code`: a usage error clap found (exit 2), no daemon (exit 4) and Ctrl-C (exit 130)
//!   included. Every code is one of `crate::protocol::codes`. A refusal keeps its fixed
//!   shape: its `reason` is its code.

use super::output::print_stdout;
use crate::error::Error;
use crate::protocol::codes;
use crate::render::Format;

/// Print `err` as the user should see it and return the exit status.
pub fn report(err: &anyhow::Error, format: Format) -> i32 {
    let service = service_error(err);
    if let Some((reason, message)) = service.and_then(Error::refusal) {
        let _ = print_stdout(&refusal_text(reason, message, format));
        return 3;
    }
    let text = chain_text(err);
    eprintln!("error: {text}");
    if matches!(format, Format::Json | Format::Yaml) {
        // An error no verb typed (standard output closed, no runtime) is still one object.
        let (code, message) = match service {
            Some(service) => (service.code().to_string(), service.message()),
            None => (codes::INTERNAL.to_string(), text),
        };
        let _ = print_stdout(&error_text(&code, &message, format));
    }
    exit_code(err)
}

/// How an error that is not a refusal is printed on standard output in `json` and `yaml`:
/// `{"error": CODE, "code": CODE, "message"}` (`error` is kept for the programs that read
/// it before `code` existed).
pub fn error_text(code: &str, message: &str, format: Format) -> String {
    structured(
        &serde_json::json!({"error": code, "code": code, "message": message}),
        format,
    )
}

/// A usage error clap found, as `report` prints other errors: `args` are the raw
/// arguments, read for `--format` since parsing failed. Help and `--version` are not
/// errors and are printed as clap prints them. Returns the exit status.
pub fn report_parse_error(err: &clap::Error, args: &[std::ffi::OsString]) -> i32 {
    let _ = err.print();
    let code = err.exit_code();
    if code == 0 {
        return 0;
    }
    if let Some(format) = format_in(args).filter(|f| matches!(f, Format::Json | Format::Yaml)) {
        let rendered = err.render().to_string();
        let first = rendered.lines().next().unwrap_or_default();
        let message = first.strip_prefix("error: ").unwrap_or(first);
        let message = format!("{message}; `advisor-consult --help` lists the verbs and flags");
        let _ = print_stdout(&error_text(codes::USAGE, &message, format));
    }
    code
}

/// The `--format` the raw arguments ask for, if any reads as one (the last one wins, as
/// with clap).
fn format_in(args: &[std::ffi::OsString]) -> Option<Format> {
    use clap::ValueEnum as _;
    let args: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    let mut found = None;
    for (i, arg) in args.iter().enumerate() {
        let value = match arg.strip_prefix("--format") {
            Some("") => args.get(i + 1).copied(),
            Some(rest) => rest.strip_prefix('='),
            None => None,
        };
        if let Some(format) = value.and_then(|v| Format::from_str(v, false).ok()) {
            found = Some(format);
        }
    }
    found
}

/// `err` and its causes joined by `: `, leaving out a cause whose text the message
/// already holds (many errors print their source in their own message).
pub fn chain_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let line = cause.to_string();
        if text.contains(&line) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&line);
    }
    text
}

/// The exit status for `err`: the first typed error in its chain decides; 1 otherwise.
pub fn exit_code(err: &anyhow::Error) -> i32 {
    service_error(err).map_or(1, Error::exit_code)
}

/// The first verb error in `err`'s chain.
fn service_error(err: &anyhow::Error) -> Option<&Error> {
    err.chain().find_map(|cause| cause.downcast_ref::<Error>())
}

/// How a refusal is printed in `format`.
pub fn refusal_text(reason: &str, message: &str, format: Format) -> String {
    match format {
        Format::Json | Format::Yaml => structured(
            &serde_json::json!({"refused": true, "reason": reason, "message": message}),
            format,
        ),
        Format::Plain | Format::Table => format!("refused ({reason}): {message}"),
    }
}

fn structured(value: &serde_json::Value, format: Format) -> String {
    match format {
        Format::Yaml => serde_yaml_ng::to_string(value).unwrap_or_else(|_| value.to_string()),
        _ => serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_found_in_arguments_that_did_not_parse() {
        let args = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert_eq!(
            format_in(&args(&["x", "--format", "json", "--bogus"])),
            Some(Format::Json)
        );
        assert_eq!(
            format_in(&args(&["x", "--bogus", "--format=yaml"])),
            Some(Format::Yaml)
        );
        assert_eq!(format_in(&args(&["x", "--format", "nope"])), None);
        assert_eq!(format_in(&args(&["x", "status"])), None);
    }
    use crate::core::writer::{ReasonCode, Refusal};

    fn check(err: anyhow::Error, expected_exit: i32) {
        assert_eq!(exit_code(&err), expected_exit, "{err:#}");
    }

    #[test]
    fn exit_codes_follow_the_spec() {
        let refused = || {
            Error::Refused(Refusal {
                reason: ReasonCode::InvalidField,
                message: "m".into(),
            })
        };
        check(refused().into(), 3);
        check(Error::Usage("u".into()).into(), 2);
        check(Error::NotFound("n".into()).into(), 2);
        check(
            Error::Unreachable {
                socket: "/s".into(),
                reason: "r".into(),
                hint: "h".into(),
            }
            .into(),
            4,
        );
        check(Error::Protocol("p".into()).into(), 1);
        check(anyhow::anyhow!("anything else"), 1);
        check(
            anyhow::Error::from(Error::Usage("u".into())).context("while doing x"),
            2,
        );
        let remote = |status| Error::Remote {
            code: "c".into(),
            message: "m".into(),
            status,
        };
        check(remote(422).into(), 3);
        check(remote(404).into(), 2);
        check(remote(500).into(), 1);
    }

    #[test]
    fn the_cause_chain_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied");
        let err = anyhow::Error::from(Error::Store(crate::store::StoreError::Io {
            context: "cannot write `/s/t`".into(),
            source: io,
        }))
        .context("recording the assessment");
        assert_eq!(
            chain_text(&err),
            "recording the assessment: cannot write `/s/t`: permission denied"
        );
    }

    #[test]
    fn refusals_print_in_every_format() {
        let json: serde_json::Value =
            serde_json::from_str(&refusal_text("invalid_task", "bad task", Format::Json)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"refused": true, "reason": "invalid_task", "message": "bad task"})
        );
        let yaml: serde_json::Value =
            serde_yaml_ng::from_str(&refusal_text("invalid_task", "bad task", Format::Yaml))
                .unwrap();
        assert_eq!(yaml, json);
        assert_eq!(
            refusal_text("invalid_task", "bad task", Format::Plain),
            "refused (invalid_task): bad task"
        );
    }
}
