//! What only the server sees, counted for the console: inserts by door and ack mode, and what the
//! lake's compactor did per table.
//!
//! The pipeline counts by table and knows no doors; the compactor reports to `sluice serve`,
//! which records its metrics and hands the same report here.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_pipeline::{AckMode, Inserted};

/// The way an insert came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// sluice's own NDJSON API, `POST /v1/tables/{table}/rows`.
    Api,
    /// ClickHouse's HTTP interface, `POST /?query=INSERT ...`.
    ClickHouseHttp,
    /// ClickHouse's native protocol over TCP.
    ClickHouseNative,
}

impl Door {
    /// Every door, in the order the console lists them.
    pub const ALL: [Door; 3] = [Door::Api, Door::ClickHouseHttp, Door::ClickHouseNative];

    /// The door's name in the console's JSON.
    pub fn name(self) -> &'static str {
        match self {
            Door::Api => "api",
            Door::ClickHouseHttp => "clickhouse_http",
            Door::ClickHouseNative => "clickhouse_native",
        }
    }

    fn index(self) -> usize {
        match self {
            Door::Api => 0,
            Door::ClickHouseHttp => 1,
            Door::ClickHouseNative => 2,
        }
    }
}

/// Every ack mode, in the order the console lists them.
pub(crate) const ACKS: [AckMode; 3] = [AckMode::Async, AckMode::Durable, AckMode::Committed];

fn ack_index(ack: AckMode) -> usize {
    match ack {
        AckMode::Async => 0,
        AckMode::Durable => 1,
        AckMode::Committed => 2,
    }
}

/// Door and ack mode pairs.
pub(crate) const PAIRS: usize = Door::ALL.len() * ACKS.len();

/// The place of a door and ack mode pair in [`DoorCounts`]' arrays: door by door.
pub(crate) fn pair(door: Door, ack: AckMode) -> usize {
    door.index() * ACKS.len() + ack_index(ack)
}

/// Accepted inserts and their rows, by door and ack mode, since start.
#[derive(Debug, Default)]
pub(crate) struct Doors {
    rows: [AtomicU64; PAIRS],
    inserts: [AtomicU64; PAIRS],
}

impl Doors {
    /// Counts an accepted insert. A resend answered from its first insert stored nothing and is
    /// not counted again.
    pub(crate) fn count(&self, door: Door, inserted: &Inserted) {
        if inserted.duplicate {
            return;
        }
        let i = pair(door, inserted.ack);
        self.rows[i].fetch_add(inserted.rows, Ordering::Relaxed);
        self.inserts[i].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> DoorCounts {
        let load = |a: &[AtomicU64; PAIRS]| std::array::from_fn(|i| a[i].load(Ordering::Relaxed));
        DoorCounts {
            rows: load(&self.rows),
            inserts: load(&self.inserts),
        }
    }
}

/// A snapshot of [`Doors`], indexed by [`pair`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DoorCounts {
    pub(crate) rows: [u64; PAIRS],
    pub(crate) inserts: [u64; PAIRS],
}

impl DoorCounts {
    pub(crate) fn rows_total(&self) -> u64 {
        self.rows.iter().sum()
    }

    pub(crate) fn inserts_total(&self) -> u64 {
        self.inserts.iter().sum()
    }
}

/// What one background compaction round of a table did, as the console counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionRound {
    /// Merges committed.
    pub merges: u64,
    /// Files merged away.
    pub files_in: u64,
    /// Files written.
    pub files_out: u64,
    /// Bytes of the files merged away.
    pub bytes_in: u64,
    /// Bytes written.
    pub bytes_out: u64,
    /// Rows rewritten.
    pub rows: u64,
}

/// A table's compaction since start: its rounds' sums, and the rounds that failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CompactionTotals {
    pub(crate) done: CompactionRound,
    pub(crate) errors: u64,
}

/// What the lake's compactor did, per table, since start.
#[derive(Debug, Default)]
pub struct Compactions {
    tables: Mutex<HashMap<String, CompactionTotals>>,
}

impl Compactions {
    /// Adds a round of `table` that went through.
    pub fn record(&self, table: &str, round: &CompactionRound) {
        let mut tables = self.lock();
        let totals = &mut tables.entry(table.to_owned()).or_default().done;
        totals.merges += round.merges;
        totals.files_in += round.files_in;
        totals.files_out += round.files_out;
        totals.bytes_in += round.bytes_in;
        totals.bytes_out += round.bytes_out;
        totals.rows += round.rows;
    }

    /// Counts a round of `table` that failed.
    pub fn record_error(&self, table: &str) {
        self.lock().entry(table.to_owned()).or_default().errors += 1;
    }

    pub(crate) fn snapshot(&self) -> HashMap<String, CompactionTotals> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CompactionTotals>> {
        self.tables
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use sluice_core::TableName;

    use super::*;

    #[test]
    fn each_pair_has_its_own_place_and_duplicates_are_not_counted() {
        let mut places: Vec<usize> = Door::ALL
            .iter()
            .flat_map(|d| ACKS.iter().map(move |a| pair(*d, *a)))
            .collect();
        places.sort_unstable();
        assert_eq!(places, (0..PAIRS).collect::<Vec<_>>());
        let doors = Doors::default();
        let inserted = |duplicate| Inserted {
            table: TableName::new("t").unwrap(),
            rows: 10,
            ack: AckMode::Durable,
            duplicate,
        };
        doors.count(Door::ClickHouseNative, &inserted(false));
        doors.count(Door::ClickHouseNative, &inserted(true));
        let counts = doors.snapshot();
        let i = pair(Door::ClickHouseNative, AckMode::Durable);
        assert_eq!((counts.rows[i], counts.inserts[i]), (10, 1));
        assert_eq!((counts.rows_total(), counts.inserts_total()), (10, 1));
    }
}
