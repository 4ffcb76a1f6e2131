//! What the database sinks share about values: the check that a flush's decimals fit their
//! precision, the text of dates and timestamps, and `list`, `struct` and `map` values as JSON.
//!
//! Arrow's text of a decimal keeps only as many digits as the column's precision: a value with
//! more would lose its leading digits without a word. The doors never make one, but a store
//! must not rely on that, so every decimal column of a flush is checked first, and every
//! decimal inside a nested value as it is written.
//!
//! # Nested values as JSON
//!
//! SQLite keeps a nested value as JSON text, PostgreSQL as `jsonb` where it has no array type
//! for it, and ClickHouse sends each one in `JSONEachRow`. A [`Node`] writes one column's values,
//! built once per column of a batch from its Arrow type. A [`Style`] says how the scalars inside
//! are written and what stands for a null list, struct or map. [`Document`] is the value's own
//! JSON, the same in every store:
//!
//! - a list is a JSON array, a struct an object with its field names, a map an object;
//! - a null anywhere inside is `null`;
//! - a decimal is a JSON number with every digit, never a float on the way;
//! - a `uuid` or `string` is a JSON string, a `json` value its own JSON, not a string of it;
//! - a date is `"YYYY-MM-DD"`, a timestamp `"YYYY-MM-DD HH:MM:SS.ffffff"` in UTC, as SQLite's
//!   scalar columns hold them;
//! - a float that is not finite is the string `"NaN"`, `"Infinity"` or `"-Infinity"`, as
//!   PostgreSQL's `to_json` writes it: JSON has no such numbers.

use std::io::Write as _;

use arrow::array::{
    Array, AsArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
    Int8Array, Int16Array, Int32Array, Int64Array, ListArray, MapArray, RecordBatch, StringArray,
    StructArray, TimestampMicrosecondArray, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Date32Type, Decimal128Type, DecimalType, Field, TimeUnit};
use chrono::DateTime;
use serde_json::value::RawValue;
use sluice_core::ColumnType;
use sluice_core::schema::MAX_TYPE_DEPTH;

/// Checks that every decimal column of `batch` holds only values of its precision; the error
/// names the column.
pub(crate) fn check_decimals(batch: &RecordBatch) -> Result<(), String> {
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if let DataType::Decimal128(precision, _) = field.data_type() {
            column
                .as_primitive::<Decimal128Type>()
                .validate_decimal_precision(*precision)
                .map_err(|e| format!("column '{}': {e}", field.name()))?;
        }
    }
    Ok(())
}

/// A date's text, `YYYY-MM-DD`, from its days since 1970-01-01.
pub(crate) fn date_text(days: i32) -> Result<String, String> {
    Date32Type::to_naive_date_opt(days)
        .map(|date| date.format("%Y-%m-%d").to_string())
        .ok_or_else(|| format!("date {days} is out of range"))
}

/// A timestamp's text, `YYYY-MM-DD HH:MM:SS.ffffff` in UTC, from its microseconds since the
/// epoch: what SQLite's date functions read.
pub(crate) fn timestamp_text(micros: i64) -> Result<String, String> {
    DateTime::from_timestamp_micros(micros)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
        .ok_or_else(|| format!("timestamp {micros} is out of range"))
}

/// The exact text of the decimal at `row`, once it is known to fit its precision: Arrow's text
/// of a wider value drops its leading digits.
pub(crate) fn decimal_text(array: &Decimal128Array, row: usize) -> Result<String, String> {
    let value = array.value(row);
    if array.scale() < 0 {
        return Err(format!("a decimal's scale is {}", array.scale()));
    }
    if !Decimal128Type::is_valid_decimal_precision(value, array.precision()) {
        return Err(format!(
            "{value} (unscaled) has more than the decimal's {} digits",
            array.precision()
        ));
    }
    Ok(array.value_as_string(row))
}

/// A JSON string of `text`.
pub(crate) fn put_json_string(out: &mut Vec<u8>, text: &str) -> Result<(), String> {
    serde_json::to_writer(out, text).map_err(|e| format!("cannot write a JSON string: {e}"))
}

