//! Arrow columns as PostgreSQL values.
//!
//! A `decimal`, `uuid` or `json` column goes over binary COPY in the form of the store column
//! it lands in ([`Form`]): a table sluice creates has `numeric(p,s)`, `uuid` and `jsonb`
//! columns, and one that exists may hold the values as text. Binary COPY takes each value in
//! the binary form of its column's type, and reads text sent for a `uuid` column, or jsonb's
//! form sent for a `text` column, as something else or not at all. The other types are sent as
//! their Arrow type maps ([`pg_type`]).
//!
//! A `list` of scalars is a PostgreSQL array of its element's type (`bigint[]`,
//! `numeric(20,4)[]`, `jsonb[]` for `list<json>`), sent in the binary array form that
//! `postgres-types` writes, each element in its own type's form. PostgreSQL checks an array's
//! element type, so an array column must be of exactly the element type sluice sends. PostgreSQL
//! arrays are rectangular, so a list of lists, structs or maps, a struct and a map are `jsonb`,
//! their JSON as [`crate::values`] writes it. A `list<json>` is `jsonb[]` rather than one `jsonb`
//! document, so a null element stays apart from a JSON `null`.

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
use sluice_core::schema::LIST_ELEMENT;
use tokio_postgres::types::{IsNull, Kind, ToSql, Type, to_sql_checked};

use super::numeric::put_numeric;
use crate::fit;
use crate::values::{self, Node};

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
        Some(ColumnType::List(element)) if !element.is_nested() => {
            let (name, ty) = pg_type(&element.arrow_field(LIST_ELEMENT, true))?;
            (Cow::Owned(format!("{name}[]")), array_type(&ty)?)
        }
        Some(ty) if ty.is_nested() => (Cow::Borrowed("jsonb"), Type::JSONB),
        _ => {
            let (name, ty) = arrow_pg_type(field.data_type())?;
            (Cow::Borrowed(name), ty)
        }
    })
}

/// The array type whose elements are of type `element`.
fn array_type(element: &Type) -> Result<Type, String> {
    Ok(match *element {
        Type::BOOL => Type::BOOL_ARRAY,
        Type::INT2 => Type::INT2_ARRAY,
        Type::INT4 => Type::INT4_ARRAY,
        Type::INT8 => Type::INT8_ARRAY,
        Type::FLOAT4 => Type::FLOAT4_ARRAY,
        Type::FLOAT8 => Type::FLOAT8_ARRAY,
        Type::TEXT => Type::TEXT_ARRAY,
        Type::DATE => Type::DATE_ARRAY,
        Type::TIMESTAMPTZ => Type::TIMESTAMPTZ_ARRAY,
        Type::NUMERIC => Type::NUMERIC_ARRAY,
        Type::UUID => Type::UUID_ARRAY,
        Type::JSON => Type::JSON_ARRAY,
        Type::JSONB => Type::JSONB_ARRAY,
        ref other => return Err(format!("sluice sends no array of {other}")),
    })
}

/// A type's name as the catalog's `format_type` spells it, from its name in sluice's DDL.
fn catalog_name(ddl: &str) -> &str {
    match ddl {
        "timestamptz" => "timestamp with time zone",
        other => other,
    }
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
    /// A list of scalars as a PostgreSQL array of this type, each element in its form.
    Array(Box<Form>, Type),
    /// A list, struct or map as its JSON after jsonb's version byte, into a `jsonb` column.
    DocumentJsonb,
    /// A list, struct or map as its JSON text, as this type: into a `json` or `text` column.
    DocumentText(Type),
}

impl Form {
    /// The form of a column of type `ty` in a table sluice created.
    pub(crate) fn created(ty: &ColumnType) -> Result<Form, String> {
        Ok(match ty {
            ColumnType::Decimal { .. } => Form::Numeric,
            ColumnType::Uuid => Form::Uuid,
            ColumnType::Json => Form::Jsonb,
            ColumnType::List(element) if !element.is_nested() => {
                let form = Form::created(element)?;
                let wire = form.wire_type(&element.arrow_field(LIST_ELEMENT, true))?;
                Form::Array(Box::new(form), array_type(&wire)?)
            }
            _ if ty.is_nested() => Form::DocumentJsonb,
            _ => Form::Arrow,
        })
    }

