//! `list`, `struct` and `map` columns, built from their JSON values by sluice rather than by
//! arrow-json.
//!
//! arrow-json would take a nested value, but not as strictly as the table's own columns are
//! taken: it rounds decimals, truncates `1.5` in an integer, and cannot keep a `json` value's
//! text inside a struct. So the strict pass notes where each nested value lies in its row, the
//! rows go to arrow-json with those values as `null`, and the nested columns are built here from
//! the values' text, each element read by its type ([`super::leaf`]).
//!
//! An error names the value's path inside its column: `attrs.http.status`, `tags[2]` (list
//! elements count from 0).

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::builder::NullBufferBuilder;
use arrow::array::{ArrayRef, ListArray, MapArray, StringBuilder, StructArray};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};
use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::JsonDialect;
use super::frame::Row as Framed;
use super::leaf::{Leaf, expected};
use crate::error::DecodeError;
use crate::name::printable;
use crate::schema::{ColumnType, StructField};

/// A row's `list`, `struct` and `map` values other than null: each one's column, and where it
/// lies in the row's text.
pub(crate) type NestedValues = Vec<(usize, Range<usize>)>;

/// How nested values are read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    pub(crate) dialect: JsonDialect,
    /// A key a struct does not have is skipped rather than refused.
    pub(crate) skip_unknown: bool,
    /// A null for a required column is an empty list or map, or a struct of nulls.
    pub(crate) null_as_default: bool,
}

/// Whether an Arrow type is one sluice builds here.
pub(crate) fn is_nested(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::List(_) | DataType::Struct(_) | DataType::Map(..)
    )
}

