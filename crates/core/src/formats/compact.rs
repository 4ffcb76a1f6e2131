//! `JSONCompactEachRow`: a JSON array per row, a value per column, rows separated by whitespace
//! (or one comma, as ClickHouse's JSON rows may be), after an optional header of a names array
//! and a types array. serde_json parses every row, so what is not JSON is refused.
//!
//! Each element is kept as its text until its column's type says how to read it:
//!
//! - A `json` column takes the element's own JSON text, whatever value it is: an object, an
//!   array, a number as written, or a string with its quotes (a JSON string, not JSON text to
//!   parse again). `null` is null. ClickHouse's own `JSON` type takes only an object here.
//! - A `decimal` column takes a number's digits as written, never through a float, or a
//!   string's content.
//! - A `list` takes a JSON array, a `map` a JSON object, and a `struct` a JSON array of its
//!   fields in order or, as ClickHouse reads a named tuple, an object of them by name, a field
//!   it leaves out being null. What they hold is read as a column of its type reads it. A string
//!   is read as the type's ClickHouse text form, as `JSONCompactStringsEachRow` sends it.
//! - Every other column takes a string's content, a number, a boolean or null; an object or an
//!   array is refused. (ClickHouse reads one into a `String` column as its text by default, with
//!   `input_format_json_read_objects_as_strings`; sluice's `string` does not.)

use std::borrow::Cow;

use arrow::array::RecordBatch;
use serde_json::value::RawValue;

use super::builder::{Builder, MapBuilder, Step, StructBuilder, Unfit};
use super::columns::Columns;
use super::quoted;
use super::value::Value;
use super::{Header, at_row, body_columns, not_the_first_header, pair};
use crate::error::DecodeError;
use crate::json::Entries;
use crate::name::printable;
use crate::options::DecodeOptions;
use crate::schema::{ColumnType, StructField, TableSchema};

/// Decodes a `JSONCompactEachRow` body into the table's columns.
pub(crate) fn decode(
    schema: &TableSchema,
    body: &[u8],
    header: Header,
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    let mut rows = Rows::new(body);
    let names = header_names(&mut rows, schema, header, options)?;
    let mut columns = Columns::new(schema, &names, options)?;
    read_rows(&mut rows, &names, &mut columns)?;
    columns.finish()
}

/// `JSONCompactEachRow` bodies whose headers, if they have one, name the first body's columns,
/// decoded into one set of columns, and each body's rows; `None` when any body fails or names
/// other columns, for each to be decoded alone.
pub(crate) fn decode_many(
    schema: &TableSchema,
    bodies: &[&[u8]],
    header: Header,
    options: &DecodeOptions,
) -> Option<(RecordBatch, Vec<usize>)> {
    let first = bodies.first()?;
    let names = header_names(&mut Rows::new(first), schema, header, options).ok()?;
    let columns = Columns::new(schema, &names, options).ok()?;
    columns.read_each(bodies, |body, columns| {
        let mut rows = Rows::new(body);
        if header != Header::None && header_names(&mut rows, schema, header, options)? != names {
            return Err(not_the_first_header());
        }
        read_rows(&mut rows, &names, columns)
    })
}

/// The names of the body's columns: its header's, which it reads (the types row is skipped:
/// the table's types decide how values are read), or the insert's column list or the table's.
fn header_names(
    rows: &mut Rows<'_>,
    schema: &TableSchema,
    header: Header,
    options: &DecodeOptions,
) -> Result<Vec<String>, DecodeError> {
    Ok(match header {
        Header::None => body_columns(schema, options.columns.as_deref()),
        Header::Names => rows.strings()?.unwrap_or_default(),
        Header::NamesAndTypes => {
            let names = rows.strings()?.unwrap_or_default();
            rows.strings()?;
            names
        }
    })
}

