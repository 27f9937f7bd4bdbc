//! What every bench computes of its samples.

// Each bench includes this file as a module of its own and uses a part of it.
#![allow(dead_code)]

use std::time::Duration;

/// The median of `samples` (the upper one of an even count).
pub fn median<T: PartialOrd + Copy>(mut samples: Vec<T>) -> T {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    samples[samples.len() / 2]
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
