//! Rows rewritten before arrow-json sees them, for two of ClickHouse's rules arrow-json does not
//! know. Every other value keeps its exact text, so nothing else changes.
//!
//! - A number for a timestamp is Unix seconds on the ClickHouse door (ClickHouse reads a number
//!   for a `DateTime` that way, and its producers send `"ts": 1795953600`); arrow-json reads
//!   microseconds. The rows the strict pass found holding one get that number times a million.
//! - With `input_format_null_as_default=1`, a null for a column that is not nullable is its
//!   type's default: zero, false, the empty string, 1970-01-01.
//!
//! And for two of sluice's own: a `json` column holds any JSON value as its text, and arrow-json
//! puts only strings in a text column, so each such value becomes a string holding its text.
//! And a `list`, `struct` or `map` column is built from its values' text elsewhere
//! ([`super::nested`]), so arrow-json reads `null` in its place.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use arrow::datatypes::{DataType, Field, SchemaRef};
use serde_json::value::RawValue;

use super::check::ToRewrite;
use super::frame::Row as Framed;
use super::nested::{self, NestedValues};
use crate::error::DecodeError;
use crate::schema::ColumnType;

/// The rows `to_rewrite` names rewritten: their timestamps' seconds in microseconds, their
/// `json` values as strings; and with `null_as_default` every row holding a null for a column
/// that is not nullable, with the column's default.
pub(crate) fn rewrite(
    schema: &SchemaRef,
    rows: &[Framed<'_>],
    to_rewrite: &ToRewrite,
    null_as_default: bool,
) -> Result<HashMap<usize, Vec<u8>>, DecodeError> {
    let ToRewrite {
        in_seconds,
        with_json,
        with_nested,
    } = to_rewrite;
    let timestamps: Vec<&str> = schema
        .fields()
        .iter()
        .filter(|f| matches!(f.data_type(), DataType::Timestamp(..)))
        .map(|f| f.name().as_str())
        .collect();
    // Looked for only when a row holds a json value: most bodies have none.
    let json_columns: Vec<&str> = if with_json.is_empty() {
        Vec::new()
    } else {
        schema
            .fields()
            .iter()
            .filter(|f| ColumnType::from_field(f) == Some(ColumnType::Json))
            .map(|f| f.name().as_str())
            .collect()
    };
    let nested_columns: Vec<&str> = schema
        .fields()
        .iter()
        .filter(|f| nested::is_nested(f.data_type()))
        .map(|f| f.name().as_str())
        .collect();
    // A nested column's default is given where it is built.
    let defaults: Vec<(&str, &str)> = schema
        .fields()
        .iter()
        .filter(|f| null_as_default && !f.is_nullable() && !nested::is_nested(f.data_type()))
        .map(|f| (f.name().as_str(), default_of(f)))
        .collect();
    let mut rewritten = HashMap::with_capacity(in_seconds.len() + with_json.len());
    let mut json_spans = with_json.iter().peekable();
    let mut nested_spans = with_nested.iter().peekable();
    for (index, row) in rows.iter().enumerate() {
        let seconds = in_seconds.binary_search(&index).is_ok();
        let json = json_spans.next_if(|(at, _)| *at == index).map(|(_, s)| s);
        let nested = nested_spans.next_if(|(at, _)| *at == index).map(|(_, s)| s);
        let nulls = !defaults.is_empty() && holds_null(row);
        if !seconds && json.is_none() && nested.is_none() && !nulls {
            continue;
        }
        let text = if !seconds && !nulls {
            // Only values to replace: each is replaced where it lies.
            replace_spans(row.text, json.map_or(&[], Vec::as_slice), nested)
        } else {
            let columns = Rewrites {
                timestamps: if seconds { &timestamps } else { &[] },
                json: if json.is_some() { &json_columns } else { &[] },
                nested: if nested.is_some() {
                    &nested_columns
                } else {
                    &[]
                },
                defaults: &defaults,
            };
            rewrite_row(row, &columns)?
        };
        rewritten.insert(index, text);
    }
    Ok(rewritten)
}

/// `text` with each of `json`, a JSON value, replaced by a string holding its text, and each
/// nested value `null`.
fn replace_spans(text: &[u8], json: &[Range<usize>], nested: Option<&NestedValues>) -> Vec<u8> {
    let mut spans: Vec<(&Range<usize>, bool)> = json.iter().map(|span| (span, true)).collect();
    spans.extend(nested.into_iter().flatten().map(|(_, span)| (span, false)));
    spans.sort_by_key(|(span, _)| span.start);
    let mut out = Vec::with_capacity(text.len() + text.len() / 4);
    let mut at = 0;
    for (span, quoted) in spans {
        out.extend_from_slice(&text[at..span.start]);
        if quoted {
            // The span is a JSON value serde_json has read, so it is UTF-8.
            let value = String::from_utf8_lossy(&text[span.clone()]);
            // Writing a string into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut out, &value);
        } else {
            out.extend_from_slice(b"null");
        }
        at = span.end;
    }
    out.extend_from_slice(&text[at..]);
    out
}

/// The columns a row's rewrite changes.
struct Rewrites<'a> {
    /// Timestamps whose numbers are seconds.
    timestamps: &'a [&'a str],
    /// `json` columns, whose values become strings of their text.
    json: &'a [&'a str],
    /// `list`, `struct` and `map` columns, whose values become `null`.
    nested: &'a [&'a str],
    /// Columns whose null becomes the default given.
    defaults: &'a [(&'a str, &'a str)],
}