/// How the scalars inside a nested value are written, where stores differ.
pub(crate) trait Style {
    /// A date, from its days since 1970-01-01.
    fn date(&self, days: i32, out: &mut Vec<u8>) -> Result<(), String>;
    /// A timestamp, from its microseconds since the epoch.
    fn timestamp(&self, micros: i64, out: &mut Vec<u8>) -> Result<(), String>;
    /// A `json` value, from its text.
    fn json(&self, text: &str, out: &mut Vec<u8>) -> Result<(), String>;
    /// A float that is NaN or infinite, which JSON has no number for.
    fn not_finite(&self, value: f64, out: &mut Vec<u8>);
    /// Whether a null list, struct or map is written as an empty one, for a store that has no
    /// null ones; otherwise it is `null`.
    fn empty_for_null(&self) -> bool;
}

/// The value's own JSON: what SQLite and PostgreSQL keep, and a ClickHouse `String` holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Document;

impl Style for Document {
    fn date(&self, days: i32, out: &mut Vec<u8>) -> Result<(), String> {
        put_json_string(out, &date_text(days)?)
    }

    fn timestamp(&self, micros: i64, out: &mut Vec<u8>) -> Result<(), String> {
        put_json_string(out, &timestamp_text(micros)?)
    }

    fn json(&self, text: &str, out: &mut Vec<u8>) -> Result<(), String> {
        // Checked, since one broken value would break the whole document around it.
        let value: &RawValue =
            serde_json::from_str(text).map_err(|e| format!("a json value is not JSON: {e}"))?;
        out.extend_from_slice(value.get().as_bytes());
        Ok(())
    }

    fn not_finite(&self, value: f64, out: &mut Vec<u8>) {
        out.extend_from_slice(match value {
            v if v.is_nan() => b"\"NaN\"".as_slice(),
            v if v > 0.0 => b"\"Infinity\"",
            _ => b"\"-Infinity\"",
        });
    }

    fn empty_for_null(&self) -> bool {
        false
    }
}

