//! Column types, table schemas, and schema inference from a first insert.
//!
//! sluice keeps a small set of column types with names users write in the config file.
//! ClickHouse's spellings (`Int64`, `String`, `DateTime`, `Decimal(P, S)`, `UUID`, `JSON`,
//! `Nullable(T)`, `LowCardinality(T)`) are accepted as aliases so a ClickHouse table definition
//! can be carried over as it is.
//!
//! `list<T>`, `struct<...>` and `map<string, T>` hold other types, up to [`MAX_TYPE_DEPTH`]
//! levels deep; ClickHouse's `Array(T)`, `Tuple(...)` and `Map(String, T)` are their aliases.
//!
//! `uuid` and `json` are text in Arrow, told apart from `string` by the field's metadata
//! ([`TYPE_METADATA_KEY`]), which travels with every batch to the stores: a store that has a type
//! of its own for them (PostgreSQL's `uuid` and `jsonb`, ClickHouse's `UUID`) reads it there.

mod column_type;
mod type_name;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use serde::{Deserialize, Serialize};

pub use column_type::{
    ColumnType, LIST_ELEMENT, MAP_ENTRIES, MAP_KEY, MAP_VALUE, StructField, quoted_field_name,
};
pub use type_name::MAX_TYPE_DEPTH;

use crate::error::ConfigError;
use crate::name::printable;

/// The longest column name sluice accepts, in bytes.
pub const MAX_COLUMN_NAME_LEN: usize = 256;

/// The most columns a first insert may give an auto-created table (SQLite's default limit;
/// PostgreSQL's is 1,600). Every column costs an encoder, and its memory, in each flush, so a
/// first insert of a few hundred kilobytes naming tens of thousands of columns could otherwise
/// exhaust the server's memory. Declared tables are the operator's to size.
pub const MAX_INFERRED_COLUMNS: usize = 2_000;

/// The Arrow field metadata key that names a text column's sluice type when it is not `string`:
/// `uuid` or `json`.
pub const TYPE_METADATA_KEY: &str = "sluice.type";

/// The most digits a `decimal` holds: what Arrow's `Decimal128` and ClickHouse's `Decimal128`
/// hold.
pub const MAX_DECIMAL_PRECISION: u8 = 38;

/// The time zone stamped on timestamp columns: timestamps are instants, stored in UTC. Written as
/// an offset, which arrow parses without a time zone database.
pub const TIMESTAMP_TZ: &str = "+00:00";

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Column {
    /// The column's name, as it appears as a JSON key.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: ColumnType,
    /// Whether rows may leave it out or send `null`. Defaults to true.
    #[serde(default = "default_nullable")]
    pub nullable: bool,
}

fn default_nullable() -> bool {
    true
}

impl Column {
    /// A nullable column.
    pub fn new(name: impl Into<String>, ty: ColumnType) -> Self {
        Self {
            name: name.into(),
            ty,
            nullable: true,
        }
    }

    /// The same column, not nullable.
    pub fn required(mut self) -> Self {
        self.nullable = false;
        self
    }
}

/// A table's columns, in order, with the Arrow schema they make.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    columns: Vec<Column>,
    arrow: SchemaRef,
}

impl TableSchema {
    /// Checks the columns (at least one, names valid and unique) and builds the Arrow schema.
    pub fn new(columns: Vec<Column>) -> Result<Self, ConfigError> {
        if columns.is_empty() {
            return Err(ConfigError::new(
                "columns",
                "a table needs at least one column",
            ));
        }
        for (i, column) in columns.iter().enumerate() {
            check_column_name(&column.name)
                .map_err(|reason| ConfigError::new(format!("columns[{i}].name"), reason))?;
            if columns[..i].iter().any(|c| c.name == column.name) {
                return Err(ConfigError::new(
                    format!("columns[{i}].name"),
                    format!("column '{}' is declared twice", column.name),
                ));
            }
        }
        let fields: Vec<Field> = columns
            .iter()
            .map(|c| c.ty.arrow_field(&c.name, c.nullable))
            .collect();
        Ok(Self {
            columns,
            arrow: Arc::new(Schema::new(fields)),
        })
    }

