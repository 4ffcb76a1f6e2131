//! Per-file statistics for the Delta log, taken from the file's Parquet footer (the writer
//! computes each column chunk's bounds as it encodes) and, for floats, from the rows.
//!
//! Delta readers skip files by these (`numRecords`, `minValues`, `maxValues`, `nullCount`), so
//! they must never be narrower than the data: timestamps are written to the millisecond as the
//! protocol asks, the minimum truncated down and the maximum rounded up; strings longer than
//! 64 bytes (which Parquet writes truncated) get no bounds rather than truncated ones; a float
//! column holding a NaN gets none (Parquet's bounds leave NaNs out, and Spark orders NaN above
//! every number). A decimal's bounds are JSON numbers with every digit of its scale, written
//! as text: a number in serde_json's `Value` would pass through an `f64` and lose digits past
//! the 16th. Reading the bounds from the footer instead of computing them again from the rows
//! gives the same statistics in less time and CPU.

use std::collections::BTreeMap;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::{max, min};
use arrow::datatypes::{
    DataType, Decimal128Type, DecimalType, Fields, Float32Type, Float64Type, SchemaRef, TimeUnit,
};
use chrono::{DateTime, NaiveDate};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::Statistics;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// Strings longer than this (in bytes) get no min/max: a truncated bound could be wrong, and a
/// long one bloats the log. It is the length the Parquet writer truncates its bounds to, so a
/// bound the footer holds exactly is one of at most this many bytes.
const MAX_STRING_STAT_LEN: usize = 64;

/// The Delta `stats` JSON of a data file holding `batches` (of `schema`, one Parquet column
/// per field), written with the footer `footer`.
pub(crate) fn file_stats(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    footer: &ParquetMetaData,
) -> String {
    let columns: Vec<ColumnRows> = (0..schema.fields().len())
        .map(|i| {
            let mut rows = ColumnRows::default();
            for batch in batches {
                rows.add(batch.column(i));
            }
            rows
        })
        .collect();
    stats_json(schema, &columns, footer)
}

/// What a file's statistics take from the rows of one column rather than from the footer: its
/// null count and, for a float column, its bounds. A file encoded as its rows stream past
/// ([`super::stream`]) adds each piece of the column as it is encoded.
#[derive(Debug, Default)]
pub(crate) struct ColumnRows {
    rows: usize,
    nulls: usize,
    floats: FloatBounds,
}

/// A float column's bounds so far.
#[derive(Debug, Default)]
enum FloatBounds {
    /// No value yet (or not a float column).
    #[default]
    NoValues,
    Bounds(Value, Value),
    /// A NaN was seen: the column gets no bounds.
    Unbounded,
}

impl ColumnRows {
    /// The rows counted.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Counts `column`, the next piece of the column's values.
    pub(crate) fn add(&mut self, column: &ArrayRef) {
        self.rows += column.len();
        self.nulls += column.null_count();
        let is_float = matches!(column.data_type(), DataType::Float32 | DataType::Float64);
        if !is_float || column.null_count() == column.len() {
            return;
        }
        self.floats = match (std::mem::take(&mut self.floats), array_float_bounds(column)) {
            (FloatBounds::Unbounded, _) | (_, None) => FloatBounds::Unbounded,
            (FloatBounds::NoValues, Some((lo, hi))) => FloatBounds::Bounds(lo, hi),
            (FloatBounds::Bounds(lo, hi), Some(next)) => {
                let (lo, hi) = widen((lo, hi), next);
                FloatBounds::Bounds(lo, hi)
            }
        };
    }
}

