//! `Values`: rows as SQL tuples, `(1, 'a', NULL), (2, 'b\'s', 3.5)`, as `INSERT ... VALUES`
//! writes them. Only literals are taken: numbers, quoted strings, `NULL`, `true` and `false`,
//! and for a `list`, `struct` or `map` column an array `[1, 2]`, a tuple `(1, 'a')` or a map
//! `{'k': 1}` of literals ([`super::quoted`]). A number for a `decimal` column is read from its
//! digits, never through a float.

use arrow::array::RecordBatch;

use super::columns::Columns;
use super::quoted;
use super::value::Value;
use super::{at_row, body_columns};
use crate::error::DecodeError;
use crate::options::DecodeOptions;
use crate::schema::{ColumnType, TableSchema};
use crate::text::{self, Int};

/// Decodes a `Values` body into the table's columns.
pub(crate) fn decode(
    schema: &TableSchema,
    body: &[u8],
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    let names = body_columns(schema, options.columns.as_deref());
    let mut columns = Columns::new(schema, &names, options)?;
    read_tuples(body, &names, &mut columns)?;
    columns.finish()
}

/// `Values` bodies decoded into one set of columns, and each body's rows; `None` when any body
/// fails, for each to be decoded alone.
pub(crate) fn decode_many(
    schema: &TableSchema,
    bodies: &[&[u8]],
    options: &DecodeOptions,
) -> Option<(RecordBatch, Vec<usize>)> {
    let names = body_columns(schema, options.columns.as_deref());
    let columns = Columns::new(schema, &names, options).ok()?;
    columns.read_each(bodies, |body, columns| read_tuples(body, &names, columns))
}

/// Reads a body's tuples into `columns`, the columns `names`, after any rows they hold.
fn read_tuples(
    body: &[u8],
    names: &[String],
    columns: &mut Columns<'_>,
) -> Result<(), DecodeError> {
    let before = columns.rows();
    let mut parser = Parser { body, pos: 0 };
    loop {
        parser.skip_space();
        if parser.at_end() {
            break;
        }
        let read = columns.rows() - before;
        let row = read + 1;
        let at = |message: String| at_row(row, DecodeError::new(None, None, message));
        if read > 0 && parser.peek() == Some(b',') {
            parser.pos += 1;
            parser.skip_space();
        }
        if parser.peek() == Some(b';') {
            parser.pos += 1;
            parser.skip_space();
            if parser.at_end() {
                break;
            }
            return Err(at(parser.unexpected("after ';'")));
        }
        parser.expect(b'(').map_err(at)?;
        tuple(&mut parser, columns, names, row)?;
        columns.end_row().map_err(|e| at_row(row, e))?;
    }
    Ok(())
}

/// The values of one tuple, its `(` already read.
fn tuple(
    parser: &mut Parser<'_>,
    columns: &mut Columns<'_>,
    names: &[String],
    row: usize,
) -> Result<(), DecodeError> {
    let width = columns.width();
    for index in 0..width {
        let at = |message: String| at_row(row, DecodeError::new(None, None, message));
        parser.skip_space();
        let literal = parser.literal().map_err(at)?;
        let value = match &literal {
            Literal::Null => Value::Null,
            Literal::Bool(b) => Value::Bool(*b),
            Literal::Number(text) => match columns.target_type(index) {
                Some(ColumnType::Decimal { .. }) => Value::Text(text),
                _ => number(text),
            },
            Literal::Text(text) => Value::Text(text),
            Literal::Nested(text) => match columns.target_type(index) {
                Some(ty) if !ty.is_nested() => {
                    let message =
                        format!("an array, tuple or map does not go into the table's {ty} column");
                    let name = names.get(index).cloned();
                    return Err(at_row(row, DecodeError::new(None, name, message)));
                }
                _ => Value::Text(text),
            },
        };
        columns.put(index, value).map_err(|e| at_row(row, e))?;
        parser.skip_space();
        let separator = if index + 1 == width { b')' } else { b',' };
        if parser.peek() != Some(separator) {
            let expected = if separator == b')' {
                format!("the end of a row of {width} values")
            } else {
                "','".to_owned()
            };
            return Err(at(parser.unexpected(&format!("where {expected} belongs"))));
        }
        parser.pos += 1;
    }
    Ok(())
}

fn number(text: &str) -> Value<'_> {
    match text::parse_int(text) {
        Some(Int::Signed(n)) => Value::Int(n),
        Some(Int::Unsigned(n)) => Value::UInt(n),
        None => text::parse_float(text).map_or(Value::Text(text), Value::Float),
    }
}

