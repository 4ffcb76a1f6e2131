//! The table's columns being built, a row at a time, from values in the body's column order.
//!
//! Every format decoder hands values here, which [`super::value`] converts into the table
//! column's type with a range check. A column a row leaves out is null, or refused when the
//! table requires it.
//!
//! A `list`, `struct` or `map` column takes text in its ClickHouse text form
//! ([`super::quoted`]), which the text formats send, or its values straight into its builder
//! ([`Columns::put_nested`]), which the binary and JSON formats do.

use arrow::array::{ArrayRef, RecordBatch};

use super::builder::{Builder, Unfit};
use super::quoted;
use super::value::Value;
use crate::error::DecodeError;
use crate::name::printable;
use crate::options::DecodeOptions;
use crate::schema::{ColumnType, TableSchema};

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
        let Some(target) = self.unfilled(index)? else {
            return Ok(());
        };
        let schema = self.schema;
        let name = &schema.columns()[target].name;
        self.append(target, value).map_err(|e| e.in_column(name))?;
        self.filled[target] = true;
        Ok(())
    }

    /// Puts the body's column `index` of the current row, a nested value, which `read` reads
    /// into the column's builder. `Ok(false)` when the insert skips the column: `read` is not
    /// called, and the caller moves past the value.
    pub(crate) fn put_nested(
        &mut self,
        index: usize,
        read: impl FnOnce(&mut Builder, &ColumnType) -> Result<(), Unfit>,
    ) -> Result<bool, DecodeError> {
        let Some(target) = self.unfilled(index)? else {
            return Ok(false);
        };
        let column = &self.schema.columns()[target];
        read(&mut self.builders[target], &column.ty).map_err(|e| e.in_column(&column.name))?;
        self.filled[target] = true;
        Ok(true)
    }

    /// The table's column the body's column `index` goes to, which the row must not have
    /// given yet; `None` when the insert skips it.
    fn unfilled(&self, index: usize) -> Result<Option<usize>, DecodeError> {
        let Some(Some(target)) = self.targets.get(index).copied() else {
            return Ok(None);
        };
        if self.filled[target] {
            let name = self.schema.columns()[target].name.clone();
            return Err(DecodeError::new(
                None,
                Some(name),
                "the row gives the column twice".to_owned(),
            ));
        }
        Ok(Some(target))
    }

    /// Appends a value of the body's column `index` in a block read column by column: the
    /// columns' values go in whole, one after the other, and [`Columns::end_block`] follows.
    /// The error is the value's, without its row or column, which the caller knows.
    pub(crate) fn push(&mut self, index: usize, value: Value<'_>) -> Result<(), Unfit> {
        match self.targets.get(index).copied() {
            Some(Some(target)) => self.append(target, value),
            _ => Ok(()),
        }
    }

    /// The builder and type of the table's column the body's column `index` goes to, for a
    /// block read column by column; `None` when the insert skips it.
    pub(crate) fn builder(&mut self, index: usize) -> Option<(&mut Builder, &ColumnType)> {
        let target = (*self.targets.get(index)?)?;
        Some((
            &mut self.builders[target],
            &self.schema.columns()[target].ty,
        ))
    }

    /// Appends `value` to the table's column `target`: a null for a required column is its
    /// type's default when the insert asked for that, else refused. A nested column takes its
    /// text form.
    fn append(&mut self, target: usize, value: Value<'_>) -> Result<(), Unfit> {
        let column = &self.schema.columns()[target];
        let builder = &mut self.builders[target];
        if value == Value::Null && !column.nullable {
            if !self.null_as_default {
                return Err(Unfit::new(
                    "the column is required (not nullable) and the row has null; \
                     input_format_null_as_default=1 stores its type's default instead",
                ));
            }
            builder.push_default(&column.ty);
            return Ok(());
        }
        quoted::push(builder, &column.ty, value)
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
                self.builders[i].push_null();
            }
            *filled = false;
        }
        self.rows += 1;
        Ok(())
    }

    /// Reads `bodies` one after another with `read`, then finishes: the batch, and each body's
    /// rows. `None` when a body fails, whose rows may be half read.
    pub(crate) fn read_each(
        mut self,
        bodies: &[&[u8]],
        mut read: impl FnMut(&[u8], &mut Self) -> Result<(), DecodeError>,
    ) -> Option<(RecordBatch, Vec<usize>)> {
        let mut rows = Vec::with_capacity(bodies.len());
        for body in bodies {
            let before = self.rows;
            read(body, &mut self).ok()?;
            rows.push(self.rows - before);
        }
        Some((self.finish().ok()?, rows))
    }

    /// The rows as a batch of the table's schema.
    pub(crate) fn finish(mut self) -> Result<RecordBatch, DecodeError> {
        let arrays: Vec<ArrayRef> = self
            .builders
            .iter_mut()
            .map(Builder::finish)
            .collect::<Result<_, _>>()
            .map_err(|e| DecodeError::new(None, None, e))?;
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
        assert_eq!(
            batch.column(1).as_string::<i32>().value(0),
            crate::formats::builder::NIL_UUID
        );
        assert_eq!(batch.column(2).as_string::<i32>().value(0), "{}");
        let conformed = crate::values::conform(batch, &schema);
        assert!(conformed.is_ok(), "the defaults are a UUID and JSON");
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

    #[test]
    fn a_null_for_a_required_nested_column_is_empty_when_asked() {
        let schema = TableSchema::new(vec![
            Column::new("l", ColumnType::list(ColumnType::Int64)).required(),
            Column::new(
                "s",
                ColumnType::Struct(vec![crate::schema::StructField::new("a", ColumnType::Int8)]),
            )
            .required(),
            Column::new("m", ColumnType::map(ColumnType::String)).required(),
        ])
        .unwrap();
        let names = ["l".to_owned(), "s".to_owned(), "m".to_owned()];
        let mut refusing = Columns::new(&schema, &names, &skipping(false)).unwrap();
        let error = refusing.put(0, Value::Null).unwrap_err().to_string();
        assert!(error.contains("input_format_null_as_default=1"), "{error}");
        let options = DecodeOptions {
            null_as_default: true,
            ..DecodeOptions::default()
        };
        let mut columns = Columns::new(&schema, &names, &options).unwrap();
        for index in 0..3 {
            columns.put(index, Value::Null).unwrap();
        }
        columns.end_row().unwrap();
        columns.put(0, Value::Text("[1, 2]")).unwrap();
        columns.put(1, Value::Text("(3)")).unwrap();
        columns.put(2, Value::Text("{'k': 'v'}")).unwrap();
        columns.end_row().unwrap();
        let error = columns.put(0, Value::Int(5)).unwrap_err().to_string();
        assert_eq!(error, "column 'l': the number 5 is not list<int64>");
        let batch = columns.finish().unwrap();
        assert_eq!(
            crate::formats::tests_support::rows_json(&batch),
            serde_json::json!([
                {"l": [], "s": {"a": null}, "m": {}},
                {"l": [1, 2], "s": {"a": 3}, "m": {"k": "v"}},
            ])
        );
    }
}
