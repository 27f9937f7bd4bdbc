//! The review inbox of a daemon offering reviews with `inbox`: each review asked of it is
//! kept as one JSON file under `<data-dir>/inbox/` (written atomically), so it survives a
//! restart; `advisor-consult reviews` lists them and `reviews answer ID --file F` answers
//! one by publishing the reply to the asker's reply subject, which the asker keeps
//! listening on until its deadline, whether or not this daemon restarted meanwhile.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One review waiting in the inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxItem {
    /// The request id (what `reviews answer` names).
    pub id: String,
    /// The asking daemon's runtime id.
    pub asker: String,
    /// The question, as the asker's advisors get it (scrubbed of secret shapes).
    pub question: String,
    /// The capabilities asked for.
    pub capabilities: Vec<String>,
    /// When it arrived (RFC 3339 UTC).
    pub received_at: String,
    /// When the asker stops waiting (RFC 3339 UTC).
    pub deadline_at: String,
    /// Where the answer goes (the asker's reply subject).
    pub reply_to: String,
}

impl InboxItem {
    /// Whether the asker has stopped waiting at `now`.
    pub fn expired(&self, now: time::OffsetDateTime) -> bool {
        time::OffsetDateTime::parse(
            &self.deadline_at,
            &time::format_description::well_known::Rfc3339,
        )
        .map_or(true, |deadline| deadline <= now)
    }
}

/// The inbox directory.
#[derive(Debug, Clone)]
pub struct Inbox {
    dir: PathBuf,
}

/// The most reviews an inbox keeps waiting; past it a request is answered `rate_limited`.
pub const MAX_WAITING: usize = 256;

impl Inbox {
    /// The inbox in `dir` (created, `0700`).
    pub fn open(dir: &Path) -> Inbox {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
        Inbox {
            dir: dir.to_path_buf(),
        }
    }

    fn path(&self, id: &str) -> Option<PathBuf> {
        advisord_adapters::mesh::wire::valid_runtime_id(id)
            .then(|| self.dir.join(format!("{id}.json")))
    }

    /// Keep `item` (temporary file `0600`, fsync, linked into place, fsync of the
    /// directory). A review already waiting under the same id is never replaced: it
    /// belongs to the asker that sent it, and its answer goes only to that asker
    /// (`AlreadyExists`).
    pub fn add(&self, item: &InboxItem) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.path(&item.id).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a valid request id")
        })?;
        let tmp = self
            .dir
            .join(format!(".{}.{}.tmp", item.id, ulid::Ulid::new()));
        let written = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(&serde_json::to_vec_pretty(item).map_err(std::io::Error::other)?)?;
            file.sync_all()?;
            // A link fails when the name exists: a waiting review is never replaced.
            std::fs::hard_link(&tmp, &path)
        })();
        let _ = std::fs::remove_file(&tmp);
        written?;
        std::fs::File::open(&self.dir)?.sync_all()
    }

    /// The reviews still waiting (their asker has not stopped waiting), oldest first.
    /// Expired ones are removed.
    pub fn list(&self) -> Vec<InboxItem> {
        let now = time::OffsetDateTime::now_utc();
        let mut items = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return items;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let item = std::fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<InboxItem>(&bytes).ok());
            match item {
                Some(item) if !item.expired(now) => items.push(item),
                _ => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        items.sort_by(|a, b| (&a.received_at, &a.id).cmp(&(&b.received_at, &b.id)));
        items
    }

    /// The waiting review `id`.
    pub fn get(&self, id: &str) -> Option<InboxItem> {
        self.list().into_iter().find(|i| i.id == id)
    }

    /// Remove review `id` (answered, or cancelled by its asker).
    pub fn remove(&self, id: &str) {
        if let Some(path) = self.path(id) {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, deadline_at: &str) -> InboxItem {
        InboxItem {
            id: id.into(),
            asker: "a".into(),
            question: "q".into(),
            capabilities: vec![],
            received_at: "2026-01-01T00:00:00Z".into(),
            deadline_at: deadline_at.into(),
            reply_to: "_INBOX.x".into(),
        }
    }

    #[test]
    fn waiting_reviews_survive_reopening_and_expired_ones_go() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = Inbox::open(dir.path());
        inbox.add(&item("A1", "2999-01-01T00:00:00Z")).unwrap();
        inbox.add(&item("B2", "2000-01-01T00:00:00Z")).unwrap();
        assert!(inbox.add(&item("../x", "2999-01-01T00:00:00Z")).is_err());
        // Another sender's request under the same id does not replace the waiting one.
        let mut thief = item("A1", "2999-01-01T00:00:00Z");
        thief.asker = "thief".into();
        thief.reply_to = "_INBOX.thief".into();
        let refused = inbox.add(&thief).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(inbox.get("A1").unwrap().reply_to, "_INBOX.x");
        use std::os::unix::fs::PermissionsExt;
        let file = dir.path().join("A1.json");
        assert_eq!(
            std::fs::metadata(file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let reopened = Inbox::open(dir.path());
        let ids: Vec<String> = reopened.list().into_iter().map(|i| i.id).collect();
        assert_eq!(ids, vec!["A1"]);
        assert!(reopened.get("B2").is_none());
        reopened.remove("A1");
        assert!(reopened.list().is_empty());
    }
}