/// One scalar column inside a nested value, downcast once.
#[derive(Debug)]
pub(crate) enum Scalar<'a> {
    Bool(&'a BooleanArray),
    Int8(&'a Int8Array),
    Int16(&'a Int16Array),
    Int32(&'a Int32Array),
    Int64(&'a Int64Array),
    UInt8(&'a UInt8Array),
    UInt16(&'a UInt16Array),
    UInt32(&'a UInt32Array),
    UInt64(&'a UInt64Array),
    Float32(&'a Float32Array),
    Float64(&'a Float64Array),
    /// A `string` or a `uuid`.
    Text(&'a StringArray),
    /// A `json` value's text.
    Json(&'a StringArray),
    Decimal(&'a Decimal128Array),
    Date(&'a Date32Array),
    Timestamp(&'a TimestampMicrosecondArray),
}

impl<'a> Scalar<'a> {
    /// The scalar column `array`, of the layout's field `field`, whose metadata tells `json`
    /// from `string`.
    pub(crate) fn of(field: &Field, array: &'a dyn Array) -> Result<Self, String> {
        if array.data_type() != field.data_type() {
            return Err(format!(
                "field '{}' is {} but holds {}",
                field.name(),
                field.data_type(),
                array.data_type()
            ));
        }
        Ok(match array.data_type() {
            DataType::Boolean => Self::Bool(array.as_boolean()),
            DataType::Int8 => Self::Int8(array.as_primitive()),
            DataType::Int16 => Self::Int16(array.as_primitive()),
            DataType::Int32 => Self::Int32(array.as_primitive()),
            DataType::Int64 => Self::Int64(array.as_primitive()),
            DataType::UInt8 => Self::UInt8(array.as_primitive()),
            DataType::UInt16 => Self::UInt16(array.as_primitive()),
            DataType::UInt32 => Self::UInt32(array.as_primitive()),
            DataType::UInt64 => Self::UInt64(array.as_primitive()),
            DataType::Float32 => Self::Float32(array.as_primitive()),
            DataType::Float64 => Self::Float64(array.as_primitive()),
            DataType::Utf8 if ColumnType::from_field(field) == Some(ColumnType::Json) => {
                Self::Json(array.as_string())
            }
            DataType::Utf8 => Self::Text(array.as_string()),
            DataType::Decimal128(_, _) => Self::Decimal(array.as_primitive()),
            DataType::Date32 => Self::Date(array.as_primitive()),
            DataType::Timestamp(TimeUnit::Microsecond, _) => Self::Timestamp(array.as_primitive()),
            other => return Err(format!("no JSON form for Arrow type {other}")),
        })
    }

    /// The column as an Arrow array.
    pub(crate) fn array(&self) -> &dyn Array {
        match self {
            Self::Bool(a) => *a,
            Self::Int8(a) => *a,
            Self::Int16(a) => *a,
            Self::Int32(a) => *a,
            Self::Int64(a) => *a,
            Self::UInt8(a) => *a,
            Self::UInt16(a) => *a,
            Self::UInt32(a) => *a,
            Self::UInt64(a) => *a,
            Self::Float32(a) => *a,
            Self::Float64(a) => *a,
            Self::Text(a) | Self::Json(a) => *a,
            Self::Decimal(a) => *a,
            Self::Date(a) => *a,
            Self::Timestamp(a) => *a,
        }
    }

    /// Writes the value at `row`, which is not null.
    fn write(&self, row: usize, out: &mut Vec<u8>, style: &dyn Style) -> Result<(), String> {
        let number = |out: &mut Vec<u8>, value: &dyn std::fmt::Display| {
            write!(out, "{value}").map_err(|e| format!("cannot write a number: {e}"))
        };
        match self {
            Self::Bool(a) => {
                out.extend_from_slice(if a.value(row) { b"true" } else { b"false" });
                Ok(())
            }
            Self::Int8(a) => number(out, &a.value(row)),
            Self::Int16(a) => number(out, &a.value(row)),
            Self::Int32(a) => number(out, &a.value(row)),
            Self::Int64(a) => number(out, &a.value(row)),
            Self::UInt8(a) => number(out, &a.value(row)),
            Self::UInt16(a) => number(out, &a.value(row)),
            Self::UInt32(a) => number(out, &a.value(row)),
            Self::UInt64(a) => number(out, &a.value(row)),
            Self::Float32(a) => float(a.value(row), f64::from(a.value(row)), out, style),
            Self::Float64(a) => float(a.value(row), a.value(row), out, style),
            Self::Text(a) => put_json_string(out, a.value(row)),
            Self::Json(a) => style.json(a.value(row), out),
            Self::Decimal(a) => {
                out.extend_from_slice(decimal_text(a, row)?.as_bytes());
                Ok(())
            }
            Self::Date(a) => style.date(a.value(row), out),
            Self::Timestamp(a) => style.timestamp(a.value(row), out),
        }
    }
}

/// A float as the shortest JSON number that reads back as it (a `float32` as one, not as the
/// `float64` it widens to), or as the style writes a value JSON has no number for.
fn float<F: serde::Serialize>(
    value: F,
    wide: f64,
    out: &mut Vec<u8>,
    style: &dyn Style,
) -> Result<(), String> {
    if wide.is_finite() {
        serde_json::to_writer(out, &value).map_err(|e| format!("cannot write a float: {e}"))
    } else {
        style.not_finite(wide, out);
        Ok(())
    }
}

/// One column of a nested type, or a part of one, written as JSON row by row.
#[derive(Debug)]
pub(crate) enum Node<'a> {
    /// A scalar.
    Scalar(Scalar<'a>),
    /// A list: a JSON array of its elements.
    List {
        array: &'a ListArray,
        element: Box<Node<'a>>,
    },
    /// A struct: an object of its fields when `keyed`, each key a JSON string already; else an
    /// array of their values in order (a ClickHouse tuple).
    Struct {
        array: &'a StructArray,
        fields: Vec<(String, Node<'a>)>,
        keyed: bool,
    },
    /// A map: an object of its entries.
    Map {
        array: &'a MapArray,
        keys: &'a StringArray,
        values: Box<Node<'a>>,
    },
    /// A value written as a JSON string holding its [`Document`] JSON (a ClickHouse `String`).
    Text(Box<Node<'a>>),
}

impl<'a> Node<'a> {
    /// The column `array` of the layout's field `field`, written as its [`Document`] JSON.
    pub(crate) fn document(field: &Field, array: &'a dyn Array) -> Result<Self, String> {
        Self::document_at(field, array, 0)
    }

    fn document_at(field: &Field, array: &'a dyn Array, depth: usize) -> Result<Self, String> {
        if depth > MAX_TYPE_DEPTH {
            return Err(format!(
                "types nest at most {MAX_TYPE_DEPTH} levels of list, struct and map"
            ));
        }
        Ok(match array.data_type() {
            DataType::List(element) => {
                let array = list(array)?;
                let element = Self::document_at(element, array.values().as_ref(), depth + 1)?;
                Self::List {
                    array,
                    element: Box::new(element),
                }
            }
            DataType::Struct(_) => {
                let array = structure(array)?;
                let fields = array
                    .fields()
                    .iter()
                    .zip(array.columns())
                    .map(|(field, column)| {
                        let node = Self::document_at(field, column.as_ref(), depth + 1)?;
                        Ok((json_key(field.name())?, node))
                    })
                    .collect::<Result<_, String>>()?;
                Self::Struct {
                    array,
                    fields,
                    keyed: true,
                }
            }
            DataType::Map(_, _) => {
                let (array, keys) = map(array)?;
                let (_, value) = array.entries_fields();
                let values = Self::document_at(value, array.values().as_ref(), depth + 1)?;
                Self::Map {
                    array,
                    keys,
                    values: Box::new(values),
                }
            }
            _ => Self::Scalar(Scalar::of(field, array)?),
        })
    }

    /// Whether the value at `row` is null.
    pub(crate) fn is_null(&self, row: usize) -> bool {
        match self {
            Self::Scalar(scalar) => scalar.array().is_null(row),
            Self::List { array, .. } => array.is_null(row),
            Self::Struct { array, .. } => array.is_null(row),
            Self::Map { array, .. } => array.is_null(row),
            Self::Text(inner) => inner.is_null(row),
        }
    }

    /// Appends the value at `row` to `out`, as JSON in `style`.
    pub(crate) fn write(
        &self,
        row: usize,
        out: &mut Vec<u8>,
        style: &dyn Style,
    ) -> Result<(), String> {
        if self.is_null(row) {
            self.write_null(out, style);
            return Ok(());
        }
        match self {
            Self::Scalar(scalar) => scalar.write(row, out, style)?,
            Self::List { array, element } => {
                out.push(b'[');
                for (n, at) in span(array.value_offsets(), row)?.enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    element.write(at, out, style)?;
                }
                out.push(b']');
            }
            Self::Struct { fields, keyed, .. } => {
                out.push(if *keyed { b'{' } else { b'[' });
                for (n, (key, node)) in fields.iter().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    if *keyed {
                        out.extend_from_slice(key.as_bytes());
                        out.push(b':');
                    }
                    node.write(row, out, style)?;
                }
                out.push(if *keyed { b'}' } else { b']' });
            }
            Self::Map {
                array,
                keys,
                values,
            } => {
                out.push(b'{');
                for (n, at) in span(array.value_offsets(), row)?.enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    if keys.is_null(at) {
                        return Err("a map has a null key".into());
                    }
                    put_json_string(out, keys.value(at))?;
                    out.push(b':');
                    values.write(at, out, style)?;
                }
                out.push(b'}');
            }
            Self::Text(inner) => {
                let mut document = Vec::new();
                inner.write(row, &mut document, &Document)?;
                let text = String::from_utf8(document)
                    .map_err(|e| format!("a JSON document is not UTF-8: {e}"))?;
                put_json_string(out, &text)?;
            }
        }
        Ok(())
    }

    /// What stands for a null value: `null`, or, where the style wants one, an empty list or
    /// map, or a struct of nulls.
    fn write_null(&self, out: &mut Vec<u8>, style: &dyn Style) {
        if !style.empty_for_null() {
            out.extend_from_slice(b"null");
            return;
        }
        match self {
            Self::Scalar(_) | Self::Text(_) => out.extend_from_slice(b"null"),
            Self::List { .. } => out.extend_from_slice(b"[]"),
            Self::Map { .. } => out.extend_from_slice(b"{}"),
            Self::Struct { fields, keyed, .. } => {
                out.push(if *keyed { b'{' } else { b'[' });
                for (n, (key, node)) in fields.iter().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    if *keyed {
                        out.extend_from_slice(key.as_bytes());
                        out.push(b':');
                    }
                    node.write_null(out, style);
                }
                out.push(if *keyed { b'}' } else { b']' });
            }
        }
    }

    /// The value at `row` as its [`Document`] JSON text.
    pub(crate) fn document_text(&self, row: usize) -> Result<String, String> {
        let mut out = Vec::new();
        self.write(row, &mut out, &Document)?;
        String::from_utf8(out).map_err(|e| format!("a JSON document is not UTF-8: {e}"))
    }
}

/// The list column `array`.
pub(crate) fn list(array: &dyn Array) -> Result<&ListArray, String> {
    array
        .as_list_opt::<i32>()
        .ok_or_else(|| format!("a list column holds {}", array.data_type()))
}

/// The struct column `array`.
pub(crate) fn structure(array: &dyn Array) -> Result<&StructArray, String> {
    array
        .as_struct_opt()
        .ok_or_else(|| format!("a struct column holds {}", array.data_type()))
}

/// The map column `array`, and its keys, which are text.
pub(crate) fn map(array: &dyn Array) -> Result<(&MapArray, &StringArray), String> {
    let map = array
        .as_map_opt()
        .ok_or_else(|| format!("a map column holds {}", array.data_type()))?;
    let keys = map
        .keys()
        .as_string_opt::<i32>()
        .ok_or_else(|| format!("a map's keys are {}, not text", map.keys().data_type()))?;
    Ok((map, keys))
}

/// The positions of row `row`'s elements in a list's or map's values.
pub(crate) fn span(offsets: &[i32], row: usize) -> Result<std::ops::Range<usize>, String> {
    let at = |i: usize| {
        offsets
            .get(i)
            .and_then(|&o| usize::try_from(o).ok())
            .ok_or_else(|| format!("row {row} has no offsets"))
    };
    Ok(at(row)?..at(row + 1)?)
}

/// A struct field's name as a JSON string.
pub(crate) fn json_key(name: &str) -> Result<String, String> {
    serde_json::to_string(name).map_err(|e| format!("cannot write a JSON key: {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, BooleanBuilder, Decimal128Array, Decimal128Builder, Float32Builder,
        Float64Builder, Int64Builder, ListBuilder, MapBuilder, StringBuilder, StructBuilder,
        TimestampMicrosecondBuilder,
    };
    use sluice_core::schema::StructField;

    use super::*;

    #[test]
    fn a_decimal_wider_than_its_precision_is_refused() {
        let batch = |values: Vec<Option<i128>>| {
            let array = Decimal128Array::from(values)
                .with_precision_and_scale(4, 2)
                .unwrap();
            RecordBatch::try_from_iter([("d", Arc::new(array) as _)]).unwrap()
        };
        assert_eq!(
            check_decimals(&batch(vec![Some(9999), None, Some(-9999)])),
            Ok(())
        );
        let error = check_decimals(&batch(vec![Some(1), Some(10_000)])).unwrap_err();
        assert!(error.starts_with("column 'd': "), "{error}");
    }

    /// Every row of `array`, a column of type `ty`, as its document JSON (`None`: null).
    fn documents(ty: &ColumnType, array: &dyn Array) -> Vec<Option<String>> {
        let field = ty.arrow_field("c", true);
        let node = Node::document(&field, array).unwrap();
        (0..array.len())
            .map(|row| (!array.is_null(row)).then(|| node.document_text(row).unwrap()))
            .collect()
    }

    /// A builder's element field in the layout's shape: `element`, nullable, with metadata.
    fn element(ty: &ColumnType) -> Arc<Field> {
        Arc::new(ty.arrow_field(sluice_core::schema::LIST_ELEMENT, true))
    }

    #[test]
    fn lists_are_arrays_with_every_digit_and_null() {
        let decimal = ColumnType::Decimal {
            precision: 20,
            scale: 4,
        };
        let mut builder = ListBuilder::new(
            Decimal128Builder::new()
                .with_precision_and_scale(20, 4)
                .unwrap(),
        )
        .with_field(element(&decimal));
        builder.values().append_value(99_999_999_999_999_999_999);
        builder.values().append_null();
        builder.values().append_value(-1);
        builder.values().append_value(0);
        builder.append(true);
        builder.append(true);
        builder.append(false);
        let array = builder.finish();
        assert_eq!(
            documents(&ColumnType::list(decimal), &array),
            [
                Some("[9999999999999999.9999,null,-0.0001,0.0000]".to_owned()),
                Some("[]".to_owned()),
                None
            ]
        );
    }

    #[test]
    fn scalars_inside_take_their_document_forms() {
        let mut floats =
            ListBuilder::new(Float64Builder::new()).with_field(element(&ColumnType::Float64));
        floats.values().append_slice(&[
            0.1,
            1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
        ]);
        floats.append(true);
        let mut singles =
            ListBuilder::new(Float32Builder::new()).with_field(element(&ColumnType::Float32));
        singles.values().append_slice(&[0.1, 3.402_823_5e38]);
        singles.append(true);
        let mut times = ListBuilder::new(
            TimestampMicrosecondBuilder::new().with_data_type(ColumnType::Timestamp.arrow_type()),
        )
        .with_field(element(&ColumnType::Timestamp));
        times.values().append_value(1_764_417_600_000_001);
        times.values().append_value(-1);
        times.append(true);
        let mut flags =
            ListBuilder::new(BooleanBuilder::new()).with_field(element(&ColumnType::Bool));
        flags.values().append_slice(&[true, false]);
        flags.append(true);
        let mut texts =
            ListBuilder::new(StringBuilder::new()).with_field(element(&ColumnType::String));
        texts.values().append_value("a \"q\"\n\u{1}é");
        texts.append(true);
        let mut docs =
            ListBuilder::new(StringBuilder::new()).with_field(element(&ColumnType::Json));
        docs.values().append_value(r#" {"a": [1, 2.50e1]} "#);
        docs.values().append_value("null");
        docs.values().append_null();
        docs.append(true);
        let cases: [(ColumnType, ArrayRef, &str); 6] = [
            (
                ColumnType::list(ColumnType::Float64),
                Arc::new(floats.finish()),
                r#"[0.1,1e+300,"NaN","Infinity","-Infinity",-0.0]"#,
            ),
            (
                ColumnType::list(ColumnType::Float32),
                Arc::new(singles.finish()),
                "[0.1,3.4028235e+38]",
            ),
            (
                ColumnType::list(ColumnType::Timestamp),
                Arc::new(times.finish()),
                r#"["2025-11-29 12:00:00.000001","1969-12-31 23:59:59.999999"]"#,
            ),
            (
                ColumnType::list(ColumnType::Bool),
                Arc::new(flags.finish()),
                "[true,false]",
            ),
            (
                ColumnType::list(ColumnType::String),
                Arc::new(texts.finish()),
                r#"["a \"q\"\n\u0001é"]"#,
            ),
            (
                ColumnType::list(ColumnType::Json),
                Arc::new(docs.finish()),
                r#"[{"a": [1, 2.50e1]},null,null]"#,
            ),
        ];
        for (ty, array, want) in cases {
            assert_eq!(documents(&ty, &array), [Some(want.to_owned())], "{ty}");
        }
    }

    #[test]
    fn structs_are_objects_with_their_names_and_maps_objects() {
        let ty = ColumnType::Struct(vec![
            StructField::new("code", ColumnType::Int64),
            StructField::new("tags", ColumnType::list(ColumnType::String)),
        ]);
        let DataType::Struct(fields) = ty.arrow_type() else {
            unreachable!()
        };
        let mut builder = StructBuilder::from_fields(fields.clone(), 3);
        builder
            .field_builder::<Int64Builder>(0)
            .unwrap()
            .append_value(7);
        let tags = builder
            .field_builder::<ListBuilder<Box<dyn arrow::array::ArrayBuilder>>>(1)
            .unwrap();
        tags.values()
            .as_any_mut()
            .downcast_mut::<StringBuilder>()
            .unwrap()
            .append_value("x");
        tags.append(true);
        builder.append(true);
        builder
            .field_builder::<Int64Builder>(0)
            .unwrap()
            .append_null();
        builder
            .field_builder::<ListBuilder<Box<dyn arrow::array::ArrayBuilder>>>(1)
            .unwrap()
            .append(false);
        builder.append(true);
        builder
            .field_builder::<Int64Builder>(0)
            .unwrap()
            .append_null();
        builder
            .field_builder::<ListBuilder<Box<dyn arrow::array::ArrayBuilder>>>(1)
            .unwrap()
            .append(false);
        builder.append(false);
        let array = builder.finish();
        assert_eq!(
            documents(&ty, &array),
            [
                Some(r#"{"code":7,"tags":["x"]}"#.to_owned()),
                Some(r#"{"code":null,"tags":null}"#.to_owned()),
                None
            ]
        );
        // A struct of nulls where a store has no null struct, and an empty list for a null one.
        let node = Node::document(&ty.arrow_field("c", true), &array).unwrap();
        let Node::Struct { array, fields, .. } = node else {
            unreachable!()
        };
        let tuple = Node::Struct {
            array,
            fields,
            keyed: false,
        };
        let mut out = Vec::new();
        tuple.write(2, &mut out, &Empty).unwrap();
        tuple.write(1, &mut out, &Empty).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "[null,[]][null,[]]");

        let ty = ColumnType::map(ColumnType::Float64);
        let DataType::Map(entries, _) = ty.arrow_type() else {
            unreachable!()
        };
        let DataType::Struct(entry) = entries.data_type() else {
            unreachable!()
        };
        let mut builder = MapBuilder::new(None, StringBuilder::new(), Float64Builder::new())
            .with_keys_field(entry[0].clone())
            .with_values_field(entry[1].clone());
        builder.keys().append_value("a\"b");
        builder.values().append_value(1.5);
        builder.keys().append_value("n");
        builder.values().append_null();
        builder.append(true).unwrap();
        builder.append(true).unwrap();
        builder.append(false).unwrap();
        let array = builder.finish();
        assert_eq!(
            documents(&ty, &array),
            [
                Some(r#"{"a\"b":1.5,"n":null}"#.to_owned()),
                Some("{}".to_owned()),
                None
            ]
        );
    }

    /// A style that has no null list, struct or map.
    struct Empty;

    impl Style for Empty {
        fn date(&self, days: i32, out: &mut Vec<u8>) -> Result<(), String> {
            Document.date(days, out)
        }
        fn timestamp(&self, micros: i64, out: &mut Vec<u8>) -> Result<(), String> {
            Document.timestamp(micros, out)
        }
        fn json(&self, text: &str, out: &mut Vec<u8>) -> Result<(), String> {
            Document.json(text, out)
        }
        fn not_finite(&self, value: f64, out: &mut Vec<u8>) {
            Document.not_finite(value, out);
        }
        fn empty_for_null(&self) -> bool {
            true
        }
    }

    #[test]
    fn what_has_no_json_form_is_refused_not_guessed() {
        let decimal = ColumnType::Decimal {
            precision: 2,
            scale: 0,
        };
        let mut builder = ListBuilder::new(
            Decimal128Builder::new()
                .with_precision_and_scale(2, 0)
                .unwrap(),
        )
        .with_field(element(&decimal));
        builder.values().append_value(100);
        builder.append(true);
        let array = builder.finish();
        let field = ColumnType::list(decimal).arrow_field("c", true);
        let node = Node::document(&field, &array).unwrap();
        let error = node.document_text(0).unwrap_err();
        assert!(
            error.contains("more than the decimal's 2 digits"),
            "{error}"
        );

        let mut docs =
            ListBuilder::new(StringBuilder::new()).with_field(element(&ColumnType::Json));
        docs.values().append_value("{\"a\":");
        docs.append(true);
        let array = docs.finish();
        let field = ColumnType::list(ColumnType::Json).arrow_field("c", true);
        let error = Node::document(&field, &array)
            .unwrap()
            .document_text(0)
            .unwrap_err();
        assert!(error.contains("not JSON"), "{error}");

        // A type nested deeper than any layout allows.
        let mut data_type = DataType::Int64;
        for _ in 0..=MAX_TYPE_DEPTH + 1 {
            data_type = DataType::List(Arc::new(Field::new("element", data_type, true)));
        }
        let array = arrow::array::new_null_array(&data_type, 1);
        let error = Node::document(&Field::new("c", data_type, true), &array).unwrap_err();
        assert!(error.contains("at most"), "{error}");
    }
}
