//! `JSONCompactEachRow`: a JSON array per row, a value per column, rows separated by whitespace
//! (or one comma, as ClickHouse's JSON rows may be), after an optional header of a names array
//! and a types array. serde_json parses every row, so what is not JSON is refused.

use arrow::array::RecordBatch;
use serde_json::Value as Json;

use super::columns::{Columns, Value};
use super::{Header, at_row, body_columns, pair};
use crate::error::DecodeError;
use crate::options::DecodeOptions;
use crate::schema::TableSchema;

/// Decodes a `JSONCompactEachRow` body into the table's columns.
pub(crate) fn decode(
    schema: &TableSchema,
    body: &[u8],
    header: Header,
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    let listed = options.columns.as_deref();
    let mut rows = Rows {
        body,
        pos: 0,
        row: 0,
    };
    let names = match header {
        Header::None => body_columns(schema, listed),
        Header::Names => rows.strings()?.unwrap_or_default(),
        Header::NamesAndTypes => {
            let names = rows.strings()?.unwrap_or_default();
            rows.strings()?;
            names
        }
    };
    let mut columns = Columns::new(schema, &names, options)?;
    while let Some(values) = rows.next_row()? {
        let row = rows.row;
        if values.len() != columns.width() {
            return Err(at_row(
                row,
                DecodeError::new(
                    None,
                    None,
                    format!(
                        "the row has {} values, and the insert has {} columns",
                        values.len(),
                        columns.width()
                    ),
                ),
            ));
        }
        for (index, json) in values.iter().enumerate() {
            let value = value(json).map_err(|e| at_row(row, e))?;
            columns.put(index, value).map_err(|e| at_row(row, e))?;
        }
        columns.end_row().map_err(|e| at_row(row, e))?;
    }
    columns.finish()
}

/// The columns a `JSONCompactEachRowWithNamesAndTypes` header declares.
pub(crate) fn declared_columns(body: &[u8]) -> Result<Vec<(String, String)>, DecodeError> {
    let mut rows = Rows {
        body,
        pos: 0,
        row: 0,
    };
    let missing = || {
        DecodeError::new(
            None,
            None,
            "the header of names and types is missing".into(),
        )
    };
    let names = rows.strings()?.ok_or_else(missing)?;
    let types = rows.strings()?.ok_or_else(missing)?;
    pair(names, types)
}

fn value(json: &Json) -> Result<Value<'_>, DecodeError> {
    Ok(match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::String(s) => Value::Text(s),
        Json::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Value::UInt(u),
            (_, Some(i), _) => Value::Int(i),
            (_, _, Some(f)) => Value::Float(f),
            _ => {
                return Err(DecodeError::new(
                    None,
                    None,
                    format!("{n} is not a number sluice reads"),
                ));
            }
        },
        Json::Array(_) | Json::Object(_) => {
            return Err(DecodeError::new(
                None,
                None,
                "a value is an array or an object; sluice's columns hold single values".to_owned(),
            ));
        }
    })
}

/// The body's rows, one JSON array at a time.
struct Rows<'a> {
    body: &'a [u8],
    pos: usize,
    /// The 1-based number of the last row read, header rows included.
    row: usize,
}

impl Rows<'_> {
    /// The next row, or `None` at the end of the body.
    fn next_row(&mut self) -> Result<Option<Vec<Json>>, DecodeError> {
        self.skip_separator();
        if self.pos >= self.body.len() {
            return Ok(None);
        }
        self.row += 1;
        let row = self.row;
        let mut stream =
            serde_json::Deserializer::from_slice(&self.body[self.pos..]).into_iter::<Json>();
        let parsed = match stream.next() {
            Some(Ok(parsed)) => parsed,
            Some(Err(e)) => {
                return Err(at_row(
                    row,
                    DecodeError::new(None, None, format!("invalid JSON: {e}")),
                ));
            }
            None => return Ok(None),
        };
        self.pos += stream.byte_offset();
        match parsed {
            Json::Array(values) => Ok(Some(values)),
            _ => Err(at_row(
                row,
                DecodeError::new(
                    None,
                    None,
                    "a row must be a JSON array of values".to_owned(),
                ),
            )),
        }
    }

    /// A header row: an array of strings.
    fn strings(&mut self) -> Result<Option<Vec<String>>, DecodeError> {
        let Some(values) = self.next_row()? else {
            return Ok(None);
        };
        let row = self.row;
        values
            .into_iter()
            .map(|v| match v {
                Json::String(s) => Ok(s),
                _ => Err(at_row(
                    row,
                    DecodeError::new(None, None, "a header row must hold strings".to_owned()),
                )),
            })
            .collect::<Result<_, _>>()
            .map(Some)
    }

    /// Skips whitespace, and one comma between rows.
    fn skip_separator(&mut self) {
        self.skip_space();
        if self.row > 0 && self.body.get(self.pos) == Some(&b',') {
            self.pos += 1;
            self.skip_space();
        }
    }

    fn skip_space(&mut self) {
        while self
            .body
            .get(self.pos)
            .is_some_and(|b| b.is_ascii_whitespace())
        {
            self.pos += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;

    use super::*;
    use crate::formats::tests_support::*;
    use crate::schema::{Column, ColumnType};

    fn schema() -> TableSchema {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("name", ColumnType::String),
        ])
        .unwrap()
    }

    #[test]
    fn arrays_in_table_order_or_by_header() {
        let batch = decode(
            &schema(),
            b"[1,\"a\"]\n[\"2\",null]\n",
            Header::None,
            &options_for(None, false),
        )
        .unwrap();
        assert_eq!(
            batch.column(0).as_primitive::<Int64Type>().values(),
            &[1, 2]
        );
        let body = b"[\"name\",\"id\"]\n[\"String\",\"Int64\"]\n[\"x\",3]";
        let batch = decode(
            &schema(),
            body,
            Header::NamesAndTypes,
            &options_for(None, false),
        )
        .unwrap();
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().values(), &[3]);
        assert_eq!(
            declared_columns(body).unwrap(),
            [
                ("name".into(), "String".into()),
                ("id".into(), "Int64".into())
            ]
        );
    }

    #[test]
    fn refuses_what_is_not_a_row_of_values() {
        for (body, says) in [
            (&b"[1,\"a\"]\n[2,,\"b\"]"[..], "row 2: invalid JSON"),
            (b"[1,\"a\"] x", "row 2: invalid JSON"),
            (b"{\"id\":1}", "row 1: a row must be a JSON array"),
            (b"[1]", "row 1: the row has 1 values"),
            (b"[1,[2]]", "row 1: a value is an array"),
            (
                b"[1.5,\"a\"]",
                "row 1, column 'id': the number 1.5 is not a whole number",
            ),
        ] {
            let error = decode(&schema(), body, Header::None, &options_for(None, false))
                .unwrap_err()
                .to_string();
            assert!(error.starts_with(says), "{body:?}: {error}");
        }
    }
}
