//! Arrow columns as SQLite values.
//!
//! A `decimal` is `TEXT` holding its exact text (`-12.50`), not `REAL`: a `REAL` is a 64-bit
//! float, which holds about 16 significant digits and no tenth exactly, where a decimal holds
//! up to 38 digits exactly. A `uuid` is its text, and a `json` value the text it was sent as.
//! A `list`, `struct` or `map` value is `TEXT` holding its JSON ([`crate::values`]), which
//! SQLite's JSON functions read: `json_extract(tags, '$[0]')`.
//! For a column that may hold a decimal, JSON or a nested value, a table that exists must give
//! it `TEXT` affinity, or none ([`holds`]): with any other, SQLite stores text that reads as a
//! number as that number, so `12.50` would read back `12.5`.

use arrow::array::{
    Array, AsArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
    Int8Array, Int16Array, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
    UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, TimeUnit};
use rusqlite::Statement;
use rusqlite::types::Null;
use sluice_core::ColumnType;

use crate::values::{Node, date_text, timestamp_text};

/// A column's type affinity, from its declared type, by SQLite's rules in the order SQLite
/// applies them (<https://sqlite.org/datatype3.html#determination_of_column_affinity>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Affinity {
    Integer,
    Text,
    /// No conversion at all: `BLOB`, or no declared type.
    Blob,
    Real,
    Numeric,
}

impl Affinity {
    fn of(declared: &str) -> Affinity {
        let upper = declared.to_ascii_uppercase();
        let has = |words: &[&str]| words.iter().any(|w| upper.contains(w));
        if has(&["INT"]) {
            Affinity::Integer
        } else if has(&["CHAR", "CLOB", "TEXT"]) {
            Affinity::Text
        } else if upper.is_empty() || has(&["BLOB"]) {
            Affinity::Blob
        } else if has(&["REAL", "FLOA", "DOUB"]) {
            Affinity::Real
        } else {
            Affinity::Numeric
        }
    }
}

/// Whether a column declared `declared` keeps every value of a layout's `ty` exactly ([`fit`]'s
/// question): text stays text only in a column of `TEXT` affinity or none. A UUID never reads
/// as a number, so any column keeps it. A nested value's JSON never reads as a number either,
/// but a column of another affinity says it was made for something else.
///
/// [`fit`]: crate::fit
pub(crate) fn holds(ty: &ColumnType, declared: &str) -> Result<(), String> {
    let affinity = Affinity::of(declared);
    if matches!(affinity, Affinity::Text | Affinity::Blob) {
        return Ok(());
    }
    match ty {
        ColumnType::Decimal { .. } | ColumnType::Json => Err(format!(
            "SQLite gives it {affinity:?} affinity, which stores text that reads as a number \
             as that number (12.50 reads back 12.5); declare it TEXT"
        )),
        _ if ty.is_nested() => Err(format!(
            "SQLite gives it {affinity:?} affinity, and sluice keeps a {ty} as its JSON text; \
             declare it TEXT"
        )),
        _ => Ok(()),
    }
}

/// The SQLite type of an Arrow column, or why there is none.
pub(crate) fn sql_type(data_type: &DataType) -> Result<&'static str, String> {
    Ok(match data_type {
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => "INTEGER",
        DataType::Float32 | DataType::Float64 => "REAL",
        DataType::Utf8
        | DataType::Decimal128(_, _)
        | DataType::Date32
        | DataType::Timestamp(TimeUnit::Microsecond, _)
        | DataType::List(_)
        | DataType::Struct(_)
        | DataType::Map(_, _) => "TEXT",
        other => return Err(format!("no SQLite type for Arrow type {other}")),
    })
}

