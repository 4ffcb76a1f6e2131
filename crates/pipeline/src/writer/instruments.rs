//! The writer's metrics, one set per table. Those the console reads are [`Tally`]s, which also
//! count in the table's stats.

use std::collections::BTreeMap;
use std::sync::Arc;

use metrics::{Counter, Gauge, Histogram};

use crate::stats::{Count, FLUSH_REASONS, TableStats, Tally, WaitTally, names};

pub(super) struct Instruments {
    pub(super) flushes: BTreeMap<&'static str, Tally>,
    pub(super) parts: Counter,
    pub(super) rows_written: Counter,
    pub(super) part_rows: Histogram,
    pub(super) row_wait: WaitTally,
    pub(super) flush_seconds: Histogram,
    pub(super) errors_retriable: Tally,
    pub(super) errors_permanent: Tally,
    pub(super) rows_dropped: Tally,
    pub(super) dead_batches: Tally,
    pub(super) dead_rows: Tally,
    pub(super) store_pause: Gauge,
    pub(super) store_pauses: Counter,
    pub(super) commit_retries: Counter,
    pub(super) answers_lost: Counter,
}

impl Instruments {
    pub(super) fn new(table: &str, stats: &Arc<TableStats>) -> Self {
        let t = || table.to_owned();
        let tally = |metric, count| Tally::new(metric, stats, count);
        Self {
            flushes: FLUSH_REASONS
                .into_iter()
                .map(|r| {
                    let metric =
                        metrics::counter!(names::FLUSHES, "table" => t(), "reason" => r.as_str());
                    (r.as_str(), tally(metric, Count::flush(r)))
                })
                .collect(),
            parts: metrics::counter!(names::PARTS_WRITTEN, "table" => t()),
            rows_written: metrics::counter!(names::ROWS_WRITTEN, "table" => t()),
            part_rows: metrics::histogram!(names::PART_ROWS, "table" => t()),
            row_wait: WaitTally::new(metrics::histogram!(names::ROW_WAIT, "table" => t()), stats),
            flush_seconds: metrics::histogram!(names::FLUSH_SECONDS, "table" => t()),
            errors_retriable: tally(
                metrics::counter!(names::FLUSH_ERRORS, "table" => t(), "kind" => "retriable"),
                Count::ErrorsRetriable,
            ),
            errors_permanent: tally(
                metrics::counter!(names::FLUSH_ERRORS, "table" => t(), "kind" => "permanent"),
                Count::ErrorsPermanent,
            ),
            rows_dropped: tally(
                metrics::counter!(names::ROWS_DROPPED, "table" => t()),
                Count::RowsDropped,
            ),
            dead_batches: tally(
                metrics::counter!(names::DEAD_LETTER_BATCHES, "table" => t()),
                Count::DeadBatches,
            ),
            dead_rows: tally(
                metrics::counter!(names::DEAD_LETTER_ROWS, "table" => t()),
                Count::DeadRows,
            ),
            store_pause: metrics::gauge!(names::STORE_PAUSE, "table" => t()),
            store_pauses: metrics::counter!(names::STORE_PAUSES, "table" => t()),
            commit_retries: metrics::counter!(names::COMMIT_RETRIES, "table" => t()),
            answers_lost: metrics::counter!(names::COMMIT_ANSWERS_LOST, "table" => t()),
        }
    }
}
