//! The ledger the SQL sinks keep in the store itself: `_sluice_ledger (table_name, partition,
//! last_seq)`, the highest insert sequence number landed per table and partition, moved in the
//! same transaction as the rows. It is what makes a replayed flush land nothing twice.

use sluice_core::PartitionKey;

/// The ledger's table name.
pub const LEDGER_TABLE: &str = "_sluice_ledger";

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
}
