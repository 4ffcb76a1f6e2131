//! Batches made ready for `JSONEachRow`, and written as it.
//!
//! A decimal goes as a JSON number with every digit of its scale (arrow-json writes Arrow's text
//! of it, unquoted), which ClickHouse 18.16 reads digit by digit, exactly: it refuses a decimal
//! in quotes. A UUID and a JSON value go as JSON strings. A nested column goes as the JSON its
//! shape says ([`nested`]), which arrow-json writes as it is through [`RawJson`].

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, StringBuilder};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, TimeUnit, TimestampMicrosecondType};
use arrow::error::ArrowError;
use arrow::json::writer::{
    Encoder, EncoderFactory, EncoderOptions, LineDelimited, NullableEncoder, WriterBuilder,
};

use super::nested::{self, EachRow, Shape};
use super::types::{DATE_MAX, DATETIME_MAX, timestamp_text};

/// The metadata key that marks a column of JSON texts to be written as they are.
const RAW_JSON: &str = "sluice.raw_json";

/// The batch as ClickHouse reads it from `JSONEachRow`: timestamps become whole seconds since the
/// epoch (`DateTime` has no fraction in ClickHouse 18.16; the fraction is dropped), and values
/// outside what `DateTime` and `Date` can hold are refused with the column and row rather than
/// wrapped around silently, as is a decimal wider than its precision, whose text would lose
/// digits. A nested column, whose shape is in `shapes` by the column's position, becomes the
/// JSON of each value, marked to be written as it is ([`RAW_JSON`]).
pub(crate) fn prepare(
    batch: &RecordBatch,
    shapes: &[Option<Shape>],
) -> Result<RecordBatch, String> {
    crate::values::check_decimals(batch)?;
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (i, (field, column)) in schema.fields().iter().zip(batch.columns()).enumerate() {
        if let Some(Some(shape)) = shapes.get(i) {
            fields.push(
                Field::new(field.name(), DataType::Utf8, true)
                    .with_metadata(HashMap::from([(RAW_JSON.to_owned(), String::new())])),
            );
            columns.push(Arc::new(json_column(field, column.as_ref(), shape)?));
            continue;
        }
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

/// Each value of the nested column `column`, of the layout's field `field`, as its JSON in
/// `shape`; a null is null, left out of the row, which ClickHouse reads as an empty array, tuple
/// or map, or a `NULL` string.
fn json_column(field: &Field, column: &dyn Array, shape: &Shape) -> Result<StringArray, String> {
    let in_column = |e: String| format!("column '{}': {e}", field.name());
    let node = nested::node(field, column, shape).map_err(in_column)?;
    let mut out = StringBuilder::new();
    let mut json = Vec::new();
    for row in 0..column.len() {
        if node.is_null(row) {
            out.append_null();
            continue;
        }
        json.clear();
        node.write(row, &mut json, &EachRow)
            .map_err(|e| format!("column '{}', row {}: {e}", field.name(), row + 1))?;
        out.append_value(std::str::from_utf8(&json).map_err(|e| in_column(e.to_string()))?);
    }
    Ok(out.finish())
}

/// Writes a text column marked [`RAW_JSON`] as it is, not as a JSON string.
#[derive(Debug)]
struct RawJson;

impl EncoderFactory for RawJson {
    fn make_default_encoder<'a>(
        &self,
        field: &'a FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        if !field.metadata().contains_key(RAW_JSON) {
            return Ok(None);
        }
        let text = array.as_string_opt::<i32>().ok_or_else(|| {
            ArrowError::InvalidArgumentError(format!("column '{}' is not text", field.name()))
        })?;
        Ok(Some(NullableEncoder::new(
            Box::new(Raw(text)),
            text.nulls().cloned(),
        )))
    }
}

/// The values of a [`RAW_JSON`] column.
struct Raw<'a>(&'a StringArray);

impl Encoder for Raw<'_> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(self.0.value(idx).as_bytes());
    }
}

