//! The scheduler: queued jobs start in order, at most a bound at once, until shutdown
//! begins. Each is run by the daemon's [`super::Runner`].

use super::{JobEntry, Jobs};
use crate::protocol::JobState;
use std::sync::Arc;
use tokio::sync::{mpsc, Semaphore};

/// Start the jobs of `queue`, at most `max_running` at once.
pub(super) async fn run(
    jobs: Arc<Jobs>,
    mut queue: mpsc::UnboundedReceiver<Arc<JobEntry>>,
    max_running: usize,
) -> &'static str {
    let slots = Arc::new(Semaphore::new(max_running.max(1)));
    loop {
        let entry = tokio::select! {
            () = jobs.drain.cancelled() => break,
            next = queue.recv() => match next {
                Some(entry) => entry,
                None => break,
            },
        };
        let slot = tokio::select! {
            () = jobs.drain.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        if entry.state() != JobState::Queued {
            continue; // cancelled while it waited
        }
        let running = (jobs.run)(jobs.clone(), entry);
        jobs.tracker.spawn(async move {
            running.await;
            drop(slot);
        });
    }
    "scheduler"
}
