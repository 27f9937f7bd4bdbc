//! Each advisor's progress while a job runs: on a terminal one line per advisor redrawn in
//! place (elapsed seconds ticking, then its outcome); elsewhere one line per event, each
//! stamped with the seconds since the job was queued, so a log shows what ran at once.

use crate::core::records::{Body, ConsultationStatus, FailureKind, Record};
use crate::protocol::{Event, Job, Timestamp};
use crate::render::job::{duration_text, outcome_text};
use crate::render::text::truncate;
use crate::render::WIDTH;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Where progress is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Standard output (the demo, whose progress is part of the show).
    Stdout,
    /// Standard error (the job verbs, whose standard output is the result).
    Stderr,
}

impl Target {
    fn is_terminal(self) -> bool {
        match self {
            Target::Stdout => std::io::stdout().is_terminal(),
            Target::Stderr => std::io::stderr().is_terminal(),
        }
    }

    /// Write `text` as is; a closed pipe or terminal is not worth failing a job for.
    pub fn write(self, text: &str) {
        let _ = match self {
            Target::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes()).and_then(|()| out.flush())
            }
            Target::Stderr => {
                let mut out = std::io::stderr().lock();
                out.write_all(text.as_bytes()).and_then(|()| out.flush())
            }
        };
    }
}

/// The instant an exchange started at `at` (RFC 3339, the daemon's clock, which is this
/// machine's), so a `wait` that joins a running job shows how long it has really run.
fn started_instant(at: Timestamp) -> Instant {
    let now = Instant::now();
    let ago =
        Duration::try_from(time::OffsetDateTime::now_utc() - at.at()).unwrap_or(Duration::ZERO);
    now.checked_sub(ago).unwrap_or(now)
}

/// Time from `from` to `to` (zero when `to` comes first).
fn since(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.at() - from.at()).unwrap_or(Duration::ZERO)
}

/// One line of progress written to a pipe or a file: stamped with the seconds since the
/// job was queued, and never cut (ids stay whole; a reader greps them), but always one
/// line (control characters become spaces).
/// The width of a line's stamp (`  2.5s  `).
const STAMP_WIDTH: usize = 8;

fn stamped(since: Duration, text: &str) -> String {
    format!(
        "{:>5.1}s  {}",
        since.as_secs_f64(),
        truncate(text, usize::MAX)
    )
}

#[derive(Debug)]
enum RowState {
    Waiting,
    Running(Instant),
    Answered(String),
    Recorded(String),
}

#[derive(Debug)]
struct Row {
    advisor: String,
    state: RowState,
}

/// The progress display of one job.
#[derive(Debug)]
pub struct Progress {
    target: Target,
    live: bool,
    started: Instant,
    rows: Vec<Row>,
    /// How many row lines the last redraw wrote (the cursor is below them).
    drawn: usize,
    /// Set once the rows are final: nothing is redrawn after.
    frozen: bool,
    /// When the job was queued, once known: lines are stamped with each event's own time
    /// since then, so a late joiner shows when things really happened.
    queued_at: Option<Timestamp>,
}

impl Progress {
    /// Progress on `target`, redrawn in place when it is a terminal (and `TERM` is not
    /// `dumb`), one line per event otherwise.
    pub fn new(target: Target) -> Progress {
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        Progress::with_live(target, target.is_terminal() && !dumb)
    }

    /// Progress on `target`, live (redrawn in place) or not.
    pub fn with_live(target: Target, live: bool) -> Progress {
        Progress {
            target,
            live,
            started: Instant::now(),
            rows: Vec::new(),
            drawn: 0,
            frozen: false,
            queued_at: None,
        }
    }

    /// Follow a job queued earlier (`wait`): stamp its events from when it was queued.
    pub fn joined(&mut self, job: &Job) {
        self.queued_at = Some(job.created_at);
    }

