//! Insert keys kept in a SQL store, in the transaction that lands their rows:
//! `_sluice_insert_keys (table_name, partition, insert_key, rows_hash, landed_at)`.
//!
//! sluice remembers the keys it saw in memory, in its log and in its key journal, all of them
//! its own. Two sluice processes writing one table would each land a resend the other had
//! already landed. A store that keeps the keys with the rows lets them agree: before a flush,
//! sluice asks which of its keys the store holds ([`sluice_core::Sink::held_keys`]) and leaves
//! those inserts' rows out; the flush's transaction then adds its keys. A key another process
//! added in between makes the flush fail, retriably, and its next try leaves that insert out.
//!
//! Unlike the ledger's, these rows are shared by every writer: a key names an insert whoever
//! landed it. `partition` holds the partition key as the ledger spells a bare one, since each
//! partition's rows of an insert land in a flush of their own. `landed_at` is Unix
//! milliseconds; a flush deletes its table's keys past their window.

use sluice_core::{PartitionKey, SinkError};

/// The keys table's name.
pub const KEYS_TABLE: &str = "_sluice_insert_keys";

/// `partition` as the keys table spells it.
pub(crate) fn partition_text(partition: &PartitionKey) -> String {
    crate::ledger::key(partition)
}

/// A rows hash as the store's signed 64-bit integer column holds it, bit for bit.
pub(crate) fn stored_hash(rows_hash: u64) -> i64 {
    rows_hash as i64
}

/// The rows hash a stored value stands for.
pub(crate) fn loaded_hash(stored: i64) -> u64 {
    stored as u64
}

/// The error of a flush one of whose keys another process added since it was asked about.
pub(crate) fn taken_meanwhile(sink: &'static str, key: &str) -> SinkError {
    SinkError::retriable(
        sink,
        format!(
            "the insert with key '{}' landed through another sluice meanwhile; the flush is \
             tried again without its rows",
            key.escape_debug()
        ),
    )
}
