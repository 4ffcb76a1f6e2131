//! A Native column of an `Array`, `Tuple` or `Map` read into a nested column's builder.
//!
//! Native lays a nested column out as columns: an array as its rows' cumulative `UInt64` end
//! offsets, then the column of every row's elements; a tuple as one column per element; a map
//! as the array of key and value pairs it is, the keys' column then the values'. So each part is
//! read whole into its builder, and then each row's list or map is closed at its offset. A
//! value that does not fit is placed back in its row through the offsets, and named by the way
//! to it: `tags[3]`, `attrs.code`, `labels.env`.

use super::read::{Failed, offsets, visit};
use super::types::NativeType;
use crate::formats::builder::{Builder, ListBuilder, MapBuilder, Step, StructBuilder, Unfit};
use crate::formats::quoted;
use crate::formats::value::{Value, to_text};
use crate::formats::wire::Input;
use crate::schema::{ColumnType, StructField};

/// Reads `rows` values of `ty`, after its prefix, into `builder`, of the table's type
/// `target`, which [`crate::formats::fit::fits`] has found `ty` fits.
pub(crate) fn read_column(
    ty: &NativeType,
    input: &mut Input<'_>,
    rows: usize,
    target: &ColumnType,
    builder: &mut Builder,
) -> Result<(), Failed> {
    match (ty, target, builder) {
        (NativeType::Array(element), ColumnType::List(target), Builder::List(list)) => {
            read_list(element, input, rows, target, list)
        }
        (NativeType::Map(key, value), ColumnType::Map(target), Builder::Map(map)) => {
            read_map((key, value), input, rows, target, map)
        }
        (NativeType::Array(entry), ColumnType::Map(target), Builder::Map(map)) => match &**entry {
            NativeType::Tuple(pair) => match &pair[..] {
                [key, value] => read_map((key, value), input, rows, target, map),
                _ => Err(unfit(target)),
            },
            _ => Err(unfit(target)),
        },
        (NativeType::Tuple(elements), ColumnType::Struct(fields), Builder::Struct(record)) => {
            read_tuple(elements, input, rows, fields, record)
        }
        (NativeType::Array(_) | NativeType::Tuple(_) | NativeType::Map(..), target, _) => {
            Err(unfit(target))
        }
        (ty, target, builder) => visit(ty, input, rows, target, None, &mut |_, value| {
            quoted::push(builder, target, value)
        }),
    }
}

/// The error of a column that does not fit, which `fits` refuses before it is read.
fn unfit(target: &ColumnType) -> Failed {
    let message = format!("the body's column does not go into a {target} column");
    (None, Unfit::new(message))
}

/// The end offsets of `rows` lists or maps, as offsets into their children's values.
fn ends(input: &mut Input<'_>, rows: usize) -> Result<Vec<usize>, Failed> {
    let whole = |message: String| (None, Unfit::new(message));
    offsets(input, rows as u64)
        .map_err(whole)?
        .into_iter()
        .map(|end| usize::try_from(end).map_err(|_| whole(format!("an offset {end} too far"))))
        .collect()
}

/// The row that holds value `index` of a column's children, and the value's place in it,
/// counted from 0.
fn locate(ends: &[usize], index: usize) -> (usize, usize) {
    let row = ends.partition_point(|&end| end <= index);
    let start = if row == 0 { 0 } else { ends[row - 1] };
    (row, index - start)
}

fn read_list(
    element: &NativeType,
    input: &mut Input<'_>,
    rows: usize,
    target: &ColumnType,
    list: &mut ListBuilder,
) -> Result<(), Failed> {
    let ends = ends(input, rows)?;
    let count = ends.last().copied().unwrap_or(0);
    let base = list.element().len();
    read_column(element, input, count, target, list.element()).map_err(
        |(index, e)| match index {
            Some(index) => {
                let (row, place) = locate(&ends, index);
                (Some(row), e.at(Step::Element(place)))
            }
            None => (None, e),
        },
    )?;
    for (row, end) in ends.iter().enumerate() {
        list.close_at(base + end)
            .map_err(|e| (Some(row), Unfit::new(e)))?;
    }
    Ok(())
}

fn read_map(
    (key, value): (&NativeType, &NativeType),
    input: &mut Input<'_>,
    rows: usize,
    target: &ColumnType,
    map: &mut MapBuilder,
) -> Result<(), Failed> {
    let ends = ends(input, rows)?;
    let count = ends.last().copied().unwrap_or(0);
    let base = map.values().len();
    let keys = map.keys();
    let put_key = &mut |_: usize, key: Value<'_>| match key {
        Value::Null => Err(Unfit::new("a map's key is null; keys are strings")),
        key => {
            keys.append_value(to_text(key)?);
            Ok(())
        }
    };
    visit(key, input, count, &ColumnType::String, None, put_key)
        .map_err(|(index, e)| (index.map(|i| locate(&ends, i).0), e))?;
    read_column(value, input, count, target, map.values()).map_err(|(index, e)| match index {
        Some(index) => {
            let row = locate(&ends, index).0;
            let key = map.key(base + index).unwrap_or_default().to_owned();
            (Some(row), e.at(Step::Key(key)))
        }
        None => (None, e),
    })?;
    for (row, end) in ends.iter().enumerate() {
        map.close_at(base + end)
            .map_err(|e| (Some(row), Unfit::new(e)))?;
    }
    Ok(())
}

fn read_tuple(
    elements: &[NativeType],
    input: &mut Input<'_>,
    rows: usize,
    fields: &[StructField],
    record: &mut StructBuilder,
) -> Result<(), Failed> {
    if elements.len() != fields.len() {
        let message = format!(
            "a tuple of {} elements does not go into a struct of {} fields",
            elements.len(),
            fields.len()
        );
        return Err((None, Unfit::new(message)));
    }
    for (index, (element, field)) in elements.iter().zip(fields).enumerate() {
        read_column(element, input, rows, &field.ty, record.child(index))
            .map_err(|(row, e)| (row, e.at(Step::Field(field.name.clone()))))?;
    }
    record.close(rows);
    Ok(())
}
