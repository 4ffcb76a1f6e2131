//! Every body format into the table's Arrow schema, all or nothing, with errors that name the
//! row and the column: JSON objects through [`crate::json`], ClickHouse's other input formats
//! here.
//!
//! # Layout
//!
//! Each file imports only from the ones above it.
//!
//! Values written as text are read by `crate::text`, which the JSON doors' nested values share.
//!
//! - `value`: one value from a body, and its conversion into each column type with a range
//!   check.
//! - `builder`: a column's Arrow builder, a tree that mirrors its type for `list`, `struct` and
//!   `map`; and `Unfit`, why a value does not fit and the way to it inside a nested value.
//! - `quoted`: nested values in ClickHouse's text form (`[1,NULL]`, `(1,'a')`, `{'k':1}`).
//! - `columns`: the table's columns built a row at a time; what a row leaves out is null, or
//!   refused when required.
//! - `fit`: whether a binary format's column type can go into a table's column at all.
//! - `typename`: ClickHouse type names taken apart, for the binary formats' parsers of types.
//! - `wire`: ClickHouse types as binary bodies declare them, and their `RowBinary` layout.
//! - `rowbinary`, `separated` (`TabSeparated` and `CSV`), `values`, `compact` (JSON arrays),
//!   `strings` (JSON objects of strings), `native` (ClickHouse's blocks of columns): one decoder
//!   per format.
//!
//! Formats other than JSON are decoded by hand: the `csv` crate frames CSV and serde_json parses
//! JSON arrays, but no crate reads ClickHouse's `RowBinary`, its `TabSeparated` escapes or its
//! `Values` literals into Arrow. ARCHITECTURE.md says why `Native` is read by hand too.

mod builder;
mod columns;
mod compact;
mod csv_records;
mod fit;
mod native;
mod quoted;
mod rowbinary;
mod separated;
mod strings;
mod together;
mod typename;
mod value;
mod values;
mod wire;

use arrow::array::RecordBatch;
pub use native::native_block_len;
pub use together::{BodyRows, Joint, Together, decode_together, may_join};

use crate::error::DecodeError;
use crate::json;
use crate::options::{DecodeOptions, Header, InputFormat};
use crate::schema::{Column, TableSchema};

/// Decodes `body`, in the format `options` names, into `schema`'s columns, with `uuid` and
/// `json` values judged as [`crate::values::conform`] does.
pub fn decode(
    schema: &TableSchema,
    body: &[u8],
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    let batch = decode_format(schema, body, options)?;
    crate::values::conform(batch, schema)
}

/// `bodies` in one of ClickHouse's formats decoded into one set of arrays, with each body's
/// rows: `RowBinary` bodies that share their header, `Native` bodies whose blocks name the
/// same columns, `JSONCompactEachRow`, `TabSeparated` and CSV bodies whose headers, if any, are
/// the first body's, and any `Values` or `JSONStringsEachRow` bodies. `None` for sluice's JSON
/// rows, which [`together`] reads its own way, or when a body does not decode so: each body then
/// decodes alone, as [`decode`] gives it.
pub(crate) fn decode_many(
    schema: &TableSchema,
    bodies: &[&[u8]],
    options: &DecodeOptions,
) -> Option<(RecordBatch, Vec<usize>)> {
    let (batch, rows) = match options.format {
        InputFormat::RowBinary(header) => rowbinary::decode_many(schema, bodies, header, options),
        InputFormat::Native => native::decode_many(schema, bodies, options),
        InputFormat::TabSeparated(header) => {
            separated::decode_tsv_many(schema, bodies, header, options)
        }
        InputFormat::Csv(header) => separated::decode_csv_many(schema, bodies, header, options),
        InputFormat::Values => values::decode_many(schema, bodies, options),
        InputFormat::JsonCompactEachRow(header) => {
            compact::decode_many(schema, bodies, header, options)
        }
        InputFormat::JsonStringsEachRow => strings::decode_many(schema, bodies, options),
        InputFormat::JsonEachRow => None,
    }?;
    Some((crate::values::conform(batch, schema).ok()?, rows))
}

