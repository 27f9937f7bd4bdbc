//! Idle exit (`--idle-exit`): the daemon stops once no job is queued or running and no
//! request came for a while.

use super::Jobs;
use crate::protocol::JobState;
use std::sync::Arc;
use std::time::Duration;

/// Resolves once `jobs` have been idle for `after`: no job queued or running and no
/// request answered for that long. Never resolves without a bound.
pub(super) async fn until_idle(jobs: &Arc<Jobs>, after: Option<Duration>) {
    let Some(after) = after else {
        return std::future::pending().await;
    };
    let tick = (after / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        tokio::time::sleep(tick).await;
        let counts = jobs.counts();
        let busy = [JobState::Queued, JobState::Running]
            .iter()
            .any(|state| counts.get(state).copied().unwrap_or(0) > 0);
        if busy {
            jobs.touch();
        } else if jobs.idle_for() >= after {
            tracing::info!(
                idle_s = after.as_secs_f64(),
                "idle: exiting (`--idle-exit`)"
            );
            return;
        }
    }
}
