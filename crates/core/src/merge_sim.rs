//! Seed 000's simulation of the merge tax: what `sluice lab merge-sim` runs, and the merge model
//! behind the estimator ([`crate::estimate`]).
//!
//! One merge thread merges `fan_in` equal parts into one, at a fixed cost per merge plus a cost
//! per row, while inserts arrive at a fixed rate for a fixed time. It is a model, not a database
//! benchmark. The assumptions that reproduce the seed's figures exactly:
//!
//! - inserts arrive at t = 1/r, 2/r, ... up to the duration (r = inserts per second), each making
//!   one part of `insert_rows` rows;
//! - a merge takes `fixed_cost + per_row_cost × rows merged`; its inputs stay active until it
//!   completes, then become one part of `fan_in` × the rows;
//! - parts of `max_part_rows` rows or more are never merged;
//! - whenever the thread is free it starts a merge on the smallest eligible level (one with at
//!   least `fan_in` parts);
//! - a merge still running when the duration ends is not counted.
//!
//! Write amplification is rows written (the inserts themselves plus every merge's output) over
//! rows ingested.

use std::time::Duration;

use serde::Serialize;

/// The seed's fixed cost per merge: 14.6 ms.
pub const SEED_FIXED_COST: Duration = Duration::from_micros(14_600);

/// The cost per merged row that reproduces the seed's figures: 0.3284 µs.
pub const SEED_PER_ROW_COST_S: f64 = 0.328_4e-6;

/// What to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MergeSimConfig {
    /// Rows ingested per second.
    pub rate: f64,
    /// Rows per insert (and so per new part).
    pub insert_rows: u64,
    /// How long ingest runs.
    #[serde(with = "seconds")]
    pub duration: Duration,
    /// Fixed cost of one merge.
    #[serde(with = "seconds")]
    pub fixed_cost: Duration,
    /// Cost per merged row, in seconds.
    pub per_row_cost_s: f64,
    /// Parts merged into one.
    pub fan_in: u64,
    /// Parts this large are never merged.
    pub max_part_rows: u64,
}

impl Default for MergeSimConfig {
    /// The seed's first experiment: 20,000 rows/s in 100-row inserts for 10 minutes.
    fn default() -> Self {
        Self {
            rate: 20_000.0,
            insert_rows: 100,
            duration: Duration::from_secs(600),
            fixed_cost: SEED_FIXED_COST,
            per_row_cost_s: SEED_PER_ROW_COST_S,
            fan_in: 10,
            max_part_rows: 1_000_000,
        }
    }
}

/// What the simulation found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MergeSimReport {
    /// The configuration simulated.
    pub config: MergeSimConfig,
    /// Parts created per second by inserts.
    pub parts_per_s: f64,
    /// Rows ingested.
    pub rows_ingested: u64,
    /// Merges completed.
    pub merges: u64,
    /// Rows written by completed merges.
    pub rows_merged: u64,
    /// (rows ingested + rows merged) / rows ingested.
    pub write_amplification: f64,
    /// Share of the time the merge thread was busy with completed merges.
    pub merger_busy: f64,
    /// Active parts when ingest ends.
    pub parts_at_end: u64,
    /// The most active parts at any moment.
    pub parts_max: u64,
    /// When active parts first reached 1,000, in seconds.
    pub passed_1000_s: Option<f64>,
    /// When active parts first reached 3,000, in seconds.
    pub passed_3000_s: Option<f64>,
    /// Active parts at the end of each second.
    pub parts_over_time: Vec<u64>,
}

struct Merge {
    ends: f64,
    level: usize,
    rows: u64,
    cost: f64,
}

