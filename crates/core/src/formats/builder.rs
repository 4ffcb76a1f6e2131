//! A column's Arrow builder, a tree that mirrors its type: a builder per value type, and for
//! `list`, `struct` and `map` the offsets, the validity and the builders of what they hold.
//!
//! Values go in converted into their type by [`super::value`]. A `list` or `map` ends each value
//! at an offset into its children, so a row-wise decoder closes it after pushing its elements,
//! and a column-wise one pushes every row's elements first and then closes each row at its
//! offset. Inside a nested value everything may be null, and a `uuid` or `json` there is judged
//! as it comes in: [`crate::values::conform`] judges only a table's own columns.
//!
//! [`Unfit`] says why a value does not go in, and where inside the column's value it is.

use std::sync::Arc;

use arrow::array::NullBufferBuilder;
use arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder,
    Float64Builder, Int8Builder, Int16Builder, Int32Builder, Int64Builder, ListArray, MapArray,
    StringBuilder, StructArray, TimestampMicrosecondBuilder, UInt8Builder, UInt16Builder,
    UInt32Builder, UInt64Builder,
};
use arrow::buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::DataType;

use super::value::{
    Value, mismatch, to_bool, to_days, to_decimal, to_float, to_int, to_json, to_micros, to_text,
    to_uuid,
};
use crate::error::DecodeError;
use crate::name::printable;
use crate::schema::ColumnType;

/// The UUID a required `uuid` column stores for a null when the insert asks for defaults.
pub(crate) const NIL_UUID: &str = "00000000-0000-0000-0000-000000000000";

/// Why a value does not go into its column, and the way to it inside the column's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unfit {
    pub(crate) message: String,
    /// The steps from the column's value down to the one that does not fit, innermost first.
    steps: Vec<Step>,
}

/// One step into a nested value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// A struct's field, by name.
    Field(String),
    /// A list's element, counted from 0 as the JSON doors count them.
    Element(usize),
    /// A map's value, by key.
    Key(String),
}

impl Unfit {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            steps: Vec::new(),
        }
    }

    /// The same, one step further out: `step` leads to where the value was.
    pub(crate) fn at(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }

    /// The way from `column` to the value, as the JSON doors write it: `attrs.http.status`
    /// for a struct's field or a map's key, `tags[3]` for a list's element.
    pub(crate) fn path(&self, column: &str) -> String {
        let mut path = printable(column);
        for step in self.steps.iter().rev() {
            match step {
                Step::Field(name) => {
                    path.push('.');
                    path.push_str(&printable(name));
                }
                Step::Element(n) => path.push_str(&format!("[{n}]")),
                Step::Key(key) => {
                    path.push('.');
                    path.push_str(&printable(key));
                }
            }
        }
        path
    }

    /// The error of a value of `column`, which names the way to it.
    pub(crate) fn in_column(self, column: &str) -> DecodeError {
        DecodeError::new(None, Some(self.path(column)), self.message)
    }
}

impl From<String> for Unfit {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

/// The rows a builder has room for at first. Arrow's builders start with room for 1,024 values,
/// which a one-row body allocated for every column and carried in its arrays to the buffer; a
/// builder doubles as it fills, so a large body pays a few more growths instead.
const INITIAL_ROWS: usize = 16;

/// A string builder with room for [`INITIAL_ROWS`] short values.
fn strings() -> StringBuilder {
    StringBuilder::with_capacity(INITIAL_ROWS, INITIAL_ROWS * 16)
}

/// One column's Arrow builder, or one of a nested column's parts.
pub(crate) enum Builder {
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
    /// Text inside a nested value: a `uuid` is made canonical and a `json` checked as it comes.
    Judged(StringBuilder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    Decimal(Decimal128Builder),
    List(Box<ListBuilder>),
    Struct(Box<StructBuilder>),
    Map(Box<MapBuilder>),
}

impl Builder {
    /// A builder for a table's column of type `ty`.
    pub(crate) fn new(ty: &ColumnType) -> Self {
        Self::of(ty, false)
    }

    /// A builder for what a list, struct or map of `ty` holds.
    fn inner(ty: &ColumnType) -> Self {
        Self::of(ty, true)
    }

