//! ClickHouse's `Native` format: blocks of whole columns, each named and typed in the block.
//!
//! A block is its column count and row count (LEB128), then per column its name, its type name
//! and, when the block has rows, the column's prefix and data. Over HTTP blocks follow each
//! other with nothing between; the native protocol puts each in a packet of its own, which
//! [`native_block_len`] finds the end of.
//!
//! - `types`: type names into layouts.
//! - `read`: a column's bytes walked over or read into values.
//! - `nested`: an `Array`, `Tuple` or `Map` column read into a nested column's builder.
//!
//! Each column's values go straight into the table's column, through the same range checks as
//! in the other formats. A column whose type can never go into the table's (a UUID into a
//! decimal, say) is refused before its values are read.

mod nested;
mod read;
mod types;

use arrow::array::RecordBatch;

use self::nested::read_column;
use self::read::{read_prefix, skip, visit};
use self::types::NativeType;
use super::at_row;
use super::builder::Unfit;
use super::columns::Columns;
use super::fit::fits;
use super::value::Value;
use super::wire::Input;
use crate::error::DecodeError;
use crate::options::DecodeOptions;
use crate::schema::TableSchema;

/// The block at the start of `bytes`: its length in bytes and its row count, or `None` when
/// `bytes` ends inside it. Only the layout is checked, not the values.
pub fn native_block_len(bytes: &[u8]) -> Result<Option<(usize, u64)>, String> {
    let mut input = Input::new(bytes);
    match skip_block(&mut input) {
        Ok(rows) => Ok(Some((input.pos(), rows))),
        Err(_) if input.ran_out() => Ok(None),
        Err(error) => Err(error),
    }
}

fn skip_block(input: &mut Input<'_>) -> Result<u64, String> {
    let (columns, rows) = (input.leb128()?, input.leb128()?);
    skip_columns(input, columns, rows)?;
    Ok(rows)
}

/// A column's name, its type name, and the type parsed.
fn column_header<'a>(input: &mut Input<'a>) -> Result<(&'a str, &'a str, NativeType), String> {
    let name = input.string()?;
    let ty_name = input.string()?;
    let ty = NativeType::parse(ty_name).map_err(|e| format!("column '{name}': {e}"))?;
    Ok((name, ty_name, ty))
}

/// The names and types of the first block's columns, for a table made by its first insert.
pub(crate) fn declared_columns(body: &[u8]) -> Result<Vec<(String, String)>, DecodeError> {
    let mut input = Input::new(body);
    let whole = |e: String| at_row(1, DecodeError::new(None, None, e));
    let (columns, rows) = (
        input.leb128().map_err(whole)?,
        input.leb128().map_err(whole)?,
    );
    let rows = usize::try_from(rows).map_err(|_| whole(format!("{rows} rows is too many")))?;
    block_columns(input, columns, rows, 1)
}

/// Decodes a body of Native blocks into the table's columns. Every block must name the same
/// columns as the first.
pub(crate) fn decode(
    schema: &TableSchema,
    body: &[u8],
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    let mut built = None;
    read_blocks(schema, body, options, &mut built)?;
    finish(schema, built)
}

/// Bodies of Native blocks decoded into one set of columns, and each body's rows. `None` when a
/// body names other columns than the first or any body fails: each is then decoded alone, which
/// names its own error.
pub(crate) fn decode_many(
    schema: &TableSchema,
    bodies: &[&[u8]],
    options: &DecodeOptions,
) -> Option<(RecordBatch, Vec<usize>)> {
    let mut built: Option<Built<'_>> = None;
    let rows_so_far = |built: &Option<Built<'_>>| built.as_ref().map_or(0, |(_, c)| c.rows());
    let mut rows = Vec::with_capacity(bodies.len());
    for body in bodies {
        let before = rows_so_far(&built);
        read_blocks(schema, body, options, &mut built).ok()?;
        rows.push(rows_so_far(&built) - before);
    }
    Some((finish(schema, built).ok()?, rows))
}

/// The names the first block with rows gave its columns, and the table's columns built so far.
type Built<'s> = (Vec<String>, Columns<'s>);

/// The arrays built, or none for a body of no rows.
fn finish(schema: &TableSchema, built: Option<Built<'_>>) -> Result<RecordBatch, DecodeError> {
    match built {
        Some((_, columns)) => columns.finish(),
        None => Ok(RecordBatch::new_empty(schema.arrow().clone())),
    }
}

