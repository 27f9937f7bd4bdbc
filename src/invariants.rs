//! The invariants' files, read and edited at the edge: the user's global ones
//! (`invariants.yaml` in the user's config directory, beside the trusted catalogues) and
//! the repository's (`invariants:` in `.advisord/project.yaml`). Both hold one list:
//!
//! ```yaml
//! invariants:
//!   - name: no-core-network
//!     description: "The core never opens a connection."
//! ```
//!
//! Edits are merged into the text as written (comments and other keys kept) and checked
//! by parsing the result again; a file whose list cannot be merged so is left alone with
//! an error that shows the entry to add by hand. The merge of the scopes is
//! [`crate::core::invariants`]; the task's invariants are records.

use crate::core::invariants::{self, Declared, InForce, TaskInvariants};
use crate::error::Error;
use serde::Serialize;
use serde_yaml_ng::Value as Yaml;
use std::path::{Path, PathBuf};

/// The file of the user's global invariants, in the user's config directory.
pub const GLOBAL_FILE: &str = "invariants.yaml";

/// The keys of one declared invariant.
const KEYS: [&str; 2] = ["name", "description"];

/// Keys by which an entry tries to remove an invariant: a file can only add.
const REMOVAL_KEYS: [&str; 5] = ["remove", "removed", "disable", "disabled", "enabled"];

/// The global file in `config_dir`.
pub fn global_file(config_dir: &Path) -> PathBuf {
    config_dir.join(GLOBAL_FILE)
}

/// The project file under `root`.
pub fn project_file(root: &Path) -> PathBuf {
    root.join(crate::check::PROJECT_FILE)
}

/// The user's config directory, or a usage error saying how to name one.
pub fn own_config_dir() -> Result<PathBuf, Error> {
    crate::trust::own_config_dir().ok_or_else(|| {
        Error::Usage(
            "cannot find your config directory, where global invariants are kept: set \
             `HOME` (or `XDG_CONFIG_HOME`) to an absolute path"
                .into(),
        )
    })
}

/// The declared invariants of both files and what was set aside in them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outer {
    /// The global and project invariants merged ([`invariants::outer`]).
    pub in_force: Vec<InForce>,
    /// Entries read and ignored, each with why (a project file that tries to remove an
    /// invariant, a global one above all).
    pub warnings: Vec<String>,
}

/// Read the global invariants (from `config_dir`, when there is one) and the project's
/// (under `root`) and merge them. A malformed file is a usage error naming it.
pub fn outer(root: &Path, config_dir: Option<&Path>) -> Result<Outer, Error> {
    let mut warnings = Vec::new();
    let global = match config_dir {
        Some(dir) => read_file(&global_file(dir), &[], &mut warnings)?,
        None => Vec::new(),
    };
    let project = read_file(&project_file(root), &global, &mut warnings)?;
    Ok(Outer {
        in_force: invariants::outer(&global, &project),
        warnings,
    })
}

/// [`outer`] from this process's config directory.
pub fn outer_here(root: &Path) -> Result<Outer, Error> {
    outer(root, crate::trust::own_config_dir().as_deref())
}

/// Every invariant in force in a task whose records fold to `task` (see
/// `Store::task_invariants`), with `outer` below it.
pub fn in_force(outer: &Outer, task: &TaskInvariants) -> Vec<InForce> {
    invariants::effective(&outer.in_force, task)
}

fn read_text(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Usage(format!(
            "cannot read `{}`: {e}; fix its permissions or remove it",
            path.display()
        ))),
    }
}

fn read_file(
    path: &Path,
    global: &[Declared],
    warnings: &mut Vec<String>,
) -> Result<Vec<Declared>, Error> {
    match read_text(path)? {
        None => Ok(Vec::new()),
        Some(text) => declared(&text, &path.display().to_string(), global, warnings),
    }
}

