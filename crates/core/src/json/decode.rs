//! Checked rows through arrow-json into a table's schema, all or nothing.
//!
//! The fast path hands all the rows to arrow-json's decoder at once: the body itself when rows
//! are lines, the rows one after another otherwise. Only when that fails does the slow path go
//! through the rows one by one to find the first bad one and say exactly what is wrong with it.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, new_null_array};
use arrow::datatypes::{Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::json::ReaderBuilder;
use arrow::json::reader::Decoder;

use super::frame;
use super::kept::{self, KEPT_ROWS};
use super::{DecodeOptions, check, direct, nested, rewrite};
use crate::error::DecodeError;
use crate::name::printable;
use crate::schema::{TableSchema, json_kind};

/// Rows decoded per Arrow batch inside one insert; larger inserts are concatenated.
const DECODE_BATCH_ROWS: usize = 8192;

/// Columns shown when an error lists the table's columns.
const LISTED_COLUMNS: usize = 12;

/// Decodes a body of JSON rows, framed by `options.dialect`, into one batch with exactly
/// `schema`'s columns.
///
/// Returns a batch with zero rows for an empty body. Any bad row refuses the whole body.
pub fn decode_ndjson(
    schema: &TableSchema,
    body: &[u8],
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    decode_ndjson_ways(schema, body, options, true)
}

/// [`decode_ndjson`], going only the long way unless `plain` says it may read plain rows once.
pub(crate) fn decode_ndjson_ways(
    schema: &TableSchema,
    body: &[u8],
    options: &DecodeOptions,
    plain: bool,
) -> Result<RecordBatch, DecodeError> {
    let target = target_schema(schema, options)?;
    let rows = frame::rows(body, options.dialect)?;
    let texts = rows.iter().map(|r| r.text);
    if let Some(batch) = plain
        .then(|| decode_plain(schema, texts, rows.len(), options, &target))
        .flatten()
    {
        return Ok(batch);
    }
    decode_checked(schema, body, &rows, options, target)
}

/// The columns an insert's rows are read into: the table's, or those its column list names.
pub(crate) fn target_schema(
    schema: &TableSchema,
    options: &DecodeOptions,
) -> Result<SchemaRef, DecodeError> {
    match &options.columns {
        None => Ok(schema.arrow().clone()),
        Some(listed) => projected_schema(schema, listed),
    }
}

/// The `rows` row texts read once, straight into Arrow columns of `target`, with the columns
/// the insert left out null: `None` when there are none, a column is not plain or a row must go
/// the long way.
pub(crate) fn decode_plain<'a>(
    schema: &TableSchema,
    texts: impl IntoIterator<Item = &'a [u8]>,
    rows: usize,
    options: &DecodeOptions,
    target: &SchemaRef,
) -> Option<RecordBatch> {
    if rows == 0 {
        return None;
    }
    let skip_unknown = options.skip_unknown_fields;
    let batch = direct::decode_rows(target, options.dialect, skip_unknown, texts, rows)?;
    match options.columns {
        Some(_) => widen(schema, batch).ok(),
        None => Some(batch),
    }
}

/// [`decode_ndjson`] the long way: the strict check, then arrow-json.
fn decode_checked(
    schema: &TableSchema,
    body: &[u8],
    rows: &[frame::Row<'_>],
    options: &DecodeOptions,
    target: SchemaRef,
) -> Result<RecordBatch, DecodeError> {
    let to_rewrite = check::check(&target, rows, options.dialect)?;
    let built = build_nested(&target, rows, &to_rewrite.with_nested, options)?;
    // arrow-json reads a nested column's values as null, so it must take a null there.
    let decoded_schema = match built.is_empty() {
        true => target.clone(),
        false => nested::relaxed(&target),
    };
    let rewritten = rewrite::rewrite(&target, rows, &to_rewrite, options.null_as_default)?;
    let texts = || {
        rows.iter()
            .enumerate()
            .map(|(i, r)| rewritten.get(&i).map_or(r.text, Vec::as_slice))
    };
    let skip_unknown = options.skip_unknown_fields;
    let decoded = if options.dialect.is_line_framed() && rewritten.is_empty() {
        decode_with(&decoded_schema, [body], rows.len(), skip_unknown)
    } else {
        decode_with(&decoded_schema, texts(), rows.len(), skip_unknown)
    };
    let mut batch = match decoded {
        Ok(batch) => batch,
        Err(error) => {
            let rows = rows.iter().zip(texts()).map(|(row, text)| (row.line, text));
            return Err(explain(schema, &decoded_schema, rows, options, error));
        }
    };
    if !built.is_empty() {
        batch = with_columns(&target, batch, built)?;
    }
    if options.columns.is_some() {
        widen(schema, batch)
    } else {
        Ok(batch)
    }
}

/// Which bodies arrow-json can take together, for one table schema: its columns' kinds are
/// worked out once for all the bodies of a round.
pub(crate) struct Joinable<'a> {
    schema: &'a TableSchema,
    /// `None` when the schema has a nested column, whose values are built apart.
    kinds: Option<check::Kinds>,
    /// How sluice's NDJSON is read: [`DecodeOptions::default`]'s dialect.
    dialect: super::JsonDialect,
}

