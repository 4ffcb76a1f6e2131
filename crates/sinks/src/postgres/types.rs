//! Arrow columns as PostgreSQL values.
//!
//! A `decimal`, `uuid` or `json` column goes over binary COPY in the form of the store column
//! it lands in ([`Form`]): a table sluice creates has `numeric(p,s)`, `uuid` and `jsonb`
//! columns, and one that exists may hold the values as text. Binary COPY takes each value in
//! the binary form of its column's type, and reads text sent for a `uuid` column, or jsonb's
//! form sent for a `text` column, as something else or not at all. The other types are sent as
//! their Arrow type maps ([`pg_type`]).

use std::borrow::Cow;
use std::error::Error;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Field, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, TimeUnit, TimestampMicrosecondType, UInt8Type, UInt16Type, UInt32Type,
    UInt64Type,
};
use bytes::{BufMut, BytesMut};
use chrono::{DateTime, NaiveDate, Utc};
use sluice_core::ColumnType;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use super::numeric::put_numeric;
use crate::fit;

/// The version byte that opens jsonb's binary form, before the JSON text.
const JSONB_VERSION: u8 = 1;

/// The PostgreSQL type of a layout's column: its name in DDL and its wire type for COPY.
pub(crate) fn pg_type(field: &Field) -> Result<(Cow<'static, str>, Type), String> {
    Ok(match ColumnType::from_field(field) {
        Some(ColumnType::Decimal { precision, scale }) => (
            Cow::Owned(format!("numeric({precision},{scale})")),
            Type::NUMERIC,
        ),
        Some(ColumnType::Uuid) => (Cow::Borrowed("uuid"), Type::UUID),
        Some(ColumnType::Json) => (Cow::Borrowed("jsonb"), Type::JSONB),
        _ => {
            let (name, ty) = arrow_pg_type(field.data_type())?;
            (Cow::Borrowed(name), ty)
        }
    })
}

/// How a layout column's values go over binary COPY.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Form {
    /// As its Arrow type maps: every type but the three below.
    Arrow,
    /// A decimal as binary `numeric`.
    Numeric,
    /// A decimal as its text, into a `text` or `varchar` column.
    DecimalText,
    /// A UUID's 16 bytes, into a `uuid` column.
    Uuid,
    /// JSON text after jsonb's version byte, into a `jsonb` column.
    Jsonb,
    /// The text as it is, as this type: a UUID or JSON into a `text` or `varchar` column, JSON
    /// into a `json` column.
    Text(Type),
}

impl Form {
    /// The form of a column of type `ty` in a table sluice created.
    pub(crate) fn created(ty: &ColumnType) -> Form {
        match ty {
            ColumnType::Decimal { .. } => Form::Numeric,
            ColumnType::Uuid => Form::Uuid,
            ColumnType::Json => Form::Jsonb,
            _ => Form::Arrow,
        }
    }

    /// The form of a column of type `ty` landing in a store column of type `store`, as
    /// `format_type` spells it (`numeric(12,2)`, `character varying(36)`); why there is none
    /// when the store column would not keep every value exactly.
    pub(crate) fn existing(ty: &ColumnType, store: &str) -> Result<Form, String> {
        let text = store == "text" || store.split('(').next() == Some("character varying");
        Ok(match *ty {
            ColumnType::Decimal { precision, scale } => {
                if text {
                    return Ok(Form::DecimalText);
                }
                if store == "numeric" {
                    return Ok(Form::Numeric);
                }
                let typmod = store
                    .strip_prefix("numeric(")
                    .and_then(|rest| rest.strip_suffix(')'))
                    .and_then(|args| args.split_once(','))
                    .and_then(|(p, s)| Some((p.trim().parse().ok()?, s.trim().parse().ok()?)));
                match typmod {
                    Some(store) => {
                        fit::decimal_holds((precision, scale), store)?;
                        Form::Numeric
                    }
                    None => {
                        return Err(
                            "sluice writes a decimal into numeric or text, never through a \
                             float or an integer"
                                .into(),
                        );
                    }
                }
            }
            ColumnType::Uuid if store == "uuid" => Form::Uuid,
            ColumnType::Uuid if text => Form::Text(Type::TEXT),
            ColumnType::Uuid => return Err("sluice writes a uuid into uuid or text".into()),
            ColumnType::Json if store == "jsonb" => Form::Jsonb,
            ColumnType::Json if store == "json" => Form::Text(Type::JSON),
            ColumnType::Json if text => Form::Text(Type::TEXT),
            ColumnType::Json => {
                return Err("sluice writes json into jsonb, json or text".into());
            }
            _ => Form::Arrow,
        })
    }

