//! The table's columns being built, a row at a time, from values in the body's column order.
//!
//! Every format decoder hands values here: text formats as text, which is parsed by the column's
//! type ([`super::text`]), binary formats as typed values. Each value is converted into the
//! table column's type with a range check, so nothing is wrapped around or truncated silently.
//! A column a row leaves out is null, or refused when the table requires it.
//!
//! A decimal is converted exactly or refused, never rounded: its text must fit the column
//! ([`crate::values::check_decimal`]), and a binary decimal of another scale must rescale
//! without losing a digit. A `uuid` column takes text, which [`crate::values::conform`]
//! canonicalizes afterwards, or a binary UUID; a `json` column takes text only, which `conform`
//! checks is JSON.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder,
    Float64Builder, Int8Builder, Int16Builder, Int32Builder, Int64Builder, RecordBatch,
    StringBuilder, TimestampMicrosecondBuilder, UInt8Builder, UInt16Builder, UInt32Builder,
    UInt64Builder, new_null_array,
};
use arrow::datatypes::DataType;

use super::text;
use crate::error::DecodeError;
use crate::name::printable;
use crate::options::DecodeOptions;
use crate::schema::{ColumnType, TableSchema};

/// One value from the body, before it is converted into its column's type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    /// Text, parsed by the column's type as ClickHouse's text formats write it.
    Text(&'a str),
    /// Days since 1970-01-01.
    Days(i32),
    /// Microseconds since 1970-01-01 00:00:00 UTC.
    Micros(i64),
    /// A binary decimal: its unscaled integer and its scale, the value being
    /// `unscaled * 10^-scale`.
    Decimal(i128, u8),
    /// A binary UUID, as one 128-bit number (its text's 32 hex digits in order).
    Uuid(u128),
}

/// The kind of values a body's column of some binary type gives, for [`can_take`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Bool,
    Whole,
    Float,
    Text,
    Date,
    Time,
    Decimal,
    Uuid,
    /// Addresses, Enum names and the like: judged value by value.
    Other,
}

/// Whether a body's column whose type gives values of `kind` can go into a column of `ty`.
/// Only the pairs where no value ever could are refused here, before a value is read: decimals
/// and UUIDs into a column that takes neither, and into `decimal`, `uuid` and `json` columns
/// what they never take. Every other pair is judged value by value.
pub(crate) fn can_take(ty: &ColumnType, kind: Kind) -> bool {
    use ColumnType as T;
    let number = matches!(
        ty,
        T::Int8
            | T::Int16
            | T::Int32
            | T::Int64
            | T::UInt8
            | T::UInt16
            | T::UInt32
            | T::UInt64
            | T::Float32
            | T::Float64
    );
    match (ty, kind) {
        (_, Kind::Decimal) => number || matches!(ty, T::Decimal { .. } | T::String),
        (_, Kind::Uuid) => matches!(ty, T::Uuid | T::String),
        (T::Decimal { .. }, kind) => matches!(kind, Kind::Whole | Kind::Text),
        (T::Uuid | T::Json, kind) => kind == Kind::Text,
        (T::List(_) | T::Struct(_) | T::Map(_), _) => false,
        _ => true,
    }
}

/// Where a body's column goes: a column of the table, or nowhere (an unknown column the insert
/// asked to skip).
pub(crate) type Target = Option<usize>;

/// The table's columns under construction.
pub(crate) struct Columns<'s> {
    schema: &'s TableSchema,
    /// A null for a required column is its type's default (`input_format_null_as_default`).
    null_as_default: bool,
    targets: Vec<Target>,
    builders: Vec<Builder>,
    filled: Vec<bool>,
    rows: usize,
}

impl<'s> Columns<'s> {
    /// Columns for a body whose values come in the order of `names` (the body's header, the
    /// insert's column list, or the table's columns). A name the table lacks is refused, or
    /// skipped when `options.skip_unknown_fields` says so; a required column no name covers is
    /// refused.
    pub(crate) fn new(
        schema: &'s TableSchema,
        names: &[String],
        options: &DecodeOptions,
    ) -> Result<Self, DecodeError> {
        let targets = targets(schema, names, options.skip_unknown_fields)?;
        if let Some(missing) = schema
            .columns()
            .iter()
            .enumerate()
            .find(|(i, c)| !c.nullable && !targets.contains(&Some(*i)))
        {
            return Err(DecodeError::new(
                None,
                Some(missing.1.name.clone()),
                "the column is required (not nullable) but the insert leaves it out".to_owned(),
            ));
        }
        if let Some(nested) = targets
            .iter()
            .flatten()
            .map(|&i| &schema.columns()[i])
            .find(|c| c.ty.is_nested())
        {
            return Err(DecodeError::new(
                None,
                Some(nested.name.clone()),
                format!(
                    "the column is {}, which this format does not carry yet; send it as \
                     JSONEachRow",
                    nested.ty.clickhouse_name()
                ),
            ));
        }
        let builders = schema
            .columns()
            .iter()
            .map(|c| Builder::new(&c.ty))
            .collect();
        Ok(Self {
            schema,
            null_as_default: options.null_as_default,
            filled: vec![false; schema.columns().len()],
            targets,
            builders,
            rows: 0,
        })
    }