impl<'a> Joinable<'a> {
    pub(crate) fn new(schema: &'a TableSchema) -> Self {
        let nested = schema
            .arrow()
            .fields()
            .iter()
            .any(|f| nested::is_nested(f.data_type()));
        let dialect = DecodeOptions::default().dialect;
        Self {
            schema,
            kinds: (!nested).then(|| check::Kinds::new(schema.arrow(), dialect)),
            dialect,
        }
    }

    /// The rows of a body that arrow-json can take together with other such bodies:
    /// `Ok(Some(rows))` when the body, framed as sluice's NDJSON, passes the strict check and
    /// needs no row rewritten or built apart; `Ok(None)` when it must be decoded alone; `Err` as
    /// [`decode_ndjson`] refuses it with [`DecodeOptions::default`].
    pub(crate) fn rows(&self, body: &[u8]) -> Result<Option<usize>, DecodeError> {
        let Some(kinds) = &self.kinds else {
            return Ok(None);
        };
        let rows = frame::rows(body, self.dialect)?;
        let to_rewrite = check::check_as(kinds, self.schema.arrow(), &rows, self.dialect)?;
        Ok(to_rewrite.is_empty().then_some(rows.len()))
    }
}

/// Decodes `bodies`, each of which [`Joinable::rows`] took, holding `rows` rows between
/// them, as one stream of rows. `Err` says only that some row failed, not which.
pub(crate) fn decode_together(
    schema: &TableSchema,
    bodies: &[&[u8]],
    rows: usize,
) -> Result<RecordBatch, ArrowError> {
    decode_with(schema.arrow(), bodies.iter().copied(), rows, false)
}

/// The `list`, `struct` and `map` columns of `target`, by index, built from their values' text;
/// none when it has none.
fn build_nested(
    target: &SchemaRef,
    rows: &[frame::Row<'_>],
    values: &[(usize, nested::NestedValues)],
    options: &DecodeOptions,
) -> Result<Vec<(usize, ArrayRef)>, DecodeError> {
    if !target
        .fields()
        .iter()
        .any(|f| nested::is_nested(f.data_type()))
    {
        return Ok(Vec::new());
    }
    let reading = nested::Reading {
        dialect: options.dialect,
        skip_unknown: options.skip_unknown_fields,
        null_as_default: options.null_as_default,
    };
    nested::build(target, rows, values, reading)
}

/// `batch`, decoded with its nested columns null, with those columns in place, as `target`.
fn with_columns(
    target: &SchemaRef,
    batch: RecordBatch,
    built: Vec<(usize, ArrayRef)>,
) -> Result<RecordBatch, DecodeError> {
    let mut columns = batch.columns().to_vec();
    for (index, column) in built {
        columns[index] = column;
    }
    RecordBatch::try_new(target.clone(), columns)
        .map_err(|e| DecodeError::new(None, None, e.to_string()))
}

/// The schema of the columns an insert lists, in table order, after checking that every column
/// left out may be null.
fn projected_schema(schema: &TableSchema, listed: &[String]) -> Result<SchemaRef, DecodeError> {
    for name in listed {
        if schema.column(name).is_none() {
            return Err(DecodeError::new(
                None,
                Some(printable(name)),
                format!(
                    "the insert lists a column the table does not have (it has: {})",
                    column_list(schema)
                ),
            ));
        }
    }
    if let Some(missing) = schema
        .columns()
        .iter()
        .find(|c| !c.nullable && !listed.contains(&c.name))
    {
        return Err(DecodeError::new(
            None,
            Some(missing.name.clone()),
            "the column is required (not nullable) but the insert's column list leaves it out"
                .to_owned(),
        ));
    }
    let fields: Vec<_> = schema
        .arrow()
        .fields()
        .iter()
        .filter(|f| listed.contains(f.name()))
        .cloned()
        .collect();
    Ok(Arc::new(Schema::new(fields)))
}

/// Fills the columns an insert left out with nulls.
fn widen(schema: &TableSchema, batch: RecordBatch) -> Result<RecordBatch, DecodeError> {
    conform(schema.arrow(), &batch).map_err(|e| DecodeError::new(None, None, e))
}

/// `batch` with exactly `schema`'s columns, taken by name: a column the schema has and the batch
/// does not is null (refused when the schema requires it), and one the batch has and the schema
/// does not is left out. A column of another type is refused. For rows taken under another
/// layout of the table (the write-ahead log's at replay, older parts at compaction).
pub fn conform(schema: &SchemaRef, batch: &RecordBatch) -> Result<RecordBatch, String> {
    let rows = batch.num_rows();
    let columns = schema
        .fields()
        .iter()
        .map(|field| match batch.column_by_name(field.name()) {
            Some(column) if column.data_type() == field.data_type() => Ok(column.clone()),
            Some(column) => Err(format!(
                "column '{}' is {} in the rows, {} in the table",
                field.name(),
                column.data_type(),
                field.data_type()
            )),
            None if field.is_nullable() => Ok(new_null_array(field.data_type(), rows)),
            None => Err(format!(
                "column '{}' is required and the rows do not have it",
                field.name()
            )),
        })
        .collect::<Result<Vec<_>, String>>()?;
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| e.to_string())
}