/// Reads a body's blocks into `built`, made at the first block with rows.
fn read_blocks<'s>(
    schema: &'s TableSchema,
    body: &[u8],
    options: &DecodeOptions,
    built: &mut Option<Built<'s>>,
) -> Result<(), DecodeError> {
    let mut input = Input::new(body);
    while !input.is_empty() {
        let first_row = built.as_ref().map_or(0, |(_, c)| c.rows()) + 1;
        let whole = |e: String| at_row(first_row, DecodeError::new(None, None, e));
        let (columns, rows) = (
            input.leb128().map_err(whole)?,
            input.leb128().map_err(whole)?,
        );
        let rows = usize::try_from(rows).map_err(|_| whole(format!("{rows} rows is too many")))?;
        if rows == 0 {
            skip_columns(&mut input, columns, 0).map_err(whole)?;
            continue;
        }
        let (names, table) = match built {
            Some(built) => built,
            None => {
                let names: Vec<String> = block_columns(input.clone(), columns, rows, first_row)?
                    .into_iter()
                    .map(|(name, _)| name)
                    .collect();
                built.insert((names.clone(), Columns::new(schema, &names, options)?))
            }
        };
        let block = Block {
            names,
            rows,
            first_row,
        };
        block.read(&mut input, columns, table)?;
    }
    Ok(())
}

/// Moves past `columns` columns of `rows` rows each.
fn skip_columns(input: &mut Input<'_>, columns: u64, rows: u64) -> Result<(), String> {
    for _ in 0..columns {
        let (name, _, ty) = column_header(input)?;
        if rows > 0 {
            read_prefix(&ty, input)
                .and_then(|()| skip(&ty, input, rows))
                .map_err(|e| format!("column '{name}': {e}"))?;
        }
    }
    Ok(())
}

/// The names and type names of a block's columns, read ahead on a copy of the input. A column
/// whose layout is wrong is refused here as reading it would refuse it.
fn block_columns(
    mut input: Input<'_>,
    columns: u64,
    rows: usize,
    first_row: usize,
) -> Result<Vec<(String, String)>, DecodeError> {
    let mut declared = Vec::new();
    for _ in 0..columns {
        let (name, ty_name, ty) = column_header(&mut input)
            .map_err(|e| at_row(first_row, DecodeError::new(None, None, e)))?;
        if rows > 0 {
            read_prefix(&ty, &mut input)
                .and_then(|()| skip(&ty, &mut input, rows as u64))
                .map_err(|e| at_row(first_row, DecodeError::new(None, Some(name.to_owned()), e)))?;
        }
        declared.push((name.to_owned(), ty_name.to_owned()));
    }
    Ok(declared)
}

/// A block with rows, as the first block named its columns.
struct Block<'n> {
    names: &'n [String],
    rows: usize,
    /// The number its first row has in the body, for errors.
    first_row: usize,
}

impl Block<'_> {
    /// Reads the block's columns, its counts already read, into the table's.
    fn read(
        &self,
        input: &mut Input<'_>,
        columns: u64,
        table: &mut Columns<'_>,
    ) -> Result<(), DecodeError> {
        let whole = |e: String| at_row(self.first_row, DecodeError::new(None, None, e));
        if columns != self.names.len() as u64 {
            return Err(whole(self.differs(columns)));
        }
        for (index, expected) in self.names.iter().enumerate() {
            let (name, ty_name, ty) = column_header(input).map_err(whole)?;
            if name != expected {
                return Err(whole(self.differs(columns)));
            }
            let in_column = |(row, e): (Option<usize>, Unfit)| {
                at_row(self.first_row + row.unwrap_or(0), e.in_column(name))
            };
            let whole_column = |e: String| in_column((None, Unfit::new(e)));
            read_prefix(&ty, input).map_err(whole_column)?;
            match table.target_type(index).cloned() {
                Some(target) if !fits(&ty, &target) => {
                    let e =
                        format!("a {ty_name} value does not go into the table's {target} column");
                    return Err(whole_column(e));
                }
                Some(_) if is_nested(&ty) => {
                    let (builder, target) = table
                        .builder(index)
                        .ok_or_else(|| whole_column("the column has no builder".to_owned()))?;
                    read_column(&ty, input, self.rows, target, builder).map_err(in_column)?;
                }
                Some(target) => {
                    let put = &mut |_: usize, value: Value<'_>| table.push(index, value);
                    visit(&ty, input, self.rows, &target, None, put).map_err(in_column)?;
                }
                None => skip(&ty, input, self.rows as u64).map_err(whole_column)?,
            }
        }
        table.end_block(self.rows);
        Ok(())
    }

    fn differs(&self, columns: u64) -> String {
        format!(
            "the block's {columns} columns are not the first block's {}",
            self.names.join(", ")
        )
    }
}

/// Whether a column of `ty` is an array, tuple or map, which goes into its builder whole.
fn is_nested(ty: &NativeType) -> bool {
    matches!(
        ty,
        NativeType::Array(_) | NativeType::Tuple(_) | NativeType::Map(..)
    )
}

#[cfg(test)]
mod tests;
