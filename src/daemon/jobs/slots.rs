//! Each advisor's turns: at most `max_concurrent` exchanges with one advisor at a time,
//! across every job of the daemon. The limit is read from the catalogue each job resolves,
//! so an edit counts for the next exchange without a restart: a raised limit hands its new
//! turns to the exchanges already waiting at once; a lowered one counts for exchanges that
//! begin after the edit (those running keep their turn and finish).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// The turns of every advisor consulted so far, by advisor id.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    by_advisor: Mutex<HashMap<String, Turns>>,
}

#[derive(Debug)]
struct Turns {
    limit: usize,
    semaphore: Arc<Semaphore>,
}

impl Slots {
    /// The semaphore bounding `advisor`'s exchanges at `max_concurrent` (at least one),
    /// following a limit that changed since the last exchange.
    pub(crate) fn of(&self, advisor: &str, max_concurrent: u32) -> Arc<Semaphore> {
        let limit = max_concurrent.max(1) as usize;
        let mut map = self.by_advisor.lock().unwrap_or_else(|p| p.into_inner());
        let turns = map.entry(advisor.to_string()).or_insert_with(|| Turns {
            limit,
            semaphore: Arc::new(Semaphore::new(limit)),
        });
        if limit > turns.limit {
            // Waiting exchanges take the new turns at once.
            turns.semaphore.add_permits(limit - turns.limit);
            turns.limit = limit;
        } else if limit < turns.limit {
            // Permits held now go back to the old semaphore, which nobody asks again.
            *turns = Turns {
                limit,
                semaphore: Arc::new(Semaphore::new(limit)),
            };
        }
        turns.semaphore.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edited_limit_counts_for_the_next_exchange() {
        let slots = Slots::default();
        let two = slots.of("gateway", 2);
        let first = two.clone().try_acquire_owned().expect("turn 1");
        let second = two.clone().try_acquire_owned().expect("turn 2");
        assert!(
            two.clone().try_acquire_owned().is_err(),
            "a third waits at 2"
        );
        // Raised to 3 in the catalogue: the third exchange goes now, on the same turns.
        let three = slots.of("gateway", 3);
        assert!(Arc::ptr_eq(&two, &three));
        let third = three
            .clone()
            .try_acquire_owned()
            .expect("turn 3 after the raise");
        assert!(three.clone().try_acquire_owned().is_err());
        // Lowered to 1: the running three finish on their turns; new exchanges get one.
        let one = slots.of("gateway", 1);
        let next = one
            .clone()
            .try_acquire_owned()
            .expect("one turn after the edit");
        assert!(
            one.clone().try_acquire_owned().is_err(),
            "only one at a time now"
        );
        drop((first, second, third, next));
        // The same limit again changes nothing; another advisor has turns of its own.
        assert!(Arc::ptr_eq(&one, &slots.of("gateway", 1)));
        assert_eq!(slots.of("other", 0).available_permits(), 1);
    }
}