/// Decodes `chunks`, which hold `rows` rows between them, as one stream of JSON objects.
fn decode_with<'a>(
    schema: &SchemaRef,
    chunks: impl IntoIterator<Item = &'a [u8]>,
    rows: usize,
    skip_unknown: bool,
) -> Result<RecordBatch, ArrowError> {
    if rows <= KEPT_ROWS {
        return kept::with_decoder(schema, !skip_unknown, |decoder| {
            decode_into(decoder, schema, chunks)
        });
    }
    // The decoder preallocates its tape for a whole batch (tens of bytes per column per row), so
    // its batch is no larger than the body needs.
    let mut decoder = ReaderBuilder::new(schema.clone())
        .with_batch_size(rows.clamp(1, DECODE_BATCH_ROWS))
        .with_strict_mode(!skip_unknown)
        .build_decoder()?;
    decode_into(&mut decoder, schema, chunks)
}

/// Decodes every chunk with `decoder` and flushes it, leaving it empty when it succeeds.
fn decode_into<'a>(
    decoder: &mut Decoder,
    schema: &SchemaRef,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Result<RecordBatch, ArrowError> {
    let mut batches = Vec::new();
    for chunk in chunks {
        let mut offset = 0;
        while offset < chunk.len() {
            let read = decoder.decode(&chunk[offset..])?;
            offset += read;
            if offset < chunk.len() || read == 0 {
                // The decoder stops early only when it holds a full batch.
                if let Some(batch) = decoder.flush()? {
                    batches.push(batch);
                }
            }
        }
    }
    if let Some(batch) = decoder.flush()? {
        batches.push(batch);
    }
    match batches.len() {
        0 => Ok(RecordBatch::new_empty(schema.clone())),
        1 => Ok(batches.remove(0)),
        _ => arrow::compute::concat_batches(schema, &batches),
    }
}

/// Finds the first bad row and says what is wrong with it.
/// `rows` are each row's line and its text as arrow-json was given it.
fn explain<'a>(
    schema: &TableSchema,
    target: &SchemaRef,
    rows: impl Iterator<Item = (usize, &'a [u8])>,
    options: &DecodeOptions,
    original: ArrowError,
) -> DecodeError {
    for (line, text) in rows {
        if let Some(error) = check_row(schema, target, text, options) {
            return DecodeError {
                line: Some(line),
                ..error
            };
        }
    }
    // No single row fails on its own (under the lenient dialect, an object spread over several
    // lines, say): say what the decoder said.
    from_arrow(original)
}