    /// The form of a column of type `ty` landing in a store column of type `store`, as
    /// `format_type` spells it (`numeric(12,2)`, `character varying(36)`); why there is none
    /// when the store column would not keep every value exactly.
    pub(crate) fn existing(ty: &ColumnType, store: &str) -> Result<Form, String> {
        let text = store == "text"
            || (store.split('(').next() == Some("character varying") && !store.ends_with("[]"));
        if ty.is_nested() {
            return Form::existing_nested(ty, store, text);
        }
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

    /// [`Form::existing`] for a list, struct or map: an array of the list's element type, or
    /// its JSON in `jsonb`, `json` or text.
    fn existing_nested(ty: &ColumnType, store: &str, text: bool) -> Result<Form, String> {
        let array = match ty {
            ColumnType::List(element) if !element.is_nested() => {
                let (name, _) = pg_type(&element.arrow_field(LIST_ELEMENT, true))?;
                Some((element, catalog_name(&name).to_owned()))
            }
            _ => None,
        };
        Ok(match (store, &array) {
            ("jsonb", _) => Form::DocumentJsonb,
            ("json", _) => Form::DocumentText(Type::JSON),
            _ if text => Form::DocumentText(Type::TEXT),
            (_, Some((element, _))) if store.ends_with("[]") => {
                let store_element = store.trim_end_matches("[]");
                let form = Form::element(element, store_element)
                    .map_err(|why| format!("its elements are {store_element}, and {why}"))?;
                let wire = form.wire_type(&element.arrow_field(LIST_ELEMENT, true))?;
                Form::Array(Box::new(form), array_type(&wire)?)
            }
            (_, Some((_, name))) => {
                return Err(format!(
                    "sluice writes a {ty} into {name}[], or its JSON into jsonb, json or text"
                ));
            }
            (_, None) => {
                return Err(format!(
                    "sluice writes a {ty} as its JSON, into jsonb, json or text"
                ));
            }
        })
    }

    /// The form of a list's elements of type `ty` in an array column whose elements are
    /// `store`. PostgreSQL refuses an array whose element type is not the column's, so that is
    /// the type sluice sends, with no conversion on the way.
    fn element(ty: &ColumnType, store: &str) -> Result<Form, String> {
        let (name, _) = pg_type(&ty.arrow_field(LIST_ELEMENT, true))?;
        let own = catalog_name(&name);
        let form = match ty {
            ColumnType::Decimal { .. } => match Form::existing(ty, store)? {
                Form::DecimalText if store != "text" => None,
                form => Some(form),
            },
            ColumnType::Uuid | ColumnType::Json => match Form::existing(ty, store) {
                Ok(Form::Text(_)) if !matches!(store, "text" | "json") => None,
                Ok(form) => Some(form),
                Err(_) => None,
            },
            _ => (store == own).then_some(Form::Arrow),
        };
        form.ok_or_else(|| {
            let types = match ty {
                ColumnType::Decimal { .. } => "numeric or text",
                ColumnType::Uuid => "uuid or text",
                ColumnType::Json => "jsonb, json or text",
                _ => own,
            };
            format!("sluice sends each {ty} as {types}")
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
            Form::Array(_, ty) => ty.clone(),
            Form::DocumentJsonb => Type::JSONB,
            Form::DocumentText(ty) => ty.clone(),
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
    /// A nested value's JSON, as binary `jsonb`.
    OwnedJsonb(String),
    /// A list's elements, as a PostgreSQL array.
    Array(Vec<Value<'a>>),
}

/// One column of a batch, ready to give its values in their form.
pub(crate) enum Column<'a> {
    /// Each value read from the array as it is asked for.
    Values(&'a dyn Array, &'a Form),
    /// A nested value's JSON, after jsonb's version byte when `jsonb` is true.
    Document { node: Node<'a>, jsonb: bool },
}

impl<'a> Column<'a> {
    /// The column `array`, of the layout's field `field`, to be sent in `form`.
    pub(crate) fn new(field: &Field, array: &'a dyn Array, form: &'a Form) -> Result<Self, String> {
        Ok(match form {
            Form::DocumentJsonb | Form::DocumentText(_) => Column::Document {
                node: Node::document(field, array)?,
                jsonb: *form == Form::DocumentJsonb,
            },
            _ => Column::Values(array, form),
        })
    }

    /// The value at `row`, or why it has none.
    pub(crate) fn value(&self, row: usize) -> Result<Value<'a>, String> {
        match self {
            Column::Values(array, form) => value(*array, row, form),
            Column::Document { node, .. } if node.is_null(row) => Ok(Value::Null),
            Column::Document { node, jsonb } => {
                let text = node.document_text(row)?;
                Ok(if *jsonb {
                    Value::OwnedJsonb(text)
                } else {
                    Value::OwnedText(text)
                })
            }
        }
    }
}

/// Row `row` of `array` as a value in `form`, or why it has none.
fn value<'a>(array: &'a dyn Array, row: usize, form: &Form) -> Result<Value<'a>, String> {
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
        Form::DecimalText => Value::OwnedText(values::decimal_text(decimal()?.0, row)?),
        Form::Uuid => {
            let text = text()?;
            Value::Uuid(
                uuid::Uuid::try_parse(text).map_err(|e| format!("'{text}' is not a UUID: {e}"))?,
            )
        }
        Form::Jsonb => Value::Jsonb(text()?),
        Form::Text(_) => Value::Text(text()?),
        Form::Array(element, _) => {
            let list = values::list(array)?;
            let items = list.values().as_ref();
            let elements = values::span(list.value_offsets(), row)?
                .enumerate()
                .map(|(n, at)| {
                    value(items, at, element).map_err(|e| format!("element {}: {e}", n + 1))
                })
                .collect::<Result<_, _>>()?;
            Value::Array(elements)
        }
        Form::DocumentJsonb | Form::DocumentText(_) => {
            return Err("a nested value is written by its column, not by value".into());
        }
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
            Value::OwnedJsonb(text) => {
                out.put_u8(JSONB_VERSION);
                out.put_slice(text.as_bytes());
                Ok(IsNull::No)
            }
            // `postgres-types` writes the array's header and each element; the slice's own
            // `to_sql` panics on a type that is not an array, so that is refused first.
            Value::Array(elements) => match ty.kind() {
                Kind::Array(_) => elements.as_slice().to_sql(ty, out),
                _ => Err(format!("a list sent as {ty}, which is no array type").into()),
            },
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
            (ColumnType::Uuid, "character varying(36)[]"),
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

    #[test]
    fn a_list_of_scalars_is_an_array_and_the_rest_jsonb() {
        let cases = [
            (
                ColumnType::list(ColumnType::Int64),
                "bigint[]",
                Type::INT8_ARRAY,
            ),
            (
                ColumnType::list(ColumnType::UInt8),
                "smallint[]",
                Type::INT2_ARRAY,
            ),
            (
                ColumnType::list(DECIMAL),
                "numeric(12,2)[]",
                Type::NUMERIC_ARRAY,
            ),
            (
                ColumnType::list(ColumnType::Uuid),
                "uuid[]",
                Type::UUID_ARRAY,
            ),
            (
                ColumnType::list(ColumnType::Timestamp),
                "timestamptz[]",
                Type::TIMESTAMPTZ_ARRAY,
            ),
            (
                ColumnType::list(ColumnType::Json),
                "jsonb[]",
                Type::JSONB_ARRAY,
            ),
            (
                ColumnType::list(ColumnType::list(ColumnType::Int64)),
                "jsonb",
                Type::JSONB,
            ),
            (ColumnType::map(ColumnType::Float64), "jsonb", Type::JSONB),
        ];
        for (ty, name, wire) in cases {
            let field = ty.arrow_field("c", true);
            let (created, created_wire) = pg_type(&field).unwrap();
            assert_eq!((created.as_ref(), &created_wire), (name, &wire), "{ty}");
            let form = Form::created(&ty).unwrap();
            assert_eq!(form.wire_type(&field).unwrap(), wire, "{ty}");
        }
    }

    #[test]
    fn an_existing_array_column_must_be_of_the_element_type_sluice_sends() {
        let ints = ColumnType::list(ColumnType::Int64);
        let arrow = |wire| Form::Array(Box::new(Form::Arrow), wire);
        let decimals = ColumnType::list(ColumnType::Decimal {
            precision: 20,
            scale: 4,
        });
        let cases = [
            (ints.clone(), "bigint[]", arrow(Type::INT8_ARRAY)),
            (ints.clone(), "jsonb", Form::DocumentJsonb),
            (ints.clone(), "json", Form::DocumentText(Type::JSON)),
            (ints.clone(), "text", Form::DocumentText(Type::TEXT)),
            (
                ColumnType::list(ColumnType::Timestamp),
                "timestamp with time zone[]",
                arrow(Type::TIMESTAMPTZ_ARRAY),
            ),
            (
                decimals.clone(),
                "numeric[]",
                Form::Array(Box::new(Form::Numeric), Type::NUMERIC_ARRAY),
            ),
            (
                decimals.clone(),
                "numeric(38,6)[]",
                Form::Array(Box::new(Form::Numeric), Type::NUMERIC_ARRAY),
            ),
            (
                decimals.clone(),
                "text[]",
                Form::Array(Box::new(Form::DecimalText), Type::TEXT_ARRAY),
            ),
            (
                ColumnType::list(ColumnType::Uuid),
                "text[]",
                Form::Array(Box::new(Form::Text(Type::TEXT)), Type::TEXT_ARRAY),
            ),
            (
                ColumnType::list(ColumnType::Json),
                "json[]",
                Form::Array(Box::new(Form::Text(Type::JSON)), Type::JSON_ARRAY),
            ),
            (
                ColumnType::Struct(vec![sluice_core::schema::StructField::new(
                    "a",
                    ColumnType::Int8,
                )]),
                "jsonb",
                Form::DocumentJsonb,
            ),
        ];
        for (ty, store, form) in cases {
            assert_eq!(Form::existing(&ty, store), Ok(form), "{ty} into {store}");
        }
        let refused = [
            (
                ints.clone(),
                "integer[]",
                "sluice sends each int64 as bigint",
            ),
            (
                ints.clone(),
                "numeric[]",
                "sluice sends each int64 as bigint",
            ),
            (
                ints.clone(),
                "bigint",
                "into bigint[], or its JSON into jsonb",
            ),
            (
                decimals.clone(),
                "numeric(20,2)[]",
                "keeps 2 digits after the point",
            ),
            (decimals, "double precision[]", "never through a float"),
            (
                ColumnType::list(ColumnType::Timestamp),
                "timestamp without time zone[]",
                "as timestamp with time zone",
            ),
            (
                ColumnType::list(ColumnType::Uuid),
                "character varying[]",
                "as uuid or text",
            ),
            (
                ColumnType::list(ColumnType::String),
                "character varying(10)[]",
                "as text",
            ),
            (
                ColumnType::map(ColumnType::Int8),
                "hstore",
                "as its JSON, into jsonb, json or text",
            ),
        ];
        for (ty, store, why) in refused {
            let error = Form::existing(&ty, store).unwrap_err();
            assert!(error.contains(why), "{ty} into {store}: {error}");
        }
    }

    #[test]
    fn a_list_goes_as_a_binary_array_with_its_nulls() {
        use arrow::array::{ListBuilder, UInt64Builder};
        let ty = ColumnType::list(ColumnType::UInt64);
        let mut builder = ListBuilder::new(UInt64Builder::new()).with_field(std::sync::Arc::new(
            ColumnType::UInt64.arrow_field(LIST_ELEMENT, true),
        ));
        builder.values().append_value(7);
        builder.values().append_null();
        builder.append(true);
        builder.append(true);
        builder.values().append_value(u64::MAX);
        builder.append(true);
        let array = builder.finish();
        let field = ty.arrow_field("c", true);
        let form = Form::created(&ty).unwrap();
        let column = Column::new(&field, &array, &form).unwrap();
        let mut out = BytesMut::new();
        column
            .value(0)
            .unwrap()
            .to_sql(&Type::INT8_ARRAY, &mut out)
            .unwrap();
        // One dimension, a null among the elements, bigint's OID 20, 2 elements from index 1,
        // then each element's length and bytes, -1 for the null.
        let mut want = vec![0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 20, 0, 0, 0, 2, 0, 0, 0, 1];
        want.extend_from_slice(&[0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(out.to_vec(), want);
        assert!(matches!(column.value(1), Ok(Value::Array(items)) if items.is_empty()));
        let error = column.value(2).unwrap_err();
        assert!(
            error.contains("element 1") && error.contains("too large for a bigint"),
            "{error}"
        );
        // A slice's array form refuses a type that is not an array, rather than panic.
        let value = column.value(0).unwrap();
        assert!(value.to_sql(&Type::INT8, &mut BytesMut::new()).is_err());
    }
}