    /// The wire type COPY is told for the column `field` in this form.
    pub(crate) fn wire_type(&self, field: &Field) -> Result<Type, String> {
        Ok(match self {
            Form::Arrow => arrow_pg_type(field.data_type())?.1,
            Form::Numeric => Type::NUMERIC,
            Form::DecimalText => Type::TEXT,
            Form::Uuid => Type::UUID,
            Form::Jsonb => Type::JSONB,
            Form::Text(ty) => ty.clone(),
        })
    }
}

/// The PostgreSQL type for an Arrow type: its name in DDL and its wire type for COPY.
fn arrow_pg_type(data_type: &DataType) -> Result<(&'static str, Type), String> {
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
    /// A decimal's own text.
    OwnedText(String),
    Date(NaiveDate),
    Timestamp(DateTime<Utc>),
    /// A decimal's unscaled value and its scale, as binary `numeric`.
    Numeric(i128, u8),
    Uuid(uuid::Uuid),
    /// JSON text, as binary `jsonb`.
    Jsonb(&'a str),
}

/// Row `row` of `array` as a value in `form`, or why it has none.
pub(crate) fn value<'a>(
    array: &'a dyn Array,
    row: usize,
    form: &Form,
) -> Result<Value<'a>, String> {
    if array.is_null(row) {
        return Ok(Value::Null);
    }
    let decimal = || match array.data_type() {
        DataType::Decimal128(_, scale) => u8::try_from(*scale)
            .map(|scale| (array.as_primitive::<Decimal128Type>(), scale))
            .map_err(|_| format!("a decimal's scale is {scale}")),
        other => Err(format!("a decimal column holds {other}")),
    };
    let text = || match array.data_type() {
        DataType::Utf8 => Ok(array.as_string::<i32>().value(row)),
        other => Err(format!("a uuid or json column holds {other}")),
    };
    Ok(match form {
        Form::Arrow => arrow_value(array, row)?,
        Form::Numeric => {
            let (values, scale) = decimal()?;
            Value::Numeric(values.value(row), scale)
        }
        Form::DecimalText => Value::OwnedText(decimal()?.0.value_as_string(row)),
        Form::Uuid => {
            let text = text()?;
            Value::Uuid(
                uuid::Uuid::try_parse(text).map_err(|e| format!("'{text}' is not a UUID: {e}"))?,
            )
        }
        Form::Jsonb => Value::Jsonb(text()?),
        Form::Text(_) => Value::Text(text()?),
    })
}

