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
}
