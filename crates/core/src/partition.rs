//! Partitioning: which buffer (and so which part) each row belongs to.
//!
//! A table is unpartitioned, or partitioned by a column's value (`service`), or by the day or
//! hour of a timestamp column (`day(ts)`, `hour(ts)`). A flush writes one part per partition, so a
//! coarse partitioning keeps parts large: seed 000's checklist says "partition coarsely".

use std::collections::HashMap;
use std::fmt;

use arrow::array::{Array, AsArray, RecordBatch, UInt32Array};
use arrow::datatypes::{DataType, Date32Type, TimeUnit, TimestampMicrosecondType};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use chrono::{DateTime, Datelike, Timelike};

use crate::error::{ConfigError, DecodeError};
use crate::name::{check_identifier, printable};
use crate::schema::{ColumnType, TableSchema};

/// The longest partition column name, so that `name=value` fits in a file name.
pub const MAX_PARTITION_COLUMN_LEN: usize = 64;

/// The longest partition value in bytes. Values become folder names (escaped, up to three bytes
/// per byte), and a folder name is at most 255 bytes.
pub const MAX_PARTITION_VALUE_LEN: usize = 60;

/// How a table's rows are split into partitions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PartitionSpec {
    /// One partition for the whole table.
    #[default]
    None,
    /// By the value of a column (`bool`, integer, `string` or `date`).
    Column(String),
    /// By the UTC day of a `timestamp` or `date` column, as `YYYY-MM-DD`.
    Day(String),
    /// By the UTC hour of a `timestamp` column, as `YYYY-MM-DD-HH`.
    Hour(String),
}

/// What a store makes of an empty string as a partition value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmptyValue {
    /// It holds it as it is, apart from null (a database, where the value is a column).
    #[default]
    Kept,
    /// It cannot tell it from null: a Delta table's log writes both as null and readers read
    /// both back as null. A row with one is refused rather than changed.
    ReadAsNull,
}

/// The partition a row belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PartitionKey {
    /// The table is not partitioned.
    Whole,
    /// The partition column's value (or day, or hour) as text.
    Value(String),
    /// The partition column is null.
    Null,
}

impl fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Whole => f.write_str("(all)"),
            Self::Value(v) => f.write_str(v),
            Self::Null => f.write_str("(null)"),
        }
    }
}

