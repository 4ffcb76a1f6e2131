//! Arrow columns as SQLite values.

use arrow::array::{
    Array, AsArray, BooleanArray, Date32Array, Float32Array, Float64Array, Int8Array, Int16Array,
    Int32Array, Int64Array, StringArray, TimestampMicrosecondArray, UInt8Array, UInt16Array,
    UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Date32Type, TimeUnit};
use chrono::DateTime;
use rusqlite::Statement;
use rusqlite::types::Null;

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
        DataType::Utf8 | DataType::Date32 | DataType::Timestamp(TimeUnit::Microsecond, _) => "TEXT",
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
    Date(&'a Date32Array),
    Timestamp(&'a TimestampMicrosecondArray),
}

impl<'a> Column<'a> {
    pub(crate) fn new(array: &'a dyn Array) -> Result<Self, String> {
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
            DataType::Date32 => Self::Date(array.as_primitive()),
            DataType::Timestamp(TimeUnit::Microsecond, _) => Self::Timestamp(array.as_primitive()),
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
            Self::Date(a) => {
                let date = Date32Type::to_naive_date_opt(a.value(row)).ok_or_else(|| {
                    BindError::Value(format!("date {} is out of range", a.value(row)))
                })?;
                stmt.raw_bind_parameter(index, date.format("%Y-%m-%d").to_string())
            }
            Self::Timestamp(a) => {
                let t = DateTime::from_timestamp_micros(a.value(row)).ok_or_else(|| {
                    BindError::Value(format!("timestamp {} is out of range", a.value(row)))
                })?;
                stmt.raw_bind_parameter(index, t.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
            }
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
