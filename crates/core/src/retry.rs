//! How long to wait before trying a failed flush again: capped exponential backoff with jitter.
//!
//! Pure arithmetic: the caller passes the attempt number and a random fraction, so tests are
//! exact and the pipeline picks its own randomness.

use std::time::Duration;

/// First wait after a failure.
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(100);

/// Longest wait between tries: a store that comes back is noticed within this.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Capped exponential backoff with "equal jitter": half the delay is fixed, half is random, so
/// retries from many tables spread out without ever collapsing to zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: DEFAULT_INITIAL_BACKOFF,
            max: DEFAULT_MAX_BACKOFF,
        }
    }
}

impl Backoff {
    /// A backoff from `initial` doubling up to `max` (at least `initial`).
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max: max.max(initial),
        }
    }

    /// The wait before try number `attempt + 1`, after `attempt` failures (counting from 1).
    /// `jitter` is a random fraction in `[0, 1)`.
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let base = self
            .initial
            .saturating_mul(1u32 << exp.min(31))
            .min(self.max);
        let jitter = jitter.clamp(0.0, 1.0);
        base.mul_f64(0.5 + 0.5 * jitter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap() {
        let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let full: Vec<_> = (1..=6).map(|a| b.delay(a, 1.0).as_millis()).collect();
        assert_eq!(full, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.delay(1, 0.0), Duration::from_millis(50));
        assert_eq!(b.delay(u32::MAX, 1.0), Duration::from_secs(1));
    }
}