    fn of(ty: &ColumnType, inner: bool) -> Self {
        const ROWS: usize = INITIAL_ROWS;
        match ty {
            ColumnType::Bool => Self::Bool(BooleanBuilder::with_capacity(ROWS)),
            ColumnType::Int8 => Self::Int8(Int8Builder::with_capacity(ROWS)),
            ColumnType::Int16 => Self::Int16(Int16Builder::with_capacity(ROWS)),
            ColumnType::Int32 => Self::Int32(Int32Builder::with_capacity(ROWS)),
            ColumnType::Int64 => Self::Int64(Int64Builder::with_capacity(ROWS)),
            ColumnType::UInt8 => Self::UInt8(UInt8Builder::with_capacity(ROWS)),
            ColumnType::UInt16 => Self::UInt16(UInt16Builder::with_capacity(ROWS)),
            ColumnType::UInt32 => Self::UInt32(UInt32Builder::with_capacity(ROWS)),
            ColumnType::UInt64 => Self::UInt64(UInt64Builder::with_capacity(ROWS)),
            ColumnType::Float32 => Self::Float32(Float32Builder::with_capacity(ROWS)),
            ColumnType::Float64 => Self::Float64(Float64Builder::with_capacity(ROWS)),
            ColumnType::Date => Self::Date(Date32Builder::with_capacity(ROWS)),
            ColumnType::Timestamp => Self::Timestamp(
                TimestampMicrosecondBuilder::with_capacity(ROWS).with_data_type(ty.arrow_type()),
            ),
            ColumnType::Decimal { .. } => Self::Decimal(
                Decimal128Builder::with_capacity(ROWS).with_data_type(ty.arrow_type()),
            ),
            ColumnType::Uuid | ColumnType::Json if inner => Self::Judged(strings()),
            // `uuid` and `json` are text told apart by the field's metadata; `push` tells them
            // apart by the column's type.
            ColumnType::String | ColumnType::Uuid | ColumnType::Json => Self::String(strings()),
            // Each nested builder keeps the column's Arrow type and builds its array with the
            // fields that type names, so the array is of exactly that type.
            ColumnType::List(element) => Self::List(Box::new(ListBuilder {
                data_type: ty.arrow_type(),
                element: Self::inner(element),
                ends: Ends::new(),
            })),
            ColumnType::Struct(fields) => Self::Struct(Box::new(StructBuilder {
                data_type: ty.arrow_type(),
                children: fields.iter().map(|f| Self::inner(&f.ty)).collect(),
                validity: NullBufferBuilder::new(0),
            })),
            ColumnType::Map(value) => Self::Map(Box::new(MapBuilder {
                data_type: ty.arrow_type(),
                keys: strings(),
                values: Self::inner(value),
                ends: Ends::new(),
            })),
        }
    }

    /// How many values it holds.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Bool(b) => b.len(),
            Self::Int8(b) => b.len(),
            Self::Int16(b) => b.len(),
            Self::Int32(b) => b.len(),
            Self::Int64(b) => b.len(),
            Self::UInt8(b) => b.len(),
            Self::UInt16(b) => b.len(),
            Self::UInt32(b) => b.len(),
            Self::UInt64(b) => b.len(),
            Self::Float32(b) => b.len(),
            Self::Float64(b) => b.len(),
            Self::String(b) | Self::Judged(b) => b.len(),
            Self::Date(b) => b.len(),
            Self::Timestamp(b) => b.len(),
            Self::Decimal(b) => b.len(),
            Self::List(list) => list.ends.offsets.len() - 1,
            Self::Struct(record) => record.validity.len(),
            Self::Map(map) => map.ends.offsets.len() - 1,
        }
    }

