//! `advisor-consult init`: adopt advisord in a repository in one command.
//!
//! Each change is computed from the file as it is, merged into it, and never replaces
//! what a user wrote: a JSON file keeps every key it has and gains advisord's (an
//! `advisord` server entry already there is kept as it is); a text file gains lines or a
//! section between `advisord` markers (a section already there is kept as it is). Run
//! twice, the second run changes nothing. `--dry-run` shows every change as a diff and
//! writes nothing.
//!
//! What it writes: `.ai/local/` in `.gitignore`; `.advisord/project.yaml` declaring
//! `project.advisors-are-optional`; the practice in `AGENTS.md` (imported from `CLAUDE.md`
//! and `GEMINI.md` where the repository has them); each host's MCP registration with the
//! approvals for exactly advisord's tools, the host's tool timeout and a wait cap below it
//! (`.mcp.json` and `.claude/settings.json`; `.gemini/settings.json`; `.codex/config.toml`);
//! and a GitHub Actions workflow running `advisor-consult check` and `verify --all`.

use crate::error::Error;
use crate::render::Format;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// `init`'s help for `--hosts` (kept here, with the hosts it names, so the flags stay free
/// of any host's name).
pub const HOSTS_HELP: &str =
    "The hosts to register with, comma-separated: claude, codex, gemini [default: those found on PATH]";

/// `init`'s examples, for its `--help`.
pub const EXAMPLES: &str = "Examples:\n  advisor-consult init --dry-run\n  advisor-consult init \
                            --hosts claude,codex,gemini --format json";

/// The hosts `init` registers advisord with.
pub const HOSTS: [&str; 3] = ["claude", "codex", "gemini"];

/// The tool-call timeout each registration gives the host, in seconds.
pub const HOST_TIMEOUT_S: u64 = 120;

/// The wait cap each registration gives the server, in seconds: below the host's timeout
/// with room for the answer to travel, so the job id always reaches the model.
pub const WAIT_CAP_S: u64 = 50;

/// The tools a host may call without asking: the read-only ones and `consult`, `job`,
/// `cancel` (`record` writes whatever the agent composes, so it stays behind the host's
/// own approval).
pub const APPROVED_TOOLS: [&str; 7] = [
    "advisors", "plan", "status", "explain", "job", "consult", "cancel",
];

/// The variables a host that filters the environment (Codex) must pass to the server, so
/// that it reaches the daemon, data and task the command line would.
pub const PASSED_THROUGH: [&str; 5] = [
    "XDG_RUNTIME_DIR",
    "ADVISORD_SOCKET",
    "ADVISORD_DATA_DIR",
    "ADVISORD_TASK",
    "ADVISORD_CATALOGUE",
];

const BEGIN: &str = "<!-- advisord:begin -->";
const END: &str = "<!-- advisord:end -->";

/// The practice, for the workers of the repository.
const PRACTICE: &str = "## Independent advisors (advisord)

- Before a decision you doubt, record an assessment with its evidence
  (`advisor-consult record`, or the `consult` tool with an inline `record`).
- Let `advisor-consult` ask whichever advisors the plan selects; do not pick them yourself.
- No advisor is needed. An absent or failing advisor is reported state, never a reason to
  stop or to ask a person: continue with what was recorded.
- Settle a disagreement by the experiment its discriminating question describes, never by
  counting advisors; record it as a `resolution` with evidence.
- Record the conclusion, then continue.
- A consultation that outlives the wait cap goes on: collect it with the `job` tool
  (`wait: true`) or `advisor-consult wait JOB`.";

const WORKFLOW: &str = "name: advisord
on:
  push:
  pull_request:
jobs:
  advisord:
    name: advisord records and independence
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: Install advisord
        run: cargo install --git https://github.com/advisord/advisord --locked advisord
      # No advisor key is needed here: advisors are optional, and `check` fails a gate
      # that needs one.
      - name: Provider independence and CI credentials
        run: advisor-consult check
      - name: Every task's record chain
        run: advisor-consult verify --all
