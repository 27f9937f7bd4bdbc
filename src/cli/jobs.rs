//! The verbs that go through the daemon's job queue: `--assessment ID`, the consultation
//! half of `ask`, `jobs`, `wait`, `cancel` and `demo`. Owned by the daemon work; until the
//! daemon exists each of them says so and exits 4 (the daemon could not be reached).

use crate::cli::JobVerb;
use crate::context::{GlobalFlags, RequestContext};

/// Run a job verb; `Ok` carries the exit status (SPEC §10).
pub fn run_job_verb(
    verb: &JobVerb,
    global: &GlobalFlags,
    ctx: &RequestContext,
) -> anyhow::Result<i32> {
    let _ = (global, ctx);
    eprintln!(
        "error: `{}` needs the daemon, which is not built yet",
        verb.name()
    );
    Ok(4)
}
