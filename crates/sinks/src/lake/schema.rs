//! A table's Delta schema, and the cast of a flush's batch to the columns its files store.
//!
//! Delta has no unsigned integers, so each unsigned column is stored one size up (`uint8` as
//! Delta `short`, `uint16` as `integer`, `uint32` as `long`) and `uint64` as `decimal(20,0)`:
//! no value changes. Timestamps are Delta `timestamp` (microseconds, UTC). A `decimal(p, s)` is
//! Delta `decimal(p,s)`, in the files Parquet's decimal of the same precision and scale. A
//! `uuid` and a `json` value are Delta `string`, holding their text. Partition columns live in
//! the log, not in the files: a `day(ts)`/`hour(ts)` table gets a derived partition column
//! (`ts_day` as `date`, `ts_hour` as `string`).
//!
//! A Delta `string` column does not say whether it holds UUIDs or JSON, so a table whose
//! column is `string` in the log fits a layout that makes it `string`, `uuid` or `json`: the
//! layout says what the column holds, and the rows it takes from then on are checked by it.
//! Rows written under an earlier layout are not checked again. A `decimal` must match the
//! log's precision and scale exactly, as every other type does: files of one column with two
//! scales would not read as one column.
//!
//! A `list` is a Delta `array`, a `struct` a Delta `struct` and a `map` a Delta `map` with string
//! keys, holding the types above; everything inside may be null.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use deltalake_core::kernel::{ArrayType, DataType as DeltaType, MapType, StructField, StructType};
use sluice_core::schema::{LIST_ELEMENT, MAP_ENTRIES, MAP_KEY, MAP_VALUE};
use sluice_core::{ColumnType, PartitionSpec, SinkError, TableDef};

const SINK: &str = "lake";

/// The time zone Delta readers expect on timestamp columns.
const DELTA_TZ: &str = "UTC";

/// The Delta type a column is stored as.
pub(crate) fn delta_type(ty: &ColumnType) -> Result<DeltaType, SinkError> {
    Ok(match ty {
        ColumnType::Bool => DeltaType::BOOLEAN,
        ColumnType::Int8 => DeltaType::BYTE,
        ColumnType::Int16 | ColumnType::UInt8 => DeltaType::SHORT,
        ColumnType::Int32 | ColumnType::UInt16 => DeltaType::INTEGER,
        ColumnType::Int64 | ColumnType::UInt32 => DeltaType::LONG,
        ColumnType::UInt64 => decimal(20, 0)?,
        &ColumnType::Decimal { precision, scale } => decimal(precision, scale)?,
        ColumnType::Float32 => DeltaType::FLOAT,
        ColumnType::Float64 => DeltaType::DOUBLE,
        ColumnType::Date => DeltaType::DATE,
        ColumnType::Timestamp => DeltaType::TIMESTAMP,
        ColumnType::String | ColumnType::Uuid | ColumnType::Json => DeltaType::STRING,
        ColumnType::List(element) => ArrayType::new(delta_type(element)?, true).into(),
        ColumnType::Map(value) => MapType::new(DeltaType::STRING, delta_type(value)?, true).into(),
        ColumnType::Struct(fields) => {
            let fields = fields
                .iter()
                .map(|f| Ok(StructField::new(f.name.clone(), delta_type(&f.ty)?, true)))
                .collect::<Result<Vec<_>, SinkError>>()?;
            StructType::try_new(fields)
                .map_err(|e| SinkError::permanent(SINK, format!("{ty} is no Delta struct: {e}")))?
                .into()
        }
        other => {
            return Err(SinkError::permanent(
                SINK,
                format!("a Delta table has no type for {other}"),
            ));
        }
    })
}

/// Delta's `decimal(precision,scale)`, which takes what sluice's `decimal` takes: 1 to 38
/// digits, a scale up to the precision.
fn decimal(precision: u8, scale: u8) -> Result<DeltaType, SinkError> {
    DeltaType::decimal(precision, scale).map_err(|e| {
        SinkError::permanent(
            SINK,
            format!("decimal({precision}, {scale}) is no Delta decimal: {e}"),
        )
    })
}

/// The Arrow type of a column inside a data file, matching [`delta_type`], with the field names
/// Delta readers expect inside lists and maps.
pub(crate) fn file_arrow_type(ty: &ColumnType) -> DataType {
    match ty {
        ColumnType::UInt8 => DataType::Int16,
        ColumnType::UInt16 => DataType::Int32,
        ColumnType::UInt32 => DataType::Int64,
        ColumnType::UInt64 => DataType::Decimal128(20, 0),
        ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, Some(DELTA_TZ.into())),
        ColumnType::List(element) => DataType::List(Arc::new(Field::new(
            LIST_ELEMENT,
            file_arrow_type(element),
            true,
        ))),
        ColumnType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| Field::new(f.name.clone(), file_arrow_type(&f.ty), true))
                .collect(),
        ),
        ColumnType::Map(value) => {
            let entry = vec![
                Field::new(MAP_KEY, DataType::Utf8, false),
                Field::new(MAP_VALUE, file_arrow_type(value), true),
            ];
            let entries = Field::new(MAP_ENTRIES, DataType::Struct(entry.into()), false);
            DataType::Map(Arc::new(entries), false)
        }
        other => other.arrow_type(),
    }
}