";

/// One file `init` creates or changes, or leaves as it is.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// The file, relative to the root (or `~/...` for a file outside it).
    pub path: String,
    /// `create`, `update`, `unchanged` or `kept` (a user's own entry left as it was).
    pub action: &'static str,
    /// The change as a unified-style diff (`-` old line, `+` new line); empty when none.
    pub diff: String,
    /// Why, in a few words.
    pub note: String,
    #[serde(skip)]
    content: Option<String>,
}

/// What `init` did or would do.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The root.
    pub root: PathBuf,
    /// The hosts registered.
    pub hosts: Vec<String>,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// Every file considered.
    pub changes: Vec<Change>,
    /// What the user still does once by hand, per host.
    pub next: Vec<String>,
}

/// The hosts named by `--hosts` (comma-separated), else those found on `PATH`.
pub fn hosts(named: Option<&str>) -> Result<Vec<String>, Error> {
    match named {
        Some(list) => {
            let mut hosts = Vec::new();
            for host in list.split(',').map(str::trim).filter(|h| !h.is_empty()) {
                if !HOSTS.contains(&host) {
                    return Err(Error::Usage(format!(
                        "`--hosts` names `{host}`; accepted: {} (comma-separated)",
                        HOSTS.join(", ")
                    )));
                }
                if !hosts.iter().any(|h| h == host) {
                    hosts.push(host.to_owned());
                }
            }
            Ok(hosts)
        }
        None => Ok(HOSTS
            .iter()
            .filter(|h| on_path(h))
            .map(|h| (*h).to_owned())
            .collect()),
    }
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            let file = dir.join(name);
            std::fs::metadata(&file).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
    })
}

/// `advisor-consult init`: compute every change, write them unless `dry_run`, print them.
pub fn run(root: &Path, named: Option<&str>, dry_run: bool, format: Format) -> anyhow::Result<i32> {
    let hosts = hosts(named)?;
    let report = plan(root, &hosts, dry_run)?;
    if !dry_run {
        for change in &report.changes {
            if let Some(content) = &change.content {
                let path = root.join(&change.path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| {
                        Error::Usage(format!("cannot create `{}`: {e}", parent.display()))
                    })?;
                }
                std::fs::write(&path, content)
                    .map_err(|e| Error::Usage(format!("cannot write `{}`: {e}", path.display())))?;
            }
        }
    }
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Yaml => print!("{}", serde_yaml_ng::to_string(&report)?),
        Format::Plain | Format::Table => print!("{}", plain(&report)),
    }
    Ok(0)
}

fn plain(report: &Report) -> String {
    let mut out = String::new();
    let verb = if report.dry_run { "would " } else { "" };
    out.push_str(&format!(
        "init {} for {}{}\n",
        report.root.display(),
        if report.hosts.is_empty() {
            "no host (none of claude, codex, gemini is on PATH; name them with --hosts)".to_owned()
        } else {
            report.hosts.join(", ")
        },
        if report.dry_run {
            " (dry run: nothing written)"
        } else {
            ""
        }
    ));
    for change in &report.changes {
        let action = match change.action {
            "create" => format!("{verb}create"),
            "update" => format!("{verb}update"),
            other => other.to_owned(),
        };
        out.push_str(&format!("{action:>14}  {}  {}\n", change.path, change.note));
        if report.dry_run && !change.diff.is_empty() {
            out.push_str(&format!(
                "--- {}\n+++ {}\n{}",
                change.path, change.path, change.diff
            ));
        }
    }
    for next in &report.next {
        out.push_str(&format!("next: {next}\n"));
    }
    out
}