/// A double-quoted SQL identifier, with inner quotes doubled: safe for any name.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// One column, downcast once, bound row by row.
pub(crate) enum Column<'a> {
    Bool(&'a BooleanArray),
    I8(&'a Int8Array),
    I16(&'a Int16Array),
    I32(&'a Int32Array),
    I64(&'a Int64Array),
    U8(&'a UInt8Array),
    U16(&'a UInt16Array),
    U32(&'a UInt32Array),
    U64(&'a UInt64Array),
    F32(&'a Float32Array),
    F64(&'a Float64Array),
    Str(&'a StringArray),
    /// Bound as its exact text.
    Decimal(&'a Decimal128Array),
    Date(&'a Date32Array),
    Timestamp(&'a TimestampMicrosecondArray),
    /// A list, struct or map, bound as its JSON text.
    Nested(Node<'a>),
}

impl<'a> Column<'a> {
    /// The column `array` of the layout's field `field`.
    pub(crate) fn new(field: &Field, array: &'a dyn Array) -> Result<Self, String> {
        Ok(match array.data_type() {
            DataType::Boolean => Self::Bool(array.as_boolean()),
            DataType::Int8 => Self::I8(array.as_primitive()),
            DataType::Int16 => Self::I16(array.as_primitive()),
            DataType::Int32 => Self::I32(array.as_primitive()),
            DataType::Int64 => Self::I64(array.as_primitive()),
            DataType::UInt8 => Self::U8(array.as_primitive()),
            DataType::UInt16 => Self::U16(array.as_primitive()),
            DataType::UInt32 => Self::U32(array.as_primitive()),
            DataType::UInt64 => Self::U64(array.as_primitive()),
            DataType::Float32 => Self::F32(array.as_primitive()),
            DataType::Float64 => Self::F64(array.as_primitive()),
            DataType::Utf8 => Self::Str(array.as_string()),
            DataType::Decimal128(_, _) => Self::Decimal(array.as_primitive()),
            DataType::Date32 => Self::Date(array.as_primitive()),
            DataType::Timestamp(TimeUnit::Microsecond, _) => Self::Timestamp(array.as_primitive()),
            DataType::List(_) | DataType::Struct(_) | DataType::Map(_, _) => {
                Self::Nested(Node::document(field, array)?)
            }
            other => return Err(format!("no SQLite type for Arrow type {other}")),
        })
    }

    /// Binds row `row` of this column to parameter `index` (1-based).
    pub(crate) fn bind(
        &self,
        stmt: &mut Statement<'_>,
        index: usize,
        row: usize,
    ) -> Result<(), BindError> {
        let array: &dyn Array = match self {
            Self::Nested(node) => {
                if node.is_null(row) {
                    return stmt
                        .raw_bind_parameter(index, Null)
                        .map_err(BindError::Sqlite);
                }
                let text = node.document_text(row).map_err(BindError::Value)?;
                return stmt
                    .raw_bind_parameter(index, text)
                    .map_err(BindError::Sqlite);
            }
            Self::Bool(a) => *a,
            Self::I8(a) => *a,
            Self::I16(a) => *a,
            Self::I32(a) => *a,
            Self::I64(a) => *a,
            Self::U8(a) => *a,
            Self::U16(a) => *a,
            Self::U32(a) => *a,
            Self::U64(a) => *a,
            Self::F32(a) => *a,
            Self::F64(a) => *a,
            Self::Str(a) => *a,
            Self::Decimal(a) => *a,
            Self::Date(a) => *a,
            Self::Timestamp(a) => *a,
        };
        if array.is_null(row) {
            return stmt
                .raw_bind_parameter(index, Null)
                .map_err(BindError::Sqlite);
        }
        let result = match self {
            Self::Bool(a) => stmt.raw_bind_parameter(index, i64::from(a.value(row))),
            Self::I8(a) => stmt.raw_bind_parameter(index, i64::from(a.value(row))),
            Self::I16(a) => stmt.raw_bind_parameter(index, i64::from(a.value(row))),
            Self::I32(a) => stmt.raw_bind_parameter(index, i64::from(a.value(row))),
            Self::I64(a) => stmt.raw_bind_parameter(index, a.value(row)),
            Self::U8(a) => stmt.raw_bind_parameter(index, i64::from(a.value(row))),
            Self::U16(a) => stmt.raw_bind_parameter(index, i64::from(a.value(row))),
            Self::U32(a) => stmt.raw_bind_parameter(index, i64::from(a.value(row))),
            Self::U64(a) => {
                let v = i64::try_from(a.value(row)).map_err(|_| {
                    BindError::Value(format!(
                        "{} is too large for a SQLite INTEGER",
                        a.value(row)
                    ))
                })?;
                stmt.raw_bind_parameter(index, v)
            }
            Self::F32(a) => stmt.raw_bind_parameter(index, f64::from(a.value(row))),
            Self::F64(a) => stmt.raw_bind_parameter(index, a.value(row)),
            Self::Str(a) => stmt.raw_bind_parameter(index, a.value(row)),
            Self::Decimal(a) => stmt.raw_bind_parameter(index, a.value_as_string(row)),
            Self::Date(a) => {
                stmt.raw_bind_parameter(index, date_text(a.value(row)).map_err(BindError::Value)?)
            }
            Self::Timestamp(a) => stmt.raw_bind_parameter(
                index,
                timestamp_text(a.value(row)).map_err(BindError::Value)?,
            ),
            // Bound above.
            Self::Nested(_) => return Ok(()),
        };
        result.map_err(BindError::Sqlite)
    }
}

/// Why a value could not be bound.
pub(crate) enum BindError {
    /// SQLite refused it.
    Sqlite(rusqlite::Error),
    /// The value has no SQLite form.
    Value(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_follows_sqlites_rules() {
        let cases = [
            ("INTEGER", Affinity::Integer),
            ("BIGINT", Affinity::Integer),
            ("TEXT", Affinity::Text),
            ("varchar(36)", Affinity::Text),
            ("CLOB", Affinity::Text),
            ("", Affinity::Blob),
            ("BLOB", Affinity::Blob),
            ("REAL", Affinity::Real),
            ("DOUBLE PRECISION", Affinity::Real),
            ("DECIMAL(12,2)", Affinity::Numeric),
            ("NUMERIC", Affinity::Numeric),
            ("JSON", Affinity::Numeric),
            ("UUID", Affinity::Numeric),
            // "INT" comes first: "POINT" holds it.
            ("FLOATING POINT", Affinity::Integer),
        ];
        for (declared, affinity) in cases {
            assert_eq!(Affinity::of(declared), affinity, "{declared}");
        }
    }

    #[test]
    fn decimals_and_json_need_a_column_that_keeps_text() {
        let decimal = ColumnType::Decimal {
            precision: 10,
            scale: 2,
        };
        for ty in [decimal, ColumnType::Json] {
            assert_eq!(holds(&ty, "TEXT"), Ok(()));
            assert_eq!(holds(&ty, ""), Ok(()));
            for declared in ["DECIMAL(10,2)", "REAL", "JSON", "INTEGER"] {
                let error = holds(&ty, declared).unwrap_err();
                assert!(
                    error.contains("declare it TEXT"),
                    "{ty} {declared}: {error}"
                );
            }
        }
        assert_eq!(holds(&ColumnType::Uuid, "UUID"), Ok(()));
        assert_eq!(holds(&ColumnType::String, "INTEGER"), Ok(()));
    }

    #[test]
    fn nested_values_need_a_text_column() {
        let ty = ColumnType::map(ColumnType::list(ColumnType::Int64));
        assert_eq!(holds(&ty, "TEXT"), Ok(()));
        assert_eq!(holds(&ty, ""), Ok(()));
        let error = holds(&ty, "JSON").unwrap_err();
        assert!(
            error.contains("map<string, list<int64>> as its JSON text; declare it TEXT"),
            "{error}"
        );
        assert_eq!(sql_type(&ty.arrow_type()), Ok("TEXT"));
    }
}
