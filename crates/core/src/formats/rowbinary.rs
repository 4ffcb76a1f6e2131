//! `RowBinary`, `RowBinaryWithNames` and `RowBinaryWithNamesAndTypes`: each row's values back to
//! back in ClickHouse's binary layout, after an optional header of column names and types.
//!
//! With types in the header, each value is read as the type the client declares and converted
//! into the table's; without, as the type `DESCRIBE TABLE` announces for the column. A header
//! type that can never go into its column (a UUID into a decimal, say) is refused before any
//! row is read.
//!
//! An `Array`, `Tuple` or `Map` goes into a `list`, `struct` or `map` column of the same
//! structure ([`super::fit`]), read value by value straight into its builder. An unknown column
//! of any type is skipped when the header says its type.

use arrow::array::RecordBatch;

use super::builder::{Builder, MapBuilder, Step, Unfit};
use super::columns::Columns;
use super::fit::fits;
use super::quoted;
use super::value::{Value, to_text};
use super::wire::{Input, WireType};
use super::{Header, at_row, body_columns, not_the_first_header};
use crate::error::DecodeError;
use crate::options::DecodeOptions;
use crate::schema::{ColumnType, TableSchema};

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
        if !fits(ty, target) {
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
    read_rows(&mut input, (&names, &types), &mut columns)?;
    columns.finish()
}

/// Bodies that share their header decoded into one set of columns, and each body's rows.
/// `None` when a body's header differs from the first's or any body fails: each is then decoded
/// alone, which names its own error.
pub(crate) fn decode_many(
    schema: &TableSchema,
    bodies: &[&[u8]],
    header: Header,
    options: &DecodeOptions,
) -> Option<(RecordBatch, Vec<usize>)> {
    let first = bodies.first()?;
    let mut input = Input::new(first);
    let declared = read_header(&mut input, header).ok()?;
    let header_bytes = &first[..input.pos()];
    let (names, types, columns) = prepare(schema, declared, options).ok()?;
    columns.read_each(bodies, |body, columns| {
        let rows = body
            .strip_prefix(header_bytes)
            .ok_or_else(not_the_first_header)?;
        read_rows(&mut Input::new(rows), (&names, &types), columns)
    })
}

/// Reads rows of the columns `names`, each read as its type in `types`, to the end of `input`.
fn read_rows(
    input: &mut Input<'_>,
    (names, types): (&[String], &[WireType]),
    columns: &mut Columns<'_>,
) -> Result<(), DecodeError> {
    while !input.is_empty() {
        let row = columns.rows() + 1;
        for (index, (ty, name)) in types.iter().zip(names).enumerate() {
            let at =
                |message: String| at_row(row, DecodeError::new(None, Some(name.clone()), message));
            if is_nested(ty) {
                let read = |builder: &mut Builder, target: &ColumnType| {
                    read_into(ty, input, target, builder)
                };
                if !columns
                    .put_nested(index, read)
                    .map_err(|e| at_row(row, e))?
                {
                    skip(ty, input).map_err(at)?;
                }
                continue;
            }
            let value = ty.read(input).map_err(at)?;
            put(columns, index, value, row)?;
        }
        columns.end_row().map_err(|e| at_row(row, e))?;
    }
    Ok(())
}

fn put(
    columns: &mut Columns<'_>,
    index: usize,
    value: Value<'_>,
    row: usize,
) -> Result<(), DecodeError> {
    columns.put(index, value).map_err(|e| at_row(row, e))
}

/// Whether a value of `ty` is an array, tuple or map, which goes into its builder whole.
fn is_nested(ty: &WireType) -> bool {
    matches!(
        ty,
        WireType::Array(_) | WireType::Tuple(_) | WireType::Map(..)
    )
}

