//! `RowBinary`, `RowBinaryWithNames` and `RowBinaryWithNamesAndTypes`: each row's values back to
//! back in ClickHouse's binary layout, after an optional header of column names and types.
//!
//! With types in the header, each value is read as the type the client declares and converted
//! into the table's; without, as the type `DESCRIBE TABLE` announces for the column. A header
//! type that can never go into its column (a UUID into a decimal, say) is refused before any
//! row is read.

use arrow::array::RecordBatch;

use super::columns::{Columns, Value, can_take};
use super::wire::{Input, WireType};
use super::{Header, at_row, body_columns};
use crate::error::DecodeError;
use crate::options::DecodeOptions;
use crate::schema::TableSchema;

/// The header's names and, when it has them, types: as written, and parsed.
struct Declared {
    names: Vec<String>,
    types: Option<(Vec<String>, Vec<WireType>)>,
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
        types: Some((type_names, types)),
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
        Some((type_names, types)) => {
            check_fit(&types, &type_names, &columns, &names)?;
            types
        }
        None => announced_types(schema, &columns, &names)?,
    };
    Ok((names, types, columns))
}

/// Refuses a header type that no value of could go into its column.
fn check_fit(
    types: &[WireType],
    type_names: &[String],
    columns: &Columns<'_>,
    names: &[String],
) -> Result<(), DecodeError> {
    for (index, ((ty, type_name), name)) in types.iter().zip(type_names).zip(names).enumerate() {
        let Some(target) = columns.target_type(index) else {
            continue;
        };
        if !can_take(target, ty.kind()) {
            return Err(DecodeError::new(
                None,
                Some(name.clone()),
                format!("header: a {type_name} value does not go into the table's {target} column"),
            ));
        }
    }
    Ok(())
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
                Ok(WireType::of(&column.ty, column.nullable))
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
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Decimal128Type, Int64Type, TimestampMicrosecondType};

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

    /// The table of ClickHouse 18.16.1's `v (n UInt8, d Decimal(18, 2), u Nullable(UUID),
    /// j Nullable(String), w Decimal(38, 10))` in sluice: the types `DESCRIBE TABLE` announces
    /// for it are the ones 18.16 wrote.
    fn typed_schema() -> TableSchema {
        let decimal = |precision, scale| ColumnType::Decimal { precision, scale };
        TableSchema::new(vec![
            Column::new("d", decimal(18, 2)).required(),
            Column::new("u", ColumnType::Uuid),
            Column::new("j", ColumnType::Json),
            Column::new("w", decimal(38, 10)).required(),
        ])
        .unwrap()
    }

    /// What ClickHouse 18.16.1 answered for `SELECT d, u, j, w FROM v ORDER BY n FORMAT
    /// RowBinary`, `v` holding `(1, -12.34, '67e55044-10b1-426f-9247-bb680e5fe0c8',
    /// '{"a":[1,2]}', '-1234567890123456789012345678.0123456789')` and `(2,
    /// 9999999999999999.99, NULL, NULL, 0.0000000001)`.
    const CLICKHOUSE_ROWS: [u8; 80] = [
        0x2e, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x6f, 0x42, 0xb1, 0x10, 0x44, 0x50,
        0xe5, 0x67, 0xc8, 0xe0, 0x5f, 0x0e, 0x68, 0xbb, 0x47, 0x92, 0x00, 0x0b, 0x7b, 0x22, 0x61,
        0x22, 0x3a, 0x5b, 0x31, 0x2c, 0x32, 0x5d, 0x7d, 0xeb, 0xba, 0x98, 0x33, 0xb1, 0x6f, 0xb6,
        0x3b, 0xec, 0xcc, 0xfd, 0x0f, 0x09, 0x4f, 0xb6, 0xf6, 0xff, 0xff, 0x63, 0xa7, 0xb3, 0xb6,
        0xe0, 0x0d, 0x01, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn decimals_uuids_and_json_in_clickhouses_own_layout() {
        let batch = crate::formats::decode(
            &typed_schema(),
            &CLICKHOUSE_ROWS,
            &DecodeOptions {
                format: crate::options::InputFormat::RowBinary(Header::None),
                ..options_for(None, false)
            },
        )
        .unwrap();
        let d: Vec<i128> = batch
            .column(0)
            .as_primitive::<Decimal128Type>()
            .values()
            .to_vec();
        assert_eq!(d, [-1234, 999_999_999_999_999_999]);
        let u: Vec<_> = batch.column(1).as_string::<i32>().iter().collect();
        assert_eq!(u, [Some("67e55044-10b1-426f-9247-bb680e5fe0c8"), None]);
        let j: Vec<_> = batch.column(2).as_string::<i32>().iter().collect();
        assert_eq!(j, [Some("{\"a\":[1,2]}"), None]);
        let w: Vec<i128> = batch
            .column(3)
            .as_primitive::<Decimal128Type>()
            .values()
            .to_vec();
        assert_eq!(w, [-12_345_678_901_234_567_890_123_456_780_123_456_789, 1]);
    }

    /// A header naming `d`, `u` and `w` in the types given, then `rows` as they are.
    fn with_types(types: [&str; 3], rows: &[u8]) -> Vec<u8> {
        let mut body = vec![3];
        for name in ["d", "u", "w"] {
            string(&mut body, name);
        }
        for ty in types {
            string(&mut body, ty);
        }
        body.extend_from_slice(rows);
        body
    }

    #[test]
    fn a_header_of_other_decimals_is_rescaled_exactly_or_refused() {
        let decode_typed = |body: &[u8]| {
            decode(
                &typed_schema(),
                body,
                Header::NamesAndTypes,
                &options_for(None, false),
            )
        };
        let types = ["Decimal32(4)", "LowCardinality(Nullable(UUID))", "Int64"];
        let mut rows = (-15_000_i32).to_le_bytes().to_vec();
        rows.push(1);
        rows.extend_from_slice(&(-3_i64).to_le_bytes());
        let batch = decode_typed(&with_types(types, &rows)).unwrap();
        let d = batch.column(0).as_primitive::<Decimal128Type>();
        assert_eq!(d.value(0), -150, "-1.5000 is -1.50");
        assert!(batch.column(1).is_null(0));
        let w = batch.column(3).as_primitive::<Decimal128Type>();
        assert_eq!(w.value(0), -30_000_000_000, "-3 is -3.0000000000");

        let mut rows = rows.clone();
        rows[..4].copy_from_slice(&12_345_i32.to_le_bytes());
        let body = with_types(types, &[rows.clone(), rows].concat());
        let error = decode_typed(&body).unwrap_err().to_string();
        assert_eq!(
            error,
            "row 1, column 'd': 1.2345 has more digits after the point than decimal(18, 2) \
             keeps, and sluice does not round"
        );
    }

    #[test]
    fn a_header_type_no_value_of_fits_is_refused_before_any_row() {
        for (types, column, says) in [
            (
                ["UUID", "UUID", "Int64"],
                "d",
                "a UUID value does not go into the table's decimal(18, 2) column",
            ),
            (
                ["Decimal(9, 2)", "Int64", "Int64"],
                "u",
                "a Int64 value does not go into the table's uuid column",
            ),
            (["Float64", "UUID", "Int64"], "d", "a Float64 value"),
            (
                ["Decimal(9, 2)", "Nullable(Decimal(9, 2))", "Int64"],
                "u",
                "Nullable(Decimal(9, 2))",
            ),
        ] {
            let error = decode(
                &typed_schema(),
                &with_types(types, &[]),
                Header::NamesAndTypes,
                &options_for(None, false),
            )
            .unwrap_err();
            assert_eq!(error.field.as_deref(), Some(column), "{types:?}");
            assert!(
                error.message.starts_with("header: ") && error.message.contains(says),
                "{error}"
            );
        }
        let wide = decode(
            &typed_schema(),
            &with_types(["Decimal(40, 2)", "UUID", "Int64"], &[]),
            Header::NamesAndTypes,
            &options_for(None, false),
        );
        assert_eq!(
            wide.unwrap().num_rows(),
            0,
            "a Decimal256 is read when it fits"
        );
        let error = declared_columns(&with_types(["Decimal(40, 2)", "UUID", "Int64"], &[]))
            .and_then(super::super::columns_of)
            .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("d"));
        assert!(error.message.contains("38"), "{error}");
        let inferred = declared_columns(&with_types(
            ["Nullable(Decimal(9, 2))", "UUID", "Int64"],
            &[],
        ))
        .and_then(super::super::columns_of)
        .unwrap();
        let types: Vec<_> = inferred
            .columns()
            .iter()
            .map(|c| (c.ty.clone(), c.nullable))
            .collect();
        assert_eq!(
            types,
            [
                (
                    ColumnType::Decimal {
                        precision: 9,
                        scale: 2
                    },
                    true
                ),
                (ColumnType::Uuid, false),
                (ColumnType::Int64, false)
            ]
        );
    }
}
