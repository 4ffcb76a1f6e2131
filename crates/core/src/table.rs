//! A table's definition: name, columns, partitioning, sort key and flush policy.

use arrow::array::RecordBatch;
use arrow::buffer::ScalarBuffer;
use arrow::compute::{SortColumn, concat, interleave_record_batch, lexsort_to_indices};
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
    /// Declared in the config: the operator's word, so a store holding the table with fewer
    /// columns may add the layout's new ones. An inferred table, or one only the catalog
    /// remembers, is fixed, and a store holding it with other columns refuses it.
    declared: bool,
    /// A new key in an insert adds a nullable column rather than being refused
    /// (`evolve = true`): a store holding the table with fewer columns adds them, as for a
    /// declared table.
    evolves: bool,
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
            let Some(column) = schema.column(key) else {
                return Err(ConfigError::new(
                    format!("sort_by[{i}]"),
                    format!("there is no column '{key}'"),
                ));
            };
            if column.ty == ColumnType::Json || column.ty.is_nested() {
                return Err(ConfigError::new(
                    format!("sort_by[{i}]"),
                    format!(
                        "column '{key}' is {}, which has no order; sort by scalar columns",
                        column.ty
                    ),
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
            declared: false,
            evolves: false,
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
            declared: false,
            evolves: false,
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

    /// When inserts into a partition with many parts are delayed or refused.
    pub fn throttle(&self) -> &PartsThrottle {
        &self.throttle
    }

    /// The same table with another throttle.
    pub fn with_throttle(mut self, throttle: PartsThrottle) -> Self {
        self.throttle = throttle;
        self
    }

    /// The same table, declared in the config: a store may change an existing table to fit
    /// its layout ([`TableDef::is_declared`]).
    pub fn declared(mut self) -> Self {
        self.declared = true;
        self
    }

    /// Whether the table is declared in the config, where changing its layout is the
    /// operator's word: a store holding it with fewer columns adds the new ones, where for an
    /// inferred table it refuses.
    pub fn is_declared(&self) -> bool {
        self.declared
    }

    /// The same table, taking new keys as new columns ([`TableDef::evolves`]) or not.
    pub fn with_evolve(mut self, evolves: bool) -> Self {
        self.evolves = evolves;
        self
    }

    /// Whether a new key in an insert adds a nullable column.
    pub fn evolves(&self) -> bool {
        self.evolves
    }

    /// Whether a store holding the table with fewer columns may add the layout's new ones:
    /// when it is declared, or takes new keys as columns.
    pub fn may_add_columns(&self) -> bool {
        self.declared || self.evolves
    }

    /// The same table with `columns` added at the end, nullable, keeping everything else.
    pub fn with_columns(&self, columns: Vec<Column>) -> Result<Self, ConfigError> {
        let mut layout = self.layout();
        layout.columns.extend(columns.into_iter().map(|c| Column {
            nullable: true,
            ..c
        }));
        let def = Self::new(self.name.clone(), layout, self.policy)?;
        Ok(Self {
            throttle: self.throttle,
            declared: self.declared,
            evolves: self.evolves,
            ..def
        })
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
            PartitionSpec::Column(c) => self.schema.column(c).map(|c| c.ty.clone()),
            PartitionSpec::Day(_) => Some(ColumnType::Date),
            PartitionSpec::Hour(_) => Some(ColumnType::String),
        }
    }

    /// The rows of `chunks` (in order) sorted by the table's sort key (nulls first; rows with
    /// equal keys in no particular order), in batches of at most `batch_rows` rows. Only the
    /// key's columns are gathered to find the order; each row is then copied once, straight from
    /// its chunk, so sorting costs one copy of the rows, not a concatenated copy and then a
    /// sorted one. A table without a sort key gets its chunks back as they are (no copy).
    pub fn sort_chunks(
        &self,
        chunks: &[RecordBatch],
        batch_rows: usize,
    ) -> Result<Vec<RecordBatch>, ArrowError> {
        let rows: usize = chunks.iter().map(RecordBatch::num_rows).sum();
        if rows < 2 {
            return Ok(chunks.to_vec());
        }
        let Some(order) = self.sort_order(chunks)? else {
            return Ok(chunks.to_vec());
        };
        let batch_rows = batch_rows.max(1);
        (0..rows)
            .step_by(batch_rows)
            .map(|from| order.gather(chunks, from..rows.min(from + batch_rows)))
            .collect()
    }

    /// Where each row of `chunks` (in order) goes when they are sorted by the table's sort key,
    /// as [`Self::sort_chunks`] sorts them; `None` for a table without a sort key. Only the
    /// key's columns are gathered to find it: the rows in sort order are then copied out a
    /// range at a time ([`SortOrder::gather`]), so they need never be held all at once.
    pub fn sort_order(&self, chunks: &[RecordBatch]) -> Result<Option<SortOrder>, ArrowError> {
        if self.sort_by.is_empty() {
            return Ok(None);
        }
        let starts: Vec<usize> = chunks
            .iter()
            .scan(0, |start, chunk| {
                let at = *start;
                *start += chunk.num_rows();
                Some(at)
            })
            .collect();
        let rows: usize = chunks.iter().map(RecordBatch::num_rows).sum();
        if rows < 2 {
            let order = ScalarBuffer::from_iter(0..rows as u32);
            return Ok(Some(SortOrder { order, starts }));
        }
        let mut columns = Vec::with_capacity(self.sort_by.len());
        for name in &self.sort_by {
            let parts = chunks
                .iter()
                .map(|chunk| {
                    chunk.column_by_name(name).ok_or_else(|| {
                        ArrowError::SchemaError(format!("no sort key column '{name}'"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let values = match parts.as_slice() {
                [one] => (*one).clone(),
                many => concat(&many.iter().map(|a| a.as_ref()).collect::<Vec<_>>())?,
            };
            columns.push(SortColumn {
                values,
                options: None,
            });
        }
        // The sorted indices have no nulls: their buffer is the order, taken without a copy.
        let (_, order, _) = lexsort_to_indices(&columns, None)?.into_parts();
        Ok(Some(SortOrder { order, starts }))
    }
}

/// The sorted order of a set of chunks' rows ([`TableDef::sort_order`]): for each position in
/// sort order, the row it takes, counted through the chunks as one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortOrder {
    order: ScalarBuffer<u32>,
    /// Where each chunk starts in the rows as a whole.
    starts: Vec<usize>,
}

impl SortOrder {
    /// The rows it orders.
    pub fn rows(&self) -> usize {
        self.order.len()
    }

    /// Positions `range` of the sorted rows, copied out of `chunks` (the chunks the order was
    /// found for) as one batch.
    pub fn gather(
        &self,
        chunks: &[RecordBatch],
        range: std::ops::Range<usize>,
    ) -> Result<RecordBatch, ArrowError> {
        let rows: usize = chunks.iter().map(RecordBatch::num_rows).sum();
        if chunks.len() != self.starts.len() || rows != self.order.len() {
            return Err(ArrowError::InvalidArgumentError(format!(
                "an order of {} rows in {} chunks cannot gather from {rows} rows in {}",
                self.order.len(),
                self.starts.len(),
                chunks.len()
            )));
        }
        let positions = self.order.get(range.clone()).ok_or_else(|| {
            ArrowError::InvalidArgumentError(format!(
                "positions {range:?} are past the {} sorted rows",
                self.order.len()
            ))
        })?;
        let picks: Vec<(usize, usize)> = positions
            .iter()
            .map(|&row| {
                let row = row as usize;
                let chunk = self.starts.partition_point(|&start| start <= row) - 1;
                (chunk, row - self.starts[chunk])
            })
            .collect();
        let sources: Vec<&RecordBatch> = chunks.iter().collect();
        match sources.first() {
            Some(first) if picks.is_empty() => Ok(first.slice(0, 0)),
            _ => interleave_record_batch(&sources, &picks),
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int64Type;

    use super::*;
    use crate::json::{DecodeOptions, JsonDialect, decode_ndjson};

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
    fn nested_columns_split_by_partition_and_sort_with_their_rows() {
        let mut layout = layout();
        layout.partition_by = "service".into();
        layout.sort_by = vec!["id".into()];
        let tags = ColumnType::list(ColumnType::String);
        let attrs = ColumnType::map(ColumnType::Struct(vec![crate::schema::StructField::new(
            "n",
            ColumnType::Int64,
        )]));
        layout.columns.push(Column::new("tags", tags));
        layout.columns.push(Column::new("attrs", attrs));
        let table = def(layout).unwrap();
        let body = concat!(
            r#"{"id":3,"service":"a","tags":["x"],"attrs":{"k":{"n":3}}}"#,
            "\n",
            r#"{"id":1,"service":"b","tags":[],"attrs":null}"#,
            "\n",
            r#"{"id":2,"service":"a","tags":null,"attrs":{"k":{"n":2},"j":null}}"#,
        );
        let batch =
            decode_ndjson(table.schema(), body.as_bytes(), &DecodeOptions::default()).unwrap();
        let pieces = table
            .partition()
            .split(&batch, crate::partition::EmptyValue::Kept)
            .unwrap();
        assert_eq!(pieces.len(), 2);
        let (_, a) = &pieces[0];
        let sorted = table.sort_chunks(&[a.clone(), a.slice(0, 1)], 100).unwrap();
        let sorted = arrow::compute::concat_batches(&sorted[0].schema(), &sorted).unwrap();
        let ids = sorted.column(0).as_primitive::<Int64Type>();
        assert_eq!(ids.values(), &[2, 3, 3]);
        let tags = sorted.column(2).as_list::<i32>();
        assert!(tags.is_null(0));
        assert_eq!(tags.value(1).as_string::<i32>().value(0), "x");
        let attrs = sorted.column(3).as_map();
        assert_eq!(attrs.value(0).len(), 2);
        assert_eq!(attrs.value(2).len(), 1);
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
    fn json_is_no_key_and_no_partition() {
        let mut with_json = layout();
        with_json
            .columns
            .push(Column::new("attrs", ColumnType::Json));
        with_json
            .columns
            .push(Column::new("user", ColumnType::Uuid));
        with_json.sort_by = vec!["user".into(), "attrs".into()];
        let error = def(with_json.clone()).unwrap_err();
        assert_eq!(error.field, "sort_by[1]");
        assert!(error.to_string().contains("no order"), "{error}");
        with_json.sort_by = vec!["user".into()];
        with_json.partition_by = "attrs".into();
        let error = def(with_json.clone()).unwrap_err();
        assert_eq!(error.field, "partition_by");
        with_json.partition_by = "user".into();
        assert!(def(with_json).is_ok(), "a uuid is a key and a partition");
    }

    #[test]
    fn nested_columns_are_no_key_and_no_partition() {
        let nested = [
            ColumnType::list(ColumnType::Int64),
            ColumnType::map(ColumnType::String),
            ColumnType::Struct(vec![crate::schema::StructField::new("a", ColumnType::Int8)]),
        ];
        for ty in nested {
            let mut with_nested = layout();
            with_nested.columns.push(Column::new("n", ty.clone()));
            with_nested.sort_by = vec!["n".into()];
            let error = def(with_nested.clone()).unwrap_err();
            assert_eq!(error.field, "sort_by[0]", "{ty}");
            assert!(
                error.to_string().contains(&format!("'n' is {ty}")),
                "{error}"
            );
            with_nested.sort_by = Vec::new();
            with_nested.partition_by = "n".into();
            let error = def(with_nested).unwrap_err();
            assert_eq!(error.field, "partition_by", "{ty}");
            assert!(error.to_string().contains("scalar column"), "{error}");
        }
    }

    #[test]
    fn layout_round_trips() {
        let mut l = layout();
        l.partition_by = "service".into();
        assert_eq!(def(l.clone()).unwrap().layout(), l);
    }

    /// The JSON rows in `text`, several to a line as ClickHouse's framing takes them, as a batch
    /// of `table`.
    fn decode(table: &TableDef, text: &str) -> RecordBatch {
        let options = DecodeOptions {
            dialect: JsonDialect::ClickHouse,
            ..Default::default()
        };
        decode_ndjson(table.schema(), text.as_bytes(), &options).unwrap()
    }

    /// The ids (first column) of `batches`, in order.
    fn ids(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    }

    #[test]
    fn sorts_chunks_by_key_into_batches_of_the_given_size() {
        let table = def(layout()).unwrap();
        let chunks = [
            decode(&table, r#"{"id":3,"service":"b"} {"id":2,"service":"a"}"#),
            decode(&table, r#"{"id":9,"service":"c"}"#).slice(0, 0),
            decode(
                &table,
                r#"{"id":1,"service":"b"} {"id":5,"service":"a"} {"id":4,"service":null}"#,
            ),
        ];
        let sorted = table.sort_chunks(&chunks, 2).unwrap();
        let sizes: Vec<usize> = sorted.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(sizes, [2, 2, 1]);
        // service (nulls first), then id.
        assert_eq!(ids(&sorted), [4, 2, 5, 1, 3]);
    }

    #[test]
    fn a_sort_order_gathers_any_range_as_the_sorted_batches_hold_it() {
        let table = def(layout()).unwrap();
        let chunks = [
            decode(&table, r#"{"id":3,"service":"b"} {"id":2,"service":"a"}"#).slice(0, 0),
            decode(
                &table,
                r#"{"id":3,"service":"b"} {"id":2,"service":"a"} {"id":7,"service":"a"}"#,
            ),
            decode(&table, r#"{"id":9,"service":"c"}"#).slice(0, 0),
            decode(
                &table,
                r#"{"id":1,"service":"b"} {"id":5,"service":"a"} {"id":4,"service":null}"#,
            ),
        ];
        let whole = table.sort_chunks(&chunks, 64).unwrap();
        assert_eq!(ids(&whole), [4, 2, 5, 7, 1, 3]);
        let order = table.sort_order(&chunks).unwrap().unwrap();
        assert_eq!(order.rows(), 6);
        for from in 0..=6 {
            for to in from..=6 {
                let piece = order.gather(&chunks, from..to).unwrap();
                assert_eq!(piece.schema(), chunks[0].schema());
                assert_eq!(ids(&[piece]), ids(&whole)[from..to], "{from}..{to}");
            }
        }
        assert!(order.gather(&chunks, 5..7).is_err(), "past the rows");
        assert!(order.gather(&chunks[1..], 0..1).is_err(), "other chunks");
    }

    #[test]
    fn without_a_sort_key_chunks_come_back_as_they_are() {
        let mut unsorted = layout();
        unsorted.sort_by.clear();
        let table = def(unsorted).unwrap();
        let chunk = decode(&table, r#"{"id":3,"service":"b"} {"id":2,"service":"a"}"#);
        let out = table
            .sort_chunks(&[chunk.clone(), chunk.clone()], 1)
            .unwrap();
        assert_eq!(out, [chunk.clone(), chunk.clone()]);
        assert_eq!(table.sort_order(&[chunk]).unwrap(), None);
    }
}
