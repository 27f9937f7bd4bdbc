//! A set of patterns searched with a bounded number of search caches.
//!
//! A `regex::RegexSet` keeps a search cache for every thread that ever searched with it
//! at the same time as another, and keeps them for good. In a daemon whose records are
//! judged on the many threads of a blocking pool, a burst leaves one per thread (tens of
//! kilobytes each, more once its lazy automaton fills), allocated during the burst and
//! scattered over its pages, which then cannot go back to the system. [`Patterns`] is the
//! same set, built as `RegexSet` builds one, whose searches take one of a few kept caches
//! or make their own, given back only while fewer than its bound are kept.

use regex_automata::{meta, nfa::thompson::WhichCaptures, Input, MatchKind, PatternSet};
use std::sync::Mutex;

/// Patterns searched at once, with at most `keep` search caches kept between searches.
pub struct Patterns {
    set: meta::Regex,
    kept: Mutex<Vec<meta::Cache>>,
    keep: usize,
}

impl Patterns {
    /// The set of `patterns` (every match reported, as `RegexSet` does), keeping at most
    /// `keep` caches.
    pub fn new<P: AsRef<str>>(patterns: &[P], keep: usize) -> Result<Patterns, String> {
        let config = meta::Config::new()
            .nfa_size_limit(Some(10 * (1 << 20)))
            .hybrid_cache_capacity(2 * (1 << 20))
            .match_kind(MatchKind::All)
            .utf8_empty(true)
            .which_captures(WhichCaptures::None);
        let set = meta::Builder::new()
            .configure(config)
            .build_many(patterns)
            .map_err(|e| e.to_string())?;
        Ok(Patterns {
            set,
            kept: Mutex::new(Vec::new()),
            keep,
        })
    }

    /// The indices of the patterns that match somewhere in `text`, ascending.
    pub fn matching(&self, text: &str) -> Vec<usize> {
        let mut cache = self.take();
        let mut found = PatternSet::new(self.set.pattern_len());
        self.set
            .which_overlapping_matches_with(&mut cache, &Input::new(text), &mut found);
        self.give_back(cache);
        found.iter().map(|id| id.as_usize()).collect()
    }

    /// How many caches are kept now.
    #[cfg(test)]
    fn caches_kept(&self) -> usize {
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn take(&self) -> meta::Cache {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner()).pop();
        kept.unwrap_or_else(|| self.set.create_cache())
    }

    fn give_back(&self, cache: meta::Cache) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < self.keep {
            kept.push(cache);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_matching_pattern_is_found_in_order() {
        let set = Patterns::new(&[r"\bfoo\b", r"ba[rz]", r"qux"], 2).expect("compiles");
        assert_eq!(set.matching("a foo and a baz"), vec![0, 1]);
        assert_eq!(set.matching("nothing here"), Vec::<usize>::new());
    }

    /// However many searches ran at once, at most `keep` caches stay.
    #[test]
    fn at_most_keep_caches_stay_after_searches_at_once() {
        let set = Patterns::new(&["a+", "b+"], 2).expect("compiles");
        let barrier = std::sync::Barrier::new(6);
        std::thread::scope(|scope| {
            for _ in 0..6 {
                scope.spawn(|| {
                    // Each thread holds a cache while the others take theirs.
                    let cache = set.take();
                    barrier.wait();
                    set.give_back(cache);
                });
            }
        });
        assert_eq!(set.caches_kept(), 2, "six caches given back, two kept");
        assert_eq!(set.matching("aab"), vec![0, 1]);
        assert_eq!(set.caches_kept(), 2);
    }
}
