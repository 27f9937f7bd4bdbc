//! The review inbox as verbs: list the reviews waiting, and answer one, which sends the
//! answer to the asker over the mesh. Only a daemon offering reviews with `inbox` keeps
//! one.

use super::{offer, Mesh};
use crate::daemon::jobs::blocking;
use crate::error::{Error, Result};
use crate::protocol::{codes, ReviewAnswered, ReviewItem, ReviewList};
use advisord_adapters::contract::read_answer;
use advisord_adapters::mesh::wire::ReplyOutcome;
use std::sync::Arc;

fn inbox_of(mesh: Option<&Arc<Mesh>>) -> Result<(&Arc<Mesh>, &super::inbox::Inbox)> {
    mesh.and_then(|mesh| mesh.inbox.as_ref().map(|inbox| (mesh, inbox)))
        .ok_or_else(|| Error::Review {
            code: codes::NO_INBOX,
            status: 409,
            message: "this daemon keeps no review inbox; start it with `--mesh URL \
                      --offer-reviews inbox` (or `ADVISORD_MESH_OFFER=inbox`)"
                .into(),
        })
}

/// The reviews waiting, oldest first.
pub async fn list(mesh: Option<&Arc<Mesh>>) -> Result<ReviewList> {
    let (_, inbox) = inbox_of(mesh)?;
    let inbox = inbox.clone();
    let items = blocking(move || Ok(inbox.list())).await?;
    let reviews = items
        .into_iter()
        .map(|i| ReviewItem {
            id: i.id,
            asker: i.asker,
            question: i.question,
            capabilities: i.capabilities,
            received_at: i.received_at,
            deadline_at: i.deadline_at,
        })
        .collect();
    Ok(ReviewList { reviews })
}

/// Answer review `id` with `answer` (read as any advisor's answer is).
pub async fn answer(mesh: Option<&Arc<Mesh>>, id: &str, answer: &str) -> Result<ReviewAnswered> {
    let (mesh, inbox) = inbox_of(mesh)?;
    let item = {
        let (inbox, id) = (inbox.clone(), id.to_string());
        blocking(move || Ok(inbox.get(&id))).await?
    };
    let item = item.ok_or_else(|| Error::Review {
        code: codes::UNKNOWN_REVIEW,
        status: 404,
        message: format!(
            "no review `{id}` is waiting: it was answered, cancelled, or its asker stopped \
             waiting; `advisor-consult reviews` lists those waiting"
        ),
    })?;
    let normalised = read_answer(answer).map_err(|failure| Error::Review {
        code: codes::INVALID_ANSWER,
        status: 400,
        message: format!(
            "the answer cannot be read ({}: {}); give a JSON object with at least \
             `conclusion` and `stance` (supports, opposes, alternative, inconclusive), as \
             docs/MESH.md shows",
            failure.kind.as_str(),
            failure.diagnostic
        ),
    })?;
    let outcome = ReplyOutcome::Completed {
        answer: normalised.clone(),
        source: mesh.inbox_source(),
        usage: None,
    };
    let payload = offer::sealed_reply(mesh, &item.id, outcome)
        .map_err(|e| Error::Internal(format!("the answer could not be encoded: {e}")))?;
    mesh.send(item.reply_to.clone(), payload)
        .await
        .map_err(|why| Error::Review {
            code: codes::MESH_DOWN,
            status: 503,
            message: format!(
                "the answer was not sent: {why}; the review stays in the inbox, try again"
            ),
        })?;
    inbox.remove(&item.id);
    tracing::info!(review = %item.id, asker = %item.asker, "review answered from the inbox");
    Ok(ReviewAnswered {
        id: item.id,
        asker: item.asker,
        conclusion: normalised.conclusion,
        stance: normalised.stance.as_str().to_string(),
    })
}
