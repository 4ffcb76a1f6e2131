//! The writer's metrics, one set per table.

use std::collections::BTreeMap;

use metrics::{Counter, Gauge, Histogram};
use sluice_core::FlushReason;

use crate::stats::names;

pub(super) struct Instruments {
    pub(super) flushes: BTreeMap<&'static str, Counter>,
    pub(super) parts: Counter,
    pub(super) rows_written: Counter,
    pub(super) part_rows: Histogram,
    pub(super) row_wait: Histogram,
    pub(super) flush_seconds: Histogram,
    pub(super) errors_retriable: Counter,
    pub(super) errors_permanent: Counter,
    pub(super) rows_dropped: Counter,
    pub(super) dead_batches: Counter,
    pub(super) dead_rows: Counter,
    pub(super) store_pause: Gauge,
    pub(super) store_pauses: Counter,
}

impl Instruments {
    pub(super) fn new(table: &str) -> Self {
        let t = || table.to_owned();
        let reasons = [
            FlushReason::Rows,
            FlushReason::Bytes,
            FlushReason::Age,
            FlushReason::Inserts,
            FlushReason::Shutdown,
        ];
        Self {
            flushes: reasons
                .into_iter()
                .map(|r| {
                    (
                        r.as_str(),
                        metrics::counter!(names::FLUSHES, "table" => t(), "reason" => r.as_str()),
                    )
                })
                .collect(),
            parts: metrics::counter!(names::PARTS_WRITTEN, "table" => t()),
            rows_written: metrics::counter!(names::ROWS_WRITTEN, "table" => t()),
            part_rows: metrics::histogram!(names::PART_ROWS, "table" => t()),
            row_wait: metrics::histogram!(names::ROW_WAIT, "table" => t()),
            flush_seconds: metrics::histogram!(names::FLUSH_SECONDS, "table" => t()),
            errors_retriable: metrics::counter!(names::FLUSH_ERRORS, "table" => t(), "kind" => "retriable"),
            errors_permanent: metrics::counter!(names::FLUSH_ERRORS, "table" => t(), "kind" => "permanent"),
            rows_dropped: metrics::counter!(names::ROWS_DROPPED, "table" => t()),
            dead_batches: metrics::counter!(names::DEAD_LETTER_BATCHES, "table" => t()),
            dead_rows: metrics::counter!(names::DEAD_LETTER_ROWS, "table" => t()),
            store_pause: metrics::gauge!(names::STORE_PAUSE, "table" => t()),
            store_pauses: metrics::counter!(names::STORE_PAUSES, "table" => t()),
        }
    }
}
