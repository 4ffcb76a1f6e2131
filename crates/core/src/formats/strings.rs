//! `JSONStringsEachRow`: a JSON object per row, as ClickHouse's `JSONEachRow` frames them, every
//! value a string (or null) read by the column's type as ClickHouse's text formats write it.

use std::collections::HashMap;

use arrow::array::RecordBatch;

use super::columns::Columns;
use super::value::Value;
use super::{at_row, body_columns};
use crate::error::DecodeError;
use crate::json::frame::{self, Row};
use crate::options::DecodeOptions;
use crate::options::JsonDialect;
use crate::schema::TableSchema;

/// Decodes a `JSONStringsEachRow` body into the table's columns.
pub(crate) fn decode(
    schema: &TableSchema,
    body: &[u8],
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    let names = body_columns(schema, options.columns.as_deref());
    let mut columns = Columns::new(schema, &names, options)?;
    read_objects(body, &positions(&names), options, &mut columns)?;
    columns.finish()
}

/// `JSONStringsEachRow` bodies decoded into one set of columns, and each body's rows; `None`
/// when any body fails, for each to be decoded alone.
pub(crate) fn decode_many(
    schema: &TableSchema,
    bodies: &[&[u8]],
    options: &DecodeOptions,
) -> Option<(RecordBatch, Vec<usize>)> {
    let names = body_columns(schema, options.columns.as_deref());
    let index = positions(&names);
    let columns = Columns::new(schema, &names, options).ok()?;
    columns.read_each(bodies, |body, columns| {
        read_objects(body, &index, options, columns)
    })
}

/// Each column name's position among `names`.
fn positions(names: &[String]) -> HashMap<&str, usize> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i))
        .collect()
}

/// Reads a body's rows into `columns`, each value into the column `index` places its key at.
fn read_objects(
    body: &[u8],
    index: &HashMap<&str, usize>,
    options: &DecodeOptions,
    columns: &mut Columns<'_>,
) -> Result<(), DecodeError> {
    for (number, row) in frame::rows(body, JsonDialect::ClickHouse)?
        .iter()
        .enumerate()
    {
        let at = |e: DecodeError| at_row(number + 1, e);
        let object = parse(row).map_err(at)?;
        for (key, value) in &object {
            let Some(&i) = index.get(key.as_str()) else {
                if options.skip_unknown_fields {
                    continue;
                }
                return Err(at(unknown(key, options.columns.is_some())));
            };
            columns
                .put(i, value.as_deref().map_or(Value::Null, Value::Text))
                .map_err(at)?;
        }
        columns.end_row().map_err(at)?;
    }
    Ok(())
}

/// A row's keys and values; serde_json refuses what is not JSON, a value other than a string or
/// null, and a key given twice.
fn parse(row: &Row<'_>) -> Result<Vec<(String, Option<String>)>, DecodeError> {
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(row.text)
        .map_err(|e| DecodeError::new(None, None, format!("invalid JSON: {e}")))?;
    object
        .into_iter()
        .map(|(key, value)| match value {
            serde_json::Value::String(text) => Ok((key, Some(text))),
            serde_json::Value::Null => Ok((key, None)),
            other => Err(DecodeError::new(
                None,
                Some(key),
                format!("{other} is not a string: JSONStringsEachRow sends every value as one"),
            )),
        })
        .collect()
}

fn unknown(key: &str, listed: bool) -> DecodeError {
    let why = if listed {
        "the insert's column list does not name it"
    } else {
        "the table has no such column"
    };
    DecodeError::new(
        None,
        Some(crate::name::printable(key)),
        format!("{why}; input_format_skip_unknown_fields=1 skips it"),
    )
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;

    use super::*;
    use crate::formats::tests_support::*;
    use crate::options::InputFormat;
    use crate::schema::{Column, ColumnType};

    fn schema() -> TableSchema {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("ok", ColumnType::Bool),
        ])
        .unwrap()
    }

    #[test]
    fn string_values_read_by_the_column_type() {
        let body = br#"{"id":"1","ok":"true"} {"ok":null,"id":"2"}"#;
        let batch = decode(&schema(), body, &options_for(None, false)).unwrap();
        assert_eq!(
            batch.column(0).as_primitive::<Int64Type>().values(),
            &[1, 2]
        );
        assert!(batch.column(1).as_boolean().value(0));
        assert!(batch.column(1).is_null(1));
    }

    #[test]
    fn refuses_other_values_unknown_keys_and_bad_json() {
        for (body, says) in [
            (&br#"{"id":1}"#[..], "row 1, column 'id': 1 is not a string"),
            (
                br#"{"id":"1","x":"2"}"#,
                "row 1, column 'x': the table has no such column",
            ),
            (br#"{"id":"1"} {"id":"2",}"#, "row 2: invalid JSON"),
            (
                br#"{"ok":"true"}"#,
                "row 1, column 'id': the column is required",
            ),
        ] {
            let error = decode(&schema(), body, &options_for(None, false))
                .unwrap_err()
                .to_string();
            assert!(error.starts_with(says), "{error}");
        }
        let skipped = decode(
            &schema(),
            br#"{"id":"1","x":"2"}"#,
            &options_for(None, true),
        )
        .unwrap();
        assert_eq!(skipped.num_rows(), 1);
    }

    #[test]
    fn every_value_is_a_string_and_a_json_column_takes_its_content() {
        let body = format!(
            "{{\"d\":\"-12.34\",\"u\":\"{UUID_SENT}\",\"j\":\"{{\\\"a\\\":[1,2]}}\"}}\n\
             {{\"d\":null,\"u\":null,\"j\":null}}\n\
             {{\"d\":\"1e-2\",\"j\":\"\\\"text\\\"\"}}"
        );
        let batch = decode_newer(InputFormat::JsonStringsEachRow, body.as_bytes()).unwrap();
        let (d, u, j) = newer_rows(&batch);
        assert_eq!(d, [Some(-1234), None, Some(1)]);
        assert_eq!(u, [Some(UUID_KEPT), None, None]);
        assert_eq!(j, [Some("{\"a\":[1,2]}"), None, Some("\"text\"")]);
        for (body, says) in [
            (
                r#"{"d":"1.239"}"#,
                "row 1, column 'd': 1.239 has 3 digits after the point",
            ),
            (r#"{"d":1.5}"#, "row 1, column 'd': 1.5 is not a string"),
            (
                r#"{"u":"67e55044"}"#,
                "row 1, column 'u': '67e55044' is not a UUID",
            ),
            (r#"{"j":"{\"a\":"}"#, "row 1, column 'j': not JSON"),
        ] {
            let error = decode_newer(InputFormat::JsonStringsEachRow, body.as_bytes()).unwrap_err();
            assert!(error.starts_with(says), "{body}: {error}");
        }
    }
}
