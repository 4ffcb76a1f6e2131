//! ClickHouse's `Native` format: blocks of whole columns, each named and typed in the block.
//!
//! A block is its column count and row count (LEB128), then per column its name, its type name
//! and, when the block has rows, the column's prefix and data. Over HTTP blocks follow each
//! other with nothing between; the native protocol puts each in a packet of its own, which
//! [`native_block_len`] finds the end of.
//!
//! - `types`: type names into layouts.
//! - `read`: a column's bytes walked over or read into values.
//!
//! Columns are read whole and then handed to the table's columns a row at a time, so every
//! value goes through the same range checks as in the other formats.

mod read;
mod types;

use arrow::array::RecordBatch;

use self::read::{Cell, read_cells, read_prefix, skip};
use self::types::NativeType;
use super::at_row;
use super::columns::Columns;
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
    for _ in 0..columns {
        let (name, ty) = column_header(input)?;
        if rows > 0 {
            read_prefix(&ty, input)
                .and_then(|()| skip(&ty, input, rows))
                .map_err(|e| format!("column '{name}': {e}"))?;
        }
    }
    Ok(rows)
}

fn column_header<'a>(input: &mut Input<'a>) -> Result<(&'a str, NativeType), String> {
    let name = input.string()?;
    let ty = input.string()?;
    let ty = NativeType::parse(ty).map_err(|e| format!("column '{name}': {e}"))?;
    Ok((name, ty))
}

/// The names and types of the first block's columns, for a table made by its first insert.
pub(crate) fn declared_columns(body: &[u8]) -> Result<Vec<(String, String)>, DecodeError> {
    let mut input = Input::new(body);
    let whole = |e: String| DecodeError::new(None, None, e);
    let (columns, rows) = (
        input.leb128().map_err(whole)?,
        input.leb128().map_err(whole)?,
    );
    let mut declared = Vec::new();
    for _ in 0..columns {
        let name = input.string().map_err(whole)?;
        let ty_name = input.string().map_err(whole)?;
        let ty = NativeType::parse(ty_name)
            .map_err(|e| DecodeError::new(None, Some(name.to_owned()), e))?;
        if rows > 0 {
            read_prefix(&ty, &mut input)
                .and_then(|()| skip(&ty, &mut input, rows))
                .map_err(|e| DecodeError::new(None, Some(name.to_owned()), e))?;
        }
        declared.push((name.to_owned(), ty_name.to_owned()));
    }
    Ok(declared)
}

/// A block's columns as read: each name with its values, or none for a column the insert
/// skips.
struct Block<'a> {
    rows: usize,
    names: Vec<String>,
    cells: Vec<Option<Vec<Cell<'a>>>>,
}

/// Decodes a body of Native blocks into the table's columns. Every block must name the same
/// columns as the first.
pub(crate) fn decode(
    schema: &TableSchema,
    body: &[u8],
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    let mut input = Input::new(body);
    let mut built: Option<(Vec<String>, Columns<'_>)> = None;
    while !input.is_empty() {
        let first_row = built.as_ref().map_or(0, |(_, c)| c.rows()) + 1;
        let block = read_block(schema, &mut input, first_row)?;
        if block.rows == 0 {
            continue;
        }
        let (names, columns) = match &mut built {
            Some(built) => built,
            None => built.insert((
                block.names.clone(),
                Columns::new(schema, &block.names, options)?,
            )),
        };
        if *names != block.names {
            return Err(at_row(
                first_row,
                DecodeError::new(
                    None,
                    None,
                    format!(
                        "the block names columns {} where the first block named {}",
                        block.names.join(", "),
                        names.join(", ")
                    ),
                ),
            ));
        }
        put_block(columns, &block, first_row)?;
    }
    match built {
        Some((_, columns)) => columns.finish(),
        None => Ok(RecordBatch::new_empty(schema.arrow().clone())),
    }
}

/// Reads one block; `first_row` is the number its first row has in the body, for errors.
fn read_block<'a>(
    schema: &TableSchema,
    input: &mut Input<'a>,
    first_row: usize,
) -> Result<Block<'a>, DecodeError> {
    let whole = |e: String| at_row(first_row, DecodeError::new(None, None, e));
    let columns = input.leb128().map_err(whole)?;
    let rows = input.leb128().map_err(whole)?;
    let rows = usize::try_from(rows).map_err(|_| whole(format!("{rows} rows is too many")))?;
    let mut block = Block {
        rows,
        names: Vec::new(),
        cells: Vec::new(),
    };
    for _ in 0..columns {
        let (name, ty) = column_header(input).map_err(whole)?;
        let in_column = |(row, e): (Option<usize>, String)| {
            at_row(
                first_row + row.unwrap_or(0),
                DecodeError::new(None, Some(name.to_owned()), e),
            )
        };
        block.names.push(name.to_owned());
        if rows == 0 {
            continue;
        }
        read_prefix(&ty, input).map_err(|e| in_column((None, e)))?;
        let target = schema
            .columns()
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.ty);
        block.cells.push(match target {
            Some(target) => Some(read_cells(&ty, input, rows, target).map_err(in_column)?),
            None => {
                skip(&ty, input, rows as u64).map_err(|e| in_column((None, e)))?;
                None
            }
        });
    }
    Ok(block)
}

fn put_block(
    columns: &mut Columns<'_>,
    block: &Block<'_>,
    first_row: usize,
) -> Result<(), DecodeError> {
    for row in 0..block.rows {
        for (index, cells) in block.cells.iter().enumerate() {
            if let Some(cells) = cells {
                columns
                    .put(index, cells[row].value())
                    .map_err(|e| at_row(first_row + row, e))?;
            }
        }
        columns.end_row().map_err(|e| at_row(first_row + row, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
