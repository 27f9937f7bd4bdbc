//! No spare file is made while a consultation is being answered at once.
//!
//! The spare files' thread runs at the lowest priority, yet once it is inside a file's
//! creation (100 to 250 µs on ext4) a thread of the job's that wakes meanwhile waits for
//! the call to end on a kernel that does not preempt system calls; and on a machine whose
//! scheduler packs threads onto as few cores as it can, the job's threads and that one share
//! a core. Measured on the project's test machine: the thread ran about 280 µs inside each
//! consultation's round trip on the disk, before its plan was staged and before its reply.
//! So a consultation taken on the connection that queued it holds the writes' quiet
//! ([`crate::store::spare::quiet`]) from its request until its reply has nothing to send:
//! the last event written, or no new one for [`ANSWERING_IDLE`] (its advisors are slow,
//! and the thread may work meanwhile).

use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _};
use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// How long a consultation's reply may wait for its next event before the spare files'
/// thread may work again: the steps of a job answered at once come within a millisecond of
/// each other; an advisor that takes longer leaves the machine idle meanwhile.
pub const ANSWERING_IDLE: Duration = Duration::from_millis(5);

/// `events`, holding `quiet` (the writes' quiet) while they come without a wait of
/// [`ANSWERING_IDLE`]: dropped at their end or at the first such wait.
pub fn quiet_while_answering<T: Send + 'static, Q: Send + Unpin + 'static>(
    events: BoxStream<'static, T>,
    quiet: Q,
) -> BoxStream<'static, T> {
    Answering {
        events,
        quiet: Some(quiet),
        idle: None,
    }
    .boxed()
}

struct Answering<T, Q> {
    events: BoxStream<'static, T>,
    quiet: Option<Q>,
    /// Since when the next event is waited for.
    idle: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T, Q: Unpin> Stream for Answering<T, Q> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = &mut *self;
        match this.events.poll_next_unpin(cx) {
            Poll::Ready(Some(event)) => {
                this.idle = None;
                Poll::Ready(Some(event))
            }
            Poll::Ready(None) => {
                this.quiet = None;
                this.idle = None;
                Poll::Ready(None)
            }
            Poll::Pending => {
                if this.quiet.is_some() {
                    let idle = this
                        .idle
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(ANSWERING_IDLE)));
                    if idle.as_mut().poll(cx).is_ready() {
                        this.quiet = None;
                        this.idle = None;
                    }
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// A guard that says when it is dropped.
    struct Held(Arc<AtomicBool>);
    impl Drop for Held {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }

    fn held() -> (Held, Arc<AtomicBool>) {
        let flag = Arc::new(AtomicBool::new(true));
        (Held(flag.clone()), flag)
    }

    #[tokio::test(start_paused = true)]
    async fn the_quiet_is_held_until_the_last_event_and_no_longer() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<u32>();
        let (guard, holding) = held();
        let mut events = quiet_while_answering(rx.boxed(), guard);
        tx.unbounded_send(1).expect("sent");
        tx.unbounded_send(2).expect("sent");
        assert_eq!(events.next().await, Some(1));
        assert_eq!(events.next().await, Some(2));
        assert!(
            holding.load(Ordering::SeqCst),
            "let go before the reply was over"
        );
        drop(tx);
        assert_eq!(events.next().await, None);
        assert!(
            !holding.load(Ordering::SeqCst),
            "still held once the reply ended"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_wait_keeps_the_quiet_and_a_long_one_lets_it_go() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<u32>();
        let (guard, holding) = held();
        let mut events = quiet_while_answering(rx.boxed(), guard);
        // A wait shorter than the bound: still held when the next event comes.
        let short = tokio::time::timeout(ANSWERING_IDLE / 2, events.next()).await;
        assert!(short.is_err(), "no event was sent");
        tx.unbounded_send(1).expect("sent");
        assert_eq!(events.next().await, Some(1));
        assert!(holding.load(Ordering::SeqCst), "let go after a short wait");
        // A wait past the bound: let go, and the events still come.
        let long = tokio::time::timeout(ANSWERING_IDLE * 2, events.next()).await;
        assert!(long.is_err(), "no event was sent");
        assert!(
            !holding.load(Ordering::SeqCst),
            "held while the reply waited on its advisors"
        );
        tx.unbounded_send(2).expect("sent");
        assert_eq!(events.next().await, Some(2));
    }
}
