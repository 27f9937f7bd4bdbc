//! The house's layering, held by the suite: no two source files import each other in a
//! loop (in any crate of the workspace), and no arrow points up a layer (the core and the
//! protocol import nothing above them; the CLI does not reach into the daemon; the job's
//! runner does not call the service layer above it).
//!
//! A file-level reading of the source: every `use crate::…`/`use super::…` and every
//! inline `crate::a::b` path makes the file depend on the file that defines the module it
//! names (the longest prefix that is a module file). Test modules (from the first
//! `#[cfg(test)]` on) are left out: a test may use anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's source: module path (`["core", "chain"]`) → the file's text.
struct Crate {
    root: PathBuf,
    modules: BTreeMap<Vec<String>, String>,
}

impl Crate {
    fn read(root: &Path) -> Crate {
        let mut modules = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    modules.insert(module_of(root, &path), without_tests(&text));
                }
            }
        }
        Crate {
            root: root.to_path_buf(),
            modules,
        }
    }

    /// The file module that `path` (absolute, from the crate root) lands in: its longest
    /// prefix that is a module of this crate.
    fn owner(&self, path: &[String]) -> Option<Vec<String>> {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|prefix| self.modules.contains_key(prefix))
    }

    /// Each module's dependencies on other modules of the crate: the paths it names, and
    /// its own child modules it names relatively (`relay::serve` in `mesh.rs`).
    fn edges(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut edges = BTreeMap::new();
        for (module, text) in &self.modules {
            let mut to = BTreeSet::new();
            for child in self
                .modules
                .keys()
                .filter(|c| c.len() == module.len() + 1 && c.starts_with(module))
            {
                let name = format!("{}::", child[module.len()]);
                let named = text.match_indices(&name).any(|(at, _)| {
                    at == 0 || {
                        let before = text.as_bytes()[at - 1];
                        !(before.is_ascii_alphanumeric() || before == b'_' || before == b':')
                    }
                });
                if named {
                    to.insert(child.clone());
                }
            }
            for path in paths_in(text) {
                let Some(absolute) = resolve(module, &path) else {
                    continue;
                };
                if let Some(target) = self.owner(&absolute) {
                    if &target != module && !module.starts_with(&target) {
                        to.insert(target);
                    }
                }
            }
            edges.insert(module.clone(), to);
        }
        edges
    }

    fn file(&self, module: &[String]) -> String {
        let name = if module.is_empty() {
            "lib.rs".to_string()
        } else {
            format!("{}.rs", module.join("/"))
        };
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = self.root.strip_prefix(workspace).unwrap_or(&self.root);
        format!("{}/{name}", root.display())
    }
}

/// `src/core/chain.rs` → `["core", "chain"]`; `lib.rs`, `main.rs` and `mod.rs` name
/// their folder.
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("lib" | "main" | "mod")
    ) {
        parts.pop();
    }
    parts
}

/// `text` without what only tests compile: a `#[cfg(test)] mod tests { … }` block (by
/// convention the file's last item) and the next line after any other `#[cfg(test)]`
/// (`mod tests;`, a `use`).
fn without_tests(text: &str) -> String {
    let mut kept = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            kept.push(line);
            continue;
        }
        match lines.next() {
            Some(next)
                if next.trim_start().starts_with("mod ") && next.trim_end().ends_with('{') =>
            {
                break
            }
            _ => continue,
        }
    }
    kept.join("\n")
}

/// Every `crate::…` and `super::…` path in `text`, `use` groups expanded
/// (`use crate::a::{b::c, d}` → `crate::a::b::c`, `crate::a::d`).
fn paths_in(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut paths = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("use ") {
        let after = &rest[at + 4..];
        let boundary = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric();
        if boundary && (after.starts_with("crate::") || after.starts_with("super::")) {
            if let Some(end) = after.find(';') {
                let statement: String = after[..end].split_whitespace().collect();
                paths.extend(expand(&statement));
            }
        }
        rest = after;
    }
    for start in ["crate::", "super::"] {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(start) {
            let boundary = at == 0
                || !(rest.as_bytes()[at - 1].is_ascii_alphanumeric()
                    || rest.as_bytes()[at - 1] == b'_'
                    || rest.as_bytes()[at - 1] == b':');
            let tail = &rest[at..];
            let len = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            if boundary {
                paths.push(tail[..len].trim_end_matches(':').to_string());
            }
            rest = &rest[at + start.len()..];
        }
    }
    paths
}

/// `a::{b::c, d}` → `a::b::c`, `a::d` (nested groups too).
fn expand(path: &str) -> Vec<String> {
    let Some(open) = path.find('{') else {
        return vec![path.to_string()];
    };
    let prefix = &path[..open];
    let mut depth = 0;
    let mut close = path.len();
    for (i, c) in path.char_indices().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = i;
                    break;
                }
            }
            _ => {}
        }
    }
    let inner = &path[open + 1..close];
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[from..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty() && *p != "self")
        .flat_map(|p| expand(&format!("{prefix}{p}")))
        .chain(std::iter::once(prefix.trim_end_matches("::").to_string()))
        .collect()
}

