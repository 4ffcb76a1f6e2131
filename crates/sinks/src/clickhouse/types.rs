//! Arrow's scalar types as ClickHouse types, and which ClickHouse columns keep them.
//!
//! A `decimal(p, s)` is ClickHouse's `Decimal(p, s)`, a `uuid` its `UUID`, a `json` value a
//! `String` holding the text it was sent as (ClickHouse 18.16 has no JSON type). In
//! `JSONEachRow` a decimal goes as a JSON number with every digit of its scale (arrow-json
//! writes Arrow's text of it, unquoted), which ClickHouse 18.16 reads digit by digit, exactly:
//! it refuses a decimal in quotes. A UUID and a JSON value go as JSON strings.

use std::borrow::Cow;

use arrow::datatypes::{DataType, Field, TimeUnit};
use sluice_core::ColumnType;

use crate::fit;

/// The last second ClickHouse's `DateTime` (a `UInt32` of seconds) can hold: 2106-02-07 06:28:15.
pub(crate) const DATETIME_MAX: i64 = u32::MAX as i64;

/// The last day ClickHouse's `Date` (a `UInt16` of days) can hold: 2149-06-06.
pub(crate) const DATE_MAX: i32 = u16::MAX as i32;

/// The ClickHouse type of a layout's scalar column, without `Nullable`.
pub(crate) fn ch_type(field: &Field) -> Result<Cow<'static, str>, String> {
    Ok(match ColumnType::from_field(field) {
        Some(ColumnType::Decimal { precision, scale }) => {
            Cow::Owned(format!("Decimal({precision}, {scale})"))
        }
        Some(ColumnType::Uuid) => Cow::Borrowed("UUID"),
        Some(ColumnType::Json) => Cow::Borrowed("String"),
        _ => Cow::Borrowed(arrow_ch_type(field.data_type())?),
    })
}

/// Whether a column of ClickHouse type `store` (as `system.columns` spells it) keeps every
/// value of a layout's `ty` exactly, as `JSONEachRow` carries it ([`fit`]'s question).
pub(crate) fn holds(ty: &ColumnType, store: &str) -> Result<(), String> {
    let mut store = store;
    for wrapper in ["Nullable(", "LowCardinality("] {
        if let Some(inner) = store
            .strip_prefix(wrapper)
            .and_then(|s| s.strip_suffix(')'))
        {
            store = inner;
        }
    }
    match *ty {
        ColumnType::Decimal { precision, scale } => {
            let declared = store
                .strip_prefix("Decimal(")
                .and_then(|rest| rest.strip_suffix(')'))
                .and_then(|args| args.split_once(','))
                .and_then(|(p, s)| Some((p.trim().parse().ok()?, s.trim().parse().ok()?)));
            match declared {
                Some(declared) => fit::decimal_holds((precision, scale), declared),
                None => Err(
                    "sluice sends a decimal as a JSON number, which only a Decimal \
                             column reads exactly"
                        .into(),
                ),
            }
        }
        ColumnType::Uuid if matches!(store, "UUID" | "String") => Ok(()),
        ColumnType::Uuid => Err("sluice sends a uuid into UUID or String".into()),
        ColumnType::Json if store == "String" => Ok(()),
        ColumnType::Json => Err("sluice sends json as its text, into String".into()),
        _ => Ok(()),
    }
}

/// The ClickHouse type for an Arrow type, without `Nullable`.
fn arrow_ch_type(data_type: &DataType) -> Result<&'static str, String> {
    Ok(match data_type {
        DataType::Boolean | DataType::UInt8 => "UInt8",
        DataType::Int8 => "Int8",
        DataType::Int16 => "Int16",
        DataType::Int32 => "Int32",
        DataType::Int64 => "Int64",
        DataType::UInt16 => "UInt16",
        DataType::UInt32 => "UInt32",
        DataType::UInt64 => "UInt64",
        DataType::Float32 => "Float32",
        DataType::Float64 => "Float64",
        DataType::Utf8 => "String",
        DataType::Date32 => "Date",
        DataType::Timestamp(TimeUnit::Microsecond, _) => "DateTime('UTC')",
        other => return Err(format!("no ClickHouse type for Arrow type {other}")),
    })
}

/// A back-quoted identifier with backslashes and back quotes escaped: safe for any name.
pub(crate) fn quote(name: &str) -> String {
    format!("`{}`", name.replace('\\', "\\\\").replace('`', "\\`"))
}

/// A single-quoted string literal with backslashes and quotes escaped.
pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A timestamp's text for an error message.
pub(crate) fn timestamp_text(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|| format!("{micros} µs since the epoch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_types_fit_only_columns_that_keep_them() {
        let decimal = ColumnType::Decimal {
            precision: 12,
            scale: 2,
        };
        for store in [
            "Decimal(12, 2)",
            "Nullable(Decimal(18, 4))",
            "Decimal(38, 2)",
        ] {
            assert_eq!(holds(&decimal, store), Ok(()), "{store}");
        }
        for store in [
            "Decimal(12, 1)",
            "Decimal(11, 2)",
            "String",
            "Float64",
            "Int64",
        ] {
            assert!(holds(&decimal, store).is_err(), "{store}");
        }
        assert_eq!(holds(&ColumnType::Uuid, "Nullable(UUID)"), Ok(()));
        assert_eq!(holds(&ColumnType::Uuid, "String"), Ok(()));
        assert!(holds(&ColumnType::Uuid, "FixedString(16)").is_err());
        assert_eq!(holds(&ColumnType::Json, "LowCardinality(String)"), Ok(()));
        assert!(holds(&ColumnType::Json, "UInt8").is_err());
        assert_eq!(holds(&ColumnType::String, "UInt8"), Ok(()));
        let field = |ty: ColumnType| ty.arrow_field("c", false);
        assert_eq!(ch_type(&field(decimal)).unwrap(), "Decimal(12, 2)");
        assert_eq!(ch_type(&field(ColumnType::Uuid)).unwrap(), "UUID");
        assert_eq!(ch_type(&field(ColumnType::Json)).unwrap(), "String");
    }

    #[test]
    fn names_and_strings_are_escaped() {
        assert_eq!(quote("a`b\\c"), "`a\\`b\\\\c`");
        assert_eq!(literal("o'brien\\"), "'o\\'brien\\\\'");
    }
}