fn decode_format(
    schema: &TableSchema,
    body: &[u8],
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    match options.format {
        InputFormat::JsonEachRow => json::decode_ndjson(schema, body, options),
        InputFormat::RowBinary(header) => rowbinary::decode(schema, body, header, options),
        InputFormat::TabSeparated(header) => separated::decode_tsv(schema, body, header, options),
        InputFormat::Csv(header) => separated::decode_csv(schema, body, header, options),
        InputFormat::Values => values::decode(schema, body, options),
        InputFormat::JsonCompactEachRow(header) => compact::decode(schema, body, header, options),
        InputFormat::JsonStringsEachRow => strings::decode(schema, body, options),
        InputFormat::Native => native::decode(schema, body, options),
    }
}

/// The schema of a new table, from its first insert: JSON objects by their values, and
/// formats whose header names the columns' types (`...WithNamesAndTypes`) by those types.
pub fn infer_table_schema(
    body: &[u8],
    options: &DecodeOptions,
) -> Result<TableSchema, DecodeError> {
    let declared = match options.format {
        InputFormat::JsonEachRow => return json::infer_schema(body, options.dialect),
        InputFormat::RowBinary(Header::NamesAndTypes) => rowbinary::declared_columns(body)?,
        InputFormat::TabSeparated(Header::NamesAndTypes) => separated::declared_tsv_columns(body)?,
        InputFormat::Csv(Header::NamesAndTypes) => {
            separated::declared_csv_columns(body, options.csv_delimiter.unwrap_or(b','))?
        }
        InputFormat::JsonCompactEachRow(Header::NamesAndTypes) => compact::declared_columns(body)?,
        InputFormat::Native => native::declared_columns(body)?,
        _ => {
            return Err(DecodeError::new(
                None,
                None,
                "sluice makes a new table from a first insert that names its columns' types: \
                 JSONEachRow, Native, or a ...WithNamesAndTypes format; declare the table in the config \
                 to insert in this format first"
                    .to_owned(),
            ));
        }
    };
    columns_of(declared)
}

/// A new table's columns from a header's names and ClickHouse types.
fn columns_of(declared: Vec<(String, String)>) -> Result<TableSchema, DecodeError> {
    let mut columns = Vec::with_capacity(declared.len());
    for (name, ty) in declared {
        let wire = wire::WireType::parse(&ty)
            .map_err(|e| DecodeError::new(None, Some(name.clone()), e))?;
        let (ty, nullable) = wire
            .column_type()
            .map_err(|e| DecodeError::new(None, Some(name.clone()), e))?;
        let column = Column::new(name, ty);
        columns.push(if nullable { column } else { column.required() });
    }
    TableSchema::new(columns).map_err(|e| DecodeError::new(None, None, e.to_string()))
}

/// Why a body is not read with a round's others in [`decode_many`]: its header is not the first
/// body's. Never shown: the body is then decoded alone.
fn not_the_first_header() -> DecodeError {
    DecodeError::new(None, None, "header: not the round's first".to_owned())
}

/// The names of the body's columns when it has no header: the insert's column list, else the
/// table's columns in order.
fn body_columns(schema: &TableSchema, listed: Option<&[String]>) -> Vec<String> {
    match listed {
        Some(listed) => listed.to_vec(),
        None => schema.columns().iter().map(|c| c.name.clone()).collect(),
    }
}

/// A header's names and types, side by side; refused when they do not pair up.
fn pair(names: Vec<String>, types: Vec<String>) -> Result<Vec<(String, String)>, DecodeError> {
    if names.len() != types.len() {
        return Err(DecodeError::new(
            None,
            None,
            format!(
                "the header names {} columns and gives {} types",
                names.len(),
                types.len()
            ),
        ));
    }
    Ok(names.into_iter().zip(types).collect())
}

/// `error`, placed at row `row` of the body.
fn at_row(row: usize, mut error: DecodeError) -> DecodeError {
    error.line = Some(row);
    error.counts_rows = true;
    error
}

