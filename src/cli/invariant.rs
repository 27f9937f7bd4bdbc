//! `invariant add|list|remove`: the team's constraints at three scopes. Global and project
//! invariants are edits of local files (the user's `invariants.yaml`, the repository's
//! `.advisord/project.yaml`); task ones are `record`s of kind `invariant`, through the
//! daemon like any record, so their history is in the task's chain. `list` is computed
//! here from the files and the task's records.

use crate::cli::GlobalFlags;
use crate::context::Resolved;
use crate::core::invariants::{InForce, Scope};
use crate::error::Error;
use crate::protocol::{RecordRequest, RequestContext};
use crate::render::{self, Format, Render};
use crate::store::Store;
use advisord_adapters::registry::Registry;
use clap::Subcommand;
use serde::Serialize;

/// `invariant --help`'s examples.
pub const EXAMPLES: &str = "\
Examples:
  advisor-consult invariant add no-core-network --global \\
      --description 'The core never opens a network connection.'
  advisor-consult invariant add reversible-migrations --project \\
      --description 'Every migration can be rolled back.'
  advisor-consult invariant add keep-api-v1 --description 'The v1 API keeps its shape.'
  advisor-consult invariant list
  advisor-consult invariant remove keep-api-v1

Precedence: task > project > global; a narrower scope's invariant replaces a wider one of
the same name. A repository's project file can add invariants, never remove global ones.";

/// The scope flags of `add` and `remove`: the task's when neither is given (the task is
/// the one `--task NAME` names, as for every verb).
#[derive(Debug, Clone, Copy, clap::Args)]
#[group(multiple = false)]
pub struct ScopeFlags {
    /// The user's global invariants (`invariants.yaml` in ~/.config/advisord)
    #[arg(long)]
    pub global: bool,
    /// This repository's (`invariants:` in .advisord/project.yaml); neither flag: the
    /// task's, recorded in its chain
    #[arg(long)]
    pub project: bool,
}

impl ScopeFlags {
    /// The scope named.
    pub fn scope(self) -> Scope {
        if self.global {
            Scope::Global
        } else if self.project {
            Scope::Project
        } else {
            Scope::Task
        }
    }
}

/// What `invariant` does.
#[derive(Debug, Subcommand)]
pub enum InvariantAction {
    /// Declare an invariant: every conclusion on material, high or critical doubt then
    /// accounts for it
    Add {
        /// Its name: 1 to 64 of `a-z 0-9 - _`, starting with a letter or a digit
        name: String,
        /// What it demands, in a sentence
        #[arg(long)]
        description: String,
        /// Where it is declared
        #[command(flatten)]
        scope: ScopeFlags,
    },
    /// The invariants in force for the task, each with its scope
    List,
    /// Remove an invariant from its scope
    Remove {
        /// Its name
        name: String,
        /// Where it is declared
        #[command(flatten)]
        scope: ScopeFlags,
    },
}

/// What `invariant list` prints.
#[derive(Debug, Serialize)]
pub struct InvariantList {
    /// The task.
    pub task: String,
    /// Every invariant in force, by name.
    pub invariants: Vec<InForce>,
    /// File entries ignored, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Render for InvariantList {
    fn plain(&self) -> String {
        let mut out = String::new();
        if self.invariants.is_empty() {
            out.push_str(&format!(
                "no invariant is in force for task `{}`\n",
                self.task
            ));
        } else {
            out.push_str(&format!(
                "{} invariant(s) in force for task `{}`:\n",
                self.invariants.len(),
                self.task
            ));
        }
        for i in &self.invariants {
            let replaces = if i.replaces.is_empty() {
                String::new()
            } else {
                let wider: Vec<&str> = i.replaces.iter().map(|s| s.as_str()).collect();
                format!(", replaces {}", wider.join(" and "))
            };
            out.push_str(&format!("  {} ({}{replaces})\n", i.name, i.scope));
            out.push_str(&format!("    {}\n", i.description.replace('\n', "\n    ")));
        }
        out
    }
}

/// Run `invariant add|list|remove`.
pub async fn run(
    action: &InvariantAction,
    global: &GlobalFlags,
    ctx: &RequestContext,
) -> anyhow::Result<i32> {
    let format = global.format;
    match action {
        InvariantAction::List => {
            let list = list(ctx)?;
            for warning in &list.warnings {
                eprintln!("warning: {warning}");
            }
            print!("{}", render::render(&list, format));
            Ok(0)
        }
        InvariantAction::Add {
            name,
            description,
            scope,
        } => match scope.scope() {
            Scope::Task => {
                let record = serde_json::json!({
                    "kind": "invariant", "name": name, "action": "add",
                    "description": description,
                });
                record_task(global, ctx, record).await
            }
            scope => {
                let path = file_of(scope, ctx)?;
                crate::invariants::add_to_file(&path, name, description)?;
                say(
                    format,
                    &format!("added {scope} invariant `{name}` to `{}`", path.display()),
                );
                Ok(0)
            }
        },
        InvariantAction::Remove { name, scope } => match scope.scope() {
            Scope::Task => {
                let record = serde_json::json!({
                    "kind": "invariant", "name": name, "action": "remove",
                });
                record_task(global, ctx, record).await
            }
            scope => {
                let path = file_of(scope, ctx)?;
                if !crate::invariants::remove_from_file(&path, name)? {
                    return Err(Error::Usage(format!(
                        "`{}` declares no invariant `{name}`; `advisor-consult invariant \
                         list` shows each invariant in force with its scope",
                        path.display()
                    ))
                    .into());
                }
                say(
                    format,
                    &format!(
                        "removed {scope} invariant `{name}` from `{}`",
                        path.display()
                    ),
                );
                Ok(0)
            }
        },
    }
}

/// The file of a global or project invariant.
fn file_of(scope: Scope, ctx: &RequestContext) -> Result<std::path::PathBuf, Error> {
    Ok(match scope {
        Scope::Global => crate::invariants::global_file(&crate::invariants::own_config_dir()?),
        _ => crate::invariants::project_file(&ctx.root),
    })
}

fn say(format: Format, text: &str) {
    match format {
        Format::Json => println!("{}", serde_json::json!({ "done": text })),
        _ => println!("{text}"),
    }
}

/// Record a task-scope change through the façade, as `record` does.
async fn record_task(
    global: &GlobalFlags,
    ctx: &RequestContext,
    record: serde_json::Value,
) -> anyhow::Result<i32> {
    let api = crate::cli::select_api(global).await?;
    let stored = api
        .record(RecordRequest {
            context: ctx.clone(),
            record,
            dry_run: false,
        })
        .await?;
    print!("{}", render::render(&stored, global.format));
    Ok(0)
}

/// The invariants in force for the context's task: the files, then the task's records.
pub fn list(ctx: &RequestContext) -> Result<InvariantList, Error> {
    let resolved = Resolved::resolve(ctx, &Registry::builtin())?;
    let outer = crate::invariants::outer_here(&resolved.root)?;
    let store = Store::open(&resolved.state_dir);
    let task = store.task_invariants(&resolved.task)?;
    let invariants = crate::invariants::in_force(&outer, &task);
    Ok(InvariantList {
        task: resolved.task.to_string(),
        invariants,
        warnings: outer.warnings,
    })
}
