//! `context`: the task's standing conclusions, disputes, open assessments and cooling
//! advisors in about 40 lines, for a session picking up where the last one stopped.

use crate::core::views::context::context;
use crate::facade::Api;
use crate::protocol::{AdvisorsRequest, RequestContext, StatusRequest};
use crate::render::{render, Format};

/// Print the context of `ctx`'s task in `format`; exit status 0.
pub async fn run(api: &dyn Api, ctx: &RequestContext, format: Format) -> anyhow::Result<i32> {
    let status = api
        .status(StatusRequest {
            context: ctx.clone(),
        })
        .await?;
    let advisors = api
        .advisors(AdvisorsRequest {
            context: ctx.clone(),
        })
        .await?;
    super::print_stdout(&render(&context(&status, &advisors), format))?;
    Ok(0)
}
