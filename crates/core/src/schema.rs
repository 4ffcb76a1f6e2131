//! Column types, table schemas, and schema inference from a first insert.
//!
//! sluice keeps a small set of column types with names users write in the config file.
//! ClickHouse's spellings (`Int64`, `String`, `DateTime`, `Decimal(P, S)`, `UUID`, `JSON`,
//! `Nullable(T)`, `LowCardinality(T)`) are accepted as aliases so a ClickHouse table definition
//! can be carried over as it is.
//!
//! `uuid` and `json` are text in Arrow, told apart from `string` by the field's metadata
//! ([`TYPE_METADATA_KEY`]), which travels with every batch to the stores: a store that has a type
//! of its own for them (PostgreSQL's `uuid` and `jsonb`, ClickHouse's `UUID`) reads it there.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};

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

/// A column's type. Every type maps to one Arrow type and back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
#[non_exhaustive]
pub enum ColumnType {
    /// `bool`: JSON `true` / `false`.
    Bool,
    /// `int8`
    Int8,
    /// `int16`
    Int16,
    /// `int32`
    Int32,
    /// `int64`
    Int64,
    /// `uint8`
    UInt8,
    /// `uint16`
    UInt16,
    /// `uint32`
    UInt32,
    /// `uint64`
    UInt64,
    /// `float32`
    Float32,
    /// `float64`
    Float64,
    /// `string`: UTF-8 text.
    String,
    /// `date`: a calendar day, from `"YYYY-MM-DD"`.
    Date,
    /// `timestamp`: microseconds since the epoch in UTC, from RFC 3339 text
    /// (`"2026-11-29T12:00:00Z"`, `"2026-11-29 12:00:00"`) or an integer count of microseconds.
    Timestamp,
    /// `decimal(precision, scale)`: an exact number of up to `precision` digits, `scale` of them
    /// after the point, from a JSON number or a number in quotes. Never a float on the way.
    Decimal {
        /// Digits in all, 1 to [`MAX_DECIMAL_PRECISION`].
        precision: u8,
        /// Digits after the point, at most `precision`.
        scale: u8,
    },
    /// `uuid`: a UUID, from its text in any of the usual spellings, kept in the hyphenated
    /// lower-case form.
    Uuid,
    /// `json`: any JSON value, kept as its text, for data whose shape varies.
    Json,
}

impl ColumnType {
    /// Every type, in the order the docs list them (`decimal` as one of its kinds).
    pub const ALL: [ColumnType; 17] = [
        Self::Bool,
        Self::Int8,
        Self::Int16,
        Self::Int32,
        Self::Int64,
        Self::UInt8,
        Self::UInt16,
        Self::UInt32,
        Self::UInt64,
        Self::Float32,
        Self::Float64,
        Self::String,
        Self::Date,
        Self::Timestamp,
        Self::Decimal {
            precision: 18,
            scale: 2,
        },
        Self::Uuid,
        Self::Json,
    ];