/// Runs the simulation. Pure arithmetic: the same config always gives the same report.
pub fn simulate(config: &MergeSimConfig) -> MergeSimReport {
    let duration = config.duration.as_secs_f64();
    let inserts_per_s = config.rate / config.insert_rows.max(1) as f64;
    let inserts = (duration * inserts_per_s + 1e-9).floor() as u64;
    let fan_in = config.fan_in.max(2);
    // Active parts per level, and how many of them the running merge holds.
    let mut levels: Vec<u64> = vec![0];
    let mut merging: Option<Merge> = None;
    let mut active: u64 = 0;
    let (mut merges, mut rows_merged, mut busy) = (0u64, 0u64, 0.0f64);
    let (mut passed_1000, mut passed_3000) = (None, None);
    let mut parts_max = 0;
    let mut over_time = Vec::with_capacity(duration.ceil() as usize);
    let mut next_insert = 1u64;

    loop {
        let insert_at = (next_insert <= inserts).then(|| next_insert as f64 / inserts_per_s);
        let merge_at = merging.as_ref().map(|m| m.ends).filter(|t| *t <= duration);
        let (now, is_merge) = match (insert_at, merge_at) {
            (None, None) => break,
            (Some(i), Some(m)) if m <= i => (m, true),
            (Some(i), _) => (i, false),
            (None, Some(m)) => (m, true),
        };
        // Sample active parts at every whole second passed.
        while (over_time.len() as f64 + 1.0) <= now {
            over_time.push(active);
        }
        if is_merge {
            if let Some(done) = merging.take() {
                finish_merge(&mut levels, done.level, fan_in);
                active = active - fan_in + 1;
                merges += 1;
                rows_merged = rows_merged.saturating_add(done.rows);
                busy += done.cost;
            }
        } else {
            levels[0] += 1;
            active += 1;
            next_insert += 1;
        }
        parts_max = parts_max.max(active);
        if passed_1000.is_none() && active >= 1000 {
            passed_1000 = Some(now);
        }
        if passed_3000.is_none() && active >= 3000 {
            passed_3000 = Some(now);
        }
        if merging.is_none() {
            start_merge(config, fan_in, now, &levels, &mut merging);
        }
    }
    while (over_time.len() as f64) < duration.floor() {
        over_time.push(active);
    }
    let rows_ingested = inserts.saturating_mul(config.insert_rows);
    MergeSimReport {
        config: *config,
        parts_per_s: inserts_per_s,
        rows_ingested,
        merges,
        rows_merged,
        write_amplification: if rows_ingested == 0 {
            0.0
        } else {
            (rows_ingested + rows_merged) as f64 / rows_ingested as f64
        },
        merger_busy: if duration > 0.0 { busy / duration } else { 0.0 },
        parts_at_end: active,
        parts_max,
        passed_1000_s: passed_1000,
        passed_3000_s: passed_3000,
        parts_over_time: over_time,
    }
}

/// Rows in one part of `level`: an insert's rows times `fan_in` to the power of the level.
fn level_rows(config: &MergeSimConfig, fan_in: u64, level: usize) -> u64 {
    config
        .insert_rows
        .saturating_mul(fan_in.saturating_pow(level as u32))
}

/// Starts a merge at `now` on the smallest level with `fan_in` parts not already being merged
/// and parts below `max_part_rows`. Leaves `merging` as it is when no level qualifies.
fn start_merge(
    config: &MergeSimConfig,
    fan_in: u64,
    now: f64,
    levels: &[u64],
    merging: &mut Option<Merge>,
) {
    let held = |level: usize, merging: &Option<Merge>| match merging {
        Some(m) if m.level == level => fan_in,
        _ => 0,
    };
    let eligible = (0..levels.len()).find(|&l| {
        levels[l] - held(l, merging) >= fan_in
            && level_rows(config, fan_in, l) < config.max_part_rows
    });
    if let Some(level) = eligible {
        let rows = level_rows(config, fan_in, level) * fan_in;
        let cost = config.fixed_cost.as_secs_f64() + config.per_row_cost_s * rows as f64;
        *merging = Some(Merge {
            ends: now + cost,
            level,
            rows,
            cost,
        });
    }
}

/// Replaces the `fan_in` parts a finished merge read on `level` with the one part it wrote on
/// the level above, adding that level when it is new.
fn finish_merge(levels: &mut Vec<u64>, level: usize, fan_in: u64) {
    levels[level] -= fan_in;
    if levels.len() <= level + 1 {
        levels.push(0);
    }
    levels[level + 1] += 1;
}

mod seconds {
    use std::time::Duration;

    use serde::Serializer;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rate: f64, insert_rows: u64) -> MergeSimReport {
        simulate(&MergeSimConfig {
            rate,
            insert_rows,
            ..MergeSimConfig::default()
        })
    }

    #[test]
    fn reproduces_the_seed_at_20000_rows_per_second() {
        let small = run(20_000.0, 100);
        assert_eq!(small.merges, 13_328);
        assert_eq!(format!("{:.1}", small.write_amplification), "4.9");
        assert_eq!(format!("{:.2}", small.write_amplification), "4.91");
        assert_eq!(format!("{:.1}", small.merger_busy * 100.0), "35.0");
        assert_eq!(small.parts_per_s, 200.0);

        let medium = run(20_000.0, 10_000);
        assert_eq!(medium.merges, 130);
        assert_eq!(format!("{:.2}", medium.write_amplification), "2.91");
        assert_eq!(format!("{:.2}", medium.merger_busy * 100.0), "1.57");

        let large = run(20_000.0, 1_000_000);
        assert_eq!(large.merges, 0);
        assert_eq!(large.write_amplification, 1.0);
    }

    #[test]
    fn ten_times_the_load_saturates_the_merger() {
        let report = run(200_000.0, 100);
        assert_eq!(report.parts_at_end, 838_281);
        assert!(report.merger_busy > 0.99, "{}", report.merger_busy);
        // Parts pass 1,000 within the first second.
        assert!(report.passed_1000_s.unwrap() < 1.0);
        assert!(report.passed_3000_s.unwrap() < 3.0);
        assert_eq!(report.parts_over_time.len(), 600);
        assert!(report.parts_over_time.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn a_merger_that_keeps_up_keeps_parts_few() {
        let report = run(20_000.0, 100);
        assert!(report.parts_max < 100, "{}", report.parts_max);
        assert_eq!(report.passed_1000_s, None);
    }
}
