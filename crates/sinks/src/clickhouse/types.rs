//! Arrow types as ClickHouse types, and batches made ready for `JSONEachRow`.
//!
//! A `decimal(p, s)` is ClickHouse's `Decimal(p, s)`, a `uuid` its `UUID`, a `json` value a
//! `String` holding the text it was sent as (ClickHouse 18.16 has no JSON type). In
//! `JSONEachRow` a decimal goes as a JSON number with every digit of its scale (arrow-json
//! writes Arrow's text of it, unquoted), which ClickHouse 18.16 reads digit by digit, exactly:
//! it refuses a decimal in quotes. A UUID and a JSON value go as JSON strings.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit, TimestampMicrosecondType};
use sluice_core::ColumnType;

use crate::fit;

/// The last second ClickHouse's `DateTime` (a `UInt32` of seconds) can hold: 2106-02-07 06:28:15.
const DATETIME_MAX: i64 = u32::MAX as i64;

/// The last day ClickHouse's `Date` (a `UInt16` of days) can hold: 2149-06-06.
const DATE_MAX: i32 = u16::MAX as i32;

/// The ClickHouse type of a layout's column, without `Nullable`.
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

/// A column's definition in `CREATE TABLE`.
pub(crate) fn column_ddl(field: &Field) -> Result<String, String> {
    let ty = ch_type(field)?;
    Ok(if field.is_nullable() {
        format!("{} Nullable({ty})", quote(field.name()))
    } else {
        format!("{} {ty}", quote(field.name()))
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

/// The batch as ClickHouse reads it from `JSONEachRow`: timestamps become whole seconds since the
/// epoch (`DateTime` has no fraction in ClickHouse 18.16; the fraction is dropped), and values
/// outside what `DateTime` and `Date` can hold are refused with the column and row rather than
/// wrapped around silently, as is a decimal wider than its precision, whose text would lose
/// digits.
pub(crate) fn prepare(batch: &RecordBatch) -> Result<RecordBatch, String> {
    crate::values::check_decimals(batch)?;
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        match field.data_type() {
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                let micros = column.as_primitive::<TimestampMicrosecondType>();
                let seconds: Int64Array = micros.unary(|us| us.div_euclid(1_000_000));
                if let Some(row) = (0..seconds.len()).find(|&i| {
                    seconds.is_valid(i) && !(0..=DATETIME_MAX).contains(&seconds.value(i))
                }) {
                    return Err(format!(
                        "column '{}', row {}: {} is outside what ClickHouse DateTime holds \
                         (1970-01-01 00:00:00 to 2106-02-07 06:28:15 UTC)",
                        field.name(),
                        row + 1,
                        timestamp_text(micros.value(row)),
                    ));
                }
                fields.push(Field::new(
                    field.name(),
                    DataType::Int64,
                    field.is_nullable(),
                ));
                columns.push(Arc::new(seconds));
            }
            DataType::Date32 => {
                let days = column.as_primitive::<arrow::datatypes::Date32Type>();
                if let Some(row) = (0..days.len())
                    .find(|&i| days.is_valid(i) && !(0..=DATE_MAX).contains(&days.value(i)))
                {
                    return Err(format!(
                        "column '{}', row {}: day {} since 1970-01-01 is outside what ClickHouse \
                         Date holds (1970-01-01 to 2149-06-06)",
                        field.name(),
                        row + 1,
                        days.value(row),
                    ));
                }
                fields.push(field.as_ref().clone());
                columns.push(column.clone());
            }
            _ => {
                fields.push(field.as_ref().clone());
                columns.push(column.clone());
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| e.to_string())
}

fn timestamp_text(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|| format!("{micros} µs since the epoch"))
}

/// Appends the rows to `out` as newline-delimited JSON objects; nulls are left out, which
/// ClickHouse reads as `NULL` for a `Nullable` column.
pub(crate) fn ndjson(batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), String> {
    out.reserve(batch.get_array_memory_size());
    let mut writer = arrow::json::LineDelimitedWriter::new(out);
    writer
        .write(batch)
        .and_then(|()| writer.finish())
        .map_err(|e| format!("cannot encode the batch as JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use arrow::array::{BooleanArray, Date32Array, StringArray, TimestampMicrosecondArray};

    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    #[test]
    fn timestamps_become_whole_seconds_and_dates_stay_text() {
        let ts = TimestampMicrosecondArray::from(vec![Some(1_764_417_600_900_000), None])
            .with_timezone("UTC");
        let day = Date32Array::from(vec![Some(20_421), Some(0)]);
        let ok = BooleanArray::from(vec![true, false]);
        let s = StringArray::from(vec!["a\"\n\u{1}", "é"]);
        let b = batch(vec![
            ("ts", Arc::new(ts) as ArrayRef),
            ("day", Arc::new(day)),
            ("ok", Arc::new(ok)),
            ("s", Arc::new(s)),
        ]);
        let mut out = Vec::new();
        ndjson(&prepare(&b).unwrap(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["ts"], 1_764_417_600);
        assert_eq!(lines[0]["day"], "2025-11-29");
        assert_eq!(lines[0]["ok"], true);
        assert_eq!(lines[0]["s"], "a\"\n\u{1}");
        assert!(lines[1].get("ts").is_none(), "nulls are left out: {text}");
        assert_eq!(lines[1]["day"], "1970-01-01");
    }

    #[test]
    fn values_clickhouse_cannot_hold_are_refused_with_column_and_row() {
        let ts = TimestampMicrosecondArray::from(vec![0, -1]).with_timezone("UTC");
        let error = prepare(&batch(vec![("ts", Arc::new(ts) as ArrayRef)])).unwrap_err();
        assert!(
            error.contains("column 'ts', row 2") && error.contains("1969-12-31"),
            "{error}"
        );
        let day = Date32Array::from(vec![DATE_MAX + 1]);
        let error = prepare(&batch(vec![("day", Arc::new(day) as ArrayRef)])).unwrap_err();
        assert!(error.contains("column 'day', row 1"), "{error}");
    }

    #[test]
    fn decimals_go_as_exact_numbers_and_uuids_and_json_as_strings() {
        use arrow::array::{Decimal128Array, StringArray};
        let decimal = |values: Vec<Option<i128>>, precision, scale| {
            Arc::new(
                Decimal128Array::from(values)
                    .with_precision_and_scale(precision, scale)
                    .unwrap(),
            ) as ArrayRef
        };
        let widest = "9".repeat(38).parse::<i128>().unwrap();
        let b = batch(vec![
            ("d", decimal(vec![Some(-widest), Some(0), None], 38, 2)),
            ("f", decimal(vec![Some(5), Some(-widest), Some(1)], 38, 38)),
            (
                "u",
                Arc::new(StringArray::from(vec![
                    "67e55044-10b1-426f-9247-bb680e5fe0c8",
                    "00000000-0000-0000-0000-000000000000",
                    "ffffffff-ffff-ffff-ffff-ffffffffffff",
                ])),
            ),
            (
                "j",
                Arc::new(StringArray::from(vec![
                    Some(r#"{"a":[1,2.50]}"#),
                    Some("null"),
                    None,
                ])),
            ),
        ]);
        let mut out = Vec::new();
        ndjson(&prepare(&b).unwrap(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let (nines, zeros) = ("9".repeat(36), "0".repeat(37));
        let u = r#""u":"67e55044-10b1-426f-9247-bb680e5fe0c8""#;
        let j = r#""j":"{\"a\":[1,2.50]}""#;
        assert_eq!(
            lines[0],
            format!(r#"{{"d":-{nines}.99,"f":0.{zeros}5,{u},{j}}}"#)
        );
        let u = r#""u":"00000000-0000-0000-0000-000000000000""#;
        assert_eq!(
            lines[1],
            format!(r#"{{"d":0.00,"f":-0.{nines}99,{u},"j":"null"}}"#)
        );
        let u = r#""u":"ffffffff-ffff-ffff-ffff-ffffffffffff""#;
        assert_eq!(lines[2], format!(r#"{{"f":0.{zeros}1,{u}}}"#));
        let too_wide = batch(vec![("d", decimal(vec![Some(1000)], 3, 0))]);
        assert!(prepare(&too_wide).unwrap_err().contains("column 'd'"));
    }

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