/// Reads the rows left in `rows` into `columns`, the columns `names`.
fn read_rows(
    rows: &mut Rows<'_>,
    names: &[String],
    columns: &mut Columns<'_>,
) -> Result<(), DecodeError> {
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
        for (index, raw) in values.iter().enumerate() {
            if columns
                .target_type(index)
                .is_some_and(ColumnType::is_nested)
                && raw.get().starts_with(['[', '{'])
            {
                let read = |builder: &mut Builder, ty: &ColumnType| nested(builder, ty, raw);
                columns
                    .put_nested(index, read)
                    .map_err(|e| at_row(row, e))?;
                continue;
            }
            let element = element(raw, columns.target_type(index)).map_err(|mut e| {
                e.field = names.get(index).map(|name| printable(name));
                at_row(row, e)
            })?;
            let value = match &element {
                Element::Value(value) => *value,
                Element::Unescaped(text) => Value::Text(text),
            };
            columns.put(index, value).map_err(|e| at_row(row, e))?;
        }
        columns.end_row().map_err(|e| at_row(row, e))?;
    }
    Ok(())
}

/// The columns a `JSONCompactEachRowWithNamesAndTypes` header declares.
pub(crate) fn declared_columns(body: &[u8]) -> Result<Vec<(String, String)>, DecodeError> {
    let mut rows = Rows::new(body);
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

/// One element of a row, read for a column of type `ty`.
enum Element<'a> {
    Value(Value<'a>),
    /// A string whose escapes had to be resolved.
    Unescaped(String),
}

/// Reads `raw`, valid JSON, for a column of type `ty` (`None` when the column is skipped).
fn element<'a>(raw: &'a RawValue, ty: Option<&ColumnType>) -> Result<Element<'a>, DecodeError> {
    let text = raw.get();
    let invalid = |e: serde_json::Error| DecodeError::new(None, None, format!("invalid JSON: {e}"));
    let value = match text.as_bytes().first() {
        // A column the insert skips takes any value.
        _ if ty.is_none() => Value::Null,
        Some(b'n') => Value::Null,
        _ if ty == Some(&ColumnType::Json) => Value::Text(text),
        Some(b'"') => match serde_json::from_str::<&str>(text) {
            Ok(content) => Value::Text(content),
            Err(_) => {
                return Ok(Element::Unescaped(
                    serde_json::from_str(text).map_err(invalid)?,
                ));
            }
        },
        Some(b't') => Value::Bool(true),
        Some(b'f') => Value::Bool(false),
        Some(b'[' | b'{') => {
            return Err(DecodeError::new(
                None,
                None,
                "a value is an array or an object; only a json, list, struct or map column \
                 holds one"
                    .to_owned(),
            ));
        }
        _ if matches!(ty, Some(ColumnType::Decimal { .. })) => Value::Text(text),
        _ => {
            let number: serde_json::Number = serde_json::from_str(text).map_err(invalid)?;
            match (number.as_u64(), number.as_i64(), number.as_f64()) {
                (Some(u), _, _) => Value::UInt(u),
                (_, Some(i), _) => Value::Int(i),
                (_, _, Some(f)) => Value::Float(f),
                _ => {
                    return Err(DecodeError::new(
                        None,
                        None,
                        format!("{number} is not a number sluice reads"),
                    ));
                }
            }
        }
    };
    Ok(Element::Value(value))
}

/// Reads `raw`, a JSON array or object, into `builder`, of the nested type `ty`. The recursion
/// follows the type, whose depth is bounded, not the JSON.
fn nested(builder: &mut Builder, ty: &ColumnType, raw: &RawValue) -> Result<(), Unfit> {
    let text = raw.get();
    let not = |what: &str| Unfit::new(format!("{} is not {what}", shown(text)));
    match (ty, builder) {
        (ColumnType::List(element), Builder::List(list)) => {
            let items: Vec<&RawValue> = serde_json::from_str(text).map_err(|_| not("an array"))?;
            for (place, item) in items.into_iter().enumerate() {
                inner(list.element(), element, item).map_err(|e| e.at(Step::Element(place)))?;
            }
            list.close().map_err(Unfit::new)
        }
        (ColumnType::Map(value), Builder::Map(map)) => {
            let Entries(entries) = serde_json::from_str(text).map_err(|_| not("an object"))?;
            map_entries(map, value, entries)
        }
        (ColumnType::Struct(fields), Builder::Struct(record)) => {
            if text.starts_with('{') {
                let Entries(entries) = serde_json::from_str(text).map_err(|_| not("an object"))?;
                return struct_by_name(record, fields, entries);
            }
            let items: Vec<&RawValue> = serde_json::from_str(text).map_err(|_| not("an array"))?;
            if items.len() != fields.len() {
                return Err(Unfit::new(format!(
                    "an array of {} values is not a struct of {} fields",
                    items.len(),
                    fields.len()
                )));
            }
            for (index, (field, item)) in fields.iter().zip(items).enumerate() {
                inner(record.child(index), &field.ty, item)
                    .map_err(|e| e.at(Step::Field(field.name.clone())))?;
            }
            record.close(1);
            Ok(())
        }
        _ => Err(not(&ty.name())),
    }
}

