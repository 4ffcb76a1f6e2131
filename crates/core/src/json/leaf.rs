//! The values inside a `list`, `struct` or `map`, read from their JSON text by the type they
//! must have, as strictly as the table's own columns are.
//!
//! A number in quotes is taken where the door takes one for a column; a timestamp given as a
//! number is Unix seconds on the ClickHouse door and microseconds elsewhere, as for a column.
//! A decimal is exact or refused, a UUID is kept in its canonical form, and a `json` value is
//! kept as the text sent.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Date32Builder, Decimal128Builder, Float64Array, Int64Array,
    StringBuilder, TimestampMicrosecondBuilder, UInt64Array,
};
use arrow::compute::cast;
use arrow::datatypes::DataType;

use super::JsonDialect;
use crate::schema::ColumnType;
use crate::text::{self, Int};
use crate::values;

/// One scalar type's values under construction.
pub(super) struct Leaf {
    ty: ColumnType,
    values: Values,
}

enum Values {
    Bool(BooleanBuilder),
    /// Signed integers of any width, each checked against the column's range as it comes.
    Int(Vec<Option<i64>>),
    /// Unsigned integers of any width, checked the same way.
    UInt(Vec<Option<u64>>),
    Float(Vec<Option<f64>>),
    /// `string`, `uuid` and `json`.
    Text(StringBuilder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    Decimal {
        builder: Decimal128Builder,
        precision: u8,
        scale: u8,
    },
}

impl Leaf {
    /// Values of `ty`, a type that holds no other.
    pub(super) fn new(ty: &ColumnType) -> Self {
        let values = match ty {
            ColumnType::Bool => Values::Bool(BooleanBuilder::new()),
            ColumnType::Int8 | ColumnType::Int16 | ColumnType::Int32 | ColumnType::Int64 => {
                Values::Int(Vec::new())
            }
            ColumnType::UInt8 | ColumnType::UInt16 | ColumnType::UInt32 | ColumnType::UInt64 => {
                Values::UInt(Vec::new())
            }
            ColumnType::Float32 | ColumnType::Float64 => Values::Float(Vec::new()),
            ColumnType::Date => Values::Date(Date32Builder::new()),
            ColumnType::Timestamp => Values::Timestamp(
                TimestampMicrosecondBuilder::new().with_data_type(ty.arrow_type()),
            ),
            &ColumnType::Decimal { precision, scale } => Values::Decimal {
                builder: Decimal128Builder::new().with_data_type(ty.arrow_type()),
                precision,
                scale,
            },
            _ => Values::Text(StringBuilder::new()),
        };
        Self {
            ty: ty.clone(),
            values,
        }
    }

    pub(super) fn push_null(&mut self) {
        match &mut self.values {
            Values::Bool(b) => b.append_null(),
            Values::Int(v) => v.push(None),
            Values::UInt(v) => v.push(None),
            Values::Float(v) => v.push(None),
            Values::Text(b) => b.append_null(),
            Values::Date(b) => b.append_null(),
            Values::Timestamp(b) => b.append_null(),
            Values::Decimal { builder, .. } => builder.append_null(),
        }
    }

    /// Appends the JSON value `raw`, not `null`, or says why it does not fit.
    pub(super) fn push(&mut self, raw: &str, dialect: JsonDialect) -> Result<(), String> {
        let ty = &self.ty;
        match &mut self.values {
            Values::Bool(b) => b.append_value(match raw {
                "true" => true,
                "false" => false,
                _ => return Err(expected("a boolean", raw)),
            }),
            Values::Int(v) => v.push(Some(signed(ty, &number(raw, dialect)?)?)),
            Values::UInt(v) => v.push(Some(unsigned(ty, &number(raw, dialect)?)?)),
            Values::Float(v) => v.push(Some(float(&number(raw, dialect)?)?)),
            Values::Text(b) => match ty {
                ColumnType::Json => b.append_value(raw),
                ColumnType::Uuid => b.append_value(values::canonical_uuid(&string(raw)?)?),
                _ => b.append_value(string(raw)?),
            },
            Values::Date(b) => b.append_value(date(raw)?),
            Values::Timestamp(b) => b.append_value(timestamp(raw, dialect)?),
            Values::Decimal {
                builder,
                precision,
                scale,
            } => {
                // A decimal may come in quotes at every door, so no float reader sees it.
                let digits = number(raw, JsonDialect::ClickHouse)?;
                builder.append_value(text::parse_decimal(&digits, *precision, *scale)?);
            }
        }
        Ok(())
    }