    /// The columns in order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The first two columns whose names differ only in case (the earlier first). Delta Lake and
    /// SQLite take such names for one column; PostgreSQL and ClickHouse keep them apart.
    pub fn case_clash(&self) -> Option<(&str, &str)> {
        let mut seen: HashMap<String, &str> = HashMap::new();
        self.columns.iter().find_map(|column| {
            seen.insert(column.name.to_lowercase(), &column.name)
                .map(|earlier| (earlier, column.name.as_str()))
        })
    }

    /// The column called `name`.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The Arrow schema rows are decoded into.
    pub fn arrow(&self) -> &SchemaRef {
        &self.arrow
    }
}

/// Checks a column name: non-empty, at most [`MAX_COLUMN_NAME_LEN`] bytes, no control characters.
///
/// Column names are looser than table names (`user-id` and `@timestamp` are fine) because they
/// never become paths on their own; partition columns, which do, are checked again by
/// [`crate::partition::PartitionSpec`].
pub fn check_column_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("column name is empty".to_owned());
    }
    if name.len() > MAX_COLUMN_NAME_LEN {
        return Err(format!(
            "column name '{}' is {} bytes long; at most {MAX_COLUMN_NAME_LEN} are allowed",
            printable(name),
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(format!(
            "column name '{}' has a control character",
            printable(name)
        ));
    }
    Ok(())
}

/// A word for the kind of a JSON value, for error messages.
pub(crate) fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::DataType;

    use super::*;

    #[test]
    fn type_names_round_trip() {
        let nested = [
            ColumnType::list(ColumnType::Uuid),
            ColumnType::map(ColumnType::list(ColumnType::Json)),
            ColumnType::Struct(vec![
                StructField::new("at", ColumnType::Timestamp),
                StructField::new("attrs", ColumnType::map(ColumnType::String)),
            ]),
        ];
        for ty in ColumnType::ALL.into_iter().chain(nested) {
            assert_eq!(ColumnType::parse(&ty.name()).unwrap(), (ty.clone(), false));
            let field = ty.arrow_field("c", true);
            assert_eq!(ColumnType::from_field(&field), Some(ty));
        }
        assert_eq!(
            ColumnType::parse("Nullable(DateTime)").unwrap(),
            (ColumnType::Timestamp, true)
        );
        assert_eq!(
            ColumnType::from_arrow(&DataType::Utf8),
            Some(ColumnType::String)
        );
        assert!(ColumnType::parse("decimal").is_err());
    }

    #[test]
    fn decimals_and_clickhouse_spellings_parse() {
        let decimal = |precision, scale| ColumnType::Decimal { precision, scale };
        let cases = [
            ("decimal(10, 2)", decimal(10, 2), false),
            ("decimal(7)", decimal(7, 0), false),
            ("Decimal(38,38)", decimal(38, 38), false),
            ("Decimal32(4)", decimal(9, 4), false),
            ("Decimal64(2)", decimal(18, 2), false),
            ("Nullable(Decimal128(10))", decimal(38, 10), true),
            ("UUID", ColumnType::Uuid, false),
            ("Nullable(UUID)", ColumnType::Uuid, true),
            ("Object('json')", ColumnType::Json, false),
            ("JSON", ColumnType::Json, false),
            ("LowCardinality(String)", ColumnType::String, false),
            ("LowCardinality(Nullable(String))", ColumnType::String, true),
        ];
        for (text, ty, nullable) in cases {
            assert_eq!(ColumnType::parse(text), Ok((ty, nullable)), "{text}");
        }
        for bad in [
            "decimal(0, 0)",
            "decimal(39, 2)",
            "decimal(10, 11)",
            "decimal(ten, 2)",
            "Decimal32(10)",
        ] {
            assert!(ColumnType::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(decimal(12, 3).clickhouse_name(), "Decimal(12, 3)");
        assert_eq!(decimal(12, 3).arrow_type(), DataType::Decimal128(12, 3));
    }

    #[test]
    fn schema_refuses_duplicates_and_empty() {
        assert!(TableSchema::new(vec![]).is_err());
        let err = TableSchema::new(vec![
            Column::new("a", ColumnType::Int64),
            Column::new("a", ColumnType::String),
        ])
        .unwrap_err();
        assert_eq!(err.field, "columns[1].name");
    }
}
