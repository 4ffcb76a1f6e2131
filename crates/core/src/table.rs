//! A table's definition: name, columns, partitioning, sort key and flush policy.

use arrow::array::RecordBatch;
use arrow::compute::{SortColumn, lexsort_to_indices, take_record_batch};
use arrow::error::ArrowError;
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::name::TableName;
use crate::partition::PartitionSpec;
use crate::policy::FlushPolicy;
use crate::schema::{Column, ColumnType, TableSchema};
use crate::throttle::PartsThrottle;

/// What makes a table's data what it is: its columns, partitioning and sort key. This is what
/// sluice stores beside an auto-created table so it stays fixed across restarts, and what the
/// config file declares for a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableLayout {
    /// The columns in order.
    pub columns: Vec<Column>,
    /// `""`, `"col"`, `"day(col)"` or `"hour(col)"`.
    #[serde(default)]
    pub partition_by: String,
    /// Columns rows are sorted by inside each part, most significant first.
    #[serde(default)]
    pub sort_by: Vec<String>,
}

/// A validated table definition.
#[derive(Debug, Clone, PartialEq)]
pub struct TableDef {
    name: TableName,
    schema: TableSchema,
    partition: PartitionSpec,
    sort_by: Vec<String>,
    policy: FlushPolicy,
    throttle: PartsThrottle,
}

impl TableDef {
    /// Checks a layout and builds the table. Errors name the field inside the layout.
    pub fn new(
        name: TableName,
        layout: TableLayout,
        policy: FlushPolicy,
    ) -> Result<Self, ConfigError> {
        let schema = TableSchema::new(layout.columns)?;
        let partition = PartitionSpec::parse(&layout.partition_by)
            .map_err(|reason| ConfigError::new("partition_by", reason))?;
        partition.validate(&schema)?;
        for (i, key) in layout.sort_by.iter().enumerate() {
            if schema.column(key).is_none() {
                return Err(ConfigError::new(
                    format!("sort_by[{i}]"),
                    format!("there is no column '{key}'"),
                ));
            }
            if layout.sort_by[..i].contains(key) {
                return Err(ConfigError::new(
                    format!("sort_by[{i}]"),
                    format!("column '{key}' is listed twice"),
                ));
            }
        }
        Ok(Self {
            name,
            schema,
            partition,
            sort_by: layout.sort_by,
            policy,
            throttle: PartsThrottle::default(),
        })
    }

    /// A table created from an inferred schema: no partitioning, no sort key.
    pub fn inferred(name: TableName, schema: TableSchema, policy: FlushPolicy) -> Self {
        Self {
            name,
            schema,
            partition: PartitionSpec::None,
            sort_by: Vec::new(),
            policy,
            throttle: PartsThrottle::default(),
        }
    }

    /// The table's name.
    pub fn name(&self) -> &TableName {
        &self.name
    }

    /// Its columns.
    pub fn schema(&self) -> &TableSchema {
        &self.schema
    }

    /// How its rows are partitioned.
    pub fn partition(&self) -> &PartitionSpec {
        &self.partition
    }

    /// Its sort key.
    pub fn sort_by(&self) -> &[String] {
        &self.sort_by
    }

    /// When its batches flush.
    pub fn policy(&self) -> &FlushPolicy {
        &self.policy
    }

    /// The same table with another flush policy.
    pub fn with_policy(mut self, policy: FlushPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// When inserts into a partition with many parts are delayed or refused.
    pub fn throttle(&self) -> &PartsThrottle {
        &self.throttle
    }

    /// The same table with another throttle.
    pub fn with_throttle(mut self, throttle: PartsThrottle) -> Self {
        self.throttle = throttle;
        self
    }

    /// The layout to store or compare.
    pub fn layout(&self) -> TableLayout {
        let partition_by = match &self.partition {
            PartitionSpec::None => String::new(),
            PartitionSpec::Column(c) => c.clone(),
            PartitionSpec::Day(c) => format!("day({c})"),
            PartitionSpec::Hour(c) => format!("hour({c})"),
        };
        TableLayout {
            columns: self.schema.columns().to_vec(),
            partition_by,
            sort_by: self.sort_by.clone(),
        }
    }

    /// The type of the column a partition value is stored under, as a table format sees it:
    /// the column's own type, `date` for `day(col)`, `string` for `hour(col)`.
    pub fn partition_key_type(&self) -> Option<ColumnType> {
        match &self.partition {
            PartitionSpec::None => None,
            PartitionSpec::Column(c) => self.schema.column(c).map(|c| c.ty),
            PartitionSpec::Day(_) => Some(ColumnType::Date),
            PartitionSpec::Hour(_) => Some(ColumnType::String),
        }
    }

    /// Sorts a batch by the table's sort key (a stable sort; nulls first). A table without a
    /// sort key gets the batch back unchanged.
    pub fn sort(&self, batch: RecordBatch) -> Result<RecordBatch, ArrowError> {
        if self.sort_by.is_empty() || batch.num_rows() < 2 {
            return Ok(batch);
        }
        let columns: Vec<SortColumn> = self
            .sort_by
            .iter()
            .filter_map(|name| batch.column_by_name(name))
            .map(|values| SortColumn {
                values: values.clone(),
                options: None,
            })
            .collect();
        let indices = lexsort_to_indices(&columns, None)?;
        take_record_batch(&batch, &indices)
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;

    use super::*;
    use crate::decode::{DecodeOptions, decode_ndjson};

    fn layout() -> TableLayout {
        TableLayout {
            columns: vec![
                Column::new("id", ColumnType::Int64),
                Column::new("service", ColumnType::String),
            ],
            partition_by: String::new(),
            sort_by: vec!["service".into(), "id".into()],
        }
    }

    fn def(layout: TableLayout) -> Result<TableDef, ConfigError> {
        TableDef::new(TableName::new("t").unwrap(), layout, FlushPolicy::default())
    }

    #[test]
    fn sort_key_must_name_columns_once() {
        let mut bad = layout();
        bad.sort_by.push("nope".into());
        assert_eq!(def(bad).unwrap_err().field, "sort_by[2]");
        let mut twice = layout();
        twice.sort_by.push("id".into());
        assert_eq!(def(twice).unwrap_err().field, "sort_by[2]");
    }

    #[test]
    fn layout_round_trips() {
        let mut l = layout();
        l.partition_by = "service".into();
        assert_eq!(def(l.clone()).unwrap().layout(), l);
    }

    #[test]
    fn sorts_by_key() {
        let table = def(layout()).unwrap();
        let batch = decode_ndjson(
            table.schema(),
            br#"{"id":3,"service":"b"} {"id":2,"service":"a"} {"id":1,"service":"b"}"#,
            &DecodeOptions::default(),
        )
        .unwrap();
        let sorted = table.sort(batch).unwrap();
        let ids = sorted
            .column(0)
            .as_primitive::<Int64Type>()
            .values()
            .to_vec();
        assert_eq!(ids, [2, 1, 3]);
    }
}