    /// Appends `value` converted into the type `ty`, or says why it does not fit. A nested
    /// builder takes only a null here: its values are pushed through its parts.
    pub(crate) fn push(&mut self, ty: &ColumnType, value: Value<'_>) -> Result<(), String> {
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
            Self::Judged(b) => match ty {
                ColumnType::Uuid => {
                    b.append_value(crate::values::canonical_uuid(&to_uuid(value)?)?)
                }
                ColumnType::Json => {
                    let text = to_json(value)?;
                    crate::values::check_json(text)?;
                    b.append_value(text);
                }
                _ => b.append_value(to_text(value)?),
            },
            Self::Date(b) => b.append_value(to_days(value)?),
            Self::Timestamp(b) => b.append_value(to_micros(value)?),
            Self::Decimal(b) => b.append_value(to_decimal(value, ty)?),
            Self::List(_) | Self::Struct(_) | Self::Map(_) => {
                return Err(mismatch(value, &ty.name()));
            }
        }
        Ok(())
    }

    /// The type's default, as ClickHouse stores one for a null: zero, false, the empty string,
    /// 1970-01-01, the nil UUID, for `json` the empty object, as ClickHouse's `JSON` has, and an
    /// empty list, an empty map, or a struct whose fields are null.
    pub(crate) fn push_default(&mut self, ty: &ColumnType) {
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
            Self::String(b) | Self::Judged(b) => b.append_value(match ty {
                ColumnType::Uuid => NIL_UUID,
                ColumnType::Json => "{}",
                _ => "",
            }),
            Self::Date(b) => b.append_value(0),
            Self::Timestamp(b) => b.append_value(0),
            Self::Decimal(b) => b.append_value(0),
            Self::List(list) => list.close_empty(),
            Self::Struct(record) => {
                record.children.iter_mut().for_each(Builder::push_null);
                record.validity.append_non_null();
            }
            Self::Map(map) => map.close_empty(),
        }
    }

    pub(crate) fn push_null(&mut self) {
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
            Self::String(b) | Self::Judged(b) => b.append_null(),
            Self::Date(b) => b.append_null(),
            Self::Timestamp(b) => b.append_null(),
            Self::Decimal(b) => b.append_null(),
            Self::List(list) => list.close_null(),
            // A null struct's fields are null too, so each child stays as long as the struct.
            Self::Struct(record) => {
                record.children.iter_mut().for_each(Builder::push_null);
                record.validity.append_null();
            }
            Self::Map(map) => map.close_null(),
        }
    }

    /// The values so far as an array, the builder left empty.
    pub(crate) fn finish(&mut self) -> Result<ArrayRef, String> {
        Ok(match self {
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
            Self::String(b) | Self::Judged(b) => ArrayBuilder::finish(b),
            Self::Date(b) => Arc::new(b.finish()),
            Self::Timestamp(b) => Arc::new(b.finish()),
            Self::Decimal(b) => Arc::new(b.finish()),
            Self::List(list) => list.finish()?,
            Self::Struct(record) => record.finish()?,
            Self::Map(map) => map.finish()?,
        })
    }
}

/// The error of a nested builder whose Arrow type is not its kind's: never, as
/// [`ColumnType::arrow_type`] gives each nested type its Arrow counterpart.
fn not_nested(data_type: &DataType) -> String {
    format!("{data_type} is not a list, struct or map type")
}

/// Where each list or map ends in its children, and which are null.
struct Ends {
    offsets: Vec<i32>,
    validity: NullBufferBuilder,
}

impl Ends {
    fn new() -> Self {
        Self {
            offsets: vec![0],
            validity: NullBufferBuilder::new(0),
        }
    }

    fn last(&self) -> usize {
        // Every offset was checked to be at least 0 when it was added.
        self.offsets.last().map_or(0, |&o| o as usize)
    }

    /// Ends a value at `end`, an offset into children that hold `held` values.
    fn close_at(&mut self, end: usize, held: usize) -> Result<(), String> {
        if end < self.last() || end > held {
            return Err(format!("an offset {end} outside {}..={held}", self.last()));
        }
        let end = i32::try_from(end)
            .map_err(|_| format!("more than {} elements in one column", i32::MAX))?;
        self.offsets.push(end);
        self.validity.append_non_null();
        Ok(())
    }

    fn close_null(&mut self) {
        self.offsets.push(self.offsets.last().copied().unwrap_or(0));
        self.validity.append_null();
    }

    fn close_empty(&mut self) {
        self.offsets.push(self.offsets.last().copied().unwrap_or(0));
        self.validity.append_non_null();
    }