    /// The name used in config files and error messages.
    pub fn name(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Self::Bool => "bool",
            Self::Int8 => "int8",
            Self::Int16 => "int16",
            Self::Int32 => "int32",
            Self::Int64 => "int64",
            Self::UInt8 => "uint8",
            Self::UInt16 => "uint16",
            Self::UInt32 => "uint32",
            Self::UInt64 => "uint64",
            Self::Float32 => "float32",
            Self::Float64 => "float64",
            Self::String => "string",
            Self::Date => "date",
            Self::Timestamp => "timestamp",
            Self::Decimal { precision, scale } => {
                return Cow::Owned(format!("decimal({precision}, {scale})"));
            }
            Self::Uuid => "uuid",
            Self::Json => "json",
        })
    }

    /// The ClickHouse type of the values sluice stores for this type: what its ClickHouse door
    /// tells clients in `DESCRIBE TABLE`.
    pub fn clickhouse_name(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Self::Bool => "Bool",
            Self::Int8 => "Int8",
            Self::Int16 => "Int16",
            Self::Int32 => "Int32",
            Self::Int64 => "Int64",
            Self::UInt8 => "UInt8",
            Self::UInt16 => "UInt16",
            Self::UInt32 => "UInt32",
            Self::UInt64 => "UInt64",
            Self::Float32 => "Float32",
            Self::Float64 => "Float64",
            Self::String => "String",
            Self::Date => "Date32",
            Self::Timestamp => "DateTime64(6, 'UTC')",
            Self::Decimal { precision, scale } => {
                return Cow::Owned(format!("Decimal({precision}, {scale})"));
            }
            Self::Uuid => "UUID",
            // A client that knows ClickHouse's newer `JSON` type sends it in a binary layout of
            // its own; as `String` every client sends the text.
            Self::Json => "String",
        })
    }

    /// Parses a type name; the second value is true when it was written `Nullable(T)`.
    pub fn parse(text: &str) -> Result<(ColumnType, bool), String> {
        let text = text.trim();
        if let Some(inner) = call(text, "Nullable") {
            return Self::parse(inner).map(|(ty, _)| (ty, true));
        }
        // Dictionary encoding is the store's business: the values are T's.
        if let Some(inner) = call(text, "LowCardinality") {
            return Self::parse(inner);
        }
        if let Some(ty) = parse_decimal(text)? {
            return Ok((ty, false));
        }
        let ty = match text {
            "bool" | "boolean" | "Bool" => Self::Bool,
            "int8" | "Int8" => Self::Int8,
            "int16" | "Int16" => Self::Int16,
            "int32" | "Int32" => Self::Int32,
            "int64" | "Int64" => Self::Int64,
            "uint8" | "UInt8" => Self::UInt8,
            "uint16" | "UInt16" => Self::UInt16,
            "uint32" | "UInt32" => Self::UInt32,
            "uint64" | "UInt64" => Self::UInt64,
            "float32" | "Float32" => Self::Float32,
            "float64" | "Float64" => Self::Float64,
            "string" | "String" => Self::String,
            "date" | "Date" => Self::Date,
            "timestamp" | "DateTime" | "DateTime64" => Self::Timestamp,
            "uuid" | "UUID" => Self::Uuid,
            "json" | "JSON" | "Object('json')" => Self::Json,
            other => {
                return Err(format!(
                    "unknown column type '{}'; known types: bool, int8 .. int64, uint8 .. \
                     uint64, float32, float64, string, date, timestamp, decimal(p, s), uuid, json",
                    printable(other),
                ));
            }
        };
        Ok((ty, false))
    }

    /// The Arrow type rows of this column are decoded into.
    pub fn arrow_type(self) -> DataType {
        match self {
            Self::Bool => DataType::Boolean,
            Self::Int8 => DataType::Int8,
            Self::Int16 => DataType::Int16,
            Self::Int32 => DataType::Int32,
            Self::Int64 => DataType::Int64,
            Self::UInt8 => DataType::UInt8,
            Self::UInt16 => DataType::UInt16,
            Self::UInt32 => DataType::UInt32,
            Self::UInt64 => DataType::UInt64,
            Self::Float32 => DataType::Float32,
            Self::Float64 => DataType::Float64,
            Self::String => DataType::Utf8,
            Self::Date => DataType::Date32,
            Self::Timestamp => {
                DataType::Timestamp(TimeUnit::Microsecond, Some(TIMESTAMP_TZ.into()))
            }
            // Both checked by `parse_decimal` and `decimal`: at most 38 digits, so the scale
            // fits an i8.
            Self::Decimal { precision, scale } => DataType::Decimal128(precision, scale as i8),
            Self::Uuid | Self::Json => DataType::Utf8,
        }
    }

    /// The Arrow field a column of this type is decoded into: its type, and for `uuid` and
    /// `json` the metadata that tells them from `string`.
    pub fn arrow_field(self, name: &str, nullable: bool) -> Field {
        let field = Field::new(name, self.arrow_type(), nullable);
        match self.metadata_name() {
            Some(ty) => field.with_metadata(HashMap::from([(
                TYPE_METADATA_KEY.to_owned(),
                ty.to_owned(),
            )])),
            None => field,
        }
    }

    /// The value of [`TYPE_METADATA_KEY`] for this type, if it has one.
    fn metadata_name(self) -> Option<&'static str> {
        match self {
            Self::Uuid => Some("uuid"),
            Self::Json => Some("json"),
            _ => None,
        }
    }

    /// The column type for an Arrow type, when sluice has one; text is `string`.
    pub fn from_arrow(data_type: &DataType) -> Option<ColumnType> {
        Some(match data_type {
            DataType::Boolean => Self::Bool,
            DataType::Int8 => Self::Int8,
            DataType::Int16 => Self::Int16,
            DataType::Int32 => Self::Int32,
            DataType::Int64 => Self::Int64,
            DataType::UInt8 => Self::UInt8,
            DataType::UInt16 => Self::UInt16,
            DataType::UInt32 => Self::UInt32,
            DataType::UInt64 => Self::UInt64,
            DataType::Float32 => Self::Float32,
            DataType::Float64 => Self::Float64,
            DataType::Utf8 => Self::String,
            DataType::Date32 => Self::Date,
            DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if &**tz == TIMESTAMP_TZ => {
                Self::Timestamp
            }
            &DataType::Decimal128(precision, scale) => return Self::decimal(precision, scale).ok(),
            _ => return None,
        })
    }

    /// The column type of an Arrow field: [`ColumnType::from_arrow`], with `uuid` and `json`
    /// read from the field's metadata.
    pub fn from_field(field: &Field) -> Option<ColumnType> {
        let named = field.metadata().get(TYPE_METADATA_KEY).map(String::as_str);
        match (field.data_type(), named) {
            (DataType::Utf8, Some("uuid")) => Some(Self::Uuid),
            (DataType::Utf8, Some("json")) => Some(Self::Json),
            (data_type, _) => Self::from_arrow(data_type),
        }
    }

    /// `decimal(precision, scale)`, checked: 1 to 38 digits, a scale from 0 to the precision.
    pub fn decimal(precision: u8, scale: i8) -> Result<ColumnType, String> {
        if !(1..=MAX_DECIMAL_PRECISION).contains(&precision) {
            return Err(format!(
                "a decimal has 1 to {MAX_DECIMAL_PRECISION} digits, not {precision}"
            ));
        }
        match u8::try_from(scale) {
            Ok(scale) if scale <= precision => Ok(Self::Decimal { precision, scale }),
            _ => Err(format!(
                "a decimal's scale is 0 to its precision ({precision}), not {scale}"
            )),
        }
    }
}

