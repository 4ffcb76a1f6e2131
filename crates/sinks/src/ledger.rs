//! The ledger the SQL sinks keep in the store itself: `_sluice_ledger (table_name, partition,
//! last_seq)`, the highest insert sequence number landed per table and partition, moved in the
//! same transaction as the rows. It is what makes a replayed flush land nothing twice.
//!
//! Sequence numbers mean something only together with the write-ahead log that gave them, so
//! each sluice data directory (each writer, named by `_sluice/writer-id`) keeps rows of its own:
//! the `partition` column holds `<writer>\u{2}<partition>`. Two sluice processes writing one
//! table then never read each other's numbers as their own (one's flushes would otherwise look
//! like replays to the other, and be skipped). Rows written before ledgers named writers (a
//! bare `<partition>`) count for every writer: a floor its numbering starts above.

use std::collections::HashMap;

use sluice_core::PartitionKey;

/// The ledger's table name.
pub const LEDGER_TABLE: &str = "_sluice_ledger";

/// Between the writer and the partition in a ledger key: in no writer id and in no partition
/// key's first character.
const WRITER_END: char = '\u{2}';

/// The writer whose rows of the ledger a sink reads and writes. The empty writer (a sink made
/// without one, as tests and the library do) keeps the bare keys of a ledger without writers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerWriter(String);

impl LedgerWriter {
    /// The writer named `id` (`_sluice/writer-id`).
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The key of `partition` in this writer's rows.
    pub(crate) fn key(&self, partition: &PartitionKey) -> String {
        if self.0.is_empty() {
            key(partition)
        } else {
            format!("{}{WRITER_END}{}", self.0, key(partition))
        }
    }

    /// The partition a ledger key stands for, if the row is this writer's or from before
    /// ledgers named writers.
    fn partition(&self, text: &str) -> Option<PartitionKey> {
        // A bare key is empty or starts with `=` or `\u{1}` (a partition value may hold any
        // character, `\u{2}` too); a writer's starts with its id, letters, digits and `-`.
        if text.is_empty() || text.starts_with(['=', '\u{1}']) {
            return parse_key(text);
        }
        let (writer, rest) = text.split_once(WRITER_END)?;
        if writer == self.0 {
            parse_key(rest)
        } else {
            None
        }
    }

    /// The highest sequence number per partition among `rows` (`(key, last_seq)`) that are
    /// this writer's or everyone's.
    pub(crate) fn watermarks<'a>(
        &self,
        rows: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Vec<(PartitionKey, u64)> {
        let mut held: HashMap<PartitionKey, u64> = HashMap::new();
        for (text, last_seq) in rows {
            if let Some(partition) = self.partition(text) {
                let entry = held.entry(partition).or_default();
                *entry = (*entry).max(last_seq);
            }
        }
        held.into_iter().collect()
    }
}

/// How a partition is written in the ledger: reversible, and distinct for "whole table" and null.
/// (`\u{1}`, not NUL: PostgreSQL text cannot hold NUL.)
pub(crate) fn key(key: &PartitionKey) -> String {
    match key {
        PartitionKey::Whole => String::new(),
        PartitionKey::Null => "\u{1}null".to_owned(),
        PartitionKey::Value(v) => format!("={v}"),
    }
}

/// The partition a ledger key stands for.
pub(crate) fn parse_key(text: &str) -> Option<PartitionKey> {
    match text {
        "" => Some(PartitionKey::Whole),
        "\u{1}null" => Some(PartitionKey::Null),
        other => other
            .strip_prefix('=')
            .map(|v| PartitionKey::Value(v.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        for k in [
            PartitionKey::Whole,
            PartitionKey::Null,
            PartitionKey::Value(String::new()),
            PartitionKey::Value("a=b".into()),
        ] {
            assert_eq!(parse_key(&key(&k)), Some(k));
        }
    }

    #[test]
    fn a_writer_reads_its_own_rows_and_the_rows_from_before_writers() {
        let (a, b) = (LedgerWriter::new("a"), LedgerWriter::new("b"));
        let day = PartitionKey::Value("2026-12-02".into());
        let rows = [
            (a.key(&day), 1_000),
            (b.key(&day), 50),
            (b.key(&PartitionKey::Null), 7),
            // From before writers: a floor for both, whatever the value holds.
            (key(&day), 60),
            (key(&PartitionKey::Value("b\u{2}x".into())), 3),
        ];
        let rows = || rows.iter().map(|(k, s)| (k.as_str(), *s));
        let odd = PartitionKey::Value("b\u{2}x".into());
        let mut held = a.watermarks(rows());
        held.sort_by_key(|(_, seq)| *seq);
        assert_eq!(held, [(odd.clone(), 3), (day.clone(), 1_000)]);
        let mut held = b.watermarks(rows());
        held.sort_by_key(|(_, seq)| *seq);
        assert_eq!(held, [(odd, 3), (PartitionKey::Null, 7), (day.clone(), 60)]);
        // The writer without a name keeps the old keys.
        assert_eq!(LedgerWriter::default().key(&day), key(&day));
    }
}