/// The Delta `stats` JSON of a data file of `schema` (one Parquet column per field) whose
/// columns held `columns`, written with the footer `footer`.
pub(crate) fn stats_json(
    schema: &SchemaRef,
    columns: &[ColumnRows],
    footer: &ParquetMetaData,
) -> String {
    let mut top = Nested::default();
    // A field's first column chunk, counting a list's, struct's or map's leaves; when the
    // footer does not have that many columns, its bounds are not taken at all.
    let chunks = first_chunks(schema);
    let flat = footer.file_metadata().schema_descr().num_columns() == chunks.total;
    for ((field, rows), &i) in schema.fields().iter().zip(columns).zip(&chunks.first) {
        match field.data_type() {
            // Delta keeps a struct's statistics field by field, nested as the struct is.
            DataType::Struct(children) if flat => {
                struct_stats(children, i, footer).nest_into(&mut top, field.name());
                continue;
            }
            // And none for lists and maps, which readers take as unknown.
            ty if ty.is_nested() => continue,
            _ => {}
        }
        top.nulls.insert(field.name().clone(), json!(rows.nulls));
        let bounds = match (field.data_type(), &rows.floats) {
            (DataType::Float32 | DataType::Float64, FloatBounds::Bounds(lo, hi)) => {
                raw((lo.clone(), hi.clone()))
            }
            (ty, _) if flat => leaf_bounds(footer, i, ty),
            _ => None,
        };
        top.bound(field.name(), bounds);
    }
    // The bounds are raw JSON, which only serde_json's serializer writes as it is.
    let text = |bounds: &BTreeMap<String, Box<RawValue>>| {
        serde_json::to_string(bounds).unwrap_or_else(|_| "{}".into())
    };
    format!(
        r#"{{"numRecords":{},"minValues":{},"maxValues":{},"nullCount":{}}}"#,
        columns.first().map_or(0, |c| c.rows),
        text(&top.mins),
        text(&top.maxs),
        Value::Object(top.nulls),
    )
}

/// Statistics of a struct's fields, or of a file's columns: bounds as raw JSON, null counts.
#[derive(Default)]
struct Nested {
    mins: BTreeMap<String, Box<RawValue>>,
    maxs: BTreeMap<String, Box<RawValue>>,
    nulls: Map<String, Value>,
}

impl Nested {
    fn bound(&mut self, name: &str, bounds: Option<(Box<RawValue>, Box<RawValue>)>) {
        if let Some((lo, hi)) = bounds {
            self.mins.insert(name.to_owned(), lo);
            self.maxs.insert(name.to_owned(), hi);
        }
    }

    /// Puts these, a struct's fields' statistics, into `outer` under the struct's `name`.
    fn nest_into(self, outer: &mut Nested, name: &str) {
        let object =
            |bounds: &BTreeMap<String, Box<RawValue>>| serde_json::value::to_raw_value(bounds).ok();
        if !self.mins.is_empty()
            && let (Some(lo), Some(hi)) = (object(&self.mins), object(&self.maxs))
        {
            outer.bound(name, Some((lo, hi)));
        }
        if !self.nulls.is_empty() {
            outer
                .nulls
                .insert(name.to_owned(), Value::Object(self.nulls));
        }
    }
}

/// The statistics of a struct's fields whose column chunks start at `first`: a scalar field's
/// bounds and null count from the footer, a struct field's nested, none for lists and maps.
fn struct_stats(fields: &Fields, first: usize, footer: &ParquetMetaData) -> Nested {
    let mut stats = Nested::default();
    let mut index = first;
    for field in fields {
        match field.data_type() {
            DataType::Struct(children) => {
                struct_stats(children, index, footer).nest_into(&mut stats, field.name());
            }
            ty if ty.is_nested() => {}
            ty => {
                if let Some(nulls) = footer_nulls(footer, index) {
                    stats.nulls.insert(field.name().clone(), json!(nulls));
                }
                stats.bound(field.name(), leaf_bounds(footer, index, ty));
            }
        }
        index += leaves(field.data_type());
    }
    stats
}