    /// Time since the display started (the job was queued just before).
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Say `text` about something that happened `at` (by the daemon's clock).
    fn say_at(&mut self, text: &str, at: Option<Timestamp>) {
        let line = if self.live {
            truncate(text, WIDTH)
        } else {
            let since = match (self.queued_at, at) {
                (Some(queued), Some(at)) => since(queued, at),
                _ => self.started.elapsed(),
            };
            if self.target == Target::Stdout {
                // The demo's progress is part of a show read on an 80-column terminal:
                // wrapped under its stamp, never cut.
                let lines = crate::render::text::wrap(text, WIDTH - STAMP_WIDTH);
                let stamp = stamped(since, "");
                format!("{stamp}{}", lines.join(&format!("\n{:STAMP_WIDTH$}", "")))
            } else {
                stamped(since, text)
            }
        };
        self.target.write(&format!("{line}\n"));
    }

    /// The job was accepted.
    pub fn queued(&mut self, job: &Job) {
        self.queued_at = Some(job.created_at);
        self.say_at(
            &format!("job {} queued (assessment {})", job.id, job.assessment),
            Some(job.created_at),
        );
    }

    /// Show one event of the job's stream.
    pub fn event(&mut self, event: &Event) {
        if let (None, Event::Done { result, .. }) = (self.queued_at, event) {
            self.queued_at = Some(result.created_at);
        }
        let at = Some(event.at());
        match event {
            Event::Plan { record, .. } => self.plan(record, at),
            Event::Started {
                advisor,
                at: started,
                ..
            } => {
                self.set(advisor, RowState::Running(started_instant(*started)));
                if !self.live {
                    self.say_at(&format!("{advisor}: asked"), at);
                }
            }
            Event::Finished {
                advisor,
                status,
                failure,
                duration_ms,
                ..
            } => {
                let text = match status {
                    ConsultationStatus::Completed => {
                        format!("answered in {}", duration_text(*duration_ms))
                    }
                    ConsultationStatus::Failed => format!(
                        "failed ({}) after {}",
                        failure.map_or("error", FailureKind::as_str),
                        duration_text(*duration_ms)
                    ),
                };
                if self.live {
                    self.set(advisor, RowState::Answered(format!("{text}, recording")));
                } else {
                    self.say_at(&format!("{advisor}: {text}"), at);
                }
            }
            Event::Recorded {
                advisor, record, ..
            } => {
                let text = match &record.body {
                    Body::Consultation(c) => outcome_text(
                        c.status,
                        c.stance.map(|s| s.as_str()),
                        c.failure,
                        c.duration_ms,
                    ),
                    _ => "recorded".to_string(),
                };
                self.set(advisor, RowState::Recorded(text.clone()));
                if !self.live {
                    self.say_at(
                        &format!("{advisor}: recorded consultation {} ({text})", record.id()),
                        at,
                    );
                }
                if self.live
                    && self
                        .rows
                        .iter()
                        .all(|r| matches!(r.state, RowState::Recorded(_)))
                {
                    self.finish();
                }
            }
            Event::Disagreement { record, .. } => {
                self.finish();
                self.say_at(
                    &format!("disagreement {} recorded: an advisor diverges", record.id()),
                    at,
                );
            }
            Event::Done {
                result, at: done, ..
            } => {
                self.finish();
                let took = since(result.created_at, *done);
                let mut line = format!(
                    "job {} {} after {}",
                    result.id,
                    result.state.as_str(),
                    duration_text(took.as_millis() as u64)
                );
                if let Some(reason) = &result.reason {
                    line.push_str(&format!(": {reason}"));
                }
                self.say_at(&line, at);
            }
        }
    }

    fn plan(&mut self, record: &Record, at: Option<Timestamp>) {
        let Body::Plan(plan) = &record.body else {
            return;
        };
        let head = if plan.selected.is_empty() {
            format!(
                "plan {}: nobody selected (mode {}, budget {})",
                record.id(),
                plan.mode.as_str(),
                plan.budget
            )
        } else {
            format!(
                "plan {}: {} advisor{} asked at once",
                record.id(),
                plan.selected.len(),
                if plan.selected.len() == 1 { "" } else { "s" }
            )
        };
        self.say_at(&head, at);
        self.rows = plan
            .selected
            .iter()
            .map(|s| Row {
                advisor: s.advisor.clone(),
                state: RowState::Waiting,
            })
            .collect();
        self.drawn = 0;
        self.frozen = self.rows.is_empty();
        if self.live {
            self.redraw();
        }
    }

    fn set(&mut self, advisor: &str, state: RowState) {
        if let Some(row) = self.rows.iter_mut().find(|r| r.advisor == advisor) {
            row.state = state;
        }
        if self.live {
            self.redraw();
        }
    }

    /// Redraw the rows when live (called on a timer, so running times tick).
    pub fn tick(&mut self) {
        if self.live && !self.frozen && self.drawn > 0 {
            self.redraw();
        }
    }

    /// Draw the rows one last time and stop redrawing them.
    pub fn finish(&mut self) {
        if self.live && !self.frozen {
            self.redraw();
        }
        self.frozen = true;
    }

    fn redraw(&mut self) {
        if self.frozen {
            return;
        }
        let width = self
            .rows
            .iter()
            .map(|r| r.advisor.chars().count())
            .max()
            .unwrap_or(0);
        let mut text = String::new();
        if self.drawn > 0 {
            text.push_str(&format!("\x1b[{}A", self.drawn));
        }
        for row in &self.rows {
            let state = match &row.state {
                RowState::Waiting => "waiting".to_string(),
                RowState::Running(since) => {
                    format!("running {:.1} s", since.elapsed().as_secs_f64())
                }
                RowState::Answered(text) | RowState::Recorded(text) => text.clone(),
            };
            let line = format!("  {:<width$}  {state}", row.advisor);
            text.push_str(&format!("\r\x1b[2K{}\n", truncate(&line, WIDTH - 1)));
        }
        self.drawn = self.rows.len();
        self.target.write(&text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_in_a_pipe_is_whole_one_line_and_stamped_since_queued() {
        let queued = Timestamp::parse("2026-03-02T10:00:00Z").unwrap();
        let at = Timestamp::parse("2026-03-02T10:00:02.5Z").unwrap();
        let text = format!(
            "a-very-long-advisor-identifier-from-a-catalogue: recorded consultation {} \
             (completed, opposes, 2.4 s)\nsecond line",
            "01JGQ0V3A0000000000000C001"
        );
        let line = stamped(since(queued, at), &text);
        assert!(line.starts_with("  2.5s  a-very-long"), "{line}");
        assert!(
            line.contains("01JGQ0V3A0000000000000C001 (completed"),
            "{line}"
        );
        assert!(line.ends_with("second line"), "{line}");
        assert!(!line.contains('\n') && !line.contains('…'), "{line}");
        assert!(line.chars().count() > WIDTH, "not cut to the width");
        assert_eq!(since(at, queued), Duration::ZERO);
    }

    #[test]
    fn a_start_time_becomes_an_instant_in_the_past() {
        let ago = |at: &str| started_instant(Timestamp::parse(at).unwrap()).elapsed();
        let five_s_ago = (time::OffsetDateTime::now_utc() - Duration::from_secs(5))
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let seen = ago(&five_s_ago);
        assert!(
            seen >= Duration::from_secs(5) && seen < Duration::from_secs(6),
            "{seen:?}"
        );
        // In the future: now.
        assert!(ago("2999-01-01T00:00:00Z") < Duration::from_secs(1));
    }

    #[test]
    fn durations_and_outcomes_read_short() {
        let check = |got: String, expected: &str| assert_eq!(got, expected);
        check(duration_text(0), "0 ms");
        check(duration_text(999), "999 ms");
        check(duration_text(1500), "1.5 s");
        check(duration_text(90_000), "90.0 s");
        check(
            outcome_text(
                ConsultationStatus::Completed,
                Some("opposes"),
                None,
                Some(1500),
            ),
            "completed, opposes, 1.5 s",
        );
        check(
            outcome_text(
                ConsultationStatus::Failed,
                None,
                Some(FailureKind::Timeout),
                Some(2000),
            ),
            "failed: timeout, 2.0 s",
        );
        check(
            outcome_text(ConsultationStatus::Failed, None, None, None),
            "failed: error",
        );
    }
}