/// The `invariants:` list of a file's `text` (`source` names it in messages); `global`
/// are the user's global invariants, which an entry here can never remove: such an
/// entry is ignored, and `warnings` says so.
pub fn declared(
    text: &str,
    source: &str,
    global: &[Declared],
    warnings: &mut Vec<String>,
) -> Result<Vec<Declared>, Error> {
    let root: Yaml = serde_yaml_ng::from_str(text).map_err(|e| {
        Error::Usage(format!(
            "`{source}` is not valid YAML ({e}); fix the syntax"
        ))
    })?;
    let list = match root.get("invariants") {
        None | Some(Yaml::Null) => return Ok(Vec::new()),
        Some(Yaml::Sequence(list)) => list,
        Some(_) => {
            return Err(Error::Usage(format!(
                "`invariants` in `{source}` must be a list of `{{name, description}}` entries"
            )))
        }
    };
    let mut out: Vec<Declared> = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        let Yaml::Mapping(map) = entry else {
            return Err(Error::Usage(format!(
                "entry {} of `invariants` in `{source}` must be a mapping with `name` and \
                 `description`",
                i + 1
            )));
        };
        let key = |k: &str| map.get(k).and_then(Yaml::as_str);
        let name = key("name").unwrap_or_default().to_string();
        if let Some(removal) = map
            .keys()
            .filter_map(Yaml::as_str)
            .find(|k| REMOVAL_KEYS.contains(k))
        {
            let is_global = global.iter().any(|g| g.name == name);
            warnings.push(if is_global {
                format!(
                    "`{source}`: entry `{name}` (with `{removal}`) is ignored: a file can add \
                     invariants, never remove one, and a repository's file never removes the \
                     user's global ones; global `{name}` stays in force (remove it yourself \
                     with `advisor-consult invariant remove {name} --global`)"
                )
            } else {
                format!(
                    "`{source}`: entry `{name}` (with `{removal}`) is ignored: a file can add \
                     invariants, never remove one; delete the entry to drop it"
                )
            });
            continue;
        }
        if let Some(unknown) = map
            .keys()
            .find(|k| !k.as_str().is_some_and(|k| KEYS.contains(&k)))
        {
            return Err(Error::Usage(format!(
                "entry {} of `invariants` in `{source}` has key `{}`; accepted keys: `name`, \
                 `description`",
                i + 1,
                unknown.as_str().unwrap_or("(not a string)")
            )));
        }
        invariants::check_name(&name)
            .map_err(|e| Error::Usage(format!("`{source}`, entry {}: {e}", i + 1)))?;
        let description = key("description").unwrap_or_default().trim().to_string();
        if description.is_empty() {
            return Err(Error::Usage(format!(
                "`{source}`: invariant `{name}` needs a `description`, the constraint in a \
                 sentence"
            )));
        }
        if out.iter().any(|d| d.name == name) {
            return Err(Error::Usage(format!(
                "`{source}` declares invariant `{name}` twice; keep one entry"
            )));
        }
        out.push(Declared { name, description });
    }
    Ok(out)
}

/// One entry as the files hold it, both values quoted (a JSON string is a YAML one).
fn entry_lines(indent: &str, name: &str, description: &str) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    format!(
        "{indent}- name: {}\n{indent}  description: {}\n",
        quote(name),
        quote(description)
    )
}

/// Where the top-level `invariants:` block is in `lines`: the key's line, the end of its
/// block (exclusive, before trailing blank lines) and the indentation of its items.
fn block(lines: &[&str]) -> Option<(usize, usize, String)> {
    let at = lines.iter().position(|l| l.trim_end() == "invariants:")?;
    let end = lines[at + 1..]
        .iter()
        .position(|l| {
            !l.trim().is_empty()
                && !l.starts_with(' ')
                && !l.starts_with('-')
                && !l.starts_with('#')
        })
        .map_or(lines.len(), |p| at + 1 + p);
    let mut end = end;
    while end > at + 1 && lines[end - 1].trim().is_empty() {
        end -= 1;
    }
    let indent = lines[at + 1..end]
        .iter()
        .find(|l| l.trim_start().starts_with("- "))
        .map_or_else(
            || "  ".to_string(),
            |l| l[..l.len() - l.trim_start().len()].to_string(),
        );
    Some((at, end, indent))
}