/// Options for the decoders' tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use arrow::array::{AsArray, RecordBatch};
    use arrow::datatypes::Decimal128Type;

    use crate::error::DecodeError;
    use crate::options::{DecodeOptions, InputFormat};
    use crate::schema::{Column, ColumnType, StructField, TableSchema};

    /// A table of the newer types: `d decimal(10, 2)`, `u uuid`, `j json`, all nullable.
    pub(crate) fn newer_types() -> TableSchema {
        TableSchema::new(vec![
            Column::new(
                "d",
                ColumnType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            ),
            Column::new("u", ColumnType::Uuid),
            Column::new("j", ColumnType::Json),
        ])
        .unwrap()
    }

    /// `body` in `format` decoded into [`newer_types`] as the door decodes it, uuids and json
    /// judged; the error as text.
    pub(crate) fn decode_newer(format: InputFormat, body: &[u8]) -> Result<RecordBatch, String> {
        let options = DecodeOptions {
            format,
            ..DecodeOptions::default()
        };
        super::decode(&newer_types(), body, &options).map_err(|e: DecodeError| e.to_string())
    }

    /// The decimals of `batch`'s first column, and the text of its other two.
    pub(crate) type Rows<'a> = (
        Vec<Option<i128>>,
        Vec<Option<&'a str>>,
        Vec<Option<&'a str>>,
    );

    pub(crate) fn newer_rows(batch: &RecordBatch) -> Rows<'_> {
        let text = |i: usize| batch.column(i).as_string::<i32>().iter().collect();
        let decimals = batch.column(0).as_primitive::<Decimal128Type>();
        (decimals.iter().collect(), text(1), text(2))
    }

    /// The UUID the newer types' tests send, in capitals, and as it is kept.
    pub(crate) const UUID_SENT: &str = "67E55044-10B1-426F-9247-BB680E5FE0C8";
    pub(crate) const UUID_KEPT: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";

    pub(crate) fn options_for(
        listed: Option<&[String]>,
        skip_unknown_fields: bool,
    ) -> DecodeOptions {
        DecodeOptions {
            columns: listed.map(<[String]>::to_vec),
            skip_unknown_fields,
            ..DecodeOptions::default()
        }
    }

    pub(crate) fn csv_options(
        delimiter: u8,
        listed: Option<&[String]>,
        skip_unknown_fields: bool,
    ) -> DecodeOptions {
        DecodeOptions {
            csv_delimiter: Some(delimiter),
            ..options_for(listed, skip_unknown_fields)
        }
    }

    /// ClickHouse 18.16.1's table `v (id Int64, tags Array(Nullable(String)), pair Tuple(code
    /// Nullable(Int32), tags Array(Nullable(String))), grid Array(Array(Nullable(Int64))))` in
    /// sluice: the types `DESCRIBE TABLE` announces for it are the ones `v` has.
    pub(crate) fn nested_table() -> TableSchema {
        let strings = || ColumnType::list(ColumnType::String);
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("tags", strings()),
            Column::new(
                "pair",
                ColumnType::Struct(vec![
                    StructField::new("code", ColumnType::Int32),
                    StructField::new("tags", strings()),
                ]),
            ),
            Column::new(
                "grid",
                ColumnType::list(ColumnType::list(ColumnType::Int64)),
            ),
        ])
        .unwrap()
    }

    /// The rows of [`nested_table`] that the tests' bodies hold, as ClickHouse 18.16.1 answered
    /// them for `INSERT INTO v VALUES (1, ['a', NULL, 'it''s\ttab'], (200, ['x']), [[1, NULL],
    /// [], [-3]]), (2, [], (NULL, []), [])`, as JSON.
    pub(crate) fn nested_rows() -> serde_json::Value {
        serde_json::json!([
            {"id": 1, "tags": ["a", null, "it's\ttab"], "pair": {"code": 200, "tags": ["x"]},
             "grid": [[1, null], [], [-3]]},
            {"id": 2, "tags": [], "pair": {"code": null, "tags": []}, "grid": []},
        ])
    }

    /// `body` in `format` decoded into `schema` as the door decodes it, as JSON rows with every
    /// null written out; the error as text.
    pub(crate) fn decode_json(
        schema: &TableSchema,
        format: InputFormat,
        body: &[u8],
    ) -> Result<serde_json::Value, String> {
        let options = DecodeOptions {
            format,
            ..DecodeOptions::default()
        };
        let batch = super::decode(schema, body, &options).map_err(|e| e.to_string())?;
        Ok(rows_json(&batch))
    }

    /// A batch's rows as JSON, every null written out.
    pub(crate) fn rows_json(batch: &RecordBatch) -> serde_json::Value {
        let mut writer = arrow::json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow::json::writer::JsonArray>(Vec::new());
        writer.write(batch).unwrap();
        writer.finish().unwrap();
        let text = writer.into_inner();
        if text.is_empty() {
            return serde_json::json!([]);
        }
        serde_json::from_slice(&text).unwrap()
    }
}