/// Every change for `hosts` in the repository at `root`.
pub fn plan(root: &Path, hosts: &[String], dry_run: bool) -> Result<Report, Error> {
    let read = |rel: &str| -> Result<Option<String>, Error> {
        match std::fs::read_to_string(root.join(rel)) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::Usage(format!(
                "cannot read `{}`: {e}; fix it or move it aside, then run `init` again",
                root.join(rel).display()
            ))),
        }
    };
    let mut changes = Vec::new();
    let mut next = Vec::new();
    let server_args = json!(["mcp", "--wait-cap", WAIT_CAP_S.to_string()]);

    changes.push(text_change(
        ".gitignore",
        read(".gitignore")?,
        |old| {
            let has = old.lines().any(|l| {
                matches!(
                    l.trim(),
                    ".ai/local/" | ".ai/local" | "/.ai/local/" | "/.ai/local"
                )
            });
            (!has).then(|| {
                let mut new = old.to_owned();
                if !new.is_empty() && !new.ends_with('\n') {
                    new.push('\n');
                }
                new.push_str("# advisord: records of this machine's sessions\n.ai/local/\n");
                new
            })
        },
        "ignore `.ai/local/` (this machine's records)",
    ));

    changes.push(project_change(read(crate::check::PROJECT_FILE)?)?);

    changes.push(text_change(
        "AGENTS.md",
        read("AGENTS.md")?,
        |old| (!old.contains(BEGIN)).then(|| append(old, &format!("{BEGIN}\n{PRACTICE}\n{END}\n"))),
        "the practice, for every worker",
    ));
    for (file, import, host) in [
        ("CLAUDE.md", "@AGENTS.md", "claude"),
        ("GEMINI.md", "@./AGENTS.md", "gemini"),
    ] {
        if let Some(old) = read(file)? {
            changes.push(text_change(
                file,
                Some(old),
                |old| {
                    (!old.contains(BEGIN) && !old.contains(import))
                        .then(|| append(old, &format!("{BEGIN}\n{import}\n{END}\n")))
                },
                &format!("imports AGENTS.md ({host} reads the import)"),
            ));
        }
    }

    for host in hosts {
        match host.as_str() {
            "claude" => {
                let entry = json!({"command": "advisor-consult", "args": server_args,
                                   "timeout": HOST_TIMEOUT_S * 1000});
                changes.push(json_change(
                    ".mcp.json",
                    read(".mcp.json")?,
                    Some(&entry),
                    |v| server_entry(v, entry.clone()),
                    "the advisord server, its timeout and wait cap",
                )?);
                let allow: Vec<Value> = APPROVED_TOOLS
                    .iter()
                    .map(|t| Value::from(format!("mcp__advisord__{t}")))
                    .collect();
                changes.push(json_change(
                    ".claude/settings.json",
                    read(".claude/settings.json")?,
                    None,
                    |v| {
                        let mut changed = add_all(v, &["permissions", "allow"], &allow);
                        changed |=
                            add_all(v, &["enabledMcpjsonServers"], &[Value::from("advisord")]);
                        changed
                    },
                    "approves advisord's tools and its server, nothing wider",
                )?);
                next.push(
                    "claude: trust the repository once (start `claude` in it and accept); \
                     `claude -p` ignores a project's settings until then"
                        .to_owned(),
                );
            }
            "gemini" => {
                let tools: Vec<&str> = APPROVED_TOOLS.to_vec();
                let entry = json!({"command": "advisor-consult", "args": server_args,
                                   "timeout": HOST_TIMEOUT_S * 1000, "trust": true,
                                   "includeTools": tools});
                changes.push(json_change(
                    ".gemini/settings.json",
                    read(".gemini/settings.json")?,
                    Some(&entry),
                    |v| server_entry(v, entry.clone()),
                    "the advisord server (trusted, advisord's tools only), timeout, wait cap",
                )?);
                next.push(
                    "gemini: trust the folder once (start `gemini` in it and accept); \
                     Gemini CLI removes variables named like `*KEY*` before it starts a \
                     server, so an advisor whose key it withholds is not configured for \
                     its sessions: put the key in the entry's `env`, or list the variable \
                     in `security.environmentVariableRedaction.allowed`"
                        .to_owned(),
                );
            }
            "codex" => {
                let tools: Vec<String> =
                    APPROVED_TOOLS.iter().map(|t| format!("\"{t}\"")).collect();
                let block = format!(
                    "[mcp_servers.advisord]\ncommand = \"advisor-consult\"\n\
                     args = [\"mcp\", \"--wait-cap\", \"{WAIT_CAP_S}\"]\n\
                     tool_timeout_sec = {HOST_TIMEOUT_S}\n\
                     enabled_tools = [{}]\n\
                     default_tools_approval_mode = \"approve\"\n\
                     # Codex passes a server only HOME, PATH and a few more; these reach\n\
                     # advisord too, so it finds the same daemon as the command line.\n\
                     env_vars = [{}]\n",
                    tools.join(", "),
                    PASSED_THROUGH
                        .iter()
                        .map(|v| format!("\"{v}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                changes.push(text_change(
                    ".codex/config.toml",
                    read(".codex/config.toml")?,
                    |old| {
                        (!old.contains("[mcp_servers.advisord]")).then(|| {
                            let mut new = old.to_owned();
                            if !new.is_empty() {
                                if !new.ends_with('\n') {
                                    new.push('\n');
                                }
                                new.push('\n');
                            }
                            new.push_str(&block);
                            new
                        })
                    },
                    "the advisord server, its approvals, timeout and wait cap",
                ));
                next.push(
                    "codex: trust the project once (`codex exec --trust`, or accept in \
                     `codex`); Codex reads a project's `.codex/config.toml` only then"
                        .to_owned(),
                );
            }
            _ => {}
        }
    }

    changes.push(text_change(
        ".github/workflows/advisord.yml",
        read(".github/workflows/advisord.yml")?,
        |old| old.is_empty().then(|| WORKFLOW.to_owned()),
        "CI: `advisor-consult check` and `verify --all`",
    ));

    Ok(Report {
        root: root.to_path_buf(),
        hosts: hosts.to_vec(),
        dry_run,
        changes,
        next,
    })
}

