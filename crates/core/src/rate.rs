//! A table's recent row rate, for the adaptive flush age ([`crate::FlushPolicy::age_limit`]).
//!
//! The rate is an exponentially decaying count: every row adds one, and the count decays by
//! `e^(-t/window)`. Divided by the window it is rows per second over roughly the last window,
//! without buckets or a timer: it is brought up to date when rows arrive or the rate is read.
//! Time is passed in, as everywhere in this crate.

use std::time::{Duration, Instant};

/// Rows per second over roughly the last `window`.
#[derive(Debug, Clone)]
pub struct RateMeter {
    window_secs: f64,
    level: f64,
    at: Option<Instant>,
}

impl RateMeter {
    /// A meter that has seen nothing. `window` must be positive; a zero window is taken as 1 ms.
    pub fn new(window: Duration) -> Self {
        Self {
            window_secs: window.as_secs_f64().max(0.001),
            level: 0.0,
            at: None,
        }
    }

    /// Counts `rows` arriving at `now`.
    pub fn record(&mut self, rows: u64, now: Instant) {
        self.level = self.level_at(now) + rows as f64;
        self.at = Some(self.at.map_or(now, |at| at.max(now)));
    }

    /// Rows per second at `now`.
    pub fn per_second(&self, now: Instant) -> f64 {
        self.level_at(now) / self.window_secs
    }

    fn level_at(&self, now: Instant) -> f64 {
        match self.at {
            None => 0.0,
            Some(at) => {
                let elapsed = now.saturating_duration_since(at).as_secs_f64();
                self.level * (-elapsed / self.window_secs).exp()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_rate_is_measured() {
        let mut meter = RateMeter::new(Duration::from_secs(1));
        let t0 = Instant::now();
        // 200 rows/s for 5 windows: the decayed count settles near the true rate.
        for i in 0..1000u64 {
            meter.record(1, t0 + Duration::from_millis(i * 5));
        }
        let rate = meter.per_second(t0 + Duration::from_millis(4995));
        assert!((190.0..=210.0).contains(&rate), "{rate}");
    }

    #[test]
    fn the_rate_decays_when_rows_stop() {
        let mut meter = RateMeter::new(Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(meter.per_second(t0), 0.0);
        meter.record(1000, t0);
        let at_once = meter.per_second(t0);
        let later = meter.per_second(t0 + Duration::from_secs(3));
        assert_eq!(at_once, 1000.0);
        assert!(later < at_once * 0.06, "{later}");
    }

    #[test]
    fn time_going_back_does_not_inflate_the_rate() {
        let mut meter = RateMeter::new(Duration::from_secs(1));
        let t0 = Instant::now();
        meter.record(10, t0 + Duration::from_secs(1));
        meter.record(10, t0);
        assert_eq!(meter.per_second(t0 + Duration::from_secs(1)), 20.0);
    }
}
