//! `advisor-consult reviews` and `reviews answer ID --file F`: the review inbox of a daemon
//! that offers reviews to the mesh with `inbox`. Both go through the daemon.

use crate::error::Error;
use crate::facade::Api;
use crate::protocol::{ReviewAnswerRequest, ReviewAnswered, ReviewList, ReviewsRequest};
use crate::render::text::Out;
use crate::render::{Format, Render};
use std::path::Path;

/// The largest answer file read, in bytes.
const MAX_ANSWER_BYTES: u64 = 256 * 1024;

/// `reviews`: the reviews waiting, oldest first.
pub async fn list(api: &dyn Api, format: Format) -> anyhow::Result<i32> {
    let list = api.reviews(ReviewsRequest {}).await?;
    super::emit(&list, format)
}

/// `reviews answer ID --file F`: send the answer in `file` (`-`: standard input).
pub async fn answer(api: &dyn Api, id: &str, file: &Path, format: Format) -> anyhow::Result<i32> {
    let answer = read_answer(file)?;
    let request = ReviewAnswerRequest {
        id: id.to_string(),
        answer,
    };
    let answered = api.answer_review(request).await?;
    super::emit(&answered, format)
}

fn read_answer(file: &Path) -> Result<String, Error> {
    let (bytes, name) = super::read_bounded_input(
        file,
        MAX_ANSWER_BYTES,
        "`reviews answer ID --file F` takes a readable file holding the answer (a JSON \
         object with `conclusion` and `stance`), or `-`",
        "256 KiB; an answer is a conclusion with its reasons",
    )?;
    String::from_utf8(bytes).map_err(|_| Error::Usage(format!("{name} is not UTF-8 text")))
}

impl Render for ReviewList {
    fn plain(&self) -> String {
        let mut out = Out::new();
        if self.reviews.is_empty() {
            out.line("no review is waiting in this daemon's inbox");
            return out.finish();
        }
        for (i, review) in self.reviews.iter().enumerate() {
            if i > 0 {
                out.blank();
            }
            out.line(&format!("review {} from {}", review.id, review.asker));
            out.field(2, "capabilities", &review.capabilities.join(", "));
            out.field(2, "answer before", &review.deadline_at);
            out.line("  question:");
            for line in review.question.lines() {
                out.para(4, 4, line);
            }
            out.para(
                2,
                2,
                &format!(
                    "answer it with `advisor-consult reviews answer {} --file answer.json`",
                    review.id
                ),
            );
        }
        out.finish()
    }
}

impl Render for ReviewAnswered {
    fn plain(&self) -> String {
        let mut out = Out::new();
        out.line(&format!(
            "review {} answered ({}); sent to {}",
            self.id, self.stance, self.asker
        ));
        out.para(2, 2, &self.conclusion);
        out.finish()
    }
}