    /// The table column each of the body's columns goes to.
    pub(crate) fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// The type of the table column the body's column `index` goes to.
    pub(crate) fn target_type(&self, index: usize) -> Option<&ColumnType> {
        let target = (*self.targets.get(index)?)?;
        Some(&self.schema.columns()[target].ty)
    }

    /// How many values a row holds: one per column of the body.
    pub(crate) fn width(&self) -> usize {
        self.targets.len()
    }

    /// Rows finished so far.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Puts the body's column `index` of the current row. The error names the column.
    pub(crate) fn put(&mut self, index: usize, value: Value<'_>) -> Result<(), DecodeError> {
        let Some(Some(target)) = self.targets.get(index).copied() else {
            return Ok(());
        };
        let fail = |message: String| {
            let column = &self.schema.columns()[target];
            DecodeError::new(None, Some(column.name.clone()), message)
        };
        if self.filled[target] {
            return Err(fail("the row gives the column twice".to_owned()));
        }
        self.append(target, value).map_err(fail)?;
        self.filled[target] = true;
        Ok(())
    }

    /// Appends a value of the body's column `index` in a block read column by column: the
    /// columns' values go in whole, one after the other, and [`Columns::end_block`] follows.
    /// The error is the value's, without its row or column, which the caller knows.
    pub(crate) fn push(&mut self, index: usize, value: Value<'_>) -> Result<(), String> {
        match self.targets.get(index).copied() {
            Some(Some(target)) => self.append(target, value),
            _ => Ok(()),
        }
    }

    /// Appends `value` to the table's column `target`: a null for a required column is its
    /// type's default when the insert asked for that, else refused.
    fn append(&mut self, target: usize, value: Value<'_>) -> Result<(), String> {
        let column = &self.schema.columns()[target];
        let builder = &mut self.builders[target];
        if value == Value::Null && !column.nullable {
            if !self.null_as_default {
                return Err(
                    "the column is required (not nullable) and the row has null; \
                     input_format_null_as_default=1 stores its type's default instead"
                        .to_owned(),
                );
            }
            builder.push_default(&column.ty);
            return Ok(());
        }
        builder.push(&column.ty, value)
    }

    /// Ends a block of `rows` rows put column by column: the table's columns the body does not
    /// name are null (a required one was refused when the columns were made).
    pub(crate) fn end_block(&mut self, rows: usize) {
        for (i, column) in self.schema.columns().iter().enumerate() {
            if !self.targets.contains(&Some(i)) {
                for _ in 0..rows {
                    self.builders[i].push_null();
                }
                debug_assert!(column.nullable, "a required column is in the body");
            }
        }
        self.rows += rows;
    }

    /// Ends the current row: the columns it left out are null.
    pub(crate) fn end_row(&mut self) -> Result<(), DecodeError> {
        for (i, filled) in self.filled.iter_mut().enumerate() {
            if !*filled {
                let column = &self.schema.columns()[i];
                if !column.nullable {
                    return Err(DecodeError::new(
                        None,
                        Some(column.name.clone()),
                        "the column is required (not nullable) and the row leaves it out"
                            .to_owned(),
                    ));
                }
                self.builders[i]
                    .push(&column.ty, Value::Null)
                    .map_err(|e| DecodeError::new(None, Some(column.name.clone()), e))?;
            }
            *filled = false;
        }
        self.rows += 1;
        Ok(())
    }

    /// The rows as a batch of the table's schema.
    pub(crate) fn finish(mut self) -> Result<RecordBatch, DecodeError> {
        let arrays: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        RecordBatch::try_new(self.schema.arrow().clone(), arrays)
            .map_err(|e| DecodeError::new(None, None, e.to_string()))
    }
}

fn targets(
    schema: &TableSchema,
    names: &[String],
    skip_unknown: bool,
) -> Result<Vec<Target>, DecodeError> {
    let mut targets = Vec::with_capacity(names.len());
    for name in names {
        let target = schema.columns().iter().position(|c| &c.name == name);
        if target.is_none() && !skip_unknown {
            let known: Vec<&str> = schema.columns().iter().map(|c| c.name.as_str()).collect();
            return Err(DecodeError::new(
                None,
                Some(printable(name)),
                format!(
                    "the table has no such column (it has: {}); \
                     input_format_skip_unknown_fields=1 skips it",
                    known.join(", ")
                ),
            ));
        }
        if target.is_some() && targets.contains(&target) {
            return Err(DecodeError::new(
                None,
                Some(printable(name)),
                "the column is named twice".to_owned(),
            ));
        }
        targets.push(target);
    }
    Ok(targets)
}

