//! How long rows waited from arrival to commit, counted in buckets a reader can subtract.
//!
//! The Prometheus histogram of `sluice_row_wait_seconds` answers a scrape, but its buckets are
//! few and its quantiles are computed by whoever scrapes it. The console wants the median and
//! the 99th percentile of the last second and the last minute, in-process, without parsing text.
//! So each table also counts its waits here: buckets four to an octave, from a millisecond to
//! about a quarter of an hour, as plain atomics. A reader takes two snapshots and subtracts them
//! to get the waits between the two, and a quantile is then read off to within a fifth of
//! itself.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets per doubling of the wait.
const PER_OCTAVE: f64 = 4.0;

/// The upper bound of the first bucket, in seconds.
const FIRST: f64 = 1e-3;

/// Buckets in all: the last one takes every wait longer than the one before it holds.
pub const BUCKETS: usize = 81;

/// The bucket a wait of `seconds` falls in.
fn bucket(seconds: f64) -> usize {
    if seconds.is_nan() || seconds <= FIRST {
        return 0;
    }
    let index = (PER_OCTAVE * (seconds / FIRST).log2()).ceil();
    if index >= (BUCKETS - 1) as f64 {
        BUCKETS - 1
    } else {
        index as usize
    }
}

/// The upper bound of bucket `i`, in seconds.
fn upper(i: usize) -> f64 {
    FIRST * (i as f64 / PER_OCTAVE).exp2()
}

/// Live wait counts, one atomic per bucket, updated by a table's writer.
#[derive(Debug)]
pub(crate) struct WaitCounts {
    counts: [AtomicU64; BUCKETS],
}

impl Default for WaitCounts {
    fn default() -> Self {
        Self {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl WaitCounts {
    /// Counts one wait.
    pub(crate) fn record(&self, seconds: f64) {
        self.counts[bucket(seconds)].fetch_add(1, Ordering::Relaxed);
    }

    /// What has been counted so far.
    pub(crate) fn snapshot(&self) -> Waits {
        Waits {
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
        }
    }
}

/// Waits counted by bucket: a snapshot since start, or the difference of two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waits {
    counts: Vec<u64>,
}

impl Default for Waits {
    fn default() -> Self {
        Self {
            counts: vec![0; BUCKETS],
        }
    }
}

impl Waits {
    /// The waits given, counted: for a reader's tests, which have no table to count them.
    pub fn of(seconds: &[f64]) -> Waits {
        let counts = WaitCounts::default();
        for s in seconds {
            counts.record(*s);
        }
        counts.snapshot()
    }

    /// How many waits.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds `other`'s waits to these: several tables' together.
    pub fn add(&mut self, other: &Waits) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine = mine.saturating_add(*theirs);
        }
    }

    /// The waits counted since `earlier`, a snapshot of the same counts taken before.
    pub fn since(&self, earlier: &Waits) -> Waits {
        Waits {
            counts: (self.counts.iter().zip(&earlier.counts))
                .map(|(now, then)| now.saturating_sub(*then))
                .collect(),
        }
    }

    /// The wait below which a share `q` (0 to 1) of the waits fall, in seconds: the geometric
    /// middle of the bucket holding it. `None` without waits.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        // The rank of the wait sought, 1-based: at least the first, at most the last.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(match i {
                    0 => FIRST,
                    i if i == BUCKETS - 1 => upper(i - 1),
                    i => (upper(i - 1) * upper(i)).sqrt(),
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waits(seconds: &[f64]) -> Waits {
        Waits::of(seconds)
    }

    #[test]
    fn a_quantile_is_within_a_fifth_of_the_wait() {
        for wait in [0.002, 0.05, 0.25, 1.0, 1.3, 7.5, 60.0, 400.0] {
            let got = waits(&[wait]).quantile(0.5).unwrap();
            assert!((got / wait - 1.0).abs() < 0.2, "{wait} read as {got}");
        }
    }

    #[test]
    fn out_of_range_waits_land_in_the_end_buckets() {
        assert_eq!(waits(&[0.0, -1.0, f64::NAN]).quantile(1.0), Some(FIRST));
        let long = waits(&[1e9]).quantile(0.5).unwrap();
        assert!(long > 800.0, "{long}");
        assert_eq!(Waits::default().quantile(0.5), None);
    }

    #[test]
    fn p50_and_p99_of_a_spread_and_of_the_difference_of_two_snapshots() {
        let counts = WaitCounts::default();
        for _ in 0..990 {
            counts.record(0.1);
        }
        for _ in 0..10 {
            counts.record(10.0);
        }
        let first = counts.snapshot();
        let near = |got: Option<f64>, want: f64| (got.unwrap() / want - 1.0).abs() < 0.2;
        assert!(near(first.quantile(0.5), 0.1));
        assert!(near(first.quantile(0.99), 0.1));
        assert!(near(first.quantile(0.999), 10.0));
        for _ in 0..100 {
            counts.record(2.0);
        }
        let later = counts.snapshot().since(&first);
        assert_eq!(later.total(), 100);
        assert!(near(later.quantile(0.5), 2.0));
        let mut both = first.clone();
        both.add(&later);
        assert_eq!(both.total(), 1_100);
    }
}