    /// The offsets and validity so far, left empty.
    fn finish(&mut self) -> (OffsetBuffer<i32>, Option<NullBuffer>) {
        let offsets = std::mem::replace(&mut self.offsets, vec![0]);
        // `close_at` keeps the offsets from 0 upward, never falling.
        let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
        (offsets, self.validity.finish())
    }
}

/// A `list` column's parts: its elements, and where each list ends among them.
pub(crate) struct ListBuilder {
    data_type: DataType,
    element: Builder,
    ends: Ends,
}

impl ListBuilder {
    /// The builder the elements go into.
    pub(crate) fn element(&mut self) -> &mut Builder {
        &mut self.element
    }

    /// Ends a list holding the elements pushed since the last one ended.
    pub(crate) fn close(&mut self) -> Result<(), String> {
        let held = self.element.len();
        self.ends.close_at(held, held)
    }

    /// Ends a list at element `end`, counted over all the elements pushed, for a column whose
    /// elements were pushed first.
    pub(crate) fn close_at(&mut self, end: usize) -> Result<(), String> {
        self.ends.close_at(end, self.element.len())
    }

    fn close_null(&mut self) {
        self.ends.close_null();
    }

    fn close_empty(&mut self) {
        self.ends.close_empty();
    }

    fn finish(&mut self) -> Result<ArrayRef, String> {
        let (offsets, validity) = self.ends.finish();
        let values = self.element.finish()?;
        let DataType::List(field) = &self.data_type else {
            return Err(not_nested(&self.data_type));
        };
        ListArray::try_new(field.clone(), offsets, values, validity)
            .map(|array| Arc::new(array) as ArrayRef)
            .map_err(|e| e.to_string())
    }
}

/// A `struct` column's parts: a builder per field, and which structs are null.
pub(crate) struct StructBuilder {
    data_type: DataType,
    children: Vec<Builder>,
    validity: NullBufferBuilder,
}

impl StructBuilder {
    /// The builder of field `index`.
    pub(crate) fn child(&mut self, index: usize) -> &mut Builder {
        &mut self.children[index]
    }

    /// Ends `rows` structs, each field having had a value pushed for each.
    pub(crate) fn close(&mut self, rows: usize) {
        self.validity.append_n_non_nulls(rows);
    }

    fn finish(&mut self) -> Result<ArrayRef, String> {
        let children = self
            .children
            .iter_mut()
            .map(Builder::finish)
            .collect::<Result<Vec<_>, _>>()?;
        let DataType::Struct(fields) = &self.data_type else {
            return Err(not_nested(&self.data_type));
        };
        StructArray::try_new(fields.clone(), children, self.validity.finish())
            .map(|array| Arc::new(array) as ArrayRef)
            .map_err(|e| e.to_string())
    }
}

/// A `map` column's parts: its keys and values, and where each map ends among them.
pub(crate) struct MapBuilder {
    data_type: DataType,
    keys: StringBuilder,
    values: Builder,
    ends: Ends,
}

impl MapBuilder {
    /// The builder the keys go into. A key is never null.
    pub(crate) fn keys(&mut self) -> &mut StringBuilder {
        &mut self.keys
    }

    /// The builder the values go into, one per key.
    pub(crate) fn values(&mut self) -> &mut Builder {
        &mut self.values
    }

    /// The key of entry `index`, counted over all the entries pushed.
    pub(crate) fn key(&self, index: usize) -> Option<&str> {
        let offsets = self.keys.offsets_slice();
        let (start, end) = (*offsets.get(index)?, *offsets.get(index + 1)?);
        let bytes = self.keys.values_slice().get(start as usize..end as usize)?;
        std::str::from_utf8(bytes).ok()
    }

    /// Ends a map holding the entries pushed since the last one ended.
    pub(crate) fn close(&mut self) -> Result<(), String> {
        let held = self.keys.len();
        self.ends.close_at(held, held)
    }

    /// Ends a map at entry `end`, counted over all the entries pushed.
    pub(crate) fn close_at(&mut self, end: usize) -> Result<(), String> {
        self.ends.close_at(end, self.keys.len())
    }

    fn close_null(&mut self) {
        self.ends.close_null();
    }

    fn close_empty(&mut self) {
        self.ends.close_empty();
    }

