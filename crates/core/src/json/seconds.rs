//! Timestamps sent as Unix seconds on the ClickHouse door.
//!
//! ClickHouse reads a number for a `DateTime` column as Unix seconds, and its producers send
//! `"ts": 1795953600`; arrow-json reads a number for a timestamp column as microseconds. The rows
//! the strict pass found holding such a number are rewritten, that number times a million, before
//! arrow-json sees them. Every other value keeps its exact text, so nothing else changes.

use std::collections::{BTreeMap, HashMap};

use arrow::datatypes::{DataType, SchemaRef};
use serde_json::value::RawValue;

use super::frame::Row as Framed;
use crate::error::DecodeError;

/// The rows at `indexes`, rewritten with their timestamps' seconds in microseconds.
pub(crate) fn rewrite(
    schema: &SchemaRef,
    rows: &[Framed<'_>],
    indexes: &[usize],
) -> Result<HashMap<usize, Vec<u8>>, DecodeError> {
    let timestamps: Vec<&str> = schema
        .fields()
        .iter()
        .filter(|f| matches!(f.data_type(), DataType::Timestamp(..)))
        .map(|f| f.name().as_str())
        .collect();
    let mut rewritten = HashMap::with_capacity(indexes.len());
    for &index in indexes {
        let Some(row) = rows.get(index) else {
            continue;
        };
        rewritten.insert(index, rewrite_row(row, &timestamps)?);
    }
    Ok(rewritten)
}

fn rewrite_row(row: &Framed<'_>, timestamps: &[&str]) -> Result<Vec<u8>, DecodeError> {
    let fail =
        |field: Option<String>, message: String| DecodeError::new(Some(row.line), field, message);
    // The strict pass has accepted the row, so this parse succeeds.
    let mut object: BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(row.text).map_err(|e| fail(None, format!("invalid JSON: {e}")))?;
    for name in timestamps {
        let Some(value) = object.get_mut(*name) else {
            continue;
        };
        let Some(micros) = micros(value.get()) else {
            continue;
        };
        let micros = micros.ok_or_else(|| {
            fail(
                Some((*name).to_owned()),
                format!(
                    "{} seconds is too far from 1970 for a timestamp",
                    value.get()
                ),
            )
        })?;
        *value = RawValue::from_string(micros.to_string())
            .map_err(|e| fail(Some((*name).to_owned()), e.to_string()))?;
    }
    serde_json::to_vec(&object).map_err(|e| fail(None, e.to_string()))
}

/// `None` when `text` is not a number; else its seconds in microseconds, `None` inside when they
/// do not fit.
fn micros(text: &str) -> Option<Option<i64>> {
    let number: serde_json::Number = serde_json::from_str(text).ok()?;
    Some(if let Some(seconds) = number.as_i64() {
        seconds.checked_mul(1_000_000)
    } else if let Some(seconds) = number.as_u64() {
        i64::try_from(seconds)
            .ok()
            .and_then(|s| s.checked_mul(1_000_000))
    } else {
        number.as_f64().and_then(|seconds| {
            let micros = (seconds * 1_000_000.0).round();
            // i64::MAX as f64 rounds up, so the comparison is strict.
            (micros.is_finite() && micros.abs() < i64::MAX as f64).then_some(micros as i64)
        })
    })
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use arrow::datatypes::TimestampMicrosecondType;

    use super::*;
    use crate::json::{DecodeOptions, JsonDialect, decode_ndjson};
    use crate::schema::{Column, ColumnType, TableSchema};

    #[test]
    fn the_clickhouse_door_reads_seconds_and_replayed_records_keep_microseconds() {
        let schema = TableSchema::new(vec![Column::new("ts", ColumnType::Timestamp)]).unwrap();
        let body = br#"{"ts": 1795953600} {"ts": "2026-11-29 12:00:00"}"#;
        let read = |dialect| {
            let options = DecodeOptions {
                dialect,
                ..DecodeOptions::default()
            };
            let batch = decode_ndjson(&schema, body, &options).unwrap();
            let ts = batch.column(0).as_primitive::<TimestampMicrosecondType>();
            (ts.value(0), ts.value(1))
        };
        let noon = 1_795_953_600_000_000;
        assert_eq!(read(JsonDialect::ClickHouse), (noon, noon));
        assert_eq!(read(JsonDialect::ClickHouseMicros), (1_795_953_600, noon));
    }

    #[test]
    fn seconds_become_microseconds_and_nothing_else_changes() {
        assert_eq!(micros("1795953600"), Some(Some(1_795_953_600_000_000)));
        assert_eq!(micros("-1.5"), Some(Some(-1_500_000)));
        assert_eq!(micros("1e300"), Some(None));
        assert_eq!(micros("\"2026-11-29\""), None);
        let row = Framed {
            line: 3,
            column: 1,
            text: br#"{"f": 0.30000000000000004, "at": 1795953600.25, "s": "x"}"#,
        };
        let out = rewrite_row(&row, &["at"]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"at":1795953600250000,"f":0.30000000000000004,"s":"x"}"#
        );
        let far = Framed {
            text: br#"{"at": 9223372036855}"#,
            ..row
        };
        let error = rewrite_row(&far, &["at"]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "line 3, column 'at': 9223372036855 seconds is too far from 1970 for a timestamp"
        );
    }
}