fn append(old: &str, section: &str) -> String {
    let mut new = old.to_owned();
    if !new.is_empty() {
        if !new.ends_with('\n') {
            new.push('\n');
        }
        new.push('\n');
    }
    new.push_str(section);
    new
}

/// A text file's change: `merge` gives the new text, or `None` when nothing is to change.
fn text_change(
    path: &str,
    old: Option<String>,
    merge: impl FnOnce(&str) -> Option<String>,
    note: &str,
) -> Change {
    let existed = old.is_some();
    let old = old.unwrap_or_default();
    match merge(&old) {
        Some(new) if new != old => Change {
            path: path.to_owned(),
            action: if existed { "update" } else { "create" },
            diff: diff(&old, &new),
            note: note.to_owned(),
            content: Some(new),
        },
        _ => Change {
            path: path.to_owned(),
            action: "unchanged",
            diff: String::new(),
            note: "already there".to_owned(),
            content: None,
        },
    }
}

/// `.advisord/project.yaml` declaring `project.advisors-are-optional: true`.
fn project_change(old: Option<String>) -> Result<Change, Error> {
    let path = crate::check::PROJECT_FILE;
    if let Some(text) = &old {
        let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| {
            Error::Usage(format!(
                "`{path}` does not parse ({e}); fix it, then run `init` again"
            ))
        })?;
        match value
            .get("project")
            .and_then(|p| p.get("advisors-are-optional"))
        {
            Some(serde_yaml_ng::Value::Bool(true)) => {}
            Some(_) => {
                return Ok(Change {
                    path: path.to_owned(),
                    action: "kept",
                    diff: String::new(),
                    note: "declares `advisors-are-optional` otherwise; left as you wrote it"
                        .to_owned(),
                    content: None,
                })
            }
            None => {}
        }
    }
    Ok(text_change(
        path,
        old,
        |old| {
            if old.contains("advisors-are-optional: true") {
                return None;
            }
            let lines: Vec<&str> = old.lines().collect();
            match lines.iter().position(|l| l.trim_end() == "project:") {
                Some(at) => {
                    let mut new: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
                    new.insert(at + 1, "  advisors-are-optional: true".to_owned());
                    Some(new.join("\n") + "\n")
                }
                None => Some(append(old, "project:\n  advisors-are-optional: true\n")),
            }
        },
        "declares that no advisor is required",
    ))
}