impl PartitionSpec {
    /// Parses `""` (none), `"col"`, `"day(col)"` or `"hour(col)"`.
    pub fn parse(text: &str) -> Result<PartitionSpec, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Self::None);
        }
        let call = |name: &str| {
            text.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('('))
                .and_then(|rest| rest.strip_suffix(')'))
                .map(|inner| inner.trim().to_owned())
        };
        let spec = if let Some(col) = call("day") {
            Self::Day(col)
        } else if let Some(col) = call("hour") {
            Self::Hour(col)
        } else {
            Self::Column(text.to_owned())
        };
        let column = spec.source_column().unwrap_or_default();
        check_identifier(column, MAX_PARTITION_COLUMN_LEN).map_err(|e| {
            format!("partition column: {e} (write \"col\", \"day(col)\" or \"hour(col)\")")
        })?;
        Ok(spec)
    }

    /// The column partition values are taken from.
    pub fn source_column(&self) -> Option<&str> {
        match self {
            Self::None => None,
            Self::Column(c) | Self::Day(c) | Self::Hour(c) => Some(c),
        }
    }

    /// The name partition values go by in folder names and table formats: the column itself,
    /// or `<col>_day` / `<col>_hour`.
    pub fn key_name(&self) -> Option<String> {
        match self {
            Self::None => None,
            Self::Column(c) => Some(c.clone()),
            Self::Day(c) => Some(format!("{c}_day")),
            Self::Hour(c) => Some(format!("{c}_hour")),
        }
    }

    /// Checks the column exists and has a type this partitioning can use.
    pub fn validate(&self, schema: &TableSchema) -> Result<(), ConfigError> {
        let Some(name) = self.source_column() else {
            return Ok(());
        };
        let column = schema.column(name).ok_or_else(|| {
            ConfigError::new("partition_by", format!("there is no column '{name}'"))
        })?;
        let ty = &column.ty;
        let ok = match self {
            Self::None => true,
            Self::Column(_) => {
                !ty.is_nested()
                    && !matches!(
                        ty,
                        ColumnType::Float32
                            | ColumnType::Float64
                            | ColumnType::Timestamp
                            | ColumnType::Decimal { .. }
                            | ColumnType::Json
                    )
            }
            Self::Day(_) => matches!(ty, ColumnType::Timestamp | ColumnType::Date),
            Self::Hour(_) => *ty == ColumnType::Timestamp,
        };
        if !ok {
            let hint = match self {
                Self::Column(_) if *ty == ColumnType::Timestamp => {
                    "; partition a timestamp by day(col) or hour(col)"
                }
                Self::Column(_) if *ty == ColumnType::Json || ty.is_nested() => {
                    "; partition by a scalar column"
                }
                Self::Column(_) => "; numbers with a fraction make poor partitions",
                _ => "",
            };
            return Err(ConfigError::new(
                "partition_by",
                format!("column '{name}' has type {ty}, which this partitioning cannot use{hint}"),
            ));
        }
        Ok(())
    }

    /// Splits a decoded batch into one batch per partition, in order of first appearance;
    /// `empty` is what the table's store makes of an empty partition value.
    ///
    /// Rows keep their relative order inside each partition.
    pub fn split(
        &self,
        batch: &RecordBatch,
        empty: EmptyValue,
    ) -> Result<Vec<(PartitionKey, RecordBatch)>, DecodeError> {
        self.group(batch, empty)?.split()
    }

    /// Groups a decoded batch's rows by partition without copying them yet, so the partitions
    /// can be counted (and an insert spread over too many refused) before any is built.
    pub fn group<'a>(
        &self,
        batch: &'a RecordBatch,
        empty: EmptyValue,
    ) -> Result<Grouped<'a>, DecodeError> {
        let Some(name) = self.source_column() else {
            return Ok(Grouped {
                batch,
                groups: vec![(PartitionKey::Whole, None)],
            });
        };
        let column = batch.column_by_name(name).ok_or_else(|| {
            DecodeError::new(
                None,
                Some(name.to_owned()),
                "partition column is missing".into(),
            )
        })?;
        let keys = self.keys(column.as_ref(), empty)?;
        let mut order: Vec<(PartitionKey, Option<Vec<u32>>)> = Vec::new();
        let mut index: HashMap<PartitionKey, usize> = HashMap::new();
        for (row, key) in keys.into_iter().enumerate() {
            let slot = *index.entry(key.clone()).or_insert_with(|| {
                order.push((key, Some(Vec::new())));
                order.len() - 1
            });
            if let Some(rows) = &mut order[slot].1 {
                rows.push(row as u32);
            }
        }
        if let [(_, rows)] = order.as_mut_slice() {
            // One partition: the batch as it is.
            *rows = None;
        }
        Ok(Grouped {
            batch,
            groups: order,
        })
    }

    // Long because: one match over the source column's Arrow type, an arm per partition
    // transform, each with its own checks on the values.
    fn keys(
        &self,
        column: &dyn Array,
        empty: EmptyValue,
    ) -> Result<Vec<PartitionKey>, DecodeError> {
        let field = self.source_column().unwrap_or_default();
        let too_long = |row: usize, value: &str| {
            DecodeError::new(
                None,
                Some(field.to_owned()),
                format!(
                    "row {}: partition value '{}' is {} bytes long; at most {MAX_PARTITION_VALUE_LEN} are allowed",
                    row + 1,
                    printable(value),
                    value.len()
                ),
            )
        };
        let mut keys = Vec::with_capacity(column.len());
        match (self, column.data_type()) {
            (Self::Day(_) | Self::Hour(_), DataType::Timestamp(TimeUnit::Microsecond, _)) => {
                let hour = matches!(self, Self::Hour(_));
                let values = column.as_primitive::<TimestampMicrosecondType>();
                for (row, v) in values.iter().enumerate() {
                    keys.push(match v {
                        None => PartitionKey::Null,
                        Some(micros) => {
                            let t = DateTime::from_timestamp_micros(micros).ok_or_else(|| {
                                DecodeError::new(
                                    None,
                                    Some(field.to_owned()),
                                    format!("row {}: timestamp {micros} is out of range", row + 1),
                                )
                            })?;
                            PartitionKey::Value(if hour {
                                format!(
                                    "{:04}-{:02}-{:02}-{:02}",
                                    t.year(),
                                    t.month(),
                                    t.day(),
                                    t.hour()
                                )
                            } else {
                                format!("{:04}-{:02}-{:02}", t.year(), t.month(), t.day())
                            })
                        }
                    });
                }
            }
            (Self::Day(_), DataType::Date32) => {
                let values = column.as_primitive::<Date32Type>();
                for v in values.iter() {
                    keys.push(match v.and_then(Date32Type::to_naive_date_opt) {
                        None => PartitionKey::Null,
                        Some(date) => PartitionKey::Value(date.format("%Y-%m-%d").to_string()),
                    });
                }
            }
            _ => {
                let options = FormatOptions::default();
                let formatter = ArrayFormatter::try_new(column, &options)
                    .map_err(|e| DecodeError::new(None, Some(field.to_owned()), e.to_string()))?;
                for row in 0..column.len() {
                    if column.is_null(row) {
                        keys.push(PartitionKey::Null);
                        continue;
                    }
                    let value = formatter.value(row).to_string();
                    if value.len() > MAX_PARTITION_VALUE_LEN {
                        return Err(too_long(row, &value));
                    }
                    if value.is_empty() && empty == EmptyValue::ReadAsNull {
                        return Err(DecodeError::new(
                            None,
                            Some(field.to_owned()),
                            format!(
                                "row {}: an empty string cannot be a partition value of this \
                                 table: its store (a Delta table) reads it back as null; send \
                                 null or a non-empty value",
                                row + 1
                            ),
                        ));
                    }
                    keys.push(PartitionKey::Value(value));
                }
            }
        }
        Ok(keys)
    }
}