/// `Name(inner)` -> `inner`.
fn call<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.strip_prefix(name)?
        .strip_prefix('(')?
        .strip_suffix(')')
        .map(str::trim)
}

/// `decimal(p, s)`, `decimal(p)`, and ClickHouse's `Decimal(p, s)`, `Decimal32(s)`,
/// `Decimal64(s)`, `Decimal128(s)`; `None` for any other type.
fn parse_decimal(text: &str) -> Result<Option<ColumnType>, String> {
    let number = |digits: &str, what: &str| -> Result<u8, String> {
        digits
            .trim()
            .parse()
            .map_err(|_| format!("'{}': the {what} is not a number", printable(text)))
    };
    let (precision, scale) = if let Some(args) = call(text, "decimal").or(call(text, "Decimal")) {
        match args.split_once(',') {
            Some((precision, scale)) => (number(precision, "precision")?, number(scale, "scale")?),
            None => (number(args, "precision")?, 0),
        }
    } else if let Some((precision, args)) =
        [("Decimal32", 9), ("Decimal64", 18), ("Decimal128", 38)]
            .into_iter()
            .find_map(|(name, precision)| Some((precision, call(text, name)?)))
    {
        (precision, number(args, "scale")?)
    } else if text == "decimal" || text == "Decimal" {
        return Err("write a decimal as decimal(precision, scale): decimal(18, 2)".to_owned());
    } else {
        return Ok(None);
    };
    let scale = i8::try_from(scale).unwrap_or(i8::MAX);
    ColumnType::decimal(precision, scale)
        .map(Some)
        .map_err(|e| format!("'{}': {e}", printable(text)))
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl TryFrom<String> for ColumnType {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        match Self::parse(&text)? {
            (ty, false) => Ok(ty),
            (_, true) => Err("write Nullable(T) as the column's `nullable = true`".to_owned()),
        }
    }
}

impl From<ColumnType> for String {
    fn from(ty: ColumnType) -> Self {
        ty.name().into_owned()
    }
}

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
    use super::*;

    #[test]
    fn type_names_round_trip() {
        for ty in ColumnType::ALL {
            assert_eq!(ColumnType::parse(&ty.name()).unwrap(), (ty, false));
            assert_eq!(ColumnType::from_field(&ty.arrow_field("c", true)), Some(ty));
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
