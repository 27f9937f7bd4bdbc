//! The store: one JSON file per record under `<state>/<task>/`, written atomically and
//! serialised per task by a lock, so concurrent writers in many processes never lose,
//! duplicate or tear a record.

use crate::core::policy::PlanEnv;
use crate::core::records::{Record, TaskName};
use crate::core::writer::Refusal;
use std::path::{Path, PathBuf};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The writer refused the record; nothing was written.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The file system failed; nothing was half-written.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A stored file does not parse as a record.
    #[error("`{path}` is not a readable record: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// The records of one state directory.
pub struct Store {
    state_dir: PathBuf,
}

impl Store {
    /// A store over `state_dir` (created on first write).
    pub fn open(state_dir: &Path) -> Store {
        Store {
            state_dir: state_dir.to_path_buf(),
        }
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Every record of `task`, in sequence order (empty when the task has none).
    pub fn records(&self, task: &TaskName) -> Result<Vec<Record>, StoreError> {
        let _ = task;
        todo!("store: records")
    }

    /// Every consultation record of every task, for availability.
    pub fn consultations_all_tasks(&self) -> Result<Vec<Record>, StoreError> {
        todo!("store: consultations_all_tasks")
    }

    /// Admit `input` through the writer under the task's lock and store it durably.
    pub fn write(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
    ) -> Result<Record, StoreError> {
        let _ = (task, input, plan_env);
        todo!("store: write")
    }
}