/// One column's Arrow builder.
enum Builder {
    Bool(BooleanBuilder),
    Int8(Int8Builder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    UInt8(UInt8Builder),
    UInt16(UInt16Builder),
    UInt32(UInt32Builder),
    UInt64(UInt64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    String(StringBuilder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    Decimal(Decimal128Builder),
    /// A `list`, `struct` or `map` column the body does not name: all null.
    Nulls(DataType, usize),
}

impl Builder {
    fn new(ty: &ColumnType) -> Self {
        match ty {
            ColumnType::Bool => Self::Bool(BooleanBuilder::new()),
            ColumnType::Int8 => Self::Int8(Int8Builder::new()),
            ColumnType::Int16 => Self::Int16(Int16Builder::new()),
            ColumnType::Int32 => Self::Int32(Int32Builder::new()),
            ColumnType::Int64 => Self::Int64(Int64Builder::new()),
            ColumnType::UInt8 => Self::UInt8(UInt8Builder::new()),
            ColumnType::UInt16 => Self::UInt16(UInt16Builder::new()),
            ColumnType::UInt32 => Self::UInt32(UInt32Builder::new()),
            ColumnType::UInt64 => Self::UInt64(UInt64Builder::new()),
            ColumnType::Float32 => Self::Float32(Float32Builder::new()),
            ColumnType::Float64 => Self::Float64(Float64Builder::new()),
            ColumnType::Date => Self::Date(Date32Builder::new()),
            ColumnType::Timestamp => {
                Self::Timestamp(TimestampMicrosecondBuilder::new().with_data_type(ty.arrow_type()))
            }
            ColumnType::Decimal { .. } => {
                Self::Decimal(Decimal128Builder::new().with_data_type(ty.arrow_type()))
            }
            // `uuid` and `json` are text told apart by the field's metadata; `push` tells them
            // apart by the column's type.
            ColumnType::String | ColumnType::Uuid | ColumnType::Json => {
                Self::String(StringBuilder::new())
            }
            ColumnType::List(_) | ColumnType::Struct(_) | ColumnType::Map(_) => {
                Self::Nulls(ty.arrow_type(), 0)
            }
        }
    }

    /// Appends `value` converted into the column's type `ty`, or says why it does not fit.
    fn push(&mut self, ty: &ColumnType, value: Value<'_>) -> Result<(), String> {
        if value == Value::Null {
            self.push_null();
            return Ok(());
        }
        match self {
            Self::Bool(b) => b.append_value(to_bool(value)?),
            Self::Int8(b) => b.append_value(to_int(value, ty)?),
            Self::Int16(b) => b.append_value(to_int(value, ty)?),
            Self::Int32(b) => b.append_value(to_int(value, ty)?),
            Self::Int64(b) => b.append_value(to_int(value, ty)?),
            Self::UInt8(b) => b.append_value(to_int(value, ty)?),
            Self::UInt16(b) => b.append_value(to_int(value, ty)?),
            Self::UInt32(b) => b.append_value(to_int(value, ty)?),
            Self::UInt64(b) => b.append_value(to_int(value, ty)?),
            Self::Float32(b) => b.append_value(to_float(value)? as f32),
            Self::Float64(b) => b.append_value(to_float(value)?),
            Self::String(b) => match ty {
                ColumnType::Uuid => b.append_value(to_uuid(value)?),
                ColumnType::Json => b.append_value(to_json(value)?),
                _ => b.append_value(to_text(value)?),
            },
            Self::Date(b) => b.append_value(to_days(value)?),
            Self::Timestamp(b) => b.append_value(to_micros(value)?),
            Self::Decimal(b) => b.append_value(to_decimal(value, ty)?),
            Self::Nulls(..) => return Err(mismatch(value, &ty.name())),
        }
        Ok(())
    }

    /// The type's default, as ClickHouse stores one for a null: zero, false, the empty string,
    /// 1970-01-01, the nil UUID, and for `json` the empty object, as ClickHouse's `JSON` has.
    fn push_default(&mut self, ty: &ColumnType) {
        match self {
            Self::Bool(b) => b.append_value(false),
            Self::Int8(b) => b.append_value(0),
            Self::Int16(b) => b.append_value(0),
            Self::Int32(b) => b.append_value(0),
            Self::Int64(b) => b.append_value(0),
            Self::UInt8(b) => b.append_value(0),
            Self::UInt16(b) => b.append_value(0),
            Self::UInt32(b) => b.append_value(0),
            Self::UInt64(b) => b.append_value(0),
            Self::Float32(b) => b.append_value(0.0),
            Self::Float64(b) => b.append_value(0.0),
            Self::String(b) => b.append_value(match ty {
                ColumnType::Uuid => NIL_UUID,
                ColumnType::Json => "{}",
                _ => "",
            }),
            Self::Date(b) => b.append_value(0),
            Self::Timestamp(b) => b.append_value(0),
            Self::Decimal(b) => b.append_value(0),
            Self::Nulls(_, count) => *count += 1,
        }
    }

    fn push_null(&mut self) {
        match self {
            Self::Bool(b) => b.append_null(),
            Self::Int8(b) => b.append_null(),
            Self::Int16(b) => b.append_null(),
            Self::Int32(b) => b.append_null(),
            Self::Int64(b) => b.append_null(),
            Self::UInt8(b) => b.append_null(),
            Self::UInt16(b) => b.append_null(),
            Self::UInt32(b) => b.append_null(),
            Self::UInt64(b) => b.append_null(),
            Self::Float32(b) => b.append_null(),
            Self::Float64(b) => b.append_null(),
            Self::String(b) => b.append_null(),
            Self::Date(b) => b.append_null(),
            Self::Timestamp(b) => b.append_null(),
            Self::Decimal(b) => b.append_null(),
            Self::Nulls(_, count) => *count += 1,
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Bool(b) => Arc::new(b.finish()),
            Self::Int8(b) => Arc::new(b.finish()),
            Self::Int16(b) => Arc::new(b.finish()),
            Self::Int32(b) => Arc::new(b.finish()),
            Self::Int64(b) => Arc::new(b.finish()),
            Self::UInt8(b) => Arc::new(b.finish()),
            Self::UInt16(b) => Arc::new(b.finish()),
            Self::UInt32(b) => Arc::new(b.finish()),
            Self::UInt64(b) => Arc::new(b.finish()),
            Self::Float32(b) => Arc::new(b.finish()),
            Self::Float64(b) => Arc::new(b.finish()),
            Self::String(b) => ArrayBuilder::finish(b),
            Self::Date(b) => Arc::new(b.finish()),
            Self::Timestamp(b) => Arc::new(b.finish()),
            Self::Decimal(b) => Arc::new(b.finish()),
            Self::Nulls(data_type, count) => new_null_array(data_type, std::mem::take(count)),
        }
    }
}

/// The UUID a required `uuid` column stores for a null when the insert asks for defaults.
const NIL_UUID: &str = "00000000-0000-0000-0000-000000000000";

fn mismatch(value: Value<'_>, what: &str) -> String {
    let given = match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Int(n) => format!("the number {n}"),
        Value::UInt(n) => format!("the number {n}"),
        Value::Float(n) => format!("the number {n}"),
        Value::Text(t) => format!("'{}'", printable(t)),
        Value::Days(_) => "a date".to_owned(),
        Value::Micros(_) => "a date and time".to_owned(),
        Value::Decimal(unscaled, scale) => format!("the decimal {}", decimal_text(unscaled, scale)),
        Value::Uuid(id) => format!("the UUID {}", uuid_text(id)),
    };
    format!("{given} is not {what}")
}

fn to_bool(value: Value<'_>) -> Result<bool, String> {
    match value {
        Value::Bool(b) => Ok(b),
        Value::Int(0) | Value::UInt(0) => Ok(false),
        Value::Int(1) | Value::UInt(1) => Ok(true),
        Value::Text(t) => text::parse_bool(t).ok_or_else(|| mismatch(value, "a boolean")),
        _ => Err(mismatch(value, "a boolean")),
    }
}

/// A whole number in the range of `T`, the column's type `ty`.
fn to_int<T: TryFrom<i64> + TryFrom<u64>>(value: Value<'_>, ty: &ColumnType) -> Result<T, String> {
    let out_of_range = || format!("{} is out of range for {}", shown(value), ty.name());
    match value {
        Value::Int(n) => T::try_from(n).map_err(|_| out_of_range()),
        Value::UInt(n) => T::try_from(n).map_err(|_| out_of_range()),
        Value::Bool(b) => T::try_from(u64::from(b)).map_err(|_| out_of_range()),
        Value::Decimal(unscaled, scale) => {
            let whole =
                rescale(unscaled, scale, 0).map_err(|_| mismatch(value, "a whole number"))?;
            match (i64::try_from(whole), u64::try_from(whole)) {
                (Ok(n), _) => T::try_from(n).map_err(|_| out_of_range()),
                (_, Ok(n)) => T::try_from(n).map_err(|_| out_of_range()),
                _ => Err(out_of_range()),
            }
        }
        Value::Text(t) => match text::parse_int(t) {
            Some(text::Int::Signed(n)) => T::try_from(n).map_err(|_| out_of_range()),
            Some(text::Int::Unsigned(n)) => T::try_from(n).map_err(|_| out_of_range()),
            None => Err(mismatch(value, "a whole number")),
        },
        _ => Err(mismatch(value, "a whole number")),
    }
}

fn shown(value: Value<'_>) -> String {
    match value {
        Value::Int(n) => n.to_string(),
        Value::UInt(n) => n.to_string(),
        Value::Text(t) => printable(t),
        Value::Decimal(unscaled, scale) => decimal_text(unscaled, scale),
        other => format!("{other:?}"),
    }
}

fn to_float(value: Value<'_>) -> Result<f64, String> {
    match value {
        Value::Float(f) => Ok(f),
        Value::Int(n) => Ok(n as f64),
        Value::UInt(n) => Ok(n as f64),
        Value::Text(t) => text::parse_float(t).ok_or_else(|| mismatch(value, "a number")),
        Value::Decimal(unscaled, scale) => decimal_text(unscaled, scale)
            .parse()
            .map_err(|_| mismatch(value, "a number")),
        _ => Err(mismatch(value, "a number")),
    }
}

/// Text for a `string` column: text as it is, and a binary UUID or decimal written out.
fn to_text(value: Value<'_>) -> Result<Cow<'_, str>, String> {
    match value {
        Value::Text(t) => Ok(Cow::Borrowed(t)),
        Value::Uuid(id) => Ok(Cow::Owned(uuid_text(id))),
        Value::Decimal(unscaled, scale) => Ok(Cow::Owned(decimal_text(unscaled, scale))),
        _ => Err(mismatch(value, "a string")),
    }
}

/// Text for a `uuid` column: a binary UUID written out, or text, which `conform` canonicalizes.
fn to_uuid(value: Value<'_>) -> Result<Cow<'_, str>, String> {
    match value {
        Value::Text(t) => Ok(Cow::Borrowed(t)),
        Value::Uuid(id) => Ok(Cow::Owned(uuid_text(id))),
        _ => Err(mismatch(value, "a UUID")),
    }
}

/// Text for a `json` column, which `conform` checks is JSON.
fn to_json(value: Value<'_>) -> Result<&str, String> {
    match value {
        Value::Text(t) => Ok(t),
        _ => Err(mismatch(value, "JSON text")),
    }
}

/// The unscaled integer of a `decimal(precision, scale)` column, the column's type `ty`: text
/// that fits exactly, a whole number, or a binary decimal rescaled without losing a digit.
fn to_decimal(value: Value<'_>, ty: &ColumnType) -> Result<i128, String> {
    let &ColumnType::Decimal { precision, scale } = ty else {
        return Err(mismatch(value, "a decimal"));
    };
    let unscaled = match value {
        Value::Text(t) => return text::parse_decimal(t, precision, scale),
        Value::Int(n) => rescale(i128::from(n), 0, scale),
        Value::UInt(n) => rescale(i128::from(n), 0, scale),
        Value::Decimal(unscaled, from) => rescale(unscaled, from, scale),
        Value::Float(_) => {
            return Err(format!(
                "{} is a float, which is not exact; send a decimal as a Decimal or as its digits",
                shown(value)
            ));
        }
        _ => return Err(mismatch(value, "a decimal")),
    };
    let given = || match value {
        Value::Decimal(unscaled, from) => decimal_text(unscaled, from),
        other => shown(other),
    };
    let out_of_range = || format!("{} is out of range for {}", given(), ty.name());
    let unscaled = unscaled.map_err(|unfit| match unfit {
        Unfit::Fraction => format!(
            "{} has more digits after the point than {} keeps, and sluice does not round",
            given(),
            ty.name()
        ),
        Unfit::Range => out_of_range(),
    })?;
    let limit = 10_u128.checked_pow(u32::from(precision));
    if limit.is_some_and(|limit| unscaled.unsigned_abs() >= limit) {
        return Err(out_of_range());
    }
    Ok(unscaled)
}

/// Why a decimal does not rescale exactly.
enum Unfit {
    /// Digits after the point would be lost.
    Fraction,
    /// The value overflows.
    Range,
}

/// `unscaled * 10^-from` as an integer of scale `to`, exactly.
fn rescale(unscaled: i128, from: u8, to: u8) -> Result<i128, Unfit> {
    if unscaled == 0 {
        return Ok(0);
    }
    if from <= to {
        return 10_i128
            .checked_pow(u32::from(to - from))
            .and_then(|factor| unscaled.checked_mul(factor))
            .ok_or(Unfit::Range);
    }
    // A divisor past i128 leaves no non-zero value whole.
    let divisor = 10_i128
        .checked_pow(u32::from(from - to))
        .ok_or(Unfit::Fraction)?;
    if unscaled % divisor != 0 {
        return Err(Unfit::Fraction);
    }
    Ok(unscaled / divisor)
}

/// A decimal's text: `unscaled * 10^-scale`, with `scale` digits after the point.
fn decimal_text(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let scale = usize::from(scale);
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    format!("{sign}{whole}.{fraction}")
}

/// A UUID's canonical text: hyphenated, in lower case.
fn uuid_text(id: u128) -> String {
    uuid::Uuid::from_u128(id).hyphenated().to_string()
}

fn to_days(value: Value<'_>) -> Result<i32, String> {
    match value {
        Value::Days(d) => Ok(d),
        Value::Text(t) => text::parse_date(t).ok_or_else(|| mismatch(value, "a date (YYYY-MM-DD)")),
        Value::Int(n) => i32::try_from(n).map_err(|_| mismatch(value, "a day number")),
        Value::UInt(n) => i32::try_from(n).map_err(|_| mismatch(value, "a day number")),
        _ => Err(mismatch(value, "a date")),
    }
}

/// A timestamp. A number is Unix seconds, as ClickHouse reads one for a `DateTime` column.
fn to_micros(value: Value<'_>) -> Result<i64, String> {
    let too_far = || format!("{} is too far from 1970 for a timestamp", shown(value));
    match value {
        Value::Micros(m) => Ok(m),
        Value::Days(d) => Ok(i64::from(d) * 86_400_000_000),
        Value::Int(s) => s.checked_mul(1_000_000).ok_or_else(too_far),
        Value::UInt(s) => i64::try_from(s)
            .ok()
            .and_then(|s| s.checked_mul(1_000_000))
            .ok_or_else(too_far),
        Value::Float(s) => text::seconds_to_micros(s).ok_or_else(too_far),
        Value::Text(t) => text::parse_timestamp(t).ok_or_else(|| {
            mismatch(
                value,
                "a date and time (YYYY-MM-DD hh:mm:ss) or Unix seconds",
            )
        }),
        Value::Bool(_) | Value::Null | Value::Decimal(..) | Value::Uuid(_) => {
            Err(mismatch(value, "a date and time"))
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray, Int64Array};
    use arrow::datatypes::{
        DataType, Decimal128Type, Float64Type, Int16Type, Int64Type, TimestampMicrosecondType,
        UInt8Type,
    };

    use super::*;
    use crate::schema::Column;

    fn skipping(skip_unknown_fields: bool) -> DecodeOptions {
        DecodeOptions {
            skip_unknown_fields,
            ..DecodeOptions::default()
        }
    }

    fn schema() -> TableSchema {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("small", ColumnType::UInt8),
            Column::new("at", ColumnType::Timestamp),
        ])
        .unwrap()
    }

    #[test]
    fn builds_rows_in_any_column_order_and_fills_what_they_leave_out() {
        let schema = schema();
        let names = ["at".to_owned(), "id".to_owned()];
        let mut columns = Columns::new(&schema, &names, &skipping(false)).unwrap();
        columns.put(0, Value::Text("2026-12-06 10:00:00")).unwrap();
        columns.put(1, Value::Int(7)).unwrap();
        columns.end_row().unwrap();
        columns.put(0, Value::UInt(1_795_953_600)).unwrap();
        columns.put(1, Value::Text("-8")).unwrap();
        columns.end_row().unwrap();
        let batch = columns.finish().unwrap();
        assert_eq!(
            batch.column(0).as_primitive::<Int64Type>(),
            &Int64Array::from(vec![7, -8])
        );
        assert_eq!(batch.column(1).null_count(), 2);
        let at = batch.column(2).as_primitive::<TimestampMicrosecondType>();
        assert_eq!(at.value(0), 1_796_551_200_000_000);
        assert_eq!(
            at.value(1),
            1_795_953_600_000_000,
            "a number is Unix seconds"
        );
    }

    #[test]
    fn refuses_what_does_not_fit_naming_the_column() {
        let schema = schema();
        let names = ["id".to_owned(), "small".to_owned()];
        let mut columns = Columns::new(&schema, &names, &skipping(false)).unwrap();
        let error = columns.put(1, Value::Int(300)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "column 'small': 300 is out of range for uint8"
        );
        let error = columns.put(0, Value::Text("1x")).unwrap_err();
        assert!(
            error.to_string().contains("'1x' is not a whole number"),
            "{error}"
        );
        let error = columns.put(0, Value::Null).unwrap_err();
        assert!(error.to_string().contains("required"), "{error}");
        columns.put(1, Value::UInt(255)).unwrap();
        let error = columns.end_row().unwrap_err();
        assert!(error.to_string().starts_with("column 'id'"), "{error}");

        let error = Columns::new(&schema, &["nope".to_owned()], &skipping(false))
            .err()
            .unwrap();
        assert!(error.to_string().contains("no such column"), "{error}");
        let error = Columns::new(&schema, &["small".to_owned()], &skipping(true))
            .err()
            .unwrap();
        assert!(error.to_string().contains("leaves it out"), "{error}");
        let skipping = Columns::new(
            &schema,
            &["nope".to_owned(), "id".to_owned()],
            &skipping(true),
        )
        .unwrap();
        assert_eq!(skipping.targets(), &[None, Some(0)]);
    }

    #[test]
    fn a_null_for_a_required_column_is_refused_or_its_default_when_asked() {
        let schema = schema();
        let names = ["id".to_owned()];
        let mut refusing = Columns::new(&schema, &names, &skipping(false)).unwrap();
        let error = refusing.put(0, Value::Null).unwrap_err().to_string();
        assert!(error.contains("input_format_null_as_default=1"), "{error}");
        let options = DecodeOptions {
            null_as_default: true,
            ..DecodeOptions::default()
        };
        let mut defaulting = Columns::new(&schema, &names, &options).unwrap();
        defaulting.put(0, Value::Null).unwrap();
        defaulting.end_row().unwrap();
        let batch = defaulting.finish().unwrap();
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(0), 0);
        assert!(
            batch.column(1).is_null(0),
            "a nullable column keeps its null"
        );
    }

    fn decimal(precision: u8, scale: u8) -> ColumnType {
        ColumnType::Decimal { precision, scale }
    }

    /// One column of `ty` built from `values`, a row each.
    fn column_of(ty: ColumnType, values: &[Value<'_>]) -> Result<ArrayRef, DecodeError> {
        let schema = TableSchema::new(vec![Column::new("c", ty)]).unwrap();
        let mut columns = Columns::new(&schema, &["c".to_owned()], &skipping(false)).unwrap();
        for value in values {
            columns.put(0, *value)?;
            columns.end_row()?;
        }
        Ok(columns.finish()?.column(0).clone())
    }

    #[test]
    fn decimals_convert_exactly_or_are_refused() {
        let column = column_of(
            decimal(10, 2),
            &[
                Value::Text("-12.34"),
                Value::Int(-7),
                Value::UInt(99_999_999),
                Value::Decimal(12_300, 3),
                Value::Decimal(5, 0),
                Value::Null,
            ],
        )
        .unwrap();
        let column = column.as_primitive::<Decimal128Type>();
        assert_eq!(column.data_type(), &DataType::Decimal128(10, 2));
        let values: Vec<Option<i128>> = column.iter().collect();
        assert_eq!(
            values,
            [
                Some(-1234),
                Some(-700),
                Some(9_999_999_900),
                Some(1230),
                Some(500),
                None
            ]
        );
        let widest = 10_i128.pow(38) - 1;
        let column = column_of(
            decimal(38, 0),
            &[
                Value::Text(&"9".repeat(38)),
                Value::Decimal(-widest, 0),
                Value::Int(i64::MIN),
            ],
        )
        .unwrap();
        let values: Vec<i128> = column.as_primitive::<Decimal128Type>().values().to_vec();
        assert_eq!(values, [widest, -widest, i128::from(i64::MIN)]);

        for (value, says) in [
            (
                Value::Decimal(12_345, 3),
                "12.345 has more digits after the point than decimal(10, 2) keeps",
            ),
            (Value::Decimal(1, 38), "more digits after the point"),
            (Value::Text("1.239"), "3 digits after the point"),
            (
                Value::Decimal(10_000_000_000, 2),
                "100000000.00 is out of range for decimal(10, 2)",
            ),
            (Value::Int(100_000_000), "out of range"),
            (Value::Decimal(widest, 0), "out of range"),
            (Value::Float(1.5), "is a float, which is not exact"),
            (Value::Bool(true), "the boolean true is not a decimal"),
            (Value::Uuid(1), "is not a decimal"),
            (Value::Text("12,5"), "not a decimal number"),
        ] {
            let error = column_of(decimal(10, 2), &[value]).unwrap_err().to_string();
            assert!(error.starts_with("column 'c': "), "{error}");
            assert!(error.contains(says), "{value:?}: {error}");
        }
    }

    #[test]
    fn uuids_and_json_are_text_and_other_columns_take_their_text() {
        let id = 0x67e5_5044_10b1_426f_9247_bb68_0e5f_e0c8;
        let text = "67e55044-10b1-426f-9247-bb680e5fe0c8";
        let column = column_of(ColumnType::Uuid, &[Value::Uuid(id), Value::Text("X")]).unwrap();
        let uuids: Vec<_> = column.as_string::<i32>().iter().collect();
        assert_eq!(uuids, [Some(text), Some("X")], "conform judges text later");
        let error = column_of(ColumnType::Uuid, &[Value::Int(1)]).unwrap_err();
        assert!(
            error.to_string().ends_with("the number 1 is not a UUID"),
            "{error}"
        );

        let column = column_of(ColumnType::Json, &[Value::Text("[1, {\"a\": null}]")]).unwrap();
        assert_eq!(column.as_string::<i32>().value(0), "[1, {\"a\": null}]");
        for value in [Value::Int(1), Value::Uuid(id), Value::Decimal(1, 0)] {
            let error = column_of(ColumnType::Json, &[value]).unwrap_err();
            assert!(error.to_string().contains("is not JSON text"), "{error}");
        }

        let column = column_of(
            ColumnType::String,
            &[Value::Uuid(id), Value::Decimal(-5, 2), Value::Decimal(0, 3)],
        )
        .unwrap();
        let strings: Vec<_> = column.as_string::<i32>().iter().flatten().collect();
        assert_eq!(strings, [text, "-0.05", "0.000"]);
        let column = column_of(ColumnType::Float64, &[Value::Decimal(-12_345, 2)]).unwrap();
        assert_eq!(column.as_primitive::<Float64Type>().value(0), -123.45);
        let column = column_of(ColumnType::Int16, &[Value::Decimal(-1_200, 2)]).unwrap();
        assert_eq!(column.as_primitive::<Int16Type>().value(0), -12);
        let error = column_of(ColumnType::Int16, &[Value::Decimal(-1_250, 2)]).unwrap_err();
        assert!(
            error.to_string().contains("-12.50 is not a whole number"),
            "{error}"
        );
        let error = column_of(ColumnType::UInt8, &[Value::Decimal(30_000, 2)]).unwrap_err();
        assert!(
            error.to_string().contains("300.00 is out of range"),
            "{error}"
        );
    }

    #[test]
    fn a_null_for_a_required_column_of_a_new_type_is_its_clickhouse_default() {
        let schema = TableSchema::new(vec![
            Column::new("d", decimal(9, 2)).required(),
            Column::new("u", ColumnType::Uuid).required(),
            Column::new("j", ColumnType::Json).required(),
        ])
        .unwrap();
        let names = ["d".to_owned(), "u".to_owned(), "j".to_owned()];
        let options = DecodeOptions {
            null_as_default: true,
            ..DecodeOptions::default()
        };
        let mut columns = Columns::new(&schema, &names, &options).unwrap();
        for index in 0..3 {
            columns.put(index, Value::Null).unwrap();
        }
        columns.end_row().unwrap();
        let batch = columns.finish().unwrap();
        assert_eq!(batch.column(0).as_primitive::<Decimal128Type>().value(0), 0);
        assert_eq!(batch.column(1).as_string::<i32>().value(0), NIL_UUID);
        assert_eq!(batch.column(2).as_string::<i32>().value(0), "{}");
        let conformed = crate::values::conform(batch, &schema);
        assert!(conformed.is_ok(), "the defaults are a UUID and JSON");
    }

    #[test]
    fn the_pairs_no_value_could_fit_are_told_up_front() {
        for ty in ColumnType::ALL {
            let number_or_text = !matches!(
                ty,
                ColumnType::Bool
                    | ColumnType::Date
                    | ColumnType::Timestamp
                    | ColumnType::Uuid
                    | ColumnType::Json
            );
            assert_eq!(can_take(&ty, Kind::Decimal), number_or_text, "{ty}");
            let uuid = matches!(ty, ColumnType::Uuid | ColumnType::String);
            assert_eq!(can_take(&ty, Kind::Uuid), uuid, "{ty}");
            assert!(
                can_take(&ty, Kind::Text),
                "{ty}: text is judged value by value"
            );
        }
        for kind in [Kind::Bool, Kind::Float, Kind::Date, Kind::Time, Kind::Other] {
            for ty in [decimal(9, 2), ColumnType::Uuid, ColumnType::Json] {
                assert!(!can_take(&ty, kind), "{kind:?} into {ty}");
            }
        }
        assert!(can_take(&decimal(9, 2), Kind::Whole));
        assert!(!can_take(&ColumnType::Json, Kind::Whole));
        assert!(
            can_take(&ColumnType::Int64, Kind::Date),
            "judged value by value"
        );
    }

    #[test]
    fn every_column_type_has_its_own_builder() {
        for ty in ColumnType::ALL {
            let schema = TableSchema::new(vec![Column::new("c", ty.clone())]).unwrap();
            let mut columns = Columns::new(&schema, &["c".to_owned()], &skipping(false)).unwrap();
            columns.put(0, Value::Null).unwrap();
            columns.end_row().unwrap();
            let batch = columns.finish().unwrap();
            assert_eq!(batch.column(0).data_type(), &ty.arrow_type(), "{ty}");
        }
        let schema = TableSchema::new(vec![Column::new("b", ColumnType::UInt8)]).unwrap();
        let mut columns = Columns::new(&schema, &["b".to_owned()], &skipping(false)).unwrap();
        columns.put(0, Value::Bool(true)).unwrap();
        columns.end_row().unwrap();
        let batch = columns.finish().unwrap();
        assert_eq!(batch.column(0).as_primitive::<UInt8Type>().value(0), 1);
    }
}