/// The Delta table's columns, in order, and its partition columns.
pub(crate) fn delta_columns(
    table: &TableDef,
) -> Result<(Vec<StructField>, Vec<String>), SinkError> {
    let mut fields: Vec<StructField> = table
        .schema()
        .columns()
        .iter()
        .map(|c| {
            Ok(StructField::new(
                c.name.clone(),
                delta_type(&c.ty)?,
                c.nullable,
            ))
        })
        .collect::<Result<_, SinkError>>()?;
    let partition_columns = match (table.partition(), table.partition().key_name()) {
        (PartitionSpec::Column(c), _) => vec![c.clone()],
        (PartitionSpec::Day(_) | PartitionSpec::Hour(_), Some(key)) => {
            let ty = table.partition_key_type().unwrap_or(ColumnType::String);
            fields.push(StructField::new(key.clone(), delta_type(&ty)?, true));
            vec![key]
        }
        _ => Vec::new(),
    };
    Ok((fields, partition_columns))
}

/// The schema of a data file: the table's columns without the partition column, in file types.
pub(crate) fn file_schema(table: &TableDef) -> SchemaRef {
    let skip = match table.partition() {
        PartitionSpec::Column(c) => Some(c.as_str()),
        _ => None,
    };
    let fields: Vec<Field> = table
        .schema()
        .columns()
        .iter()
        .filter(|c| Some(c.name.as_str()) != skip)
        .map(|c| Field::new(c.name.clone(), file_arrow_type(&c.ty), c.nullable))
        .collect();
    Arc::new(Schema::new(fields))
}

/// A flush's batch as its data file stores it: partition column dropped, types cast to
/// [`file_arrow_type`]. Casts only widen, so they cannot fail on values sluice accepted.
pub(crate) fn to_file_batch(
    table: &TableDef,
    schema: &SchemaRef,
    batch: &RecordBatch,
) -> Result<RecordBatch, SinkError> {
    let columns = schema
        .fields()
        .iter()
        .map(|field| {
            let column = batch.column_by_name(field.name()).ok_or_else(|| {
                SinkError::permanent(
                    SINK,
                    format!(
                        "table {}: the batch has no column '{}'",
                        table.name(),
                        field.name()
                    ),
                )
            })?;
            if column.data_type() == field.data_type() {
                Ok(column.clone())
            } else {
                cast(column, field.data_type()).map_err(|e| {
                    SinkError::permanent(
                        SINK,
                        format!("table {}: column '{}': {e}", table.name(), field.name()),
                    )
                })
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| {
        SinkError::permanent(SINK, format!("table {}: {e}", table.name())).with_source(e)
    })
}

#[cfg(test)]
mod tests {
    use arrow::array::{AsArray, Decimal128Array, UInt64Array};
    use sluice_core::{Column, FlushPolicy, TableLayout, TableName};

    use super::*;

    fn table(partition_by: &str) -> TableDef {
        TableDef::new(
            TableName::new("t").unwrap(),
            TableLayout {
                columns: vec![
                    Column::new("ts", ColumnType::Timestamp),
                    Column::new("n", ColumnType::UInt64).required(),
                    Column::new("service", ColumnType::String),
                ],
                partition_by: partition_by.into(),
                sort_by: vec![],
            },
            FlushPolicy::default(),
        )
        .unwrap()
    }

    #[test]
    fn derived_partitions_get_their_own_column() {
        let (fields, parts) = delta_columns(&table("day(ts)")).unwrap();
        assert_eq!(parts, ["ts_day"]);
        assert_eq!(fields.len(), 4);
        assert_eq!(fields[3].data_type(), &DeltaType::DATE);
        let (fields, parts) = delta_columns(&table("service")).unwrap();
        assert_eq!(parts, ["service"]);
        assert_eq!(fields.len(), 3);
        let schema = file_schema(&table("service"));
        assert!(schema.field_with_name("service").is_err());
        assert_eq!(delta_columns(&table("")).unwrap().1, Vec::<String>::new());
    }

    #[test]
    fn new_types_are_delta_decimals_and_strings() {
        let decimal = ColumnType::Decimal {
            precision: 38,
            scale: 38,
        };
        assert_eq!(
            delta_type(&decimal).unwrap(),
            DeltaType::decimal(38, 38).unwrap()
        );
        assert_eq!(file_arrow_type(&decimal), DataType::Decimal128(38, 38));
        for ty in [ColumnType::Uuid, ColumnType::Json] {
            assert_eq!(delta_type(&ty).unwrap(), DeltaType::STRING);
            assert_eq!(file_arrow_type(&ty), DataType::Utf8);
        }
    }

    #[test]
    fn uint64_keeps_every_value() {
        let t = table("");
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::UInt64, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(UInt64Array::from(vec![0, u64::MAX]))])
                .unwrap();
        let file = Arc::new(Schema::new(vec![Field::new(
            "n",
            file_arrow_type(&ColumnType::UInt64),
            false,
        )]));
        let out = to_file_batch(&t, &file, &batch).unwrap();
        let values: &Decimal128Array = out.column(0).as_primitive();
        assert_eq!(values.value(1), u64::MAX as i128);
        assert_eq!(values.len(), 2);
    }
}