fn check_row(
    schema: &TableSchema,
    target: &SchemaRef,
    line: &[u8],
    options: &DecodeOptions,
) -> Option<DecodeError> {
    let value: serde_json::Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => return Some(DecodeError::new(None, None, format!("invalid JSON: {e}"))),
    };
    let serde_json::Value::Object(map) = &value else {
        return Some(DecodeError::new(
            None,
            None,
            format!("expected a JSON object, found {}", json_kind(&value)),
        ));
    };
    for key in map.keys() {
        let allowed = target.field_with_name(key).is_ok();
        if allowed || options.skip_unknown_fields {
            continue;
        }
        let message = if schema.column(key).is_some() {
            "the column is not in the insert's column list".to_owned()
        } else {
            format!("unknown column (the table has: {})", column_list(schema))
        };
        return Some(DecodeError::new(None, Some(printable(key)), message));
    }
    for field in target.fields().iter().filter(|f| !f.is_nullable()) {
        match map.get(field.name()) {
            None => {
                return Some(DecodeError::new(
                    None,
                    Some(field.name().clone()),
                    "the column is required (not nullable) but the row leaves it out".to_owned(),
                ));
            }
            Some(serde_json::Value::Null) => {
                return Some(DecodeError::new(
                    None,
                    Some(field.name().clone()),
                    "the column is required (not nullable) but the row sends null".to_owned(),
                ));
            }
            Some(_) => {}
        }
    }
    decode_with(target, [line], 1, options.skip_unknown_fields)
        .err()
        .map(from_arrow)
}

/// Turns arrow-json's message into a field and a message.
fn from_arrow(error: ArrowError) -> DecodeError {
    let text = match error {
        ArrowError::JsonError(text) => text,
        other => other.to_string(),
    };
    // arrow-json nests "whilst decoding field 'a': " once per level; the innermost names the
    // column.
    let mut rest = text.as_str();
    let mut field = None;
    while let Some(after) = rest.strip_prefix("whilst decoding field '") {
        if let Some(end) = after.find("': ") {
            field = Some(after[..end].to_owned());
            rest = &after[end + 3..];
        } else {
            break;
        }
    }
    DecodeError::new(None, field, rest.to_owned())
}

