//! The sampler: once a second, the pipeline's tables, its log and memory, and the server's own
//! counts, read into one [`Sample`] for the history.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_pipeline::{Pipeline, TableInfo, Waits};

use super::counts::{Compactions, Doors};
use super::history::{Sample, TableReading};

/// How often the sampler reads the server.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);

/// Milliseconds since the Unix epoch now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The most active parts in any one partition of `table`, 0 when its store does not count them.
pub(crate) fn parts_max(table: &TableInfo) -> u64 {
    (table.active_parts.iter().flatten())
        .map(|p| p.parts)
        .max()
        .unwrap_or(0)
}

/// One reading of everything the history keeps: the sample (its wait quantiles are left for
/// the history to work out), each table's reading, and the waits of every table together.
pub(crate) fn read(
    pipeline: &Pipeline,
    doors: &Doors,
    compactions: &Compactions,
) -> (Sample, Vec<TableReading>, Waits) {
    let tables = pipeline.tables();
    let mut sample = Sample {
        at_ms: now_ms(),
        doors: doors.snapshot(),
        refusals: crate::error::refusals().iter().map(|(_, n)| n).sum(),
        memory_used: pipeline.memory().0,
        merges: compactions.snapshot().values().map(|c| c.done.merges).sum(),
        ..Sample::default()
    };
    if let Some(wal) = pipeline.wal() {
        sample.wal_bytes = wal.bytes;
        sample.wal_fsyncs = wal.fsyncs;
    }
    let mut waits = Waits::default();
    let mut readings = Vec::with_capacity(tables.len());
    for table in &tables {
        for (i, (_, count)) in table.counters.flushes.by_reason().iter().enumerate() {
            sample.flushes[i] += count;
        }
        sample.rows_written += table.rows_written;
        sample.parts_written += table.parts_written;
        sample.bytes_written += table.bytes_written;
        let parts = parts_max(table);
        sample.parts_max = sample.parts_max.max(parts);
        waits.add(&table.row_wait);
        readings.push(TableReading {
            name: table.name.clone(),
            parts_max: parts,
            rows_received: table.counters.rows_received,
            inserts: table.counters.inserts,
        });
    }
    (sample, readings, waits)
}