/// Row `row` of `array`, a column of one of the types that had a PostgreSQL type before
/// `decimal`, `uuid` and `json`, as a value.
fn arrow_value(array: &dyn Array, row: usize) -> Result<Value<'_>, String> {
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
            Value::OwnedText(v) => v.to_sql(ty, out),
            Value::Date(v) => v.to_sql(ty, out),
            Value::Timestamp(v) => v.to_sql(ty, out),
            Value::Numeric(value, scale) => {
                put_numeric(*value, *scale, out);
                Ok(IsNull::No)
            }
            Value::Uuid(v) => {
                out.put_slice(v.as_bytes());
                Ok(IsNull::No)
            }
            Value::Jsonb(text) => {
                out.put_u8(JSONB_VERSION);
                out.put_slice(text.as_bytes());
                Ok(IsNull::No)
            }
        }
    }

    fn accepts(_: &Type) -> bool {
        // The column's wire type comes from the same mapping as the value, so they always agree.
        true
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECIMAL: ColumnType = ColumnType::Decimal {
        precision: 12,
        scale: 2,
    };

    #[test]
    fn a_created_table_has_postgres_own_types() {
        let (name, ty) = pg_type(&DECIMAL.arrow_field("d", true)).unwrap();
        assert_eq!((name.as_ref(), ty), ("numeric(12,2)", Type::NUMERIC));
        let (name, ty) = pg_type(&ColumnType::Uuid.arrow_field("u", true)).unwrap();
        assert_eq!((name.as_ref(), ty), ("uuid", Type::UUID));
        let (name, ty) = pg_type(&ColumnType::Json.arrow_field("j", true)).unwrap();
        assert_eq!((name.as_ref(), ty), ("jsonb", Type::JSONB));
        let (name, _) = pg_type(&ColumnType::String.arrow_field("s", true)).unwrap();
        assert_eq!(name, "text");
    }

    #[test]
    fn an_existing_column_is_written_in_its_own_form_or_refused() {
        let cases = [
            (DECIMAL, "numeric", Form::Numeric),
            (DECIMAL, "numeric(12,2)", Form::Numeric),
            (DECIMAL, "numeric(20,4)", Form::Numeric),
            (DECIMAL, "text", Form::DecimalText),
            (DECIMAL, "character varying", Form::DecimalText),
            (ColumnType::Uuid, "uuid", Form::Uuid),
            (
                ColumnType::Uuid,
                "character varying(36)",
                Form::Text(Type::TEXT),
            ),
            (ColumnType::Json, "jsonb", Form::Jsonb),
            (ColumnType::Json, "json", Form::Text(Type::JSON)),
            (ColumnType::Json, "text", Form::Text(Type::TEXT)),
            (ColumnType::String, "uuid", Form::Arrow),
        ];
        for (ty, store, form) in cases {
            assert_eq!(Form::existing(&ty, store), Ok(form), "{ty} into {store}");
        }
        for (ty, store) in [
            (DECIMAL, "numeric(12,1)"),
            (DECIMAL, "numeric(11,2)"),
            (DECIMAL, "double precision"),
            (DECIMAL, "bigint"),
            (ColumnType::Uuid, "bytea"),
            (ColumnType::Json, "character(20)"),
        ] {
            assert!(Form::existing(&ty, store).is_err(), "{ty} into {store}");
        }
    }

    #[test]
    fn values_take_their_columns_form() {
        use arrow::array::{Decimal128Array, StringArray};
        let decimals = Decimal128Array::from(vec![Some(-1250), None])
            .with_precision_and_scale(12, 2)
            .unwrap();
        let texts = StringArray::from(vec!["67e55044-10b1-426f-9247-bb680e5fe0c8"]);
        let bytes = |value: Value<'_>| {
            let mut out = BytesMut::new();
            value.to_sql(&Type::TEXT, &mut out).unwrap();
            out.to_vec()
        };
        let numeric = value(&decimals, 0, &Form::Numeric).unwrap();
        assert!(matches!(numeric, Value::Numeric(-1250, 2)), "{numeric:?}");
        assert!(matches!(
            value(&decimals, 1, &Form::Numeric),
            Ok(Value::Null)
        ));
        let text = value(&decimals, 0, &Form::DecimalText).unwrap();
        assert_eq!(bytes(text), b"-12.50");
        let id = value(&texts, 0, &Form::Uuid).unwrap();
        assert_eq!(
            bytes(id),
            [
                0x67, 0xe5, 0x50, 0x44, 0x10, 0xb1, 0x42, 0x6f, 0x92, 0x47, 0xbb, 0x68, 0x0e, 0x5f,
                0xe0, 0xc8
            ]
        );
        let json = StringArray::from(vec![r#"{"a":1.50}"#]);
        assert_eq!(
            bytes(value(&json, 0, &Form::Jsonb).unwrap()),
            b"\x01{\"a\":1.50}"
        );
        assert!(value(&texts, 0, &Form::Numeric).is_err());
    }
}
