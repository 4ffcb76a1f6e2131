//! Seed 000's insert batching estimator, with sluice's policy in front: the one model behind
//! `sluice estimate` and the console's `GET /v1/estimate`, so the two can never disagree.
//!
//! Given a write rate, an insert size and a partition count, it says how many parts land per
//! second, hour and day when inserts land as they come, and when sluice batches them; what the
//! merge model predicts for each (merges, write amplification, merge thread load); and how soon a
//! partition would pass MergeTree's thresholds (1,000 parts delay inserts, 3,000 refuse them).
//! No I/O: arithmetic and the merge simulation over a bounded window.
//!
//! [`EstimateInput::check`] bounds every input, so that what a person types into a web page
//! cannot overflow the arithmetic or make a simulation run long.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::merge_sim::{self, MergeSimConfig};

/// Most parts one simulation run creates; the window shrinks below 10 minutes to stay instant.
const MAX_SIMULATED_PARTS: f64 = 2_000_000.0;

/// MergeTree's thresholds per partition.
pub const PARTS_TO_DELAY: u64 = 1_000;
/// See [`PARTS_TO_DELAY`].
pub const PARTS_TO_THROW: u64 = 3_000;

/// The highest write rate taken, rows per second: far above any one gateway's, low enough that
/// the figures stay exact in `f64` and `u64`.
pub const MAX_RATE: f64 = 1e9;
/// The most rows per insert, and bytes per row, taken.
pub const MAX_INSERT_ROWS: u64 = 1_000_000_000;
/// The most partitions taken.
pub const MAX_PARTITIONS: u64 = 1_000_000;
/// The longest age limit taken: a day.
pub const MAX_AGE_S: f64 = 86_400.0;
/// The largest row limit taken.
pub const MAX_ROWS: u64 = 1_000_000_000_000;
/// The largest byte limit taken: a pebibyte.
pub const MAX_BYTES: u64 = 1 << 50;

/// The workload and sluice's policy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EstimateInput {
    /// Rows per second.
    pub rate: f64,
    /// Rows per insert as producers send them.
    pub insert_rows: u64,
    /// Partitions the rows spread over (evenly).
    pub partitions: u64,
    /// sluice's age limit, seconds.
    pub max_age_s: f64,
    /// sluice's row limit.
    pub max_rows: u64,
    /// sluice's byte limit.
    pub max_bytes: u64,
    /// Bytes a row takes in sluice's buffer (Arrow memory).
    pub row_bytes: f64,
}

/// One of [`EstimateInput`]'s fields, for an error to name: each front end spells it its own way
/// (a flag, a URL parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// [`EstimateInput::rate`].
    Rate,
    /// [`EstimateInput::insert_rows`].
    InsertRows,
    /// [`EstimateInput::partitions`].
    Partitions,
    /// [`EstimateInput::max_age_s`].
    MaxAge,
    /// [`EstimateInput::max_rows`].
    MaxRows,
    /// [`EstimateInput::max_bytes`].
    MaxBytes,
    /// [`EstimateInput::row_bytes`].
    RowBytes,
}

/// An input the estimator does not take, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// Which input.
    pub field: Field,
    /// What is wrong with it, as a phrase: "must be more than 0 and at most 1000000000".
    pub reason: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for InputError {}

impl EstimateInput {
    /// Checks every input is within the range the model takes.
    pub fn check(&self) -> Result<(), InputError> {
        let real = |field, value: f64, max: f64| {
            if value > 0.0 && value <= max {
                Ok(())
            } else {
                Err(InputError {
                    field,
                    reason: format!("must be more than 0 and at most {max}, got {value}"),
                })
            }
        };
        let whole = |field, value: u64, max: u64| {
            if (1..=max).contains(&value) {
                Ok(())
            } else {
                Err(InputError {
                    field,
                    reason: format!("must be at least 1 and at most {max}, got {value}"),
                })
            }
        };
        real(Field::Rate, self.rate, MAX_RATE)?;
        whole(Field::InsertRows, self.insert_rows, MAX_INSERT_ROWS)?;
        whole(Field::Partitions, self.partitions, MAX_PARTITIONS)?;
        real(Field::MaxAge, self.max_age_s, MAX_AGE_S)?;
        whole(Field::MaxRows, self.max_rows, MAX_ROWS)?;
        whole(Field::MaxBytes, self.max_bytes, MAX_BYTES)?;
        real(Field::RowBytes, self.row_bytes, MAX_INSERT_ROWS as f64)
    }
}

