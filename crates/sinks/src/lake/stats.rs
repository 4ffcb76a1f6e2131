//! Per-file statistics for the Delta log, computed from the batch a file was written from.
//!
//! Delta readers skip files by these (`numRecords`, `minValues`, `maxValues`, `nullCount`), so
//! they must never be narrower than the data: timestamps are written to the millisecond as the
//! protocol asks, the minimum truncated down and the maximum rounded up; long strings get no
//! bounds rather than truncated ones; `decimal` columns (stored `uint64`) get null counts only.

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::{max, max_boolean, max_string, min, min_boolean, min_string};
use arrow::datatypes::{
    DataType, Date32Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    SchemaRef, TimeUnit, TimestampMicrosecondType,
};
use chrono::{DateTime, NaiveDate};
use serde_json::{Map, Value, json};

/// Strings longer than this (in bytes) get no min/max: a truncated bound could be wrong, and a
/// long one bloats the log.
const MAX_STRING_STAT_LEN: usize = 64;

/// The Delta `stats` JSON of a data file holding `batches` (of `schema`).
pub(crate) fn file_stats(schema: &SchemaRef, batches: &[RecordBatch]) -> String {
    let mut mins = Map::new();
    let mut maxs = Map::new();
    let mut nulls = Map::new();
    for (i, field) in schema.fields().iter().enumerate() {
        let columns: Vec<&ArrayRef> = batches.iter().map(|b| b.column(i)).collect();
        let null_count: usize = columns.iter().map(|c| c.null_count()).sum();
        nulls.insert(field.name().clone(), json!(null_count));
        let mut lo_hi: Option<(Value, Value)> = None;
        let mut complete = true;
        for column in columns {
            match bounds(column) {
                Some(b) => lo_hi = Some(widen(lo_hi, b)),
                // A column with only nulls has no bounds; any other miss (a NaN, a long
                // string) leaves the whole file without them.
                None if column.null_count() == column.len() => {}
                None => complete = false,
            }
        }
        if let (true, Some((lo, hi))) = (complete, lo_hi) {
            mins.insert(field.name().clone(), lo);
            maxs.insert(field.name().clone(), hi);
        }
    }
    json!({
        "numRecords": batches.iter().map(RecordBatch::num_rows).sum::<usize>(),
        "minValues": mins,
        "maxValues": maxs,
        "nullCount": nulls,
    })
    .to_string()
}

/// The smallest and largest value of a column as Delta writes them, when it has any.
fn bounds(column: &ArrayRef) -> Option<(Value, Value)> {
    macro_rules! numeric {
        ($t:ty) => {{
            let values = column.as_primitive::<$t>();
            Some((json!(min(values)?), json!(max(values)?)))
        }};
    }
    match column.data_type() {
        DataType::Boolean => {
            let values = column.as_boolean();
            Some((json!(min_boolean(values)?), json!(max_boolean(values)?)))
        }
        DataType::Int8 => numeric!(Int8Type),
        DataType::Int16 => numeric!(Int16Type),
        DataType::Int32 => numeric!(Int32Type),
        DataType::Int64 => numeric!(Int64Type),
        DataType::Float32 => {
            let values = column.as_primitive::<Float32Type>();
            float_bounds(min(values)?.into(), max(values)?.into())
        }
        DataType::Float64 => {
            let values = column.as_primitive::<Float64Type>();
            float_bounds(min(values)?, max(values)?)
        }
        DataType::Utf8 => {
            let values = column.as_string::<i32>();
            let (lo, hi) = (min_string(values)?, max_string(values)?);
            (lo.len() <= MAX_STRING_STAT_LEN && hi.len() <= MAX_STRING_STAT_LEN)
                .then(|| (json!(lo), json!(hi)))
        }
        DataType::Date32 => {
            let values = column.as_primitive::<Date32Type>();
            Some((date(min(values)?)?, date(max(values)?)?))
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            let values = column.as_primitive::<TimestampMicrosecondType>();
            let lo = min(values)?.div_euclid(1000);
            let hi = max(values)?;
            let hi = hi.div_euclid(1000) + i64::from(hi.rem_euclid(1000) != 0);
            Some((millis(lo)?, millis(hi)?))
        }
        _ => None,
    }
}

/// The bounds of two batches together. Values of one column compare as their JSON forms do:
/// numbers numerically, strings (dates and timestamps in fixed-width ISO form included)
/// lexically.
fn widen(acc: Option<(Value, Value)>, next: (Value, Value)) -> (Value, Value) {
    let Some((lo, hi)) = acc else {
        return next;
    };
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

/// Float bounds, unless a NaN makes them meaningless.
fn float_bounds(lo: f64, hi: f64) -> Option<(Value, Value)> {
    (!lo.is_nan() && !hi.is_nan()).then(|| (json!(lo), json!(hi)))
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

    use arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

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
            ],
        )
        .unwrap();
        let stats: Value = serde_json::from_str(&file_stats(&batch.schema(), &[batch])).unwrap();
        assert_eq!(stats["numRecords"], 3);
        assert_eq!(stats["minValues"]["id"], -3);
        assert_eq!(stats["maxValues"]["id"], 5);
        assert_eq!(stats["nullCount"]["id"], 1);
        assert_eq!(stats["minValues"]["s"], "a");
        assert_eq!(stats["maxValues"]["s"], "c");
        // 1.0005 s truncates down to 1.000; 2.000001 s rounds up to 2.001.
        assert_eq!(stats["minValues"]["ts"], "1970-01-01T00:00:01.000Z");
        assert_eq!(stats["maxValues"]["ts"], "1970-01-01T00:00:02.001Z");
        assert!(stats["minValues"].get("long").is_none());
        assert_eq!(stats["nullCount"]["long"], 0);
    }
}