    /// The values as an array of the type's Arrow type.
    pub(super) fn finish(&mut self) -> Result<ArrayRef, String> {
        let widest: ArrayRef = match &mut self.values {
            Values::Bool(b) => return Ok(Arc::new(b.finish())),
            Values::Text(b) => return Ok(Arc::new(b.finish())),
            Values::Date(b) => return Ok(Arc::new(b.finish())),
            Values::Timestamp(b) => return Ok(Arc::new(b.finish())),
            Values::Decimal { builder, .. } => return Ok(Arc::new(builder.finish())),
            Values::Int(v) => Arc::new(Int64Array::from(std::mem::take(v))),
            Values::UInt(v) => Arc::new(UInt64Array::from(std::mem::take(v))),
            Values::Float(v) => Arc::new(Float64Array::from(std::mem::take(v))),
        };
        // Every value was checked against the type's range, so the cast only narrows.
        let target: DataType = self.ty.arrow_type();
        cast(&widest, &target).map_err(|e| e.to_string())
    }
}

/// The text of a number: as it is, or inside quotes where the door takes a number in quotes.
fn number(raw: &str, dialect: JsonDialect) -> Result<Cow<'_, str>, String> {
    match raw.as_bytes().first() {
        Some(b'-' | b'0'..=b'9') => Ok(Cow::Borrowed(raw)),
        Some(b'"') if dialect.takes_quoted_numbers() => string(raw),
        Some(b'"') => Err(format!(
            "expected a number, found a string ({raw}): numbers are sent without quotes"
        )),
        _ => Err(expected("a number", raw)),
    }
}

fn signed(ty: &ColumnType, text: &str) -> Result<i64, String> {
    let (min, max) = match ty {
        ColumnType::Int8 => (i8::MIN.into(), i8::MAX.into()),
        ColumnType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        ColumnType::Int32 => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN, i64::MAX),
    };
    let value = match whole(text)? {
        Int::Signed(n) => Some(n),
        Int::Unsigned(n) => i64::try_from(n).ok(),
    };
    value
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("{text} is out of range for {ty}"))
}

fn unsigned(ty: &ColumnType, text: &str) -> Result<u64, String> {
    let max = match ty {
        ColumnType::UInt8 => u8::MAX.into(),
        ColumnType::UInt16 => u16::MAX.into(),
        ColumnType::UInt32 => u32::MAX.into(),
        _ => u64::MAX,
    };
    match whole(text)? {
        Int::Unsigned(n) if n <= max => Ok(n),
        _ => Err(format!("{text} is out of range for {ty}")),
    }
}

/// A whole number; a fraction or an exponent is refused, never truncated.
fn whole(text: &str) -> Result<Int, String> {
    if let Some(int) = text::parse_int(text) {
        return Ok(int);
    }
    if text.contains(['.', 'e', 'E']) && text.parse::<f64>().is_ok() {
        return Err(format!(
            "{text} is not an integer: a number with a fraction or an exponent does not fit an \
             integer"
        ));
    }
    Err(format!("'{text}' is not a number"))
}

fn float(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() => Ok(value),
        Ok(_) => Err(format!("{text} is out of range")),
        Err(_) => Err(format!("'{text}' is not a number")),
    }
}

/// The content of a JSON string.
fn string(raw: &str) -> Result<Cow<'_, str>, String> {
    if !raw.starts_with('"') {
        return Err(expected("a string", raw));
    }
    match serde_json::from_str::<&str>(raw) {
        Ok(borrowed) => Ok(Cow::Borrowed(borrowed)),
        // A string with escapes cannot be borrowed.
        Err(_) => serde_json::from_str::<String>(raw)
            .map(Cow::Owned)
            .map_err(|e| e.to_string()),
    }
}

/// Days since 1970-01-01: `"YYYY-MM-DD"`, or a whole number of days.
fn date(raw: &str) -> Result<i32, String> {
    if raw.starts_with('"') {
        let text = string(raw)?;
        return text::parse_date(&text).ok_or_else(|| format!("'{text}' is not a date"));
    }
    let days = signed(&ColumnType::Int32, &number(raw, JsonDialect::Ndjson)?)?;
    i32::try_from(days).map_err(|_| format!("{raw} days is out of range for a date"))
}

/// Microseconds since 1970-01-01 UTC: text, or a number of seconds on the ClickHouse door and of
/// microseconds elsewhere.
fn timestamp(raw: &str, dialect: JsonDialect) -> Result<i64, String> {
    if raw.starts_with('"') {
        let text = string(raw)?;
        return text::parse_timestamp(&text).ok_or_else(|| format!("'{text}' is not a timestamp"));
    }
    let digits = number(raw, JsonDialect::Ndjson)?;
    if dialect == JsonDialect::ClickHouse {
        return text::parse_timestamp(&digits)
            .ok_or_else(|| format!("{raw} seconds is not a timestamp sluice can hold"));
    }
    signed(&ColumnType::Int64, &digits)
}

/// "expected a boolean, found a string".
pub(super) fn expected(what: &str, raw: &str) -> String {
    format!("expected {what}, found {}", kind_of(raw))
}

/// A word for the kind of the JSON value `raw`, for error messages.
pub(super) fn kind_of(raw: &str) -> &'static str {
    match raw.as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}