/// The list a file's `text` holds as YAML (`None` when it has none).
fn list_of(text: &str) -> Result<(Yaml, Vec<Yaml>), String> {
    let mut root: Yaml = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
    if root.is_null() {
        root = Yaml::Mapping(Default::default());
    }
    let list = match root.get("invariants") {
        Some(Yaml::Sequence(list)) => list.clone(),
        _ => Vec::new(),
    };
    if let Yaml::Mapping(map) = &mut root {
        map.remove("invariants");
    }
    Ok((root, list))
}

/// `old` with the entry for `name` added to its `invariants:` list, as text: appended to
/// the block where there is one, else a new block at the end.
fn added(old: &str, name: &str, description: &str) -> Option<String> {
    let lines: Vec<&str> = old.lines().collect();
    let new = match block(&lines) {
        Some((_, end, indent)) => {
            let mut out: Vec<String> = lines[..end].iter().map(|l| (*l).to_string()).collect();
            out.push(
                entry_lines(&indent, name, description)
                    .trim_end()
                    .to_string(),
            );
            out.extend(lines[end..].iter().map(|l| (*l).to_string()));
            out.join("\n") + "\n"
        }
        None if old.contains("\ninvariants:") || old.starts_with("invariants:") => return None,
        None => {
            let mut out = old.to_string();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str("invariants:\n");
            out.push_str(&entry_lines("  ", name, description));
            out
        }
    };
    // The merge is believed only if the file now reads as before plus the one entry.
    let (before_rest, before) = list_of(old).ok()?;
    let (after_rest, after) = list_of(&new).ok()?;
    let mut wanted = before;
    let mut entry = serde_yaml_ng::Mapping::new();
    entry.insert("name".into(), name.into());
    entry.insert("description".into(), description.into());
    wanted.push(Yaml::Mapping(entry));
    (before_rest == after_rest && wanted == after).then_some(new)
}

/// `old` without the entries of its `invariants:` block that name `name`, as text.
fn removed(old: &str, name: &str) -> Option<String> {
    let lines: Vec<&str> = old.lines().collect();
    let (at, end, indent) = block(&lines)?;
    let item = format!("{indent}- ");
    let starts: Vec<usize> = (at + 1..end)
        .filter(|&i| lines[i].starts_with(&item))
        .collect();
    let mut keep: Vec<bool> = vec![true; lines.len()];
    for (k, &start) in starts.iter().enumerate() {
        let stop = starts.get(k + 1).copied().unwrap_or(end);
        let text: String = lines[start..stop]
            .iter()
            .map(|l| l.get(indent.len()..).unwrap_or("").to_string() + "\n")
            .collect();
        let names_it = serde_yaml_ng::from_str::<Yaml>(&text)
            .ok()
            .and_then(|v| v.get(0).cloned())
            .and_then(|v| v.get("name").and_then(Yaml::as_str).map(str::to_string))
            .is_some_and(|n| n == name);
        if names_it {
            keep[start..stop].iter_mut().for_each(|k| *k = false);
        }
    }
    let new: String = lines
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(l, _)| (*l).to_string() + "\n")
        .collect();
    let (before_rest, before) = list_of(old).ok()?;
    let (after_rest, after) = list_of(&new).ok()?;
    let wanted: Vec<Yaml> = before
        .into_iter()
        .filter(|e| e.get("name").and_then(Yaml::as_str) != Some(name))
        .collect();
    (before_rest == after_rest && wanted == after).then_some(new)
}