/// A value inside a nested one: null, a nested value, or a single value read as its type reads
/// one.
fn inner(builder: &mut Builder, ty: &ColumnType, raw: &RawValue) -> Result<(), Unfit> {
    if ty.is_nested() && raw.get().starts_with(['[', '{']) {
        return nested(builder, ty, raw);
    }
    let value = element(raw, Some(ty)).map_err(|e| Unfit::new(e.message))?;
    match &value {
        Element::Value(value) => quoted::push(builder, ty, *value),
        Element::Unescaped(text) => quoted::push(builder, ty, Value::Text(text)),
    }
}

fn map_entries(
    map: &mut MapBuilder,
    ty: &ColumnType,
    entries: Vec<(Cow<'_, str>, &RawValue)>,
) -> Result<(), Unfit> {
    for (key, value) in entries {
        map.keys().append_value(&key);
        inner(map.values(), ty, value).map_err(|e| e.at(Step::Key(key.into_owned())))?;
    }
    map.close().map_err(Unfit::new)
}

/// A struct from an object of its fields by name, as ClickHouse reads a named tuple: a field
/// left out is null, and a key that names no field is refused.
fn struct_by_name(
    record: &mut StructBuilder,
    fields: &[StructField],
    entries: Vec<(Cow<'_, str>, &RawValue)>,
) -> Result<(), Unfit> {
    let mut given: Vec<Option<&RawValue>> = vec![None; fields.len()];
    for (key, value) in entries {
        let Some(index) = fields.iter().position(|f| f.name == key) else {
            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            return Err(Unfit::new(format!(
                "the struct has no field '{}' (it has: {})",
                printable(&key),
                names.join(", ")
            )));
        };
        if given[index].replace(value).is_some() {
            let message = format!("the object gives the field '{}' twice", printable(&key));
            return Err(Unfit::new(message));
        }
    }
    for (index, (field, value)) in fields.iter().zip(given).enumerate() {
        match value {
            Some(value) => inner(record.child(index), &field.ty, value)
                .map_err(|e| e.at(Step::Field(field.name.clone())))?,
            None => record.child(index).push_null(),
        }
    }
    record.close(1);
    Ok(())
}

/// A JSON value in an error, shortened, its line breaks and the like escaped.
fn shown(text: &str) -> String {
    let mut shown = String::new();
    for c in text.chars().take(40) {
        if c.is_control() {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    if text.chars().nth(40).is_some() {
        shown.push_str("...");
    }
    shown
}

/// The body's rows, one JSON array at a time.
struct Rows<'a> {
    body: &'a [u8],
    /// The body as text, when it is UTF-8: read as text, its strings are not checked again one
    /// by one.
    text: Option<&'a str>,
    pos: usize,
    /// The 1-based number of the last row read, header rows included.
    row: usize,
}

impl<'a> Rows<'a> {
    fn new(body: &'a [u8]) -> Self {
        Self {
            body,
            text: std::str::from_utf8(body).ok(),
            pos: 0,
            row: 0,
        }
    }

    /// The next row, its elements as their JSON text, or `None` at the end of the body.
    fn next_row(&mut self) -> Result<Option<Vec<&'a RawValue>>, DecodeError> {
        self.skip_separator();
        let body: &'a [u8] = self.body;
        if self.pos >= body.len() {
            return Ok(None);
        }
        self.row += 1;
        let row = self.row;
        let invalid = |e: serde_json::Error| {
            at_row(
                row,
                DecodeError::new(None, None, format!("invalid JSON: {e}")),
            )
        };
        let rest = &body[self.pos..];
        if !rest.starts_with(b"[") {
            // Refused as invalid JSON when it is not JSON at all.
            let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<&RawValue>();
            if let Some(Err(e)) = stream.next() {
                return Err(invalid(e));
            }
            let message = "a row must be a JSON array of values".to_owned();
            return Err(at_row(row, DecodeError::new(None, None, message)));
        }
        // The row's elements are found in the one pass that finds its end. A body that is not
        // UTF-8 is read byte by byte, for serde_json to say where it breaks.
        let read = match self.text.and_then(|text| text.get(self.pos..)) {
            Some(text) => next_array(serde_json::Deserializer::from_str(text)),
            None => next_array(serde_json::Deserializer::from_slice(rest)),
        };
        match read {
            Some((Ok(values), len)) => {
                self.pos += len;
                Ok(Some(values))
            }
            Some((Err(e), _)) => Err(invalid(e)),
            None => Ok(None),
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
            .map(|v| {
                serde_json::from_str::<String>(v.get()).map_err(|_| {
                    at_row(
                        row,
                        DecodeError::new(None, None, "a header row must hold strings".to_owned()),
                    )
                })
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

/// A row's elements, or why they are not JSON, and the bytes the row took.
type ReadRow<'a> = Option<(Result<Vec<&'a RawValue>, serde_json::Error>, usize)>;

/// The JSON array at the start of `de`'s input; `None` at its end.
fn next_array<'a, R: serde_json::de::Read<'a>>(de: serde_json::Deserializer<R>) -> ReadRow<'a> {
    let mut stream = de.into_iter::<Vec<&'a RawValue>>();
    let row = stream.next()?;
    Some((row, stream.byte_offset()))
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
            (b"[1,[2]]", "row 1, column 'name': a value is an array"),
            (
                b"[1,{\"a\":2}]",
                "row 1, column 'name': a value is an array or an object",
            ),
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

    #[test]
    fn a_skipped_column_takes_any_value() {
        let body = b"[\"id\",\"name\",\"extra\"]\n[1,\"a\",{\"deep\":[1]}]";
        let batch = decode(&schema(), body, Header::Names, &options_for(None, true)).unwrap();
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().values(), &[1]);
    }

    #[test]
    fn a_json_column_takes_the_json_value_itself() {
        let body = format!(
            "[-12.34, \"{UUID_SENT}\", {{\"a\": [1, 2]}}]\n\
             [\"99999999.99\", null, \"{{\\\"a\\\":1}}\"]\n\
             [1.5e1, \"{UUID_KEPT}\", 12.50]\n\
             [0.30, null, [true, null]]\n\
             [null, null, null]"
        );
        let format = InputFormat::JsonCompactEachRow(Header::None);
        let batch = decode_newer(format, body.as_bytes()).unwrap();
        let (d, u, j) = newer_rows(&batch);
        assert_eq!(
            d,
            [Some(-1234), Some(9_999_999_999), Some(1500), Some(30), None]
        );
        assert_eq!(u, [Some(UUID_KEPT), None, Some(UUID_KEPT), None, None]);
        // A string is a JSON string, its quotes and escapes kept: the value as sent.
        assert_eq!(
            j,
            [
                Some("{\"a\": [1, 2]}"),
                Some("\"{\\\"a\\\":1}\""),
                Some("12.50"),
                Some("[true, null]"),
                None
            ]
        );
        for (body, says) in [
            (
                "[0.1, null, null] [0.30000000000000004, null, null]",
                "row 2, column 'd': 0.30000000000000004 has 17 digits after the point",
            ),
            (
                "[-100000000, null, null]",
                "row 1, column 'd': -100000000 has 9 digits before the point",
            ),
            (
                "[true, null, null]",
                "row 1, column 'd': the boolean true is not a decimal",
            ),
            (
                "[null, \"urn:uuid:zz\", null]",
                "row 1, column 'u': 'urn:uuid:zz' is not a UUID",
            ),
            (
                "[null, 12, null]",
                "row 1, column 'u': the number 12 is not a UUID",
            ),
            (
                "[null, {}, null]",
                "row 1, column 'u': a value is an array or an object",
            ),
        ] {
            let error = decode_newer(format, body.as_bytes()).unwrap_err();
            assert!(error.starts_with(says), "{body}: {error}");
        }
    }

    #[test]
    fn arrays_objects_and_named_tuples_as_json() {
        let format = InputFormat::JsonCompactEachRow(Header::None);
        let body = b"[1, [\"a\", null, \"it's\\ttab\"], [200, [\"x\"]], [[1, null], [], [-3]]]\n\
                     [\"2\", [], {\"tags\": [], \"code\": null}, []]";
        assert_eq!(
            decode_json(&nested_table(), format, body),
            Ok(nested_rows())
        );
        // `JSONCompactStringsEachRow` sends each value as text, a nested one in its text form.
        let strings = b"[\"1\", \"['a',NULL,'it\\\\'s\\\\ttab']\", \"(200,['x'])\", \
                        \"[[1,NULL],[],[-3]]\"]\n[\"2\", \"[]\", \"(NULL,[])\", \"[]\"]";
        assert_eq!(
            decode_json(&nested_table(), format, strings),
            Ok(nested_rows())
        );
        let schema = TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new(
                "labels",
                ColumnType::map(ColumnType::decimal(9, 2).unwrap()),
            ),
            Column::new(
                "attrs",
                ColumnType::Struct(vec![
                    StructField::new("code", ColumnType::Int32),
                    StructField::new("http", ColumnType::map(ColumnType::list(ColumnType::Json))),
                ]),
            ),
        ])
        .unwrap();
        let body = b"[1, {\"b\": 0.10, \"a\": \"2.5\", \"n\": null}, {\"http\": {\"s\": [{\"x\": [1]}, 2, null]}}]\n\
                     [2, {}, [7, {}]]";
        assert_eq!(
            decode_json(&schema, format, body),
            Ok(serde_json::json!([
                {"id": 1, "labels": {"b": 0.1, "a": 2.5, "n": null},
                 "attrs": {"code": null, "http": {"s": ["{\"x\": [1]}", "2", null]}}},
                {"id": 2, "labels": {}, "attrs": {"code": 7, "http": {}}},
            ]))
        );
    }

    #[test]
    fn json_that_does_not_fit_a_nested_column_is_named_by_its_way() {
        let format = InputFormat::JsonCompactEachRow(Header::None);
        for (body, says) in [
            (
                "[1, [], [1, []], [[1, \"x\"]]]",
                "row 1, column 'grid[0][1]': 'x' is not a whole number",
            ),
            (
                "[1, [], {\"code\": 1, \"nope\": 2}, []]",
                "row 1, column 'pair': the struct has no field 'nope' (it has: code, tags)",
            ),
            (
                "[1, [], {\"code\": 1, \"code\": 2}, []]",
                "row 1, column 'pair': the object gives the field 'code' twice",
            ),
            (
                "[1, [], [1], []]",
                "row 1, column 'pair': an array of 1 values is not a struct of 2 fields",
            ),
            (
                "[1, {\"a\": 1}, [1, []], []]",
                "row 1, column 'tags': {\"a\": 1} is not an array",
            ),
            (
                "[1, [[\"a\"]], [1, []], []]",
                "row 1, column 'tags[0]': a value is an array or an object; only a json, list, \
                 struct or map column holds one",
            ),
            (
                "[1, [], [1, [2]], []]",
                "row 1, column 'pair.tags[0]': the number 2 is not a string",
            ),
        ] {
            let error = decode_json(&nested_table(), format, body.as_bytes()).unwrap_err();
            assert_eq!(error, says, "{body}");
        }
    }
}