fn column_list(schema: &TableSchema) -> String {
    let names: Vec<&str> = schema
        .columns()
        .iter()
        .take(LISTED_COLUMNS)
        .map(|c| c.name.as_str())
        .collect();
    let more = schema.columns().len().saturating_sub(LISTED_COLUMNS);
    if more > 0 {
        format!("{} and {more} more", names.join(", "))
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type};

    use super::*;
    use crate::schema::{Column, ColumnType};

    #[test]
    fn conform_takes_columns_by_name_fills_nullable_ones_and_refuses_the_rest() {
        let table = schema();
        let decode = |body: &str, columns: &[&str]| {
            let fields: Vec<Field> = columns
                .iter()
                .map(|c| Field::new(*c, DataType::Int64, true))
                .collect();
            let schema = Arc::new(Schema::new(fields));
            let batch = arrow::json::ReaderBuilder::new(schema)
                .build(body.as_bytes())
                .unwrap()
                .next()
                .unwrap()
                .unwrap();
            conform(table.arrow(), &batch)
        };
        // `extra` is left out; `name` and `ts` are null.
        let batch = decode("{\"extra\":7,\"id\":1}", &["extra", "id"]).unwrap();
        assert_eq!(batch.schema(), *table.arrow());
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(0), 1);
        assert_eq!(batch.column(1).null_count(), 1);
        // A required column missing, or a column of another type, is refused.
        let missing = decode("{\"extra\":7}", &["extra"]).unwrap_err();
        assert!(missing.contains("column 'id' is required"), "{missing}");
        let retyped = decode("{\"id\":1,\"name\":2}", &["id", "name"]).unwrap_err();
        assert!(
            retyped.contains("column 'name' is Int64 in the rows"),
            "{retyped}"
        );
    }

    fn schema() -> TableSchema {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("name", ColumnType::String),
            Column::new("ts", ColumnType::Timestamp),
        ])
        .unwrap()
    }

    fn decode(body: &str) -> Result<RecordBatch, DecodeError> {
        decode_ndjson(&schema(), body.as_bytes(), &DecodeOptions::default())
    }

    #[test]
    fn decodes_rows_and_blank_lines() {
        let batch =
            decode("{\"id\":1,\"name\":\"a\"}\n\n{\"id\":2,\"ts\":\"2026-11-29T12:00:00Z\"}\r\n")
                .unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(
            batch.column(0).as_primitive::<Int64Type>(),
            &Int64Array::from(vec![1, 2])
        );
        assert!(batch.column(1).is_null(1));
    }

    #[test]
    fn large_bodies_span_several_decoder_batches() {
        let body: String = (0..20_000).map(|i| format!("{{\"id\":{i}}}\n")).collect();
        let batch = decode(&body).unwrap();
        assert_eq!(batch.num_rows(), 20_000);
        let ids = batch.column(0).as_primitive::<Int64Type>();
        assert_eq!(ids.value(19_999), 19_999);
    }

    #[test]
    fn empty_body_is_zero_rows() {
        assert_eq!(decode("").unwrap().num_rows(), 0);
        assert_eq!(decode("\n \n").unwrap().num_rows(), 0);
    }

    #[test]
    fn bad_json_names_the_line() {
        let err = decode("{\"id\":1}\n{\"id\":2\n{\"id\":3}").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.message.starts_with("invalid JSON"), "{err}");
    }

    #[test]
    fn wrong_type_names_line_and_field() {
        let err = decode("{\"id\":1}\n{\"id\":1}\n{\"id\":\"abc\"}").unwrap_err();
        assert_eq!((err.line, err.field.as_deref()), (Some(3), Some("id")));
        assert!(
            err.to_string().starts_with("line 3, column 'id': "),
            "{err}"
        );
    }

    #[test]
    fn unknown_column_is_refused_unless_skipped() {
        let err = decode("{\"id\":1,\"nope\":2}").unwrap_err();
        assert_eq!(err.field.as_deref(), Some("nope"));
        assert!(err.message.contains("unknown column"), "{err}");
        let options = DecodeOptions {
            skip_unknown_fields: true,
            ..Default::default()
        };
        let batch = decode_ndjson(&schema(), b"{\"id\":1,\"nope\":2}", &options).unwrap();
        assert_eq!(batch.num_rows(), 1);
    }

    #[test]
    fn missing_required_column_is_refused() {
        let err = decode("{\"id\":1}\n{\"name\":\"x\"}").unwrap_err();
        assert_eq!((err.line, err.field.as_deref()), (Some(2), Some("id")));
        let err = decode("{\"id\":null}").unwrap_err();
        assert!(err.message.contains("sends null"), "{err}");
    }

    #[test]
    fn not_an_object_is_refused() {
        let err = decode("[1,2]").unwrap_err();
        assert_eq!(err.line, Some(1));
        assert!(err.message.contains("an array"), "{err}");
    }

    #[test]
    fn column_list_restricts_keys_and_fills_nulls() {
        let options = DecodeOptions {
            columns: Some(vec!["id".into(), "name".into()]),
            ..Default::default()
        };
        let batch = decode_ndjson(&schema(), b"{\"id\":1,\"name\":\"a\"}", &options).unwrap();
        assert_eq!(batch.schema(), *schema().arrow());
        assert!(batch.column(2).is_null(0));
        let err =
            decode_ndjson(&schema(), b"{\"id\":1,\"ts\":\"2026-01-01\"}", &options).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("ts"));
        assert!(err.message.contains("column list"), "{err}");
    }

    #[test]
    fn column_list_must_keep_required_columns() {
        let options = DecodeOptions {
            columns: Some(vec!["name".into()]),
            ..Default::default()
        };
        let err = decode_ndjson(&schema(), b"{\"name\":\"a\"}", &options).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("id"));
    }

    #[test]
    fn out_of_range_number_is_refused() {
        let schema = TableSchema::new(vec![Column::new("small", ColumnType::Int8)]).unwrap();
        let err =
            decode_ndjson(&schema, b"{\"small\":300}", &DecodeOptions::default()).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("small"));
    }

    /// A table of the types kept as text or exact numbers, decoded as the pipeline decodes a
    /// body (uuids made canonical, json checked) under `dialect`.
    fn decode_typed(
        dialect: crate::JsonDialect,
        body: &str,
    ) -> Result<RecordBatch, crate::DecodeError> {
        let schema = TableSchema::new(vec![
            Column::new("id", ColumnType::Int64),
            Column::new("price", ColumnType::decimal(38, 4).unwrap()),
            Column::new("user", ColumnType::Uuid),
            Column::new("attrs", ColumnType::Json),
        ])
        .unwrap();
        let options = DecodeOptions {
            dialect,
            ..Default::default()
        };
        crate::formats::decode(&schema, body.as_bytes(), &options)
    }

    #[test]
    fn decimals_uuids_and_json_land_as_sent_at_both_doors() {
        use arrow::array::Array;
        use arrow::datatypes::Decimal128Type;
        let id = "67e55044-10b1-426f-9247-bb680e5fe0c8";
        let widest = format!("-{}.{}", "9".repeat(34), "9".repeat(4));
        let body = format!(
            "{{\"id\":1,\"price\":12.5,\"user\":\"{}\",\"attrs\":{{\"http\": {{\"status\": 200}}, \"tags\": [\"a\", null]}}}}\n\
             {{\"id\":2,\"price\":\"{widest}\",\"user\":null,\"attrs\":\"text\"}}\n\
             {{\"id\":3,\"price\":1.5e2,\"attrs\":[1, 2.50, true]}}\n\
             {{\"id\":4,\"price\":null,\"attrs\":null}}\n\
             {{\"id\":5,\"attrs\":-0.0}}\n",
            id.to_uppercase()
        );
        for dialect in [crate::JsonDialect::Ndjson, crate::JsonDialect::ClickHouse] {
            let batch = decode_typed(dialect, &body).unwrap();
            let prices = batch.column(1).as_primitive::<Decimal128Type>();
            assert_eq!(prices.value(0), 125_000);
            let expected: i128 = format!("-{}", "9".repeat(38)).parse().unwrap();
            assert_eq!(prices.value(1), expected);
            assert_eq!(prices.value(2), 1_500_000);
            assert!(prices.is_null(3) && prices.is_null(4));
            let users = batch.column(2).as_string::<i32>();
            assert_eq!(users.value(0), id, "{dialect:?}");
            assert!(users.is_null(1) && users.is_null(2));
            let attrs = batch.column(3).as_string::<i32>();
            assert_eq!(
                attrs.value(0),
                "{\"http\": {\"status\": 200}, \"tags\": [\"a\", null]}"
            );
            assert_eq!(attrs.value(1), "\"text\"");
            assert_eq!(attrs.value(2), "[1, 2.50, true]");
            assert!(attrs.is_null(3));
            assert_eq!(attrs.value(4), "-0.0");
        }
    }

    #[test]
    fn values_that_do_not_fit_the_new_types_name_their_row_and_column() {
        let refused = |body: &str| decode_typed(crate::JsonDialect::Ndjson, body).unwrap_err();
        let cases = [
            ("{\"price\":1.23456}", "price", "5 digits after the point"),
            (
                "{\"price\":\"1.23456\"}",
                "price",
                "5 digits after the point",
            ),
            ("{\"price\":1e40}", "price", "before the point"),
            (
                "{\"price\":true}",
                "price",
                "expected a decimal number, found a boolean",
            ),
            ("{\"price\":\"12,5\"}", "price", "not a decimal number"),
            ("{\"user\":\"67e55044-10b1\"}", "user", "not a UUID"),
            (
                "{\"user\":42}",
                "user",
                "expected a UUID in a string, found a number",
            ),
        ];
        for (row, column, words) in cases {
            let body = format!("{{\"id\":1}}\n{row}\n");
            let error = refused(&body);
            assert_eq!(error.line, Some(2), "{row}: {error}");
            assert_eq!(error.field.as_deref(), Some(column), "{row}: {error}");
            assert!(error.message.contains(words), "{row}: {error}");
        }
        let deep = format!("{{\"attrs\":{}{}}}", "[".repeat(200), "]".repeat(200));
        let error = refused(&deep);
        assert_eq!(error.field.as_deref(), Some("attrs"), "{error}");
        assert!(error.message.contains("nests more than"), "{error}");
        // A json value is not the problem in a body that fails for another reason.
        let error = refused("{\"attrs\":{\"a\":1}}\n{\"id\":\"x\"}\n");
        assert_eq!(
            (error.line, error.field.as_deref()),
            (Some(2), Some("id")),
            "{error}"
        );
    }

    #[test]
    fn json_values_and_seconds_rewrite_together_on_the_clickhouse_door() {
        use arrow::datatypes::TimestampMicrosecondType;
        let schema = TableSchema::new(vec![
            Column::new("ts", ColumnType::Timestamp),
            Column::new("attrs", ColumnType::Json),
        ])
        .unwrap();
        let options = DecodeOptions {
            dialect: crate::JsonDialect::ClickHouse,
            ..Default::default()
        };
        let body = b"{\"ts\": 1795953600, \"attrs\": {\"a\": [1, \"\\u00e9\"]}}\n{\"attrs\": 7}";
        let batch = crate::formats::decode(&schema, body, &options).unwrap();
        let ts = batch.column(0).as_primitive::<TimestampMicrosecondType>();
        assert_eq!(ts.value(0), 1_795_953_600_000_000);
        let attrs = batch.column(1).as_string::<i32>();
        assert_eq!(
            attrs.value(0),
            "{\"a\": [1, \"\\u00e9\"]}",
            "kept as sent, escapes too"
        );
        assert_eq!(attrs.value(1), "7");
    }
}