/// A JSON file's change: `merge` edits the value and says whether it changed anything.
fn json_change(
    path: &str,
    old: Option<String>,
    ours: Option<&Value>,
    merge: impl FnOnce(&mut Value) -> bool,
    note: &str,
) -> Result<Change, Error> {
    let mut value = match &old {
        Some(text) if !text.trim().is_empty() => serde_json::from_str(text).map_err(|e| {
            Error::Usage(format!(
                "`{path}` is not JSON ({e}); fix it, then run `init` again (nothing was written)"
            ))
        })?,
        _ => json!({}),
    };
    if !value.is_object() {
        return Err(Error::Usage(format!(
            "`{path}` is not a JSON object; fix it, then run `init` again"
        )));
    }
    let before = value.pointer("/mcpServers/advisord").cloned();
    if !merge(&mut value) {
        // Nothing added: either it is all there already, or the user's own `advisord`
        // entry differs from the one `init` would write, and is kept as it is.
        let theirs = match (&before, ours) {
            (Some(entry), Some(ours)) => entry != ours,
            _ => false,
        };
        return Ok(Change {
            path: path.to_owned(),
            action: if theirs { "kept" } else { "unchanged" },
            diff: String::new(),
            note: if theirs {
                "your own `advisord` entry is there; left as it is".to_owned()
            } else {
                "already there".to_owned()
            },
            content: None,
        });
    }
    let new = serde_json::to_string_pretty(&value).unwrap_or_default() + "\n";
    Ok(text_change(path, old, |_| Some(new), note))
}

/// Add the `advisord` server entry unless one is there.
fn server_entry(value: &mut Value, entry: Value) -> bool {
    let servers = value
        .as_object_mut()
        .map(|o| o.entry("mcpServers").or_insert_with(|| json!({})));
    match servers.and_then(Value::as_object_mut) {
        Some(servers) if !servers.contains_key("advisord") => {
            servers.insert("advisord".to_owned(), entry);
            true
        }
        _ => false,
    }
}

/// Add each of `items` to the list at `path` (created when absent); whether any was added.
fn add_all(value: &mut Value, path: &[&str], items: &[Value]) -> bool {
    let mut at = value;
    for (i, key) in path.iter().enumerate() {
        let Some(object) = at.as_object_mut() else {
            return false;
        };
        let fresh = if i + 1 == path.len() {
            json!([])
        } else {
            json!({})
        };
        at = object.entry((*key).to_owned()).or_insert(fresh);
    }
    let Some(list) = at.as_array_mut() else {
        return false;
    };
    let mut changed = false;
    for item in items {
        if !list.contains(item) {
            list.push(item.clone());
            changed = true;
        }
    }
    changed
}

