//! Arrow columns as PostgreSQL values.

use std::error::Error;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    TimeUnit, TimestampMicrosecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use bytes::BytesMut;
use chrono::{DateTime, NaiveDate, Utc};
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// The PostgreSQL type for an Arrow type: its name in DDL and its wire type for COPY.
pub(crate) fn pg_type(data_type: &DataType) -> Result<(&'static str, Type), String> {
    Ok(match data_type {
        DataType::Boolean => ("boolean", Type::BOOL),
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => ("smallint", Type::INT2),
        DataType::Int32 | DataType::UInt16 => ("integer", Type::INT4),
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => ("bigint", Type::INT8),
        DataType::Float32 => ("real", Type::FLOAT4),
        DataType::Float64 => ("double precision", Type::FLOAT8),
        DataType::Utf8 => ("text", Type::TEXT),
        DataType::Date32 => ("date", Type::DATE),
        DataType::Timestamp(TimeUnit::Microsecond, _) => ("timestamptz", Type::TIMESTAMPTZ),
        other => return Err(format!("no PostgreSQL type for Arrow type {other}")),
    })
}

/// A double-quoted identifier with inner quotes doubled: safe for any name.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// One value of a row, borrowed from its Arrow column.
#[derive(Debug)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    I16(i16),
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
    Text(&'a str),
    Date(NaiveDate),
    Timestamp(DateTime<Utc>),
}

/// Row `row` of `array` as a value, or why it has none.
pub(crate) fn value(array: &dyn Array, row: usize) -> Result<Value<'_>, String> {
    if array.is_null(row) {
        return Ok(Value::Null);
    }
    Ok(match array.data_type() {
        DataType::Boolean => Value::Bool(array.as_boolean().value(row)),
        DataType::Int8 => Value::I16(i16::from(array.as_primitive::<Int8Type>().value(row))),
        DataType::Int16 => Value::I16(array.as_primitive::<Int16Type>().value(row)),
        DataType::UInt8 => Value::I16(i16::from(array.as_primitive::<UInt8Type>().value(row))),
        DataType::Int32 => Value::I32(array.as_primitive::<Int32Type>().value(row)),
        DataType::UInt16 => Value::I32(i32::from(array.as_primitive::<UInt16Type>().value(row))),
        DataType::Int64 => Value::I64(array.as_primitive::<Int64Type>().value(row)),
        DataType::UInt32 => Value::I64(i64::from(array.as_primitive::<UInt32Type>().value(row))),
        DataType::UInt64 => {
            let v = array.as_primitive::<UInt64Type>().value(row);
            Value::I64(i64::try_from(v).map_err(|_| format!("{v} is too large for a bigint"))?)
        }
        DataType::Float32 => Value::F32(array.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => Value::F64(array.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => Value::Text(array.as_string::<i32>().value(row)),
        DataType::Date32 => {
            let days = array.as_primitive::<Date32Type>().value(row);
            Value::Date(
                Date32Type::to_naive_date_opt(days)
                    .ok_or_else(|| format!("date {days} is out of range"))?,
            )
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            let micros = array.as_primitive::<TimestampMicrosecondType>().value(row);
            Value::Timestamp(
                DateTime::from_timestamp_micros(micros)
                    .ok_or_else(|| format!("timestamp {micros} is out of range"))?,
            )
        }
        other => return Err(format!("no PostgreSQL type for Arrow type {other}")),
    })
}

impl ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Bool(v) => v.to_sql(ty, out),
            Value::I16(v) => v.to_sql(ty, out),
            Value::I32(v) => v.to_sql(ty, out),
            Value::I64(v) => v.to_sql(ty, out),
            Value::F32(v) => v.to_sql(ty, out),
            Value::F64(v) => v.to_sql(ty, out),
            Value::Text(v) => v.to_sql(ty, out),
            Value::Date(v) => v.to_sql(ty, out),
            Value::Timestamp(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        // The column's wire type comes from the same mapping as the value, so they always agree.
        true
    }

    to_sql_checked!();
}