/// A batch's rows grouped by partition, in order of first appearance ([`PartitionSpec::group`]).
#[derive(Debug)]
pub struct Grouped<'a> {
    batch: &'a RecordBatch,
    /// Each partition and its rows; `None`: every row (the batch is one partition).
    groups: Vec<(PartitionKey, Option<Vec<u32>>)>,
}

impl Grouped<'_> {
    /// The partitions the batch spans.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether it spans none (never, for a batch of rows).
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Each partition's rows, in the order [`Grouped::split`] gives the partitions: their
    /// indexes, rising, or `None` for every row of the batch.
    pub fn rows(&self) -> impl Iterator<Item = Option<&[u32]>> {
        self.groups.iter().map(|(_, rows)| rows.as_deref())
    }

    /// One batch per partition; rows keep their relative order inside each.
    pub fn split(self) -> Result<Vec<(PartitionKey, RecordBatch)>, DecodeError> {
        let batch = self.batch;
        self.groups
            .into_iter()
            .map(|(key, rows)| match rows {
                None => Ok((key, batch.clone())),
                Some(rows) => arrow::compute::take_record_batch(batch, &UInt32Array::from(rows))
                    .map(|part| (key, part))
                    .map_err(|e| DecodeError::new(None, None, e.to_string())),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::Int64Type;

    use super::*;
    use crate::json::{DecodeOptions, decode_ndjson};
    use crate::schema::Column;

    fn schema() -> TableSchema {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64),
            Column::new("service", ColumnType::String),
            Column::new("ts", ColumnType::Timestamp),
        ])
        .unwrap()
    }

    fn batch(body: &str) -> RecordBatch {
        decode_ndjson(&schema(), body.as_bytes(), &DecodeOptions::default()).unwrap()
    }

    fn ids(batch: &RecordBatch) -> Vec<i64> {
        batch
            .column(0)
            .as_primitive::<Int64Type>()
            .values()
            .to_vec()
    }

    #[test]
    fn parses_specs() {
        assert_eq!(PartitionSpec::parse("").unwrap(), PartitionSpec::None);
        assert_eq!(
            PartitionSpec::parse("service").unwrap(),
            PartitionSpec::Column("service".into())
        );
        assert_eq!(
            PartitionSpec::parse("day(ts)").unwrap(),
            PartitionSpec::Day("ts".into())
        );
        assert_eq!(
            PartitionSpec::parse("hour( ts )").unwrap(),
            PartitionSpec::Hour("ts".into())
        );
        assert!(PartitionSpec::parse("day(../x)").is_err());
        assert!(PartitionSpec::parse("a/b").is_err());
    }

    #[test]
    fn validates_column_types() {
        let s = schema();
        assert!(
            PartitionSpec::parse("service")
                .unwrap()
                .validate(&s)
                .is_ok()
        );
        assert!(
            PartitionSpec::parse("day(ts)")
                .unwrap()
                .validate(&s)
                .is_ok()
        );
        assert!(PartitionSpec::parse("ts").unwrap().validate(&s).is_err());
        assert!(
            PartitionSpec::parse("hour(service)")
                .unwrap()
                .validate(&s)
                .is_err()
        );
        assert!(
            PartitionSpec::parse("missing")
                .unwrap()
                .validate(&s)
                .is_err()
        );
    }

    #[test]
    fn splits_by_column_keeping_order() {
        let b = batch(
            r#"{"id":1,"service":"api"}
               {"id":2,"service":"web"}
               {"id":3,"service":"api"}
               {"id":4}"#,
        );
        let parts = PartitionSpec::Column("service".into())
            .split(&b, EmptyValue::Kept)
            .unwrap();
        let got: Vec<_> = parts.iter().map(|(k, b)| (k.clone(), ids(b))).collect();
        assert_eq!(
            got,
            [
                (PartitionKey::Value("api".into()), vec![1, 3]),
                (PartitionKey::Value("web".into()), vec![2]),
                (PartitionKey::Null, vec![4]),
            ]
        );
    }

    #[test]
    fn partitions_are_counted_before_any_row_is_copied() {
        let spec = PartitionSpec::Column("service".into());
        let b = batch(
            r#"{"id":1,"service":"api"}
               {"id":2,"service":"web"}
               {"id":3}"#,
        );
        assert_eq!(spec.group(&b, EmptyValue::Kept).unwrap().len(), 3);
        // One partition: the batch itself is the piece, not a copy of it.
        let one = batch(
            r#"{"id":1,"service":"api"}
               {"id":2,"service":"api"}"#,
        );
        let parts = spec.group(&one, EmptyValue::Kept).unwrap().split().unwrap();
        assert_eq!(parts.len(), 1);
        assert!(
            parts[0]
                .1
                .column(0)
                .to_data()
                .ptr_eq(&one.column(0).to_data())
        );
    }

    #[test]
    fn splits_by_day_and_hour() {
        let b = batch(
            r#"{"id":1,"ts":"2026-11-29T23:59:59Z"}
               {"id":2,"ts":"2026-11-30T00:00:00Z"}
               {"id":3,"ts":"2026-11-29T23:00:00Z"}"#,
        );
        let days = PartitionSpec::Day("ts".into())
            .split(&b, EmptyValue::Kept)
            .unwrap();
        assert_eq!(days[0].0, PartitionKey::Value("2026-11-29".into()));
        assert_eq!(ids(&days[0].1), [1, 3]);
        let hours = PartitionSpec::Hour("ts".into())
            .split(&b, EmptyValue::Kept)
            .unwrap();
        assert_eq!(hours.len(), 2);
        assert_eq!(hours[1].0, PartitionKey::Value("2026-11-30-00".into()));
    }

    #[test]
    fn one_partition_keeps_the_batch() {
        let b = batch(r#"{"id":1,"service":"a"}"#);
        let parts = PartitionSpec::None.split(&b, EmptyValue::Kept).unwrap();
        assert_eq!(parts, vec![(PartitionKey::Whole, b.clone())]);
        let parts = PartitionSpec::Column("service".into())
            .split(&b, EmptyValue::Kept)
            .unwrap();
        assert_eq!(
            parts[0].1.column(0).as_primitive::<Int64Type>(),
            &Int64Array::from(vec![1])
        );
    }

    #[test]
    fn long_partition_values_are_refused() {
        let long = "x".repeat(MAX_PARTITION_VALUE_LEN + 1);
        let b = batch(&format!(r#"{{"id":1,"service":"{long}"}}"#));
        let err = PartitionSpec::Column("service".into())
            .split(&b, EmptyValue::Kept)
            .unwrap_err();
        assert!(err.message.contains("at most"), "{err}");
    }

    #[test]
    fn empty_partition_values_are_refused_only_where_they_would_read_back_as_null() {
        let b = batch(
            r#"{"id":1,"service":"api"}
               {"id":2,"service":""}
               {"id":3}"#,
        );
        let spec = PartitionSpec::Column("service".into());
        let kept = spec.split(&b, EmptyValue::Kept).unwrap();
        let keys: Vec<_> = kept.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            keys,
            [
                PartitionKey::Value("api".into()),
                PartitionKey::Value(String::new()),
                PartitionKey::Null,
            ]
        );
        let err = spec.split(&b, EmptyValue::ReadAsNull).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("service"));
        assert!(err.message.starts_with("row 2: an empty string"), "{err}");
        // Null itself is a partition like any other.
        let nulls = batch(r#"{"id":3}"#);
        assert_eq!(
            spec.split(&nulls, EmptyValue::ReadAsNull).unwrap()[0].0,
            PartitionKey::Null
        );
    }
}