/// What one way of landing rows costs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Landing {
    /// Parts created per second, all partitions.
    pub parts_per_s: f64,
    /// Per hour.
    pub parts_per_hour: f64,
    /// Per day.
    pub parts_per_day: f64,
    /// Rows in each part.
    pub rows_per_part: f64,
    /// Merges per hour, all partitions, by the merge model (one merge thread per partition).
    pub merges_per_hour: f64,
    /// Rows written over rows ingested.
    pub write_amplification: f64,
    /// Share of a merge thread each partition keeps busy.
    pub merger_busy: f64,
    /// Seconds until one partition holds 1,000 parts if no merge ran at all.
    pub delay_after_s_without_merges: f64,
    /// Seconds until one partition holds 3,000 parts if no merge ran at all.
    pub refuse_after_s_without_merges: f64,
    /// Seconds until 1,000 parts in the merge model, if merges fall behind within the window.
    pub delay_after_s: Option<f64>,
    /// Seconds until 3,000 parts in the merge model, if merges fall behind within the window.
    pub refuse_after_s: Option<f64>,
    /// The simulated window, seconds.
    pub simulated_s: f64,
}

/// Both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// The input.
    pub input: EstimateInput,
    /// Inserts landed as they come.
    pub direct: Landing,
    /// Inserts batched by sluice.
    pub sluice: Landing,
    /// Which limit fills sluice's batches first: `age`, `rows` or `bytes`.
    pub flush_trigger: &'static str,
    /// Seconds between flushes of one partition.
    pub flush_interval_s: f64,
    /// How many times fewer parts sluice lands.
    pub parts_ratio: f64,
}

/// Estimates both sides. Takes any input, but only one that passes [`EstimateInput::check`]
/// gives figures worth reading.
pub fn estimate(input: &EstimateInput) -> Estimate {
    let partitions = input.partitions.max(1) as f64;
    let insert_rows = input.insert_rows.max(1) as f64;
    let inserts_per_s = input.rate / insert_rows;
    // An insert spread over P partitions makes a part in each it touches.
    let touched = partitions.min(insert_rows);
    let direct_parts_per_s = inserts_per_s * touched;
    let direct = landing(input, direct_parts_per_s, insert_rows / touched);

    let per_partition_rate = input.rate / partitions;
    let candidates = [
        ("age", input.max_age_s),
        ("rows", input.max_rows as f64 / per_partition_rate),
        (
            "bytes",
            input.max_bytes as f64 / (per_partition_rate * input.row_bytes.max(1.0)),
        ),
    ];
    let (flush_trigger, interval) = candidates.into_iter().fold(
        ("age", f64::INFINITY),
        |best, c| if c.1 < best.1 { c } else { best },
    );
    // A flush needs rows, and sluice never lands more parts than the inserts would have.
    let sluice_parts_per_s = (partitions / interval)
        .min(input.rate)
        .min(direct_parts_per_s);
    let sluice = landing(
        input,
        sluice_parts_per_s,
        input.rate / sluice_parts_per_s.max(1e-12),
    );
    Estimate {
        input: *input,
        parts_ratio: direct.parts_per_s / sluice.parts_per_s.max(1e-12),
        direct,
        sluice,
        flush_trigger,
        flush_interval_s: interval,
    }
}