/// `schema` with its nested columns nullable: what arrow-json decodes, with those columns'
/// values replaced by `null`.
pub(crate) fn relaxed(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<FieldRef> = schema
        .fields()
        .iter()
        .map(|f| match is_nested(f.data_type()) && !f.is_nullable() {
            true => Arc::new(f.as_ref().clone().with_nullable(true)),
            false => f.clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The nested columns of `schema`, by index, built from `rows`: `values` lists, for each row
/// holding a nested value other than null, the row's index and, per such value, its column's
/// index and where it lies in the row's text. Rows come in order.
pub(crate) fn build(
    schema: &SchemaRef,
    rows: &[Framed<'_>],
    values: &[(usize, NestedValues)],
    reading: Reading,
) -> Result<Vec<(usize, ArrayRef)>, DecodeError> {
    let mut columns: Vec<(usize, &Field, Node)> = Vec::new();
    for (index, field) in schema.fields().iter().enumerate() {
        if !is_nested(field.data_type()) {
            continue;
        }
        let ty = ColumnType::from_field(field).ok_or_else(|| {
            DecodeError::new(None, Some(field.name().clone()), "no sluice type".into())
        })?;
        columns.push((index, field, Node::new(&ty)));
    }
    let mut values = values.iter().peekable();
    for (row_index, row) in rows.iter().enumerate() {
        let held = values.next_if(|(at, _)| *at == row_index).map(|(_, v)| v);
        for (index, field, node) in &mut columns {
            let span = held.and_then(|v| v.iter().find(|(i, _)| i == index));
            let text = span.and_then(|(_, span)| std::str::from_utf8(&row.text[span.clone()]).ok());
            push_column(node, field, text, reading).map_err(|unfit| {
                let path = format!("{}{}", field.name(), unfit.path);
                DecodeError::new(Some(row.line), Some(path), unfit.message)
            })?;
        }
    }
    columns
        .into_iter()
        .map(|(index, field, mut node)| {
            let array = node
                .finish()
                .map_err(|e| DecodeError::new(None, Some(field.name().clone()), e))?;
            Ok((index, array))
        })
        .collect()
}

/// One row's value of a column: `None` when the row leaves it out or sends null.
fn push_column(
    node: &mut Node,
    field: &Field,
    text: Option<&str>,
    reading: Reading,
) -> Result<(), Unfit> {
    match text {
        Some(text) => node.push(text, reading),
        None if field.is_nullable() => {
            node.push_null();
            Ok(())
        }
        None if reading.null_as_default => {
            node.push_empty();
            Ok(())
        }
        None => Err(Unfit::new(
            "the column is required (not nullable) and the row leaves it out or sends null",
        )),
    }
}

/// What is wrong with a value, and where inside its column.
struct Unfit {
    /// `.http.status`, `[2]`: empty for the column's value itself.
    path: String,
    message: String,
}

impl Unfit {
    fn new(message: impl Into<String>) -> Self {
        Self {
            path: String::new(),
            message: message.into(),
        }
    }

    /// The same problem, one level further out.
    fn inside(mut self, segment: impl fmt::Display) -> Self {
        self.path = format!("{segment}{}", self.path);
        self
    }
}

/// A column's values under construction, in the shape of its type.
enum Node {
    Leaf(Leaf),
    List {
        element_field: FieldRef,
        offsets: Vec<i32>,
        validity: NullBufferBuilder,
        element: Box<Node>,
    },
    Struct {
        fields: Fields,
        children: Vec<Node>,
        validity: NullBufferBuilder,
    },
    Map {
        entries_field: FieldRef,
        offsets: Vec<i32>,
        validity: NullBufferBuilder,
        keys: StringBuilder,
        values: Box<Node>,
    },
}

impl Node {
    fn new(ty: &ColumnType) -> Self {
        let validity = || NullBufferBuilder::new(0);
        match (ty, ty.arrow_type()) {
            (ColumnType::List(element), DataType::List(element_field)) => Self::List {
                element_field,
                offsets: vec![0],
                validity: validity(),
                element: Box::new(Self::new(element)),
            },
            (ColumnType::Struct(fields), DataType::Struct(arrow_fields)) => Self::Struct {
                fields: arrow_fields,
                children: fields
                    .iter()
                    .map(|f: &StructField| Self::new(&f.ty))
                    .collect(),
                validity: validity(),
            },
            (ColumnType::Map(value), DataType::Map(entries_field, _)) => Self::Map {
                entries_field,
                offsets: vec![0],
                validity: validity(),
                keys: StringBuilder::new(),
                values: Box::new(Self::new(value)),
            },
            (leaf, _) => Self::Leaf(Leaf::new(leaf)),
        }
    }

    /// Appends the JSON value `raw`.
    fn push(&mut self, raw: &str, reading: Reading) -> Result<(), Unfit> {
        if raw == "null" {
            self.push_null();
            return Ok(());
        }
        match self {
            Self::Leaf(leaf) => leaf.push(raw, reading.dialect).map_err(Unfit::new),
            Self::List {
                offsets,
                validity,
                element,
                ..
            } => {
                let items: Vec<&RawValue> =
                    serde_json::from_str(raw).map_err(|_| Unfit::new(expected("an array", raw)))?;
                for (i, item) in items.iter().enumerate() {
                    element
                        .push(item.get(), reading)
                        .map_err(|e| e.inside(format_args!("[{i}]")))?;
                }
                end_entry(offsets, items.len())?;
                validity.append_non_null();
                Ok(())
            }
            Self::Struct {
                fields,
                children,
                validity,
            } => push_struct(fields, children, validity, raw, reading),
            Self::Map {
                offsets,
                validity,
                keys,
                values,
                ..
            } => push_map(offsets, validity, keys, values, raw, reading),
        }
    }
}

fn push_struct(
    fields: &Fields,
    children: &mut [Node],
    validity: &mut NullBufferBuilder,
    raw: &str,
    reading: Reading,
) -> Result<(), Unfit> {
    let Entries(entries) =
        serde_json::from_str(raw).map_err(|_| Unfit::new(expected("an object", raw)))?;
    let mut given: Vec<Option<&RawValue>> = vec![None; fields.len()];
    for (key, value) in entries {
        let Some(index) = fields.iter().position(|f| f.name() == key.as_ref()) else {
            if reading.skip_unknown {
                continue;
            }
            let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
            return Err(Unfit::new(format!(
                "the struct has no field '{}' (it has: {}); \
                     input_format_skip_unknown_fields=1 skips it",
                printable(&key),
                names.join(", ")
            )));
        };
        if given[index].replace(value).is_some() {
            return Err(Unfit::new("the key appears more than once").inside(member(&key)));
        }
    }
    for ((child, value), field) in children.iter_mut().zip(given).zip(fields.iter()) {
        match value {
            Some(value) => child
                .push(value.get(), reading)
                .map_err(|e| e.inside(member(field.name())))?,
            None => child.push_null(),
        }
    }
    validity.append_non_null();
    Ok(())
}

fn push_map(
    offsets: &mut Vec<i32>,
    validity: &mut NullBufferBuilder,
    keys: &mut StringBuilder,
    values: &mut Node,
    raw: &str,
    reading: Reading,
) -> Result<(), Unfit> {
    let Entries(entries) =
        serde_json::from_str(raw).map_err(|_| Unfit::new(expected("an object", raw)))?;
    if let Some(key) = first_repeated(&entries) {
        return Err(Unfit::new("the key appears more than once").inside(member(key)));
    }
    for (key, value) in &entries {
        keys.append_value(key);
        values
            .push(value.get(), reading)
            .map_err(|e| e.inside(member(key)))?;
    }
    end_entry(offsets, entries.len())?;
    validity.append_non_null();
    Ok(())
}

impl Node {
    fn push_null(&mut self) {
        self.push_nothing(false);
    }

    /// An empty list or map, a struct of nulls: a required column's default.
    fn push_empty(&mut self) {
        self.push_nothing(true);
    }

    /// A value with nothing in it: null, or, when `present`, an empty list or map or a struct
    /// of nulls. A struct's fields are null either way.
    fn push_nothing(&mut self, present: bool) {
        let validity = match self {
            Self::Leaf(leaf) => return leaf.push_null(),
            Self::List {
                offsets, validity, ..
            }
            | Self::Map {
                offsets, validity, ..
            } => {
                offsets.push(offsets.last().copied().unwrap_or(0));
                validity
            }
            Self::Struct {
                children, validity, ..
            } => {
                children.iter_mut().for_each(Node::push_null);
                validity
            }
        };
        match present {
            true => validity.append_non_null(),
            false => validity.append_null(),
        }
    }

    fn finish(&mut self) -> Result<ArrayRef, String> {
        let offsets =
            |offsets: &mut Vec<i32>| OffsetBuffer::new(std::mem::replace(offsets, vec![0]).into());
        let error = |e: arrow::error::ArrowError| e.to_string();
        Ok(match self {
            Self::Leaf(leaf) => leaf.finish()?,
            Self::List {
                element_field,
                offsets: list_offsets,
                validity,
                element,
            } => Arc::new(
                ListArray::try_new(
                    element_field.clone(),
                    offsets(list_offsets),
                    element.finish()?,
                    validity.finish(),
                )
                .map_err(error)?,
            ),
            Self::Struct {
                fields,
                children,
                validity,
                ..
            } => {
                let children = children
                    .iter_mut()
                    .map(Node::finish)
                    .collect::<Result<Vec<_>, _>>()?;
                Arc::new(
                    StructArray::try_new(fields.clone(), children, validity.finish())
                        .map_err(error)?,
                )
            }
            Self::Map {
                entries_field,
                offsets: map_offsets,
                validity,
                keys,
                values,
            } => {
                let DataType::Struct(entry_fields) = entries_field.data_type() else {
                    return Err("a map's entries are not a struct".to_owned());
                };
                let entries = StructArray::try_new(
                    entry_fields.clone(),
                    vec![Arc::new(keys.finish()), values.finish()?],
                    None,
                )
                .map_err(error)?;
                Arc::new(
                    MapArray::try_new(
                        entries_field.clone(),
                        offsets(map_offsets),
                        entries,
                        validity.finish(),
                        false,
                    )
                    .map_err(error)?,
                )
            }
        })
    }
}

/// Ends a list's or a map's entry of `len` elements.
fn end_entry(offsets: &mut Vec<i32>, len: usize) -> Result<(), Unfit> {
    let end = offsets.last().copied().unwrap_or(0);
    let end = i32::try_from(len)
        .ok()
        .and_then(|len| end.checked_add(len))
        .ok_or_else(|| Unfit::new("more elements than a column of one insert can hold"))?;
    offsets.push(end);
    Ok(())
}

/// The first key of `entries` that an earlier entry has too.
fn first_repeated<'e>(entries: &'e [(Cow<'_, str>, &RawValue)]) -> Option<&'e str> {
    // Most maps are small: comparing each key with the ones before it costs less than hashing.
    const HASHED_FROM: usize = 32;
    if entries.len() < HASHED_FROM {
        return entries
            .iter()
            .enumerate()
            .find(|(i, (key, _))| entries[..*i].iter().any(|(earlier, _)| earlier == key))
            .map(|(_, (key, _))| key.as_ref());
    }
    let mut seen = std::collections::HashSet::with_capacity(entries.len());
    entries
        .iter()
        .map(|(key, _)| key.as_ref())
        .find(|key| !seen.insert(*key))
}

/// `.name` in a path.
fn member(name: &str) -> String {
    format!(".{}", printable(name))
}

/// A JSON object's entries in the order written, duplicates kept, each key borrowed from the
/// text unless it has escapes and each value left as its JSON text.
pub(crate) struct Entries<'a>(pub(crate) Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EntriesVisitor)
    }
}

struct EntriesVisitor;

impl<'de> Visitor<'de> for EntriesVisitor {
    type Value = Entries<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            entries.push((key.0, map.next_value()?));
        }
        Ok(Entries(entries))
    }
}

/// A key, borrowed from the text unless it has escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(Key(Cow::Borrowed(key)))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(Key(Cow::Owned(key.to_owned())))
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Decimal128Type, Int64Type};

    use crate::json::{DecodeOptions, JsonDialect, decode_ndjson};
    use crate::schema::{Column, ColumnType, StructField, TableSchema};

    fn table() -> TableSchema {
        let record = ColumnType::Struct(vec![
            StructField::new("code", ColumnType::Int32),
            StructField::new("tags", ColumnType::list(ColumnType::String)),
            StructField::new("doc", ColumnType::Json),
        ]);
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("ids", ColumnType::list(ColumnType::Int64)),
            Column::new(
                "prices",
                ColumnType::list(ColumnType::decimal(20, 4).unwrap()),
            ),
            Column::new("record", record),
            Column::new("attrs", ColumnType::map(ColumnType::map(ColumnType::Int16))),
            Column::new("keys", ColumnType::list(ColumnType::Uuid)),
            Column::new("at", ColumnType::list(ColumnType::Timestamp)),
        ])
        .unwrap()
    }

    fn decode_as(
        dialect: JsonDialect,
        body: &str,
    ) -> Result<arrow::array::RecordBatch, crate::DecodeError> {
        let options = DecodeOptions {
            dialect,
            ..DecodeOptions::default()
        };
        decode_ndjson(&table(), body.as_bytes(), &options)
    }

    fn decode(body: &str) -> Result<arrow::array::RecordBatch, crate::DecodeError> {
        decode_as(JsonDialect::Ndjson, body)
    }

    /// A column's values as arrow-json writes them back, one per row.
    fn shown(batch: &arrow::array::RecordBatch, column: &str) -> Vec<String> {
        let index = batch.schema().index_of(column).unwrap();
        let one = batch.project(&[index]).unwrap();
        let mut writer = arrow::json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow::json::writer::LineDelimited>(Vec::new());
        writer.write(&one).unwrap();
        writer.finish().unwrap();
        String::from_utf8(writer.into_inner())
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn nested_values_land_exactly() {
        let body = concat!(
            r#"{"id":1,"ids":[1,null,-3],"prices":["12345678901234.5678",0.1,null],"#,
            r#""record":{"code":7,"tags":["a",null],"doc":{"x":[1,2.50]}},"#,
            r#""attrs":{"http":{"status":200},"none":null,"empty":{}},"#,
            r#""keys":["6BA7B810-9DAD-11D1-80B4-00C04FD430C8"],"at":["2026-11-29T12:00:00Z",1]}"#,
            "\n",
            r#"{"id":2,"ids":[],"record":{"doc":null},"attrs":{}}"#,
            "\n",
            r#"{"id":3,"ids":null,"record":null}"#,
        );
        let batch = decode(body).unwrap();
        assert_eq!(batch.num_rows(), 3);
        assert_eq!(batch.schema(), *table().arrow());
        assert_eq!(
            shown(&batch, "ids"),
            [r#"{"ids":[1,null,-3]}"#, r#"{"ids":[]}"#, r#"{"ids":null}"#]
        );
        let prices = batch.column(2).as_list::<i32>().value(0);
        let prices = prices.as_primitive::<Decimal128Type>();
        assert_eq!(prices.value(0), 123_456_789_012_345_678);
        assert_eq!(prices.value(1), 1_000);
        assert!(prices.is_null(2));
        assert_eq!(
            shown(&batch, "record"),
            [
                r#"{"record":{"code":7,"tags":["a",null],"doc":"{\"x\":[1,2.50]}"}}"#,
                r#"{"record":{"code":null,"tags":null,"doc":null}}"#,
                r#"{"record":null}"#
            ]
        );
        assert_eq!(
            shown(&batch, "attrs")[0],
            r#"{"attrs":{"http":{"status":200},"none":null,"empty":{}}}"#
        );
        assert_eq!(
            shown(&batch, "keys")[0],
            r#"{"keys":["6ba7b810-9dad-11d1-80b4-00c04fd430c8"]}"#
        );
        let at = batch.column(6).as_list::<i32>().value(0);
        let at = at.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        assert_eq!((at.value(0), at.value(1)), (1_795_953_600_000_000, 1));
        let ids = batch.column(0).as_primitive::<Int64Type>();
        assert_eq!(ids.values(), &[1, 2, 3]);
    }

    #[test]
    fn a_value_that_does_not_fit_names_its_path() {
        let cases = [
            (
                r#"{"id":1,"ids":[1,2.5]}"#,
                "ids[1]",
                "2.5 is not an integer",
            ),
            (
                r#"{"id":1,"ids":{"a":1}}"#,
                "ids",
                "expected an array, found an object",
            ),
            (
                r#"{"id":1,"prices":[1.00001]}"#,
                "prices[0]",
                "sluice does not round",
            ),
            (
                r#"{"id":1,"attrs":{"http":{"status":70000}}}"#,
                "attrs.http.status",
                "70000 is out of range for int16",
            ),
            (
                r#"{"id":1,"attrs":{"a":{},"a":{}}}"#,
                "attrs.a",
                "more than once",
            ),
            (
                r#"{"id":1,"record":{"code":1,"other":2}}"#,
                "record",
                "no field 'other' (it has: code, tags, doc)",
            ),
            (
                r#"{"id":1,"record":{"tags":["a",3]}}"#,
                "record.tags[1]",
                "expected a string, found a number",
            ),
            (r#"{"id":1,"keys":["nope"]}"#, "keys[0]", "UUID"),
            (
                r#"{"id":1,"ids":["7"]}"#,
                "ids[0]",
                "numbers are sent without quotes",
            ),
        ];
        for (body, path, says) in cases {
            let body = format!("{{\"id\":0}}\n{body}");
            let error = decode(&body).unwrap_err();
            assert_eq!(error.line, Some(2), "{body}: {error}");
            assert_eq!(error.field.as_deref(), Some(path), "{body}: {error}");
            assert!(error.message.contains(says), "{body}: {error}");
        }
    }

    #[test]
    fn the_clickhouse_door_reads_seconds_and_quoted_numbers_inside() {
        let body = r#"{"id":1,"ids":["7"],"at":[1795953600]}"#;
        let batch = decode_as(JsonDialect::ClickHouse, body).unwrap();
        assert_eq!(shown(&batch, "ids"), [r#"{"ids":[7]}"#]);
        let at = batch.column(6).as_list::<i32>().value(0);
        let at = at.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        assert_eq!(at.value(0), 1_795_953_600_000_000);
    }

    #[test]
    fn a_required_nested_column_is_refused_when_missing_or_empty_when_asked() {
        let table = TableSchema::new(vec![
            Column::new("id", ColumnType::Int64),
            Column::new("tags", ColumnType::list(ColumnType::String)).required(),
            Column::new("attrs", ColumnType::map(ColumnType::String)).required(),
        ])
        .unwrap();
        let mut options = DecodeOptions {
            dialect: JsonDialect::ClickHouse,
            ..DecodeOptions::default()
        };
        let body = br#"{"id":1,"tags":null,"attrs":{"a":"b"}}"#;
        let error = decode_ndjson(&table, body, &options).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("tags"), "{error}");
        options.null_as_default = true;
        let batch = decode_ndjson(&table, body, &options).unwrap();
        assert_eq!(batch.column(1).as_list::<i32>().value(0).len(), 0);
        assert!(batch.column(1).is_valid(0));
        assert_eq!(batch.schema(), *table.arrow());
    }

    #[test]
    fn unknown_struct_keys_are_skipped_when_asked_and_rows_keep_their_other_values() {
        let options = DecodeOptions {
            skip_unknown_fields: true,
            ..DecodeOptions::default()
        };
        let body = br#"{"id":5,"record":{"code":1,"other":{"deep":[1]}},"extra":[1],"ids":[4]}"#;
        let batch = decode_ndjson(&table(), body, &options).unwrap();
        assert_eq!(
            shown(&batch, "record"),
            [r#"{"record":{"code":1,"tags":null,"doc":null}}"#]
        );
        assert_eq!(shown(&batch, "ids"), [r#"{"ids":[4]}"#]);
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(0), 5);
    }
}