/// Reads one value of `ty` into `builder`, of the table's type `target`, which [`fits`] has
/// found `ty` fits. The recursion follows the header's type, whose depth is bounded.
fn read_into(
    ty: &WireType,
    input: &mut Input<'_>,
    target: &ColumnType,
    builder: &mut Builder,
) -> Result<(), Unfit> {
    match (ty, target, builder) {
        (WireType::Array(element), ColumnType::List(target), Builder::List(list)) => {
            for index in 0..input.count()? {
                read_into(element, input, target, list.element())
                    .map_err(|e| e.at(Step::Element(index)))?;
            }
            list.close().map_err(Unfit::new)
        }
        (WireType::Map(key, value), ColumnType::Map(target), Builder::Map(map)) => {
            read_entries((key, value), input, target, map)
        }
        (WireType::Array(entry), ColumnType::Map(target), Builder::Map(map)) => match &**entry {
            WireType::Tuple(pair) => match &pair[..] {
                [(_, key), (_, value)] => read_entries((key, value), input, target, map),
                _ => Err(Unfit::new(format!("a tuple does not go into {target}"))),
            },
            _ => Err(Unfit::new(format!("an array does not go into {target}"))),
        },
        (WireType::Tuple(elements), ColumnType::Struct(fields), Builder::Struct(record))
            if elements.len() == fields.len() =>
        {
            for (index, ((_, element), field)) in elements.iter().zip(fields).enumerate() {
                read_into(element, input, &field.ty, record.child(index))
                    .map_err(|e| e.at(Step::Field(field.name.clone())))?;
            }
            record.close(1);
            Ok(())
        }
        (ty, target, builder) => {
            let value = ty.read(input)?;
            quoted::push(builder, target, value)
        }
    }
}

/// A map's entries: their count, then a key and a value each.
fn read_entries(
    (key, value): (&WireType, &WireType),
    input: &mut Input<'_>,
    target: &ColumnType,
    map: &mut MapBuilder,
) -> Result<(), Unfit> {
    for _ in 0..input.count()? {
        let text = match key.read(input)? {
            Value::Null => return Err(Unfit::new("a map's key is null; keys are strings")),
            other => to_text(other)?.into_owned(),
        };
        map.keys().append_value(&text);
        read_into(value, input, target, map.values()).map_err(|e| e.at(Step::Key(text)))?;
    }
    map.close().map_err(Unfit::new)
}

