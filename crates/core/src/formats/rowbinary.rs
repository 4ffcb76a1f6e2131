//! `RowBinary`, `RowBinaryWithNames` and `RowBinaryWithNamesAndTypes`: each row's values back to
//! back in ClickHouse's binary layout, after an optional header of column names and types.
//!
//! With types in the header, each value is read as the type the client declares and converted
//! into the table's; without, as the type `DESCRIBE TABLE` announces for the column.

use arrow::array::RecordBatch;

use super::columns::{Columns, Value};
use super::wire::{Input, WireType};
use super::{Header, at_row, body_columns};
use crate::error::DecodeError;
use crate::options::DecodeOptions;
use crate::schema::TableSchema;

/// The header's names and, when it has them, types.
struct Declared {
    names: Vec<String>,
    types: Option<Vec<WireType>>,
}

fn read_header(input: &mut Input<'_>, header: Header) -> Result<Option<Declared>, DecodeError> {
    if header == Header::None {
        return Ok(None);
    }
    let (names, type_names) = header_strings(input, header == Header::NamesAndTypes)?;
    if header == Header::Names {
        return Ok(Some(Declared { names, types: None }));
    }
    let types = names
        .iter()
        .zip(&type_names)
        .map(|(name, ty)| {
            WireType::parse(ty)
                .map_err(|e| DecodeError::new(None, Some(name.clone()), format!("header: {e}")))
        })
        .collect::<Result<_, _>>()?;
    Ok(Some(Declared {
        names,
        types: Some(types),
    }))
}

/// The header's column names, and their type names when `with_types`.
fn header_strings(
    input: &mut Input<'_>,
    with_types: bool,
) -> Result<(Vec<String>, Vec<String>), DecodeError> {
    let at_header = |message: String| DecodeError::new(None, None, format!("header: {message}"));
    let count = input.leb128().map_err(at_header)?;
    let mut names = Vec::new();
    for _ in 0..count {
        names.push(input.string().map_err(at_header)?.to_owned());
    }
    let mut types = Vec::new();
    if with_types {
        for _ in 0..count {
            types.push(input.string().map_err(at_header)?.to_owned());
        }
    }
    Ok((names, types))
}

/// The columns a `RowBinaryWithNamesAndTypes` header declares: names and ClickHouse types.
pub(crate) fn declared_columns(body: &[u8]) -> Result<Vec<(String, String)>, DecodeError> {
    let (names, types) = header_strings(&mut Input::new(body), true)?;
    Ok(names.into_iter().zip(types).collect())
}

/// The body's columns: their names, the type each is read as, and the table's columns they fill.
fn prepare<'s>(
    schema: &'s TableSchema,
    declared: Option<Declared>,
    options: &DecodeOptions,
) -> Result<(Vec<String>, Vec<WireType>, Columns<'s>), DecodeError> {
    let (names, types) = match declared {
        Some(Declared { names, types }) => (names, types),
        None => (body_columns(schema, options.columns.as_deref()), None),
    };
    let columns = Columns::new(schema, &names, options)?;
    let types = match types {
        Some(types) => types,
        None => announced_types(schema, &columns, &names)?,
    };
    Ok((names, types, columns))
}

/// The types `DESCRIBE TABLE` announces, for a body that does not say.
fn announced_types(
    schema: &TableSchema,
    columns: &Columns<'_>,
    names: &[String],
) -> Result<Vec<WireType>, DecodeError> {
    columns
        .targets()
        .iter()
        .zip(names)
        .map(|(target, name)| match target {
            Some(i) => {
                let column = &schema.columns()[*i];
                Ok(WireType::of(column.ty, column.nullable))
            }
            None => Err(DecodeError::new(
                None,
                Some(name.clone()),
                "an unknown column cannot be skipped in RowBinary without its type: \
                 send RowBinaryWithNamesAndTypes"
                    .to_owned(),
            )),
        })
        .collect()
}

/// Decodes a `RowBinary` body into the table's columns.
pub(crate) fn decode(
    schema: &TableSchema,
    body: &[u8],
    header: Header,
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    let mut input = Input::new(body);
    let declared = read_header(&mut input, header)?;
    let (names, types, mut columns) = prepare(schema, declared, options)?;
    while !input.is_empty() {
        let row = columns.rows() + 1;
        for (index, (ty, name)) in types.iter().zip(&names).enumerate() {
            let value = ty.read(&mut input).map_err(|message| {
                at_row(row, DecodeError::new(None, Some(name.clone()), message))
            })?;
            put(&mut columns, index, value, row)?;
        }
        columns.end_row().map_err(|e| at_row(row, e))?;
    }
    columns.finish()
}

fn put(
    columns: &mut Columns<'_>,
    index: usize,
    value: Value<'_>,
    row: usize,
) -> Result<(), DecodeError> {
    columns.put(index, value).map_err(|e| at_row(row, e))
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use arrow::datatypes::{Int64Type, TimestampMicrosecondType};

    use super::*;
    use crate::formats::tests_support::*;
    use crate::schema::{Column, ColumnType};

    fn schema() -> TableSchema {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("name", ColumnType::String),
            Column::new("at", ColumnType::Timestamp),
        ])
        .unwrap()
    }

    fn string(out: &mut Vec<u8>, s: &str) {
        out.push(s.len() as u8);
        out.extend_from_slice(s.as_bytes());
    }

    #[test]
    fn plain_rows_come_in_the_announced_types() {
        let mut body = Vec::new();
        for id in [1_i64, 2] {
            body.extend_from_slice(&id.to_le_bytes());
            body.push(0);
            string(&mut body, "x");
            body.push(1);
        }
        let batch = decode(&schema(), &body, Header::None, &options_for(None, false)).unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(1), 2);
        assert_eq!(batch.column(2).null_count(), 2);
    }

    #[test]
    fn a_header_with_types_says_how_each_value_is_sent() {
        let mut body = vec![2];
        string(&mut body, "at");
        string(&mut body, "id");
        string(&mut body, "DateTime('UTC')");
        string(&mut body, "UInt32");
        body.extend_from_slice(&1_795_953_600_u32.to_le_bytes());
        body.extend_from_slice(&7_u32.to_le_bytes());
        let batch = decode(
            &schema(),
            &body,
            Header::NamesAndTypes,
            &options_for(None, false),
        )
        .unwrap();
        let at = batch.column(2).as_primitive::<TimestampMicrosecondType>();
        assert_eq!(at.value(0), 1_795_953_600_000_000);
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(0), 7);
        assert!(batch.column(1).is_null(0));
    }

    #[test]
    fn a_short_row_is_refused_with_its_row_and_column() {
        let mut body = Vec::new();
        body.extend_from_slice(&1_i64.to_le_bytes());
        body.push(0);
        string(&mut body, "x");
        body.push(1);
        body.extend_from_slice(&2_i64.to_le_bytes());
        body.push(0);
        body.push(5);
        let error = decode(&schema(), &body, Header::None, &options_for(None, false)).unwrap_err();
        assert_eq!(error.line, Some(2));
        assert_eq!(error.field.as_deref(), Some("name"));
        assert!(error.to_string().contains("body ends"), "{error}");
        assert!(
            error.to_string().starts_with("row 2, column 'name'"),
            "{error}"
        );
    }
}
