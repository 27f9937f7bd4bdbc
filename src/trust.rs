//! Which repository catalogues the user trusts.
//!
//! A repository's own catalogue (`<root>/.advisord/advisors.yaml`) names commands that run
//! on the user's machine, and advisors whose answers count as reviews. Opening a
//! repository must not be enough to run its code, nor to let it review itself, so such a
//! catalogue is used only once the user has run `advisor-consult trust` in it. Trust is
//! kept in the user's own config directory (`$XDG_CONFIG_HOME/advisord/trusted.json`, else
//! `~/.config/advisord/trusted.json`), keyed by the file's canonical path and the SHA-256
//! of its content: a changed file (one byte is enough) needs trusting again.
//!
//! The embedded catalogue and one the user names (`--catalogue`, `ADVISORD_CATALOGUE`)
//! are trusted as they are when the user's own processes name them (the command line, the
//! daemon's socket): naming it is the user's choice. Over the daemon's TCP listener a
//! token holder is not the user, so it may name only a catalogue the daemon already
//! trusts: one the user's own processes named through the socket, the daemon's own, or
//! one trusted here (`crate::daemon::http`'s `reach`).

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file, in the config directory, that records trusted catalogues.
pub const TRUST_FILE: &str = "trusted.json";

/// The trust records: canonical path → SHA-256 (hex) of the content trusted.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Trusted {
    #[serde(default)]
    catalogues: BTreeMap<PathBuf, String>,
}

/// The user's config directory for advisord: `$XDG_CONFIG_HOME/advisord` (when absolute),
/// else `$HOME/.config/advisord`.
pub fn config_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let absolute = |v: Option<String>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(env("XDG_CONFIG_HOME"))
        .or_else(|| absolute(env("HOME")).map(|home| home.join(".config")))
        .map(|dir| dir.join("advisord"))
}

/// The config directory of this process's environment.
pub fn own_config_dir() -> Option<PathBuf> {
    config_dir(&|name| std::env::var(name).ok())
}

/// The SHA-256 of `content`, in hex.
pub fn digest(content: &[u8]) -> String {
    hex::encode(Sha256::digest(content))
}

fn read(config_dir: &Path) -> Trusted {
    std::fs::read(config_dir.join(TRUST_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Whether the catalogue at `path`, whose content is `content`, is trusted in
/// `config_dir`. A path that cannot be made canonical is not trusted.
pub fn is_trusted(config_dir: Option<&Path>, path: &Path, content: &[u8]) -> bool {
    let (Some(config_dir), Ok(canonical)) = (config_dir, path.canonicalize()) else {
        return false;
    };
    read(config_dir)
        .catalogues
        .get(&canonical)
        .is_some_and(|trusted| *trusted == digest(content))
}

/// Record the catalogue at `path` with its current `content` as trusted; its canonical
/// path and digest. Written atomically (a temporary file renamed), the directory `0700`.
pub fn trust(config_dir: &Path, path: &Path, content: &[u8]) -> std::io::Result<(PathBuf, String)> {
    use std::os::unix::fs::DirBuilderExt;
    let canonical = path.canonicalize()?;
    let hash = digest(content);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(config_dir)?;
    let mut trusted = read(config_dir);
    trusted.catalogues.insert(canonical.clone(), hash.clone());
    let bytes = serde_json::to_vec_pretty(&trusted).map_err(std::io::Error::other)?;
    let temporary = tempfile::NamedTempFile::new_in(config_dir)?;
    std::fs::write(temporary.path(), bytes)?;
    temporary
        .persist(config_dir.join(TRUST_FILE))
        .map_err(|e| e.error)?;
    Ok((canonical, hash))
}

/// What `advisors`, `plan` and a consultation say about a repository catalogue that is not
/// trusted, and what to run.
pub fn untrusted_message(path: &Path) -> String {
    format!(
        "the repository's catalogue `{}` is not trusted (never trusted here, or changed \
         since): none of its advisors run and the embedded catalogue is used instead; read \
         it, then run `advisor-consult trust` in this repository to use it",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_by_canonical_path_and_content_and_one_byte_revokes_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("config/advisord");
        let file = dir.path().join("advisors.yaml");
        std::fs::write(&file, "advisors: []\n").expect("write");
        let content = std::fs::read(&file).expect("read");
        assert!(!is_trusted(Some(&config), &file, &content));
        let (canonical, hash) = trust(&config, &file, &content).expect("trust");
        assert_eq!(canonical, file.canonicalize().expect("canonical"));
        assert_eq!(hash.len(), 64);
        assert!(is_trusted(Some(&config), &file, &content));
        // The same file by another path is the same file.
        let via = dir.path().join("config/../advisors.yaml");
        assert!(is_trusted(Some(&config), &via, &content));
        // One byte changed: not trusted.
        assert!(!is_trusted(Some(&config), &file, b"advisors: [] \n"));
        // Another file with the same content: not trusted.
        let other = dir.path().join("other.yaml");
        std::fs::write(&other, &content).expect("write");
        assert!(!is_trusted(Some(&config), &other, &content));
        assert!(!is_trusted(None, &file, &content));
    }

    #[test]
    fn the_config_dir_follows_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            config_dir(&env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])),
            Some(PathBuf::from("/x/advisord"))
        );
        assert_eq!(
            config_dir(&env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.config/advisord"))
        );
        assert_eq!(config_dir(&env(&[])), None);
    }
}
