//! The table's columns being built, a row at a time, from values in the body's column order.
//!
//! Every format decoder hands values here: text formats as text, which is parsed by the column's
//! type ([`super::text`]), binary formats as typed values. Each value is converted into the
//! table column's type with a range check, so nothing is wrapped around or truncated silently.
//! A column a row leaves out is null, or refused when the table requires it.

use std::sync::Arc;

use arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Date32Builder, Float32Builder, Float64Builder,
    Int8Builder, Int16Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder,
    TimestampMicrosecondBuilder, UInt8Builder, UInt16Builder, UInt32Builder, UInt64Builder,
};

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
        let builders = schema
            .columns()
            .iter()
            .map(|c| Builder::new(c.ty))
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
    pub(crate) fn target_type(&self, index: usize) -> Option<ColumnType> {
        let target = (*self.targets.get(index)?)?;
        Some(self.schema.columns()[target].ty)
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
            builder.push_default();
            return Ok(());
        }
        builder.push(column.ty, value)
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
                    .push(column.ty, Value::Null)
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
}

impl Builder {
    fn new(ty: ColumnType) -> Self {
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
            // Strings, and any type added later, which a test keeps from falling here silently.
            _ => Self::String(StringBuilder::new()),
        }
    }

    /// Appends `value` converted into the column's type `ty`, or says why it does not fit.
    fn push(&mut self, ty: ColumnType, value: Value<'_>) -> Result<(), String> {
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
            Self::String(b) => b.append_value(to_text(value)?),
            Self::Date(b) => b.append_value(to_days(value)?),
            Self::Timestamp(b) => b.append_value(to_micros(value)?),
        }
        Ok(())
    }

    /// The type's default, as ClickHouse stores one for a null: zero, false, the empty string,
    /// 1970-01-01.
    fn push_default(&mut self) {
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
            Self::String(b) => b.append_value(""),
            Self::Date(b) => b.append_value(0),
            Self::Timestamp(b) => b.append_value(0),
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
        }
    }
}

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
fn to_int<T: TryFrom<i64> + TryFrom<u64>>(value: Value<'_>, ty: ColumnType) -> Result<T, String> {
    let out_of_range = || format!("{} is out of range for {}", shown(value), ty.name());
    match value {
        Value::Int(n) => T::try_from(n).map_err(|_| out_of_range()),
        Value::UInt(n) => T::try_from(n).map_err(|_| out_of_range()),
        Value::Bool(b) => T::try_from(u64::from(b)).map_err(|_| out_of_range()),
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
        other => format!("{other:?}"),
    }
}

fn to_float(value: Value<'_>) -> Result<f64, String> {
    match value {
        Value::Float(f) => Ok(f),
        Value::Int(n) => Ok(n as f64),
        Value::UInt(n) => Ok(n as f64),
        Value::Text(t) => text::parse_float(t).ok_or_else(|| mismatch(value, "a number")),
        _ => Err(mismatch(value, "a number")),
    }
}

fn to_text(value: Value<'_>) -> Result<&str, String> {
    match value {
        Value::Text(t) => Ok(t),
        _ => Err(mismatch(value, "a string")),
    }
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
        Value::Bool(_) | Value::Null => Err(mismatch(value, "a date and time")),
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{Int64Type, TimestampMicrosecondType, UInt8Type};

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

    #[test]
    fn every_column_type_has_its_own_builder() {
        for ty in ColumnType::ALL {
            let schema = TableSchema::new(vec![Column::new("c", ty)]).unwrap();
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