enum Literal<'a> {
    Null,
    Bool(bool),
    Number(&'a str),
    Text(String),
    /// An array, tuple or map, as written.
    Nested(&'a str),
}

struct Parser<'a> {
    body: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn at_end(&self) -> bool {
        self.pos >= self.body.len()
    }

    fn peek(&self) -> Option<u8> {
        self.body.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(&format!("where '{}' belongs", char::from(byte))))
        }
    }

    fn unexpected(&self, context: &str) -> String {
        match self.peek() {
            None => format!("the body ends {context}"),
            Some(b) => format!(
                "unexpected '{}' at byte {} {context}",
                char::from(b).escape_default(),
                self.pos + 1
            ),
        }
    }

    fn literal(&mut self) -> Result<Literal<'a>, String> {
        match self.peek() {
            Some(b'\'') => self.quoted().map(Literal::Text),
            Some(b'[' | b'(' | b'{') => {
                let start = self.pos;
                self.pos = quoted::value_end(self.body, start)?;
                std::str::from_utf8(&self.body[start..self.pos])
                    .map(Literal::Nested)
                    .map_err(|_| format!("the value at byte {} is not UTF-8", start + 1))
            }
            Some(b'-' | b'+' | b'.' | b'0'..=b'9') => Ok(Literal::Number(self.word())),
            Some(b) if b.is_ascii_alphabetic() => {
                let start = self.pos;
                let word = self.word();
                match word.to_ascii_lowercase().as_str() {
                    "null" => Ok(Literal::Null),
                    "true" => Ok(Literal::Bool(true)),
                    "false" => Ok(Literal::Bool(false)),
                    "inf" | "nan" => Ok(Literal::Number(word)),
                    _ => Err(format!(
                        "'{word}' at byte {} is not a literal: sluice takes numbers, quoted \
                         strings, NULL, true and false in VALUES",
                        start + 1
                    )),
                }
            }
            _ => Err(self.unexpected("where a value belongs")),
        }
    }

    /// A run of characters that can make up a number or a keyword.
    fn word(&mut self) -> &'a str {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+' | b'_'))
        {
            self.pos += 1;
        }
        // Only ASCII was taken, so this is valid UTF-8.
        std::str::from_utf8(&self.body[start..self.pos]).unwrap_or_default()
    }

    /// A single-quoted string: backslash escapes, and `''` for a quote.
    fn quoted(&mut self) -> Result<String, String> {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(byte) = self.peek() else {
                return Err(format!("the string at byte {} is not closed", start + 1));
            };
            self.pos += 1;
            match byte {
                b'\'' if self.peek() == Some(b'\'') => {
                    out.push(b'\'');
                    self.pos += 1;
                }
                b'\'' => break,
                b'\\' => out.push(self.escaped()?),
                other => out.push(other),
            }
        }
        String::from_utf8(out).map_err(|_| format!("the string at byte {} is not UTF-8", start + 1))
    }

    fn escaped(&mut self) -> Result<u8, String> {
        let byte = self
            .peek()
            .ok_or_else(|| "a string ends in a backslash".to_owned())?;
        self.pos += 1;
        Ok(match byte {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'0' => 0,
            b'b' => 8,
            b'f' => 12,
            b'\\' | b'\'' | b'"' => byte,
            other => {
                return Err(format!(
                    "unknown escape \\{} at byte {}",
                    char::from(other).escape_default(),
                    self.pos
                ));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;

    use super::*;
    use crate::formats::tests_support::*;
    use crate::options::InputFormat;
    use crate::schema::Column;

    fn schema() -> TableSchema {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("name", ColumnType::String),
        ])
        .unwrap()
    }

    #[test]
    fn tuples_of_literals() {
        let body = b" (1, 'a\\'b'), (-2,NULL)\n(3, 'it''s');";
        let batch = decode(&schema(), body, &options_for(None, false)).unwrap();
        assert_eq!(
            batch.column(0).as_primitive::<Int64Type>().values(),
            &[1, -2, 3]
        );
        let names: Vec<_> = batch.column(1).as_string::<i32>().iter().collect();
        assert_eq!(names, [Some("a'b"), None, Some("it's")]);
    }

    #[test]
    fn refuses_what_is_not_a_row_of_literals() {
        for (body, says) in [
            (&b"(1, 'a', 3)"[..], "row 1: unexpected ','"),
            (b"(1, 'a') (2", "row 2: the body ends"),
            (b"(1, now())", "row 1: 'now' at byte 5 is not a literal"),
            (b"(1, 'open)", "row 1: the string at byte 5 is not closed"),
            (
                b"(1, 'a'); (2, 'b')",
                "row 2: unexpected '(' at byte 11 after ';'",
            ),
            (
                b"('x', 'a')",
                "row 1, column 'id': 'x' is not a whole number",
            ),
        ] {
            let error = decode(&schema(), body, &options_for(None, false))
                .unwrap_err()
                .to_string();
            assert!(error.starts_with(says), "{error}");
        }
    }

    #[test]
    fn decimals_from_their_digits_and_uuids_and_json_from_strings() {
        let body = format!(
            "(-12.34, '{UUID_SENT}', '{{\"a\": [1, 2]}}'), (NULL, NULL, NULL), \
             ('99999999.99', '{UUID_KEPT}', '\"it\\'s\"'), (1e2, NULL, 'null')"
        );
        let batch = decode_newer(InputFormat::Values, body.as_bytes()).unwrap();
        let (d, u, j) = newer_rows(&batch);
        assert_eq!(d, [Some(-1234), None, Some(9_999_999_999), Some(10_000)]);
        assert_eq!(u, [Some(UUID_KEPT), None, Some(UUID_KEPT), None]);
        assert_eq!(
            j,
            [
                Some("{\"a\": [1, 2]}"),
                None,
                Some("\"it's\""),
                Some("null")
            ]
        );
        for (body, says) in [
            (
                "(0.1, NULL, NULL), (0.125, NULL, NULL)",
                "row 2, column 'd': 0.125 has 3 digits after the point",
            ),
            (
                "(-123456789.5, NULL, NULL)",
                "row 1, column 'd': -123456789.5 has 9 digits before the point",
            ),
            (
                "(NULL, 'not-a-uuid', NULL)",
                "row 1, column 'u': 'not-a-uuid' is not a UUID",
            ),
            (
                "(NULL, 7, NULL)",
                "row 1, column 'u': the number 7 is not a UUID",
            ),
            (
                "(NULL, NULL, 7)",
                "row 1, column 'j': the number 7 is not JSON text",
            ),
            ("(NULL, NULL, '{')", "row 1, column 'j': not JSON"),
        ] {
            let error = decode_newer(InputFormat::Values, body.as_bytes()).unwrap_err();
            assert!(error.starts_with(says), "{body}: {error}");
        }
    }

    #[test]
    fn arrays_tuples_and_maps_as_clickhouse_writes_them() {
        // What ClickHouse 18.16.1 answered for `SELECT * FROM v ORDER BY id FORMAT Values`.
        let body =
            "(1,['a',NULL,'it\\'s\\ttab'],(200,['x']),[[1,NULL],[],[-3]]),(2,[],(NULL,[]),[])";
        let rows = decode_json(&nested_table(), InputFormat::Values, body.as_bytes());
        assert_eq!(rows, Ok(nested_rows()));
        let schema = TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new(
                "labels",
                ColumnType::map(ColumnType::list(ColumnType::Uuid)),
            ),
        ])
        .unwrap();
        let body = format!(
            "(1, {{'a': ['{UUID_SENT}', NULL], 'b' : [], }}), (2, {{}}), (3, NULL),\n\
             (4, {{ 'it''s' : NULL }})"
        );
        let rows = decode_json(&schema, InputFormat::Values, body.as_bytes()).unwrap();
        assert_eq!(
            rows,
            serde_json::json!([
                {"id": 1, "labels": {"a": [UUID_KEPT, null], "b": []}},
                {"id": 2, "labels": {}},
                {"id": 3, "labels": null},
                {"id": 4, "labels": {"it's": null}},
            ])
        );
    }

    #[test]
    fn nested_literals_go_only_into_nested_columns_and_unknown_ones_are_skipped() {
        let error = decode(&schema(), b"(1, ['a'])", &options_for(None, false))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "row 1, column 'name': an array, tuple or map does not go into the table's string \
             column"
        );
        let listed = ["id".to_owned(), "extra".to_owned(), "name".to_owned()];
        let body = b"(1, [(1, ')'), {'k': [']']}], 'x')";
        let batch = decode(&schema(), body, &options_for(Some(&listed), true)).unwrap();
        assert_eq!(
            rows_json(&batch),
            serde_json::json!([{"id": 1, "name": "x"}])
        );
        let error = decode(&schema(), b"(1, ['a)", &options_for(Some(&listed), true))
            .unwrap_err()
            .to_string();
        assert_eq!(error, "row 1: the value at byte 5 has no closing bracket");
        let error = decode_json(
            &nested_table(),
            InputFormat::Values,
            b"(1, [], (1, [2]), [])",
        )
        .unwrap_err();
        assert_eq!(
            error,
            "row 1, column 'pair.tags[0]': 2 is not a quoted string"
        );
    }
}