    fn finish(&mut self) -> Result<ArrayRef, String> {
        let (offsets, validity) = self.ends.finish();
        let keys: ArrayRef = Arc::new(self.keys.finish());
        let values = self.values.finish()?;
        let DataType::Map(entries, _) = &self.data_type else {
            return Err(not_nested(&self.data_type));
        };
        let DataType::Struct(fields) = entries.data_type() else {
            return Err(not_nested(entries.data_type()));
        };
        let entries_array = StructArray::try_new(fields.clone(), vec![keys, values], None)
            .map_err(|e| e.to_string())?;
        MapArray::try_new(entries.clone(), offsets, entries_array, validity, false)
            .map(|array| Arc::new(array) as ArrayRef)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::Array;

    use super::*;
    use crate::schema::StructField;

    #[test]
    fn a_path_names_fields_elements_and_keys() {
        let unfit = Unfit::new("no")
            .at(Step::Key("env".into()))
            .at(Step::Element(3))
            .at(Step::Field("http.status".into()));
        assert_eq!(unfit.path("attrs"), "attrs.http.status[3].env");
        let error = unfit.in_column("attrs");
        assert_eq!(error.to_string(), "column 'attrs.http.status[3].env': no");
    }

    #[test]
    fn nested_builders_make_the_columns_arrow_type_with_nulls_and_defaults() {
        let types = [
            ColumnType::list(ColumnType::list(ColumnType::Uuid)),
            ColumnType::map(ColumnType::Struct(vec![
                StructField::new("at", ColumnType::Timestamp),
                StructField::new("d", ColumnType::decimal(9, 2).unwrap()),
            ])),
            ColumnType::Struct(vec![
                StructField::new("j", ColumnType::Json),
                StructField::new("l", ColumnType::list(ColumnType::Int8)),
            ]),
        ];
        for ty in types {
            let mut builder = Builder::new(&ty);
            builder.push_null();
            builder.push_default(&ty);
            assert!(builder.push(&ty, Value::Int(1)).is_err(), "{ty}");
            assert_eq!(builder.len(), 2);
            let array = builder.finish().unwrap();
            assert_eq!(array.data_type(), &ty.arrow_type(), "{ty}");
            assert_eq!((array.len(), array.null_count()), (2, 1), "{ty}");
            assert_eq!(builder.len(), 0, "finishing empties it");
        }
    }

    #[test]
    fn offsets_never_fall_nor_pass_the_elements() {
        let ty = ColumnType::list(ColumnType::Int8);
        let mut builder = Builder::new(&ty);
        let Builder::List(list) = &mut builder else {
            panic!("a list builder");
        };
        list.element()
            .push(&ColumnType::Int8, Value::Int(1))
            .unwrap();
        list.close_at(1).unwrap();
        assert!(list.close_at(0).unwrap_err().contains("outside 1..=1"));
        assert!(list.close_at(2).unwrap_err().contains("outside 1..=1"));
        list.close().unwrap();
        assert_eq!(builder.finish().unwrap().len(), 2);
    }

    #[test]
    fn uuids_and_json_inside_are_judged_as_they_come() {
        let ty = ColumnType::list(ColumnType::Uuid);
        let mut builder = Builder::new(&ty);
        let Builder::List(list) = &mut builder else {
            panic!("a list builder");
        };
        let id = "{67E55044-10B1-426F-9247-BB680E5FE0C8}";
        list.element()
            .push(&ColumnType::Uuid, Value::Text(id))
            .unwrap();
        let error = list
            .element()
            .push(&ColumnType::Uuid, Value::Text("x"))
            .unwrap_err();
        assert!(error.contains("'x' is not a UUID"), "{error}");
        let error = Builder::inner(&ColumnType::Json)
            .push(&ColumnType::Json, Value::Text("{"))
            .unwrap_err();
        assert!(error.contains("not JSON"), "{error}");
        list.close().unwrap();
        let array = builder.finish().unwrap();
        let list = array.as_any().downcast_ref::<ListArray>().unwrap();
        let values = list
            .values()
            .as_any()
            .downcast_ref::<arrow::array::StringArray>();
        assert_eq!(
            values.unwrap().value(0),
            "67e55044-10b1-426f-9247-bb680e5fe0c8"
        );
    }
}