/// The absolute module path a `crate::`/`super::` path names, seen from `module`.
fn resolve(module: &[String], path: &str) -> Option<Vec<String>> {
    let mut parts = path.split("::").filter(|p| !p.is_empty());
    let mut base: Vec<String> = match parts.next()? {
        "crate" => Vec::new(),
        "super" => {
            let mut up = module.to_vec();
            up.pop()?;
            up
        }
        _ => return None,
    };
    for part in parts {
        if part == "super" {
            base.pop()?;
        } else if part == "self" {
            continue;
        } else {
            base.push(part.to_string());
        }
    }
    Some(base)
}

/// The strongly connected components of more than one module (Tarjan).
fn cycles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct Walk<'e> {
        edges: &'e BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'e Vec<String>, usize>,
        low: BTreeMap<&'e Vec<String>, usize>,
        stack: Vec<&'e Vec<String>>,
        on_stack: BTreeSet<&'e Vec<String>>,
        found: Vec<Vec<Vec<String>>>,
    }
    impl<'e> Walk<'e> {
        fn visit(&mut self, v: &'e Vec<String>) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

fn crates() -> Vec<Crate> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    ["src", "adapters/src", "fakes/src", "core/src"]
        .iter()
        .map(|dir| Crate::read(&workspace.join(dir)))
        .collect()
}

fn path(module: &[String]) -> String {
    module.join("::")
}

/// The circles still to untangle, each with why it is not yet: the list must match what
/// the reading finds exactly, so a new circle fails the suite, and so does an untangled
/// one that is still listed (take it off).
const KNOWN_CIRCLES: &[(&str, &str)] = &[];

#[test]
fn no_source_file_imports_another_in_a_loop() {
    let mut found = Vec::new();
    for krate in crates() {
        for component in cycles(&krate.edges()) {
            let files: Vec<String> = component.iter().map(|m| krate.file(m)).collect();
            found.push(files.join(" ⇄ "));
        }
    }
    found.sort();
    let known: Vec<&str> = KNOWN_CIRCLES.iter().map(|(c, _)| *c).collect();
    let new: Vec<&String> = found
        .iter()
        .filter(|c| !known.contains(&c.as_str()))
        .collect();
    assert!(
        new.is_empty(),
        "import circles (files that import each other in a loop; one concept split wrongly \
         or two tangled — move the shared piece down a layer):\n{}",
        new.iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let gone: Vec<&str> = known
        .iter()
        .filter(|c| !found.iter().any(|f| f == *c))
        .copied()
        .collect();
    assert!(
        gone.is_empty(),
        "untangled, so take them off KNOWN_CIRCLES:\n{}",
        gone.join("\n")
    );
}

#[test]
fn no_arrow_points_up_a_layer() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let krate = Crate::read(&workspace.join("src"));
    // (who, may not import, why)
    let rules: &[(&str, &str, &str)] = &[
        (
            "core",
            "",
            "the core is pure and imports nothing outside `core`",
        ),
        ("protocol", "cli", "the protocol sits below every surface"),
        (
            "protocol",
            "render",
            "the protocol sits below every surface",
        ),
        (
            "protocol",
            "service",
            "the protocol sits below the operations",
        ),
        ("protocol", "daemon", "the protocol sits below the daemon"),
        ("protocol", "mcp", "the protocol sits below every surface"),
        (
            "cli",
            "daemon",
            "the CLI reaches the daemon through the façade and the client",
        ),
        (
            "daemon::runner",
            "service",
            "a job's runner sits below the service layer",
        ),
    ];
    let mut wrong = Vec::new();
    for (module, to) in krate.edges() {
        for target in to {
            let (from, target_path) = (path(&module), path(&target));
            for (who, forbidden, why) in rules {
                let is_who = from == *who || from.starts_with(&format!("{who}::"));
                let hits = if forbidden.is_empty() {
                    target.first().map(String::as_str) != Some("core")
                } else {
                    target_path == *forbidden || target_path.starts_with(&format!("{forbidden}::"))
                };
                if is_who && hits {
                    wrong.push(format!(
                        "{} imports {}: {why}",
                        krate.file(&module),
                        krate.file(&target)
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "arrows up a layer:\n{}", wrong.join("\n"));
}

#[test]
fn the_reading_finds_a_planted_circle_and_inline_paths() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::{Thing, other::More};\n").unwrap();
    std::fs::write(
        src.join("b.rs"),
        "#[cfg(test)]\nuse crate::c::X;\nfn f() { crate::a::deep::g(); crate::a::h(); }\n",
    )
    .unwrap();
    std::fs::write(src.join("a/deep.rs"), "use super::super::c::Y;\n").unwrap();
    std::fs::write(
        src.join("c.rs"),
        "// use crate::a::Z;\nmod d;\npub fn f() { d::g() }\n#[cfg(test)]\nmod tests {\n    use crate::b::W;\n}\n",
    )
    .unwrap();
    std::fs::create_dir_all(src.join("c")).unwrap();
    std::fs::write(src.join("c/d.rs"), "pub fn g() {}\n").unwrap();
    let krate = Crate::read(src);
    let edges = krate.edges();
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    assert!(edges[&m("a")].contains(&m("b")));
    assert!(edges[&m("b")].contains(&m("a::deep")), "{edges:?}");
    assert!(edges[&m("a::deep")].contains(&m("c")), "{edges:?}");
    // A test module's import and a commented-out one count for nothing; a child module
    // named relatively counts.
    assert!(!edges[&m("b")].contains(&m("c")));
    assert_eq!(edges[&m("c")], BTreeSet::from([m("c::d")]), "{edges:?}");
    let found = cycles(&edges);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains(&m("a")) && found[0].contains(&m("b")));
}