/// Appends the rows to `out` as newline-delimited JSON objects; nulls are left out, which
/// ClickHouse reads as `NULL` for a `Nullable` column.
pub(crate) fn ndjson(batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), String> {
    out.reserve(batch.get_array_memory_size());
    let mut writer = WriterBuilder::new()
        .with_encoder_factory(Arc::new(RawJson))
        .build::<_, LineDelimited>(out);
    writer
        .write(batch)
        .and_then(|()| writer.finish())
        .map_err(|e| format!("cannot encode the batch as JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use arrow::array::{BooleanArray, Date32Array, TimestampMicrosecondArray};

    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    fn prepare_plain(batch: &RecordBatch) -> Result<RecordBatch, String> {
        prepare(batch, &[])
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
        ndjson(&prepare(&b, &[]).unwrap(), &mut out).unwrap();
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
        let error = prepare_plain(&batch(vec![("ts", Arc::new(ts) as ArrayRef)])).unwrap_err();
        assert!(
            error.contains("column 'ts', row 2") && error.contains("1969-12-31"),
            "{error}"
        );
        let day = Date32Array::from(vec![DATE_MAX + 1]);
        let error = prepare_plain(&batch(vec![("day", Arc::new(day) as ArrayRef)])).unwrap_err();
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
        ndjson(&prepare(&b, &[]).unwrap(), &mut out).unwrap();
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
        assert!(prepare(&too_wide, &[]).unwrap_err().contains("column 'd'"));
    }

    #[test]
    fn nested_columns_go_as_their_json_with_elements_checked_one_by_one() {
        use arrow::array::{ArrayBuilder, ListBuilder, MapBuilder, make_builder};
        use sluice_core::ColumnType;
        use sluice_core::schema::StructField;

        let times = ColumnType::list(ColumnType::Timestamp);
        let mut list = make_builder(&times.arrow_type(), 3);
        let builder = list
            .as_any_mut()
            .downcast_mut::<ListBuilder<Box<dyn ArrayBuilder>>>()
            .unwrap();
        let values = builder
            .values()
            .as_any_mut()
            .downcast_mut::<arrow::array::TimestampMicrosecondBuilder>()
            .unwrap();
        values.append_value(1_764_417_600_900_000);
        values.append_null();
        builder.append(true);
        builder.append(false);
        builder
            .values()
            .as_any_mut()
            .downcast_mut::<arrow::array::TimestampMicrosecondBuilder>()
            .unwrap()
            .append_value(-1);
        builder.append(true);
        let times_array = list.finish();

        let scores = ColumnType::map(ColumnType::Float64);
        let mut map = make_builder(&scores.arrow_type(), 3);
        let builder = map
            .as_any_mut()
            .downcast_mut::<MapBuilder<Box<dyn ArrayBuilder>, Box<dyn ArrayBuilder>>>()
            .unwrap();
        let (keys, values) = builder.entries();
        keys.as_any_mut()
            .downcast_mut::<StringBuilder>()
            .unwrap()
            .append_value("nan");
        values
            .as_any_mut()
            .downcast_mut::<arrow::array::Float64Builder>()
            .unwrap()
            .append_value(f64::NAN);
        builder.append(true).unwrap();
        builder.append(false).unwrap();
        builder.append(true).unwrap();
        let scores_array = map.finish();

        let schema = Arc::new(Schema::new(vec![
            times.arrow_field("t", true),
            scores.arrow_field("s", true),
        ]));
        let shapes = [
            Some(Shape::Array(Box::new(Shape::Scalar))),
            Some(Shape::Map(Box::new(Shape::Scalar))),
        ];
        let whole = RecordBatch::try_new(schema, vec![times_array, scores_array]).unwrap();
        let mut out = Vec::new();
        ndjson(&prepare(&whole.slice(0, 2), &shapes).unwrap(), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"t\":[1764417600,null],\"s\":{\"nan\":\"nan\"}}\n{}\n"
        );
        let error = prepare(&whole, &shapes).unwrap_err();
        assert!(
            error.starts_with("column 't', row 3: 1969-12-31") && error.contains("DateTime"),
            "{error}"
        );
        // A struct as a tuple, by position or by name, and a null one as a tuple of nulls
        // inside a list.
        let record = ColumnType::Struct(vec![StructField::new("a", ColumnType::Int8)]);
        let records = ColumnType::list(record.clone());
        let mut list = make_builder(&records.arrow_type(), 1);
        let builder = list
            .as_any_mut()
            .downcast_mut::<ListBuilder<Box<dyn ArrayBuilder>>>()
            .unwrap();
        let structure = builder
            .values()
            .as_any_mut()
            .downcast_mut::<arrow::array::StructBuilder>()
            .unwrap();
        structure
            .field_builder::<arrow::array::Int8Builder>(0)
            .unwrap()
            .append_value(5);
        structure.append(true);
        structure
            .field_builder::<arrow::array::Int8Builder>(0)
            .unwrap()
            .append_null();
        structure.append(false);
        builder.append(true);
        let schema = Arc::new(Schema::new(vec![records.arrow_field("r", true)]));
        let batch = RecordBatch::try_new(schema, vec![list.finish()]).unwrap();
        for (keyed, want) in [
            (false, "{\"r\":[[5],[null]]}\n"),
            (true, "{\"r\":[{\"a\":5},{\"a\":null}]}\n"),
        ] {
            let tuple = Shape::Tuple(vec![Shape::Scalar], keyed);
            let shapes = [Some(Shape::Array(Box::new(tuple)))];
            let mut out = Vec::new();
            ndjson(&prepare(&batch, &shapes).unwrap(), &mut out).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), want);
        }
    }
}