/// The bounds of the column chunks `index` of type `ty`, as raw JSON. A float column's are not
/// taken from the footer, whose bounds say nothing of NaN.
fn leaf_bounds(
    footer: &ParquetMetaData,
    index: usize,
    ty: &DataType,
) -> Option<(Box<RawValue>, Box<RawValue>)> {
    match ty {
        DataType::Float32 | DataType::Float64 => None,
        &DataType::Decimal128(precision, scale) => {
            let number = |value| {
                let text = Decimal128Type::format_decimal(value, precision, scale);
                RawValue::from_string(text).ok()
            };
            footer_bounds(footer, index, decimal_bounds, |(lo, hi), (a, b)| {
                (lo.min(a), hi.max(b))
            })
            .and_then(|(lo, hi)| Some((number(lo)?, number(hi)?)))
        }
        ty => footer_bounds(footer, index, |stats| chunk_bounds(stats, ty), widen).and_then(raw),
    }
}

/// Bounds as raw JSON.
fn raw((lo, hi): (Value, Value)) -> Option<(Box<RawValue>, Box<RawValue>)> {
    let raw = serde_json::value::to_raw_value;
    Some((raw(&lo).ok()?, raw(&hi).ok()?))
}

/// The nulls of column `index` over every row group of `footer`, when each says.
fn footer_nulls(footer: &ParquetMetaData, index: usize) -> Option<u64> {
    footer.row_groups().iter().try_fold(0u64, |sum, group| {
        let column = group.columns().get(index)?;
        Some(sum + column.statistics()?.null_count_opt()?)
    })
}

/// Where each field's values start among a file's column chunks, and how many chunks it has.
struct Chunks {
    first: Vec<usize>,
    total: usize,
}

fn first_chunks(schema: &SchemaRef) -> Chunks {
    let mut first = Vec::with_capacity(schema.fields().len());
    let mut total = 0;
    for field in schema.fields() {
        first.push(total);
        total += leaves(field.data_type());
    }
    Chunks { first, total }
}

/// The Parquet columns a value of `data_type` is stored in.
fn leaves(data_type: &DataType) -> usize {
    match data_type {
        DataType::List(element) | DataType::Map(element, _) => leaves(element.data_type()),
        DataType::Struct(fields) => fields.iter().map(|f| leaves(f.data_type())).sum(),
        _ => 1,
    }
}

/// The bounds of column `index` over every row group of `footer`, each row group's from
/// `chunk` and together by `widen`: `None` when it has no values or a row group holding values
/// has no exact bounds for it.
fn footer_bounds<B>(
    footer: &ParquetMetaData,
    index: usize,
    chunk: impl Fn(&Statistics) -> Option<B>,
    widen: impl Fn(B, B) -> B,
) -> Option<B> {
    let mut lo_hi = None;
    for group in footer.row_groups() {
        let column = group.columns().get(index)?;
        match column.statistics().and_then(&chunk) {
            Some(bounds) => {
                lo_hi = Some(match lo_hi {
                    Some(acc) => widen(acc, bounds),
                    None => bounds,
                });
            }
            // A row group of nulls only has no bounds; any other miss leaves the whole file
            // without them.
            None if column
                .statistics()
                .and_then(Statistics::null_count_opt)
                .is_some_and(|nulls| i64::try_from(nulls).ok() == Some(group.num_rows())) => {}
            None => return None,
        }
    }
    lo_hi
}

/// One column chunk's bounds as Delta writes them, for a column of type `ty`.
fn chunk_bounds(stats: &Statistics, ty: &DataType) -> Option<(Value, Value)> {
    match (ty, stats) {
        (DataType::Boolean, Statistics::Boolean(s)) => {
            Some((json!(s.min_opt()?), json!(s.max_opt()?)))
        }
        (DataType::Int8 | DataType::Int16 | DataType::Int32, Statistics::Int32(s)) => {
            Some((json!(s.min_opt()?), json!(s.max_opt()?)))
        }
        (DataType::Int64, Statistics::Int64(s)) => Some((json!(s.min_opt()?), json!(s.max_opt()?))),
        (DataType::Utf8, Statistics::ByteArray(s)) => {
            if !(s.min_is_exact() && s.max_is_exact()) {
                return None;
            }
            let text = |bytes: &[u8]| {
                std::str::from_utf8(bytes)
                    .ok()
                    .filter(|text| text.len() <= MAX_STRING_STAT_LEN)
                    .map(|text| json!(text))
            };
            Some((text(s.min_opt()?.data())?, text(s.max_opt()?.data())?))
        }
        (DataType::Date32, Statistics::Int32(s)) => {
            Some((date(*s.min_opt()?)?, date(*s.max_opt()?)?))
        }
        (DataType::Timestamp(TimeUnit::Microsecond, _), Statistics::Int64(s)) => {
            let lo = s.min_opt()?.div_euclid(1000);
            let hi = *s.max_opt()?;
            let hi = hi.div_euclid(1000) + i64::from(hi.rem_euclid(1000) != 0);
            Some((millis(lo)?, millis(hi)?))
        }
        _ => None,
    }
}

