//! [`ColumnType`]: the types a column may have, their names, and the Arrow types they decode
//! into.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use serde::{Deserialize, Serialize};

use super::{MAX_DECIMAL_PRECISION, TIMESTAMP_TZ, TYPE_METADATA_KEY};

/// The Arrow name of a list's element field: Parquet's and Delta Lake's.
pub const LIST_ELEMENT: &str = "element";
/// The Arrow name of a map's entries: Delta Lake's.
pub const MAP_ENTRIES: &str = "key_value";
/// The Arrow name of a map entry's key.
pub const MAP_KEY: &str = "key";
/// The Arrow name of a map entry's value.
pub const MAP_VALUE: &str = "value";

/// A column's type. Every type maps to one Arrow type and back.
///
/// `list`, `struct` and `map` hold other types; what they hold may always be null, since JSON
/// arrays hold nulls and JSON objects leave keys out.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// `list<T>`: a JSON array of T's and nulls.
    List(Box<ColumnType>),
    /// `struct<name: T, ...>`: a JSON object with these keys and no others, each of which may
    /// be left out or null.
    Struct(Vec<StructField>),
    /// `map<string, T>`: a JSON object with any keys, whose values are T's or null.
    Map(Box<ColumnType>),
}

/// One field of a `struct`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StructField {
    /// The field's name: the JSON key.
    pub name: String,
    /// Its type.
    pub ty: ColumnType,
}

impl StructField {
    /// A field called `name` of type `ty`.
    pub fn new(name: impl Into<String>, ty: ColumnType) -> Self {
        Self {
            name: name.into(),
            ty,
        }
    }
}

impl ColumnType {
    /// Every type that holds no other, in the order the docs list them (`decimal` as one of its
    /// kinds).
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

    /// `list<element>`.
    pub fn list(element: ColumnType) -> Self {
        Self::List(Box::new(element))
    }

    /// `map<string, value>`.
    pub fn map(value: ColumnType) -> Self {
        Self::Map(Box::new(value))
    }

    /// Whether the type holds others: `list`, `struct` or `map`.
    pub fn is_nested(&self) -> bool {
        matches!(self, Self::List(_) | Self::Struct(_) | Self::Map(_))
    }

    /// How many levels of `list`, `struct` and `map` the type has: 0 for the others.
    pub fn depth(&self) -> usize {
        match self {
            Self::List(element) | Self::Map(element) => 1 + element.depth(),
            Self::Struct(fields) => 1 + fields.iter().map(|f| f.ty.depth()).max().unwrap_or(0),
            _ => 0,
        }
    }

    /// The name used in config files and error messages.
    pub fn name(&self) -> Cow<'static, str> {
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
            Self::List(element) => return Cow::Owned(format!("list<{}>", element.name())),
            Self::Map(value) => return Cow::Owned(format!("map<string, {}>", value.name())),
            Self::Struct(fields) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|f| format!("{}: {}", quoted_field_name(&f.name), f.ty.name()))
                    .collect();
                return Cow::Owned(format!("struct<{}>", fields.join(", ")));
            }
        })
    }

    /// The ClickHouse type of the values sluice stores for this type: what its ClickHouse door
    /// tells clients in `DESCRIBE TABLE`.
    pub fn clickhouse_name(&self) -> Cow<'static, str> {
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
            Self::List(element) => {
                return Cow::Owned(format!("Array({})", element.clickhouse_inner_name()));
            }
            Self::Map(value) => {
                return Cow::Owned(format!("Map(String, {})", value.clickhouse_inner_name()));
            }
            Self::Struct(fields) => {
                // Fields named 1, 2, ... are an unnamed tuple's: ClickHouse takes no such names.
                let unnamed = fields
                    .iter()
                    .enumerate()
                    .all(|(i, f)| f.name == (i + 1).to_string());
                let fields: Vec<String> = fields
                    .iter()
                    .map(|f| match unnamed {
                        true => f.ty.clickhouse_inner_name().into_owned(),
                        false => format!(
                            "{} {}",
                            quoted_field_name(&f.name),
                            f.ty.clickhouse_inner_name()
                        ),
                    })
                    .collect();
                return Cow::Owned(format!("Tuple({})", fields.join(", ")));
            }
        })
    }

    /// The ClickHouse type of a value inside a list, struct or map, which may be null:
    /// `Nullable(T)`, except where ClickHouse has no `Nullable` (arrays, tuples, maps).
    fn clickhouse_inner_name(&self) -> Cow<'static, str> {
        if self.is_nested() {
            self.clickhouse_name()
        } else {
            Cow::Owned(format!("Nullable({})", self.clickhouse_name()))
        }
    }

    /// The Arrow type rows of this column are decoded into.
    pub fn arrow_type(&self) -> DataType {
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
            &Self::Decimal { precision, scale } => DataType::Decimal128(precision, scale as i8),
            Self::Uuid | Self::Json => DataType::Utf8,
            Self::List(element) => {
                DataType::List(Arc::new(element.arrow_field(LIST_ELEMENT, true)))
            }
            Self::Struct(fields) => DataType::Struct(
                fields
                    .iter()
                    .map(|f| f.ty.arrow_field(&f.name, true))
                    .collect::<Fields>(),
            ),
            Self::Map(value) => {
                let entry = Fields::from(vec![
                    Field::new(MAP_KEY, DataType::Utf8, false),
                    value.arrow_field(MAP_VALUE, true),
                ]);
                let entries = Field::new(MAP_ENTRIES, DataType::Struct(entry), false);
                DataType::Map(Arc::new(entries), false)
            }
        }
    }

    /// The Arrow field a column of this type is decoded into: its type, and for `uuid` and
    /// `json` the metadata that tells them from `string`.
    pub fn arrow_field(&self, name: &str, nullable: bool) -> Field {
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
    fn metadata_name(&self) -> Option<&'static str> {
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
            DataType::List(element) => Self::list(Self::from_field(element)?),
            DataType::Struct(fields) => Self::Struct(
                fields
                    .iter()
                    .map(|f| Some(StructField::new(f.name(), Self::from_field(f)?)))
                    .collect::<Option<_>>()?,
            ),
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(entry)
                    if entry.len() == 2 && entry[0].data_type() == &DataType::Utf8 =>
                {
                    Self::map(Self::from_field(&entry[1])?)
                }
                _ => return None,
            },
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

/// A struct field's name as it is written in a type, sluice's or ClickHouse's: as it is when it
/// is a plain identifier, in backquotes otherwise, with `\` before a backquote or a backslash
/// inside.
pub fn quoted_field_name(name: &str) -> String {
    let plain = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        return name.to_owned();
    }
    let mut quoted = String::with_capacity(name.len() + 2);
    quoted.push('`');
    for c in name.chars() {
        if c == '`' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('`');
    quoted
}
