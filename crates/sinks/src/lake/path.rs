//! Partition folder names, hive style: `<column>=<escaped value>`.

use std::fmt::Write;

use sluice_core::PartitionKey;

/// The folder value for a null partition, as Hive and Spark write it.
pub(crate) const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// The folder name for a partition, or `None` for an unpartitioned table.
///
/// Every byte outside `[A-Za-z0-9._-]` is percent-escaped, so a value can never add a path
/// separator, a NUL, or turn into `.`/`..` (the `column=` prefix sees to the last).
pub(crate) fn partition_dir_name(column: Option<&str>, key: &PartitionKey) -> Option<String> {
    let column = column?;
    let mut name = String::with_capacity(column.len() + 16);
    name.push_str(column);
    name.push('=');
    match key {
        PartitionKey::Whole => return None,
        PartitionKey::Null => name.push_str(NULL_PARTITION),
        PartitionKey::Value(value) => {
            for byte in value.bytes() {
                if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
                    name.push(byte as char);
                } else {
                    let _ = write!(name, "%{byte:02X}");
                }
            }
        }
    }
    Some(name)
}

/// Part file names start with this.
pub(crate) const PART_PREFIX: &str = "part-";

/// Part file names end with this.
pub(crate) const PART_SUFFIX: &str = ".parquet";

/// A part's file name: `part-<first seq>-<last seq>-<uuid v7>.parquet`. The sequence range says
/// which inserts it holds without opening it; the UUID keeps names unique.
pub(crate) fn part_name(first_seq: u64, last_seq: u64) -> String {
    format!(
        "{PART_PREFIX}{first_seq:020}-{last_seq:020}-{}{PART_SUFFIX}",
        uuid::Uuid::now_v7()
    )
}

/// A compacted part's file name: `part-c-<uuid v7>.parquet` (its rows come from many flushes,
/// possibly of several writers, so no sequence range describes them).
pub(crate) fn compacted_name() -> String {
    format!("{PART_PREFIX}c-{}{PART_SUFFIX}", uuid::Uuid::now_v7())
}

/// Whether a file name is one sluice gives parts ([`part_name`], [`compacted_name`], and the
/// first versions' `part-<uuid>.parquet`). Other Delta writers name their files `part-...parquet`
/// too (Spark and delta-rs: `part-00000-<uuid>-c000.zstd.parquet`); compaction and the vacuum
/// leave those alone.
pub(crate) fn is_part_name(name: &str) -> bool {
    let Some(middle) = name
        .strip_prefix(PART_PREFIX)
        .and_then(|rest| rest.strip_suffix(PART_SUFFIX))
    else {
        return false;
    };
    let uuid = match middle.strip_prefix("c-") {
        Some(uuid) => uuid,
        None if middle.len() == 36 => middle,
        None => {
            let mut fields = middle.splitn(3, '-');
            let sequence = |field: Option<&str>| {
                field.is_some_and(|f| f.len() == 20 && f.bytes().all(|b| b.is_ascii_digit()))
            };
            if !(sequence(fields.next()) && sequence(fields.next())) {
                return false;
            }
            fields.next().unwrap_or_default()
        }
    };
    uuid.len() == 36 && uuid::Uuid::try_parse(uuid).is_ok()
}

/// Whether a file name is a temporary part left by an interrupted write.
pub(crate) fn is_temporary(name: &str) -> bool {
    name.starts_with(&format!(".{PART_PREFIX}")) && name.ends_with(".tmp")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The partition a folder name stands for, when it is `column=<escaped value>`: the
    /// inverse of [`partition_dir_name`], which the round trip below checks.
    fn parse_partition_dir_name(column: &str, name: &str) -> Option<PartitionKey> {
        let value = name.strip_prefix(column)?.strip_prefix('=')?;
        if value == NULL_PARTITION {
            return Some(PartitionKey::Null);
        }
        let bytes = value.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).ok().map(PartitionKey::Value)
    }

    #[test]
    fn folder_names_parse_back() {
        for key in [
            PartitionKey::Value("a/b c%é".into()),
            PartitionKey::Value("2026-11-29".into()),
            PartitionKey::Value(String::new()),
            PartitionKey::Null,
        ] {
            let name = partition_dir_name(Some("col"), &key).unwrap();
            assert_eq!(parse_partition_dir_name("col", &name), Some(key));
        }
        assert_eq!(parse_partition_dir_name("col", "other=x"), None);
        assert_eq!(parse_partition_dir_name("col", "col=%zz"), None);
    }

    #[test]
    fn escapes_everything_path_like() {
        let value =
            |v: &str| partition_dir_name(Some("c"), &PartitionKey::Value(v.into())).unwrap();
        assert_eq!(value("2026-11-29"), "c=2026-11-29");
        assert_eq!(value("a/b"), "c=a%2Fb");
        assert_eq!(value(".."), "c=..");
        assert_eq!(value("x\0y z"), "c=x%00y%20z");
        assert_eq!(value("é"), "c=%C3%A9");
        assert_eq!(
            partition_dir_name(Some("c"), &PartitionKey::Null).unwrap(),
            "c=__HIVE_DEFAULT_PARTITION__"
        );
        assert_eq!(partition_dir_name(None, &PartitionKey::Whole), None);
    }

    #[test]
    fn part_names_carry_their_sequence_range_and_temporaries_are_recognised() {
        let name = part_name(7, 1234);
        assert!(
            name.starts_with("part-00000000000000000007-00000000000000001234-"),
            "{name}"
        );
        assert!(is_temporary(&format!(".{name}.tmp")));
        assert!(!is_temporary(&name));
        assert!(is_part_name(&name));
        assert!(is_part_name(&compacted_name()));
        assert!(is_part_name(
            "part-01a22e1a-dcc2-76bd-aed4-bfc6f6567ef6.parquet"
        ));
        let uuid = "01a22e1a-dcc2-76bd-aed4-bfc6f6567ef6";
        for other in [
            // Spark's and delta-rs's names.
            format!("part-00000-{uuid}-c000.snappy.parquet"),
            format!("part-00001-{uuid}-c000.zstd.parquet"),
            format!("part-00000000000000000007-00000000000000001234-{uuid}.zstd.parquet"),
            format!("part-c-{uuid}-c000.parquet"),
            format!("part-7-1234-{uuid}.parquet"),
            "part-c-not-a-uuid-at-all-but-36-chars-long.parquet".to_owned(),
            format!(".{name}.tmp"),
        ] {
            assert!(!is_part_name(&other), "{other}");
        }
    }
}
