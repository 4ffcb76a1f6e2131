//! Parts-aware pacing: how long to pause a table's flushes given how many active parts its
//! fullest partition holds, and where the thresholds come from.
//!
//! ClickHouse delays an insert once a partition holds `parts_to_delay_insert` active parts and
//! refuses it (`Code: 252`, too many parts) at `parts_to_throw_insert`. sluice reads the count
//! from `system.parts` after its flushes and slows down first: no pause below
//! [`PACING_START`] of the delay threshold, then a pause growing
//! linearly to `max_pause` at the threshold. Rows keep arriving during a pause, so the next part
//! is larger; merges get time to bring the count down.

use std::time::Duration;

use super::config::PACING_START;

/// ClickHouse's default `parts_to_delay_insert`, for a server that does not say.
pub(crate) const DEFAULT_DELAY_AT: u64 = 150;

/// How often a table's part count is read: a `system.parts` query per second per table costs
/// ClickHouse nothing worth measuring.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The pause before the next flush when the fullest partition holds `active` parts and
/// ClickHouse starts delaying at `delay_at`.
pub(crate) fn pause(active: u64, delay_at: u64, max_pause: Duration) -> Duration {
    let delay_at = delay_at.max(1) as f64;
    let start = delay_at * PACING_START;
    let active = active as f64;
    if active <= start {
        return Duration::ZERO;
    }
    // delay_at >= 1 and PACING_START < 1, so the span is positive.
    let share = ((active - start) / (delay_at - start)).min(1.0);
    max_pause.mul_f64(share)
}

/// A MergeTree setting from a table's `CREATE TABLE` text (`... SETTINGS parts_to_delay_insert =
/// 5, index_granularity = 8192`), when the table overrides it.
pub(crate) fn table_setting(create_query: &str, name: &str) -> Option<u64> {
    let (_, settings) = create_query.rsplit_once("SETTINGS ")?;
    settings.split(',').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key.trim() == name)
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_secs(5);

    #[test]
    fn no_pause_until_half_way_then_a_growing_one() {
        assert_eq!(pause(0, 150, MAX), Duration::ZERO);
        assert_eq!(pause(75, 150, MAX), Duration::ZERO);
        let early = pause(90, 150, MAX);
        let late = pause(140, 150, MAX);
        assert!(
            Duration::ZERO < early && early < late && late < MAX,
            "{early:?} {late:?}"
        );
        assert_eq!(pause(150, 150, MAX), MAX);
        assert_eq!(pause(10_000, 150, MAX), MAX);
    }

    #[test]
    fn tiny_thresholds_and_pacing_off() {
        assert_eq!(pause(1, 1, MAX), MAX);
        assert_eq!(pause(0, 0, MAX), Duration::ZERO);
        assert_eq!(pause(500, 150, Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn settings_are_read_from_the_create_query() {
        let query = "CREATE TABLE default.t ( a Int64) ENGINE = MergeTree() ORDER BY tuple() \
                     SETTINGS parts_to_delay_insert = 5, parts_to_throw_insert = 10, \
                     index_granularity = 8192";
        assert_eq!(table_setting(query, "parts_to_delay_insert"), Some(5));
        assert_eq!(table_setting(query, "parts_to_throw_insert"), Some(10));
        assert_eq!(table_setting(query, "max_delay_to_insert"), None);
        assert_eq!(
            table_setting(
                "CREATE TABLE x (a Int8) ENGINE = Log",
                "parts_to_delay_insert"
            ),
            None
        );
    }
}