/// A line diff of `old` and `new` (longest common subsequence): `-` removed, `+` added,
/// ` ` kept.
pub fn diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = String::new();
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!(" {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("-{}\n", a[i]));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<String> {
        HOSTS.iter().map(|h| (*h).to_owned()).collect()
    }

    fn apply(root: &Path, report: &Report) {
        for change in &report.changes {
            if let Some(content) = &change.content {
                let path = root.join(&change.path);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, content).unwrap();
            }
        }
    }

    #[test]
    fn init_merges_into_what_is_there_and_a_second_run_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".gitignore"), "target/").unwrap();
        std::fs::write(
            root.join(".mcp.json"),
            r#"{"mcpServers": {"other": {"command": "x"}}}"#,
        )
        .unwrap();
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        std::fs::write(
            root.join(".claude/settings.json"),
            r#"{"permissions": {"allow": ["Bash(ls)"]}, "model": "mine"}"#,
        )
        .unwrap();
        std::fs::write(root.join("CLAUDE.md"), "# Mine\n").unwrap();
        std::fs::create_dir_all(root.join(".advisord")).unwrap();
        std::fs::write(
            root.join(".advisord/project.yaml"),
            "project:\n  provider-independent: [src/core]\n",
        )
        .unwrap();

        let first = plan(root, &all(), true).unwrap();
        // A dry run writes nothing and shows each change as a diff.
        assert_eq!(
            std::fs::read_to_string(root.join(".gitignore")).unwrap(),
            "target/"
        );
        let gitignore = &first.changes[0];
        assert_eq!(gitignore.action, "update");
        assert!(
            gitignore.diff.contains(" target/\n+") && gitignore.diff.contains("+.ai/local/"),
            "{}",
            gitignore.diff
        );
        apply(root, &first);

        let mcp: Value =
            serde_json::from_str(&std::fs::read_to_string(root.join(".mcp.json")).unwrap())
                .unwrap();
        assert_eq!(
            mcp["mcpServers"]["other"]["command"], "x",
            "the user's server is kept"
        );
        assert_eq!(
            mcp["mcpServers"]["advisord"]["args"],
            json!(["mcp", "--wait-cap", "50"])
        );
        assert_eq!(mcp["mcpServers"]["advisord"]["timeout"], 120_000);
        let settings: Value = serde_json::from_str(
            &std::fs::read_to_string(root.join(".claude/settings.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(settings["model"], "mine");
        let allow = settings["permissions"]["allow"].as_array().unwrap();
        assert_eq!(allow[0], "Bash(ls)");
        assert!(allow.contains(&json!("mcp__advisord__consult")));
        assert!(
            !allow.contains(&json!("mcp__advisord__record")),
            "nothing wider than needed"
        );
        let project = std::fs::read_to_string(root.join(".advisord/project.yaml")).unwrap();
        assert!(
            project.contains("advisors-are-optional: true")
                && project.contains("provider-independent"),
            "{project}"
        );
        let claude_md = std::fs::read_to_string(root.join("CLAUDE.md")).unwrap();
        assert!(
            claude_md.starts_with("# Mine\n") && claude_md.contains("@AGENTS.md"),
            "{claude_md}"
        );
        assert!(std::fs::read_to_string(root.join("AGENTS.md"))
            .unwrap()
            .contains("never by\n  counting"));
        let codex = std::fs::read_to_string(root.join(".codex/config.toml")).unwrap();
        assert!(
            codex.contains("tool_timeout_sec = 120") && codex.contains("--wait-cap\", \"50"),
            "{codex}"
        );
        let gemini: Value = serde_json::from_str(
            &std::fs::read_to_string(root.join(".gemini/settings.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(gemini["mcpServers"]["advisord"]["trust"], true);
        assert!(
            std::fs::read_to_string(root.join(".github/workflows/advisord.yml"))
                .unwrap()
                .contains("verify --all")
        );
        assert!(
            !root.join("GEMINI.md").exists(),
            "GEMINI.md only where present"
        );

        let second = plan(root, &all(), false).unwrap();
        for change in &second.changes {
            assert_eq!(change.action, "unchanged", "{change:?}");
        }
    }

    #[test]
    fn a_users_own_entry_and_an_unknown_host_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mine =
            r#"{"mcpServers": {"advisord": {"command": "/opt/advisor-consult", "args": ["mcp"]}}}"#;
        std::fs::write(root.join(".mcp.json"), mine).unwrap();
        let report = plan(root, &["claude".to_owned()], false).unwrap();
        let mcp = report
            .changes
            .iter()
            .find(|c| c.path == ".mcp.json")
            .unwrap();
        assert_eq!(mcp.action, "kept");
        assert!(mcp.content.is_none());
        let err = hosts(Some("claude,cursor")).unwrap_err().to_string();
        assert!(
            err.contains("`cursor`") && err.contains("claude, codex, gemini"),
            "{err}"
        );
        assert_eq!(
            hosts(Some("gemini, claude,gemini")).unwrap(),
            ["gemini", "claude"]
        );
    }
}