fn landing(input: &EstimateInput, parts_per_s: f64, rows_per_part: f64) -> Landing {
    let partitions = input.partitions.max(1) as f64;
    let per_partition = parts_per_s / partitions;
    let window = (MAX_SIMULATED_PARTS / per_partition.max(1e-9)).min(600.0);
    let sim = merge_sim::simulate(&MergeSimConfig {
        rate: per_partition * rows_per_part,
        insert_rows: rows_per_part.round().max(1.0) as u64,
        duration: Duration::from_secs_f64(window),
        ..MergeSimConfig::default()
    });
    let per_hour = |n: f64| n * 3600.0 / window.max(1e-9);
    Landing {
        parts_per_s,
        parts_per_hour: parts_per_s * 3600.0,
        parts_per_day: parts_per_s * 86_400.0,
        rows_per_part,
        merges_per_hour: per_hour(sim.merges as f64) * partitions,
        write_amplification: sim.write_amplification,
        merger_busy: sim.merger_busy,
        delay_after_s_without_merges: PARTS_TO_DELAY as f64 / per_partition.max(1e-12),
        refuse_after_s_without_merges: PARTS_TO_THROW as f64 / per_partition.max(1e-12),
        delay_after_s: sim.passed_1000_s,
        refuse_after_s: sim.passed_3000_s,
        simulated_s: window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(rate: f64, insert_rows: u64, partitions: u64) -> EstimateInput {
        EstimateInput {
            rate,
            insert_rows,
            partitions,
            max_age_s: 1.0,
            max_rows: 1_000_000,
            max_bytes: 64 * 1024 * 1024,
            row_bytes: 100.0,
        }
    }

    #[test]
    fn the_seeds_example() {
        // 20,000 rows/s in 100-row inserts: 200 parts/s, 720,000 per hour.
        let e = estimate(&input(20_000.0, 100, 1));
        assert_eq!(e.direct.parts_per_s, 200.0);
        assert_eq!(e.direct.parts_per_hour, 720_000.0);
        assert_eq!(e.direct.parts_per_day, 17_280_000.0);
        assert_eq!(e.direct.rows_per_part, 100.0);
        // The merge model of the seed: 13,328 merges in 10 minutes, 4.9x.
        assert_eq!(e.direct.merges_per_hour, 13_328.0 * 6.0);
        assert_eq!(format!("{:.2}", e.direct.write_amplification), "4.91");
        // sluice: one part per second, 20,000 rows each.
        assert_eq!(e.flush_trigger, "age");
        assert_eq!(e.sluice.parts_per_s, 1.0);
        assert_eq!(e.sluice.rows_per_part, 20_000.0);
        assert_eq!(e.parts_ratio, 200.0);
        assert!(e.sluice.write_amplification < 3.0);
    }

    #[test]
    fn partitions_multiply_parts() {
        // Each 1,000-row insert touches all 10 partitions: 10 parts of 100 rows.
        let e = estimate(&input(10_000.0, 1_000, 10));
        assert_eq!(e.direct.parts_per_s, 100.0);
        assert_eq!(e.direct.rows_per_part, 100.0);
        assert_eq!(e.sluice.parts_per_s, 10.0);
        // Without merges one partition passes 1,000 parts after 100 s.
        assert_eq!(e.direct.delay_after_s_without_merges, 100.0);
    }

    #[test]
    fn heavy_load_flushes_before_the_age_limit_and_light_load_never_beats_direct() {
        let heavy = estimate(&input(5_000_000.0, 1_000, 1));
        assert_eq!(heavy.flush_trigger, "bytes");
        assert!(heavy.sluice.parts_per_s > 1.0);
        let light = estimate(&input(0.5, 1, 1));
        assert_eq!(light.sluice.parts_per_s, 0.5, "no more parts than rows");
    }

    #[test]
    fn check_names_the_input_out_of_range() {
        assert_eq!(input(20_000.0, 100, 1).check(), Ok(()));
        let cases = [
            (
                EstimateInput {
                    rate: 0.0,
                    ..input(1.0, 1, 1)
                },
                Field::Rate,
            ),
            (
                EstimateInput {
                    rate: f64::NAN,
                    ..input(1.0, 1, 1)
                },
                Field::Rate,
            ),
            (
                EstimateInput {
                    rate: 1e12,
                    ..input(1.0, 1, 1)
                },
                Field::Rate,
            ),
            (input(1.0, 0, 1), Field::InsertRows),
            (input(1.0, 1, 0), Field::Partitions),
            (
                EstimateInput {
                    max_age_s: f64::INFINITY,
                    ..input(1.0, 1, 1)
                },
                Field::MaxAge,
            ),
            (
                EstimateInput {
                    max_rows: 0,
                    ..input(1.0, 1, 1)
                },
                Field::MaxRows,
            ),
            (
                EstimateInput {
                    max_bytes: u64::MAX,
                    ..input(1.0, 1, 1)
                },
                Field::MaxBytes,
            ),
            (
                EstimateInput {
                    row_bytes: -1.0,
                    ..input(1.0, 1, 1)
                },
                Field::RowBytes,
            ),
        ];
        for (bad, field) in cases {
            assert_eq!(bad.check().map_err(|e| e.field), Err(field), "{bad:?}");
        }
    }

    #[test]
    fn the_extremes_that_pass_the_check_give_finite_figures() {
        for rate in [1e-9, 1.0, MAX_RATE] {
            for insert_rows in [1, MAX_INSERT_ROWS] {
                for partitions in [1, MAX_PARTITIONS] {
                    for max_age_s in [1e-6, MAX_AGE_S] {
                        let case = EstimateInput {
                            max_age_s,
                            max_rows: MAX_ROWS,
                            ..input(rate, insert_rows, partitions)
                        };
                        assert_eq!(case.check(), Ok(()));
                        let e = estimate(&case);
                        assert!(e.direct.parts_per_s.is_finite(), "{case:?}");
                        assert!(e.sluice.parts_per_s.is_finite(), "{case:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn overload_passes_the_thresholds() {
        let e = estimate(&input(200_000.0, 100, 1));
        assert!(e.direct.delay_after_s.unwrap() < 1.0);
        assert!(e.sluice.delay_after_s.is_none());
    }
}