/// Whether a row may hold a null: a cheap look for the word, before parsing it.
fn holds_null(row: &Framed<'_>) -> bool {
    row.text.windows(4).any(|w| w == b"null")
}

/// A type's default as ClickHouse stores one for a null, as JSON arrow-json reads for it: the
/// nil UUID for a `uuid`, an empty object for a `json` column (as the other formats give).
fn default_of(field: &Field) -> &'static str {
    match ColumnType::from_field(field) {
        Some(ColumnType::Uuid) => return "\"00000000-0000-0000-0000-000000000000\"",
        Some(ColumnType::Json) => return "\"{}\"",
        _ => {}
    }
    match field.data_type() {
        DataType::Boolean => "false",
        DataType::Utf8 | DataType::LargeUtf8 => "\"\"",
        DataType::Date32 | DataType::Date64 => "\"1970-01-01\"",
        _ => "0",
    }
}

fn rewrite_row(row: &Framed<'_>, columns: &Rewrites<'_>) -> Result<Vec<u8>, DecodeError> {
    let fail =
        |field: Option<String>, message: String| DecodeError::new(Some(row.line), field, message);
    // The strict pass has accepted the row, so this parse succeeds.
    let mut object: BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(row.text).map_err(|e| fail(None, format!("invalid JSON: {e}")))?;
    for name in columns.timestamps {
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
    for name in columns.json {
        if let Some(value) = object.get_mut(*name)
            && value.get() != "null"
        {
            let text = serde_json::to_string(value.get())
                .map_err(|e| fail(Some((*name).to_owned()), e.to_string()))?;
            *value = RawValue::from_string(text)
                .map_err(|e| fail(Some((*name).to_owned()), e.to_string()))?;
        }
    }
    for name in columns.nested {
        if let Some(value) = object.get_mut(*name) {
            *value = RawValue::from_string("null".to_owned())
                .map_err(|e| fail(Some((*name).to_owned()), e.to_string()))?;
        }
    }
    for (name, default) in columns.defaults {
        if let Some(value) = object.get_mut(*name)
            && value.get() == "null"
        {
            *value = RawValue::from_string((*default).to_owned())
                .map_err(|e| fail(Some((*name).to_owned()), e.to_string()))?;
        }
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
        number.as_f64().and_then(crate::text::seconds_to_micros)
    })
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::TimestampMicrosecondType;

    use super::*;
    use crate::json::{DecodeOptions, JsonDialect, decode_ndjson};
    use crate::schema::{Column, ColumnType, TableSchema};

    #[test]
    fn a_null_for_a_required_column_is_its_default_when_asked() {
        let schema = TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("s", ColumnType::String).required(),
            Column::new("ok", ColumnType::Bool).required(),
            Column::new("day", ColumnType::Date).required(),
            Column::new("note", ColumnType::String),
        ])
        .unwrap();
        let body = br#"{"id": null, "s": null, "ok": null, "day": null, "note": null}"#;
        let mut options = DecodeOptions {
            dialect: JsonDialect::ClickHouse,
            ..DecodeOptions::default()
        };
        assert!(decode_ndjson(&schema, body, &options).is_err());
        options.null_as_default = true;
        let batch = decode_ndjson(&schema, body, &options).unwrap();
        let shown: Vec<String> = batch
            .columns()
            .iter()
            .map(|c| arrow::util::display::array_value_to_string(c, 0).unwrap())
            .collect();
        assert_eq!(shown, ["0", "", "false", "1970-01-01", ""]);
        assert!(
            batch.column(4).is_null(0),
            "a nullable column keeps its null"
        );
    }

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
    fn a_null_for_a_required_uuid_or_json_is_the_nil_uuid_or_an_empty_object() {
        let schema = TableSchema::new(vec![
            Column::new("id", ColumnType::Uuid).required(),
            Column::new("doc", ColumnType::Json).required(),
            Column::new("amount", ColumnType::decimal(10, 2).unwrap()).required(),
        ])
        .unwrap();
        let options = DecodeOptions {
            dialect: JsonDialect::ClickHouse,
            null_as_default: true,
            ..DecodeOptions::default()
        };
        let body = b"{\"id\": null, \"doc\": null, \"amount\": null}";
        let batch = crate::formats::decode(&schema, body, &options).unwrap();
        let text = |i: usize| batch.column(i).as_string::<i32>().value(0).to_owned();
        assert_eq!(text(0), "00000000-0000-0000-0000-000000000000");
        assert_eq!(text(1), "{}");
        let amount = batch
            .column(2)
            .as_primitive::<arrow::datatypes::Decimal128Type>();
        assert_eq!(amount.value(0), 0);
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
        let seconds = Rewrites {
            timestamps: &["at"],
            json: &[],
            nested: &[],
            defaults: &[],
        };
        let out = rewrite_row(&row, &seconds).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"at":1795953600250000,"f":0.30000000000000004,"s":"x"}"#
        );
        let far = Framed {
            text: br#"{"at": 9223372036855}"#,
            ..row
        };
        let error = rewrite_row(&far, &seconds).unwrap_err();
        assert_eq!(
            error.to_string(),
            "line 3, column 'at': 9223372036855 seconds is too far from 1970 for a timestamp"
        );
    }
}