/// One column chunk's bounds for a decimal column, as unscaled values: Parquet stores a decimal
/// of up to 9 digits as an `INT32`, up to 18 as an `INT64`, and a wider one as a big-endian
/// two's complement of as few bytes as its precision needs.
fn decimal_bounds(stats: &Statistics) -> Option<(i128, i128)> {
    match stats {
        Statistics::Int32(s) => Some((i128::from(*s.min_opt()?), i128::from(*s.max_opt()?))),
        Statistics::Int64(s) => Some((i128::from(*s.min_opt()?), i128::from(*s.max_opt()?))),
        Statistics::FixedLenByteArray(s) if s.min_is_exact() && s.max_is_exact() => Some((
            big_endian(s.min_opt()?.data())?,
            big_endian(s.max_opt()?.data())?,
        )),
        _ => None,
    }
}

/// A big-endian two's complement integer of 1 to 16 bytes.
fn big_endian(bytes: &[u8]) -> Option<i128> {
    let first = *bytes.first()?;
    if bytes.len() > 16 {
        return None;
    }
    let start: i128 = if first & 0x80 != 0 { -1 } else { 0 };
    Some(
        bytes
            .iter()
            .fold(start, |value, &byte| (value << 8) | i128::from(byte)),
    )
}

/// The bounds of a float array holding values: `None` when one of them is a NaN.
fn array_float_bounds(column: &ArrayRef) -> Option<(Value, Value)> {
    // Arrow orders NaN above every number, so a column holding one has a NaN maximum.
    let (lo, hi) = match column.data_type() {
        DataType::Float32 => {
            let values = column.as_primitive::<Float32Type>();
            (f64::from(min(values)?), f64::from(max(values)?))
        }
        DataType::Float64 => {
            let values = column.as_primitive::<Float64Type>();
            (min(values)?, max(values)?)
        }
        _ => return None,
    };
    (!lo.is_nan() && !hi.is_nan()).then(|| (json!(lo), json!(hi)))
}

/// The bounds of two batches together. Values of one column compare as their JSON forms do:
/// numbers numerically, strings (dates and timestamps in fixed-width ISO form included)
/// lexically.
fn widen((lo, hi): (Value, Value), next: (Value, Value)) -> (Value, Value) {
    let less = |a: &Value, b: &Value| match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x < y,
            _ => x.as_f64().unwrap_or(f64::NAN) < y.as_f64().unwrap_or(f64::NAN),
        },
        (Value::String(x), Value::String(y)) => x < y,
        (Value::Bool(x), Value::Bool(y)) => x < y,
        _ => false,
    };
    let lo = if less(&next.0, &lo) { next.0 } else { lo };
    let hi = if less(&hi, &next.1) { next.1 } else { hi };
    (lo, hi)
}

fn date(days: i32) -> Option<Value> {
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    let day = epoch.checked_add_signed(chrono::TimeDelta::days(i64::from(days)))?;
    Some(json!(day.format("%Y-%m-%d").to_string()))
}