/// Moves past one value of `ty`, of a column the insert skips.
fn skip(ty: &WireType, input: &mut Input<'_>) -> Result<(), String> {
    match ty {
        WireType::Array(element) => (0..input.count()?).try_for_each(|_| skip(element, input)),
        WireType::Map(key, value) => (0..input.count()?).try_for_each(|_| {
            skip(key, input)?;
            skip(value, input)
        }),
        WireType::Tuple(elements) => elements.iter().try_for_each(|(_, e)| skip(e, input)),
        WireType::Nullable(inner) => match input.byte()? {
            0 => skip(inner, input),
            1 => Ok(()),
            other => Err(format!("a Nullable flag must be 0 or 1, not {other}")),
        },
        other => other.read(input).map(drop),
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Decimal128Type, Int64Type, TimestampMicrosecondType};

    use super::*;
    use crate::formats::tests_support::*;
    use crate::options::InputFormat;
    use crate::schema::{Column, StructField};

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

    /// What ClickHouse 18.16.1 answered for `SELECT * FROM v ORDER BY id FORMAT RowBinary`, `v`
    /// being [`nested_table`]'s and holding [`nested_rows`].
    const CLICKHOUSE_NESTED: [u8; 67] = [
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x01, 0x61, 0x01, 0x00, 0x08,
        0x69, 0x74, 0x27, 0x73, 0x09, 0x74, 0x61, 0x62, 0x00, 0xc8, 0x00, 0x00, 0x00, 0x01, 0x00,
        0x01, 0x78, 0x03, 0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
        0x01, 0x00, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
    ];

    #[test]
    fn arrays_and_tuples_in_clickhouses_own_layout() {
        let rows = decode_json(
            &nested_table(),
            InputFormat::RowBinary(Header::None),
            &CLICKHOUSE_NESTED,
        );
        assert_eq!(rows, Ok(nested_rows()));
    }

    /// A header of `columns`' names and types, then `rows`.
    fn header(columns: &[(&str, &str)], rows: &[u8]) -> Vec<u8> {
        let mut body = vec![columns.len() as u8];
        columns.iter().for_each(|(name, _)| string(&mut body, name));
        columns.iter().for_each(|(_, ty)| string(&mut body, ty));
        body.extend_from_slice(rows);
        body
    }

    /// `id int64`, `labels map<string, float64>`, `attrs struct<code: int32, http: map<string,
    /// list<int64>>>`.
    fn map_table() -> TableSchema {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("labels", ColumnType::map(ColumnType::Float64)),
            Column::new(
                "attrs",
                ColumnType::Struct(vec![
                    StructField::new("code", ColumnType::Int32),
                    StructField::new("http", ColumnType::map(ColumnType::list(ColumnType::Int64))),
                ]),
            ),
        ])
        .unwrap()
    }

    /// Two rows of [`map_table`] laid out as ClickHouse's `SerializationMap` writes a map in
    /// `RowBinary`: the entries' count, then each key and value. Each row also has an `extra`
    /// column of `Map(String, Array(Tuple(String, UInt8)))`, which the table lacks.
    fn map_rows() -> Vec<u8> {
        let mut rows = 1_i64.to_le_bytes().to_vec();
        rows.push(2);
        string(&mut rows, "a");
        rows.push(0);
        rows.extend_from_slice(&1.5_f64.to_le_bytes());
        string(&mut rows, "b");
        rows.push(1);
        rows.push(0);
        rows.extend_from_slice(&7_i32.to_le_bytes());
        rows.push(1);
        string(&mut rows, "s");
        rows.push(2);
        rows.push(0);
        rows.extend_from_slice(&200_i64.to_le_bytes());
        rows.push(1);
        rows.extend_from_slice(&[1, 1, b'k', 1, 1, b'x', 9]);
        rows.extend_from_slice(&2_i64.to_le_bytes());
        rows.extend_from_slice(&[0, 1, 0, 0]);
        rows
    }

    const MAP_TYPES: [(&str, &str); 4] = [
        ("id", "Int64"),
        ("labels", "Map(LowCardinality(String), Nullable(Float64))"),
        (
            "attrs",
            "Tuple(code Nullable(Int32), http Map(String, Array(Nullable(Int64))))",
        ),
        ("extra", "Map(String, Array(Tuple(String, UInt8)))"),
    ];

    #[test]
    fn maps_nested_in_tuples_and_unknown_nested_columns_skipped() {
        let body = header(&MAP_TYPES, &map_rows());
        let options = options_for(None, true);
        let batch = decode(&map_table(), &body, Header::NamesAndTypes, &options).unwrap();
        assert_eq!(
            rows_json(&batch),
            serde_json::json!([
                {"id": 1, "labels": {"a": 1.5, "b": null},
                 "attrs": {"code": 7, "http": {"s": [200, null]}}},
                {"id": 2, "labels": {}, "attrs": {"code": null, "http": {}}},
            ])
        );
        let refused = decode(
            &map_table(),
            &body,
            Header::NamesAndTypes,
            &options_for(None, false),
        );
        assert!(refused.unwrap_err().to_string().contains("'extra'"));
    }

    #[test]
    fn a_nested_value_that_does_not_fit_is_named_by_its_way() {
        let table = TableSchema::new(vec![
            Column::new("tags", ColumnType::list(ColumnType::UInt8)),
            Column::new("labels", ColumnType::map(ColumnType::UInt8)),
        ])
        .unwrap();
        let types = [("tags", "Array(Int64)"), ("labels", "Map(String, Int64)")];
        let mut rows = vec![1];
        rows.extend_from_slice(&5_i64.to_le_bytes());
        rows.extend_from_slice(&[1, 1, b'b']);
        rows.extend_from_slice(&(-1_i64).to_le_bytes());
        let read = |rows: &[u8]| {
            decode(
                &table,
                &header(&types, rows),
                Header::NamesAndTypes,
                &options_for(None, false),
            )
        };
        let error = read(&rows).unwrap_err().to_string();
        assert_eq!(
            error,
            "row 1, column 'labels.b': -1 is out of range for uint8"
        );
        let mut rows = vec![2];
        rows.extend_from_slice(&5_i64.to_le_bytes());
        rows.extend_from_slice(&300_i64.to_le_bytes());
        rows.push(0);
        let error = read(&rows).unwrap_err().to_string();
        assert_eq!(
            error,
            "row 1, column 'tags[1]': 300 is out of range for uint8"
        );
        let error = read(&[100, 1, 0]).unwrap_err().to_string();
        assert!(
            error.starts_with("row 1, column 'tags': 100 values, and the body ends 2 bytes"),
            "{error}"
        );
    }

    #[test]
    fn a_header_of_another_structure_is_refused_before_any_row() {
        for (ty, says) in [
            (
                "Tuple(Int32)",
                "a Tuple(Int32) value does not go into the table's struct<code: int32, tags: \
                 list<string>> column",
            ),
            ("Array(UUID)", "a Array(UUID) value"),
            ("Map(UInt64, String)", "a Map(UInt64, String) value"),
            ("Nullable(Array(String))", "a Nullable(Array(String)) value"),
            ("Array(String)", "does not go into the table's struct"),
        ] {
            let body = header(&[("id", "Int64"), ("pair", ty)], &[]);
            let error = decode(
                &nested_table(),
                &body,
                Header::NamesAndTypes,
                &options_for(None, false),
            )
            .unwrap_err();
            assert_eq!(error.field.as_deref(), Some("pair"), "{ty}");
            assert!(
                error.message.starts_with("header: ") && error.message.contains(says),
                "{ty}: {error}"
            );
        }
        // The text form goes into any nested column, as a String column's value.
        let mut rows = 3_i64.to_le_bytes().to_vec();
        string(&mut rows, "(5, ['y', NULL])");
        let body = header(&[("id", "Int64"), ("pair", "String")], &rows);
        let batch = decode(
            &nested_table(),
            &body,
            Header::NamesAndTypes,
            &options_for(None, false),
        )
        .unwrap();
        assert_eq!(
            rows_json(&batch)[0]["pair"],
            serde_json::json!({"code": 5, "tags": ["y", null]})
        );
    }

    #[test]
    fn a_header_of_nested_types_makes_nested_columns() {
        let columns = [
            ("a", "Array(Nullable(String))"),
            (
                "t",
                "Tuple(code LowCardinality(Int32), `http.status` Map(String, UInt16))",
            ),
            ("u", "Tuple(String, Array(DateTime64(3, 'UTC')))"),
            (
                "m",
                "Map(LowCardinality(String), Array(Nullable(Decimal(10, 2))))",
            ),
            ("j", "JSON"),
            ("o", "Object('json')"),
            ("n", "Nullable(JSON)"),
        ];
        let schema = declared_columns(&header(&columns, &[]))
            .and_then(super::super::columns_of)
            .unwrap();
        let types: Vec<(String, bool)> = schema
            .columns()
            .iter()
            .map(|c| (c.ty.name().into_owned(), c.nullable))
            .collect();
        let expected = [
            ("list<string>", false),
            (
                "struct<code: int32, `http.status`: map<string, uint16>>",
                false,
            ),
            ("struct<`1`: string, `2`: list<timestamp>>", false),
            ("map<string, list<decimal(10, 2)>>", false),
            ("json", false),
            ("json", false),
            ("json", true),
        ];
        let expected: Vec<(String, bool)> = expected
            .iter()
            .map(|(t, n)| ((*t).to_owned(), *n))
            .collect();
        assert_eq!(types, expected);
        for (ty, says) in [
            ("Map(UInt64, String)", "string keys"),
            ("Tuple(a UInt8, a String)", "names 'a' twice"),
            ("FixedString(0)", "size of 1 or more"),
        ] {
            let error = declared_columns(&header(&[("c", ty)], &[]))
                .and_then(super::super::columns_of)
                .unwrap_err();
            assert!(error.to_string().contains(says), "{ty}: {error}");
        }
        let deep = format!("{}UInt8{}", "Array(".repeat(17), ")".repeat(17));
        let error = declared_columns(&header(&[("c", &deep)], &[]))
            .and_then(super::super::columns_of)
            .unwrap_err();
        assert!(error.to_string().contains("at most 16 levels"), "{error}");
        let deeper = format!("{}UInt8{}", "Array(".repeat(60), ")".repeat(60));
        assert!(WireType::parse(&deeper).unwrap_err().contains("deeper"));
    }
}