/// Add invariant `name` to the file at `path` (created, with its directory, if missing).
/// Refused when the file already declares it.
pub fn add_to_file(path: &Path, name: &str, description: &str) -> Result<(), Error> {
    invariants::check_name(name).map_err(Error::Usage)?;
    if description.trim().is_empty() {
        return Err(Error::Usage(
            "`--description` must say what the invariant demands, in a sentence".into(),
        ));
    }
    let source = path.display().to_string();
    let old = read_text(path)?.unwrap_or_default();
    let current = declared(&old, &source, &[], &mut Vec::new())?;
    if current.iter().any(|d| d.name == name) {
        return Err(Error::Usage(format!(
            "`{source}` already declares invariant `{name}`; remove it first to change its text"
        )));
    }
    let new = added(&old, name, description).ok_or_else(|| {
        Error::Usage(format!(
            "cannot merge the invariant into `{source}` without rewriting what is there (its \
             `invariants` list is not a plain block list); add it by hand:\n{}",
            entry_lines("  ", name, description)
        ))
    })?;
    write(path, &new)
}

/// Remove invariant `name` from the file at `path`; `false` when it does not declare it.
pub fn remove_from_file(path: &Path, name: &str) -> Result<bool, Error> {
    let source = path.display().to_string();
    let Some(old) = read_text(path)? else {
        return Ok(false);
    };
    let current = declared(&old, &source, &[], &mut Vec::new())?;
    if !current.iter().any(|d| d.name == name) {
        return Ok(false);
    }
    let new = removed(&old, name).ok_or_else(|| {
        Error::Usage(format!(
            "cannot remove invariant `{name}` from `{source}` without rewriting what is there \
             (its `invariants` list is not a plain block list); delete its entry by hand"
        ))
    })?;
    write(path, &new)?;
    Ok(true)
}

/// Write `text` to `path` through a temporary file renamed into place.
fn write(path: &Path, text: &str) -> Result<(), Error> {
    let io = |e: std::io::Error| {
        Error::Usage(format!(
            "cannot write `{}`: {e}; check that its directory is yours and writable",
            path.display()
        ))
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut temporary = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut temporary, text.as_bytes()).map_err(io)?;
    temporary.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_merged_into_the_text_as_written() {
        let old = "# ours\nproject:\n  advisors-are-optional: true  # keep\ninvariants:\n  - name: a\n    description: first\n\nbudget:\n  per_day: 1\n";
        let new = added(old, "b", "second: with a colon").unwrap();
        assert!(new.starts_with("# ours\nproject:\n  advisors-are-optional: true  # keep\n"));
        assert!(new.contains("  - name: \"b\"\n    description: \"second: with a colon\"\n"));
        assert!(new.contains("budget:\n  per_day: 1\n"), "{new}");
        let names: Vec<String> = declared(&new, "f", &[], &mut Vec::new())
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["a", "b"]);
        let back = removed(&new, "b").unwrap();
        assert_eq!(back, old);
        let fresh = added("project:\n  x: 1", "c", "d").unwrap();
        assert_eq!(
            fresh,
            "project:\n  x: 1\ninvariants:\n  - name: \"c\"\n    description: \"d\"\n"
        );
        assert!(added("invariants: []\n", "c", "d").is_none());
    }

    #[test]
    fn a_file_cannot_remove_a_global_invariant() {
        let global = [Declared {
            name: "g".into(),
            description: "global".into(),
        }];
        let mut warnings = Vec::new();
        let project = declared(
            "invariants:\n  - name: g\n    removed: true\n  - name: p\n    description: ok\n",
            ".advisord/project.yaml",
            &global,
            &mut warnings,
        )
        .unwrap();
        assert_eq!(project.len(), 1);
        assert!(
            warnings[0].contains("never removes the user's global ones"),
            "{warnings:?}"
        );
        let merged = invariants::outer(&global, &project);
        assert!(merged.iter().any(|i| i.name == "g"));
        let bad = declared(
            "invariants:\n  - name: Bad\n    description: x\n",
            "f",
            &[],
            &mut warnings,
        )
        .unwrap_err()
        .to_string();
        assert!(bad.contains("a-z 0-9 - _"), "{bad}");
    }
}