fn millis(ms: i64) -> Option<Value> {
    let at = DateTime::from_timestamp_millis(ms)?;
    Some(json!(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        BooleanArray, Date32Array, Float64Array, Int8Array, Int64Array, StringArray,
        TimestampMicrosecondArray,
    };
    use arrow::datatypes::{Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::{EnabledStatistics, WriterProperties};

    use super::*;

    /// The stats of `batches` written as one file, a row group per batch, with the statistics
    /// the lake's parts have.
    fn stats_of(batches: &[RecordBatch]) -> Value {
        let schema = batches[0].schema();
        let props = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Page)
            .build();
        let mut writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props)).unwrap();
        for batch in batches {
            writer.write(batch).unwrap();
            writer.flush().unwrap();
        }
        let footer = writer.close().unwrap();
        assert_eq!(footer.num_row_groups(), batches.len());
        serde_json::from_str(&file_stats(&schema, batches, &footer)).unwrap()
    }

    #[test]
    fn bounds_cover_the_data() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("long", DataType::Utf8, true),
            Field::new("flag", DataType::Boolean, true),
            Field::new("day", DataType::Date32, true),
            Field::new("small", DataType::Int8, true),
            Field::new("x", DataType::Float64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(5), None, Some(-3)])),
                Arc::new(StringArray::from(vec!["b", "a", "c"])),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![1_000_500, 2_000_001, 1_500_000])
                        .with_timezone("UTC"),
                ),
                Arc::new(StringArray::from(vec![
                    "x".repeat(100),
                    "y".into(),
                    "z".into(),
                ])),
                Arc::new(BooleanArray::from(vec![Some(true), None, Some(true)])),
                Arc::new(Date32Array::from(vec![0, 365, 31])),
                Arc::new(Int8Array::from(vec![-128, 7, 127])),
                Arc::new(Float64Array::from(vec![Some(2.5), None, Some(-1.0)])),
            ],
        )
        .unwrap();
        let stats = stats_of(&[batch]);
        assert_eq!(stats["numRecords"], 3);
        assert_eq!(stats["minValues"]["id"], -3);
        assert_eq!(stats["maxValues"]["id"], 5);
        assert_eq!(stats["nullCount"]["id"], 1);
        assert_eq!(stats["minValues"]["s"], "a");
        assert_eq!(stats["maxValues"]["s"], "c");
        // 1.0005 s truncates down to 1.000; 2.000001 s rounds up to 2.001.
        assert_eq!(stats["minValues"]["ts"], "1970-01-01T00:00:01.000Z");
        assert_eq!(stats["maxValues"]["ts"], "1970-01-01T00:00:02.001Z");
        // The footer holds the long string's bound truncated: no bounds rather than wrong ones.
        assert!(stats["minValues"].get("long").is_none());
        assert!(stats["maxValues"].get("long").is_none());
        assert_eq!(stats["nullCount"]["long"], 0);
        assert_eq!(stats["minValues"]["flag"], true);
        assert_eq!(stats["maxValues"]["flag"], true);
        assert_eq!(stats["nullCount"]["flag"], 1);
        assert_eq!(stats["minValues"]["day"], "1970-01-01");
        assert_eq!(stats["maxValues"]["day"], "1971-01-01");
        assert_eq!(stats["minValues"]["small"], -128);
        assert_eq!(stats["maxValues"]["small"], 127);
        assert_eq!(stats["minValues"]["x"], -1.0);
        assert_eq!(stats["maxValues"]["x"], 2.5);
    }

    #[test]
    fn decimal_bounds_keep_every_digit_in_every_physical_form() {
        use arrow::array::Decimal128Array;
        // Precision 9 is stored as INT32, 18 as INT64, 38 as 16 big-endian bytes.
        let schema = Arc::new(Schema::new(vec![
            Field::new("d9", DataType::Decimal128(9, 2), true),
            Field::new("d18", DataType::Decimal128(18, 0), true),
            Field::new("d38", DataType::Decimal128(38, 3), true),
            Field::new("f38", DataType::Decimal128(38, 38), true),
        ]));
        let widest: i128 = "9".repeat(38).parse().unwrap();
        let column = |values: &[Option<i128>], precision, scale| {
            Arc::new(
                Decimal128Array::from(values.to_vec())
                    .with_precision_and_scale(precision, scale)
                    .unwrap(),
            ) as ArrayRef
        };
        let batch = |rows: [&[Option<i128>]; 4]| {
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    column(rows[0], 9, 2),
                    column(rows[1], 18, 0),
                    column(rows[2], 38, 3),
                    column(rows[3], 38, 38),
                ],
            )
            .unwrap()
        };
        let batches = [
            batch([
                &[Some(1250), Some(-5)],
                &[Some(999_999_999_999_999_999), Some(0)],
                &[Some(-widest), Some(1)],
                &[Some(1), None],
            ]),
            batch([&[None, None], &[None, None], &[None, None], &[None, None]]),
            batch([
                &[Some(-99_999_999), Some(0)],
                &[Some(-999_999_999_999_999_999), Some(7)],
                &[Some(widest - 1), Some(-256)],
                &[Some(-widest), Some(widest)],
            ]),
        ];
        let props = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Page)
            .build();
        let mut writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props)).unwrap();
        for batch in &batches {
            writer.write(batch).unwrap();
            writer.flush().unwrap();
        }
        let footer = writer.close().unwrap();
        let text = file_stats(&schema, &batches, &footer);
        let nines = "9".repeat(35);
        for expected in [
            r#""minValues":{"d18":-999999999999999999,"d38":-"#.to_owned()
                + &nines
                + ".999,"
                + r#""d9":-999999.99,"f38":-0."#
                + &"9".repeat(38)
                + "}",
            r#""maxValues":{"d18":999999999999999999,"d38":"#.to_owned()
                + &nines
                + ".998,"
                + r#""d9":12.50,"f38":0."#
                + &"9".repeat(38)
                + "}",
        ] {
            assert!(text.contains(&expected), "{expected} in {text}");
        }
        let stats: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            stats["nullCount"],
            json!({"d9": 2, "d18": 2, "d38": 2, "f38": 3})
        );
        assert_eq!(stats["numRecords"], 6);
    }

    #[test]
    fn bounds_span_row_groups_and_skip_only_what_they_cannot_cover() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("x", DataType::Float64, true),
            Field::new("nulls", DataType::Utf8, true),
        ]));
        let batch = |ids: Vec<Option<i64>>, s: Vec<Option<String>>, x: Vec<Option<f64>>| {
            let nulls = StringArray::from(vec![None::<&str>; ids.len()]);
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from(ids)),
                    Arc::new(StringArray::from(s)),
                    Arc::new(Float64Array::from(x)),
                    Arc::new(nulls),
                ],
            )
            .unwrap()
        };
        // 64 bytes exactly (multi-byte characters included) is kept; a row group of nulls
        // only takes nothing from the bounds.
        let longest = format!("{}{}", "é".repeat(30), "abcd");
        assert_eq!(longest.len(), MAX_STRING_STAT_LEN);
        let stats = stats_of(&[
            batch(
                vec![Some(10), Some(20)],
                vec![Some("m".into()), Some(longest.clone())],
                vec![Some(1.0), Some(f64::NAN)],
            ),
            batch(vec![None, None], vec![None, None], vec![None, None]),
            batch(
                vec![Some(-7), Some(3)],
                vec![Some("a".into()), Some("n".into())],
                vec![Some(0.5), Some(9.0)],
            ),
        ]);
        assert_eq!(stats["numRecords"], 6);
        assert_eq!(stats["minValues"]["id"], -7);
        assert_eq!(stats["maxValues"]["id"], 20);
        assert_eq!(stats["nullCount"]["id"], 2);
        assert_eq!(stats["minValues"]["s"], "a");
        assert_eq!(stats["maxValues"]["s"], longest.as_str());
        // One NaN in one row group: the float column has no bounds at all.
        assert!(stats["minValues"].get("x").is_none());
        assert!(stats["maxValues"].get("x").is_none());
        assert!(stats["minValues"].get("nulls").is_none());
        assert_eq!(stats["nullCount"]["nulls"], 6);
    }
}
