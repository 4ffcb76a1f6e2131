//! `TabSeparated` and `CSV`: a row per line (CSV's quoted values may span lines), values split by
//! a delimiter, after an optional header of names and types.
//!
//! `TabSeparated` escapes instead of quoting: `\t`, `\n`, `\\` and the like inside a value, and
//! `\N` alone for null. CSV quotes with `"` (doubled inside), and takes `\N` for null; an empty
//! value is null in a column that is not a string, as ClickHouse reads it as the default.

use std::borrow::Cow;

use arrow::array::RecordBatch;

use super::columns::{Columns, Value};
use super::{Header, body_columns, pair};
use crate::error::DecodeError;
use crate::options::DecodeOptions;
use crate::schema::{ColumnType, TableSchema};

/// Decodes a `TabSeparated` body into the table's columns.
pub(crate) fn decode_tsv(
    schema: &TableSchema,
    body: &[u8],
    header: Header,
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    let listed = options.columns.as_deref();
    let mut lines = tsv_lines(body)?;
    let names = match header {
        Header::None => body_columns(schema, listed),
        _ => tsv_header(&mut lines, header)?,
    };
    let mut columns = Columns::new(schema, &names, options)?;
    for (line, text) in lines {
        let at = |e: DecodeError| at_line(line, e);
        let fields: Vec<&str> = text.split('\t').collect();
        check_width(fields.len(), columns.width()).map_err(at)?;
        for (index, field) in fields.into_iter().enumerate() {
            if field == "\\N" {
                columns.put(index, Value::Null).map_err(at)?;
                continue;
            }
            let value = unescape(field).map_err(|e| at(DecodeError::new(None, None, e)))?;
            columns.put(index, Value::Text(&value)).map_err(at)?;
        }
        columns.end_row().map_err(at)?;
    }
    columns.finish()
}

/// The body's lines, numbered from 1, without the empty one after a final newline.
fn tsv_lines(body: &[u8]) -> Result<std::iter::Peekable<Lines<'_>>, DecodeError> {
    let text = std::str::from_utf8(body).map_err(|e| {
        let line = body[..e.valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        at_line(
            line,
            DecodeError::new(None, None, "the text is not valid UTF-8".to_owned()),
        )
    })?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    let lines: Lines<'_> = Box::new(
        text.split('\n')
            .enumerate()
            .map(|(i, line)| (i + 1, line))
            .filter(move |_| !text.is_empty()),
    );
    Ok(lines.peekable())
}

type Lines<'a> = Box<dyn Iterator<Item = (usize, &'a str)> + 'a>;

/// Reads the header lines: the names, and the types line when there is one (skipped here: the
/// table's types decide how text is read).
fn tsv_header(
    lines: &mut std::iter::Peekable<Lines<'_>>,
    header: Header,
) -> Result<Vec<String>, DecodeError> {
    let Some((_, names)) = lines.next() else {
        return Ok(Vec::new());
    };
    let names = names
        .split('\t')
        .map(|n| unescape(n).map(Cow::into_owned))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| at_line(1, DecodeError::new(None, None, format!("header: {e}"))))?;
    if header == Header::NamesAndTypes {
        lines.next();
    }
    Ok(names)
}

/// The columns a `TabSeparatedWithNamesAndTypes` header declares.
pub(crate) fn declared_tsv_columns(body: &[u8]) -> Result<Vec<(String, String)>, DecodeError> {
    let mut lines = tsv_lines(body)?;
    let split = |line: Option<(usize, &str)>| -> Result<Vec<String>, DecodeError> {
        let (n, text) = line.ok_or_else(|| {
            DecodeError::new(
                None,
                None,
                "the header of names and types is missing".to_owned(),
            )
        })?;
        text.split('\t')
            .map(|v| unescape(v).map(Cow::into_owned))
            .collect::<Result<_, _>>()
            .map_err(|e| at_line(n, DecodeError::new(None, None, e)))
    };
    let names = split(lines.next())?;
    let types = split(lines.next())?;
    pair(names, types)
}

/// Reverses `TabSeparated`'s escaping.
fn unescape(field: &str) -> Result<Cow<'_, str>, String> {
    if !field.contains('\\') {
        return Ok(Cow::Borrowed(field));
    }
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escaped = chars
            .next()
            .ok_or_else(|| "a value ends in a lone backslash".to_owned())?;
        out.push(match escaped {
            'b' => '\u{8}',
            'f' => '\u{c}',
            'r' => '\r',
            'n' => '\n',
            't' => '\t',
            '0' => '\0',
            'a' => '\u{7}',
            'v' => '\u{b}',
            '\\' | '\'' | '"' | '`' | '/' | '=' => escaped,
            'x' => hex_byte(&mut chars)?,
            other => return Err(format!("unknown escape \\{other}")),
        });
    }
    Ok(Cow::Owned(out))
}

fn hex_byte(chars: &mut std::str::Chars<'_>) -> Result<char, String> {
    let digits: String = chars.by_ref().take(2).collect();
    u8::from_str_radix(&digits, 16)
        .ok()
        .filter(|b| b.is_ascii() && digits.len() == 2)
        .map(char::from)
        .ok_or_else(|| format!("\\x{digits} is not an ASCII byte in hex"))
}

/// Decodes a `CSV` body into the table's columns.
pub(crate) fn decode_csv(
    schema: &TableSchema,
    body: &[u8],
    header: Header,
    options: &DecodeOptions,
) -> Result<RecordBatch, DecodeError> {
    let listed = options.columns.as_deref();
    let delimiter = options.csv_delimiter.unwrap_or(b',');
    let mut records = csv_reader(body, delimiter).into_byte_records();
    let names = match header {
        Header::None => body_columns(schema, listed),
        _ => csv_header(&mut records, header)?,
    };
    let mut columns = Columns::new(schema, &names, options)?;
    for record in records {
        let (line, record) = csv_record(record)?;
        let at = |e: DecodeError| at_line(line, e);
        check_width(record.len(), columns.width()).map_err(at)?;
        for (index, field) in record.iter().enumerate() {
            let text = std::str::from_utf8(field).map_err(|_| {
                at(DecodeError::new(
                    None,
                    None,
                    "the text is not valid UTF-8".to_owned(),
                ))
            })?;
            let value = csv_value(text, columns.target_type(index));
            columns.put(index, value).map_err(at)?;
        }
        columns.end_row().map_err(at)?;
    }
    columns.finish()
}

fn csv_reader(body: &[u8], delimiter: u8) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(delimiter)
        .from_reader(body)
}

/// A CSV record and the line it starts on.
fn csv_record(
    record: Result<csv::ByteRecord, csv::Error>,
) -> Result<(usize, csv::ByteRecord), DecodeError> {
    let record = record.map_err(|e| {
        let line = e.position().map_or(0, |p| p.line() as usize);
        at_line(line, DecodeError::new(None, None, format!("not CSV: {e}")))
    })?;
    let line = record.position().map_or(0, |p| p.line() as usize);
    Ok((line, record))
}

fn csv_value<'a>(text: &'a str, ty: Option<&ColumnType>) -> Value<'a> {
    match (text, ty) {
        ("\\N", _) => Value::Null,
        ("", Some(ty)) if *ty != ColumnType::String => Value::Null,
        _ => Value::Text(text),
    }
}

fn csv_header(
    records: &mut csv::ByteRecordsIntoIter<&[u8]>,
    header: Header,
) -> Result<Vec<String>, DecodeError> {
    let Some(record) = records.next() else {
        return Ok(Vec::new());
    };
    let (line, names) = csv_record(record)?;
    let names = utf8_fields(&names).map_err(|e| at_line(line, e))?;
    if header == Header::NamesAndTypes
        && let Some(types) = records.next()
    {
        csv_record(types)?;
    }
    Ok(names)
}

fn utf8_fields(record: &csv::ByteRecord) -> Result<Vec<String>, DecodeError> {
    record
        .iter()
        .map(|field| {
            String::from_utf8(field.to_vec()).map_err(|_| {
                DecodeError::new(None, None, "the header is not valid UTF-8".to_owned())
            })
        })
        .collect()
}

/// The columns a `CSVWithNamesAndTypes` header declares.
pub(crate) fn declared_csv_columns(
    body: &[u8],
    delimiter: u8,
) -> Result<Vec<(String, String)>, DecodeError> {
    let mut records = csv_reader(body, delimiter).into_byte_records();
    let mut next = || -> Result<Vec<String>, DecodeError> {
        let record = records.next().ok_or_else(|| {
            DecodeError::new(
                None,
                None,
                "the header of names and types is missing".to_owned(),
            )
        })?;
        let (line, record) = csv_record(record)?;
        utf8_fields(&record).map_err(|e| at_line(line, e))
    };
    let names = next()?;
    let types = next()?;
    pair(names, types)
}

fn check_width(fields: usize, width: usize) -> Result<(), DecodeError> {
    if fields == width {
        return Ok(());
    }
    Err(DecodeError::new(
        None,
        None,
        format!("the row has {fields} values, and the insert has {width} columns"),
    ))
}

/// `error`, placed at line `line` of the body.
fn at_line(line: usize, mut error: DecodeError) -> DecodeError {
    error.line = Some(line);
    error
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;

    use super::*;
    use crate::formats::tests_support::*;
    use crate::options::InputFormat;
    use crate::schema::Column;

    fn schema() -> TableSchema {
        TableSchema::new(vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("name", ColumnType::String),
            Column::new("score", ColumnType::Float64),
        ])
        .unwrap()
    }

    fn names(batch: &RecordBatch) -> Vec<Option<&str>> {
        batch.column(1).as_string::<i32>().iter().collect()
    }

    #[test]
    fn tab_separated_with_escapes_nulls_and_a_header() {
        let body = b"name\tid\nString\tInt64\na\\tb\\\\c\\n\t1\n\\N\t2\n";
        let batch = decode_tsv(
            &schema(),
            body,
            Header::NamesAndTypes,
            &options_for(None, false),
        )
        .unwrap();
        assert_eq!(names(&batch), [Some("a\tb\\c\n"), None]);
        assert_eq!(
            batch.column(0).as_primitive::<Int64Type>().values(),
            &[1, 2]
        );
        assert_eq!(batch.column(2).null_count(), 2);
        let plain = decode_tsv(
            &schema(),
            b"3\tx\t1.5",
            Header::None,
            &options_for(None, false),
        )
        .unwrap();
        assert_eq!(plain.num_rows(), 1);
    }

    #[test]
    fn tab_separated_refuses_rows_of_the_wrong_width_and_bad_escapes() {
        let error = decode_tsv(
            &schema(),
            b"1\ta\t2\n2\tb\t3\t4\n",
            Header::None,
            &options_for(None, false),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "line 2: the row has 4 values, and the insert has 3 columns"
        );
        let error = decode_tsv(
            &schema(),
            b"1\ta\\q\t2",
            Header::None,
            &options_for(None, false),
        )
        .unwrap_err();
        assert!(error.to_string().contains("unknown escape"), "{error}");
        let error = decode_tsv(
            &schema(),
            b"1\ta\tx",
            Header::None,
            &options_for(None, false),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "line 1, column 'score': 'x' is not a number"
        );
    }

    #[test]
    fn csv_with_quotes_nulls_and_a_column_list() {
        let listed = ["name".to_owned(), "id".to_owned()];
        let body = b"\"a,\"\"b\"\"\",1\n\\N,2\n\"multi\nline\",3\n";
        let batch = decode_csv(
            &schema(),
            body,
            Header::None,
            &csv_options(b',', Some(&listed), false),
        )
        .unwrap();
        assert_eq!(names(&batch), [Some("a,\"b\""), None, Some("multi\nline")]);
        let semicolons = decode_csv(
            &schema(),
            b"1;x;;\n",
            Header::None,
            &csv_options(b';', None, false),
        );
        assert!(semicolons.unwrap_err().to_string().contains("4 values"));
        let empty = decode_csv(
            &schema(),
            b"1,,\n",
            Header::None,
            &csv_options(b',', None, false),
        )
        .unwrap();
        assert_eq!(names(&empty), [Some("")]);
        assert_eq!(empty.column(2).null_count(), 1);
        let error = decode_csv(
            &schema(),
            b"id\n1\n\"open",
            Header::Names,
            &csv_options(b',', None, false),
        )
        .unwrap_err();
        assert!(error.to_string().contains("line 3"), "{error}");
    }

    #[test]
    fn headers_declare_columns_for_a_new_table() {
        let tsv = declared_tsv_columns(b"a\tb\nUInt8\tString\n1\tx\n").unwrap();
        assert_eq!(
            tsv,
            [("a".into(), "UInt8".into()), ("b".into(), "String".into())]
        );
        let csv = declared_csv_columns(b"a,b\nUInt8\n", b',').unwrap_err();
        assert!(csv.to_string().contains("2 columns and gives 1 types"));
    }

    #[test]
    fn tab_separated_decimals_uuids_and_json() {
        let tsv =
            |body: &str| decode_newer(InputFormat::TabSeparated(Header::None), body.as_bytes());
        let body = format!(
            "-12.34\t{UUID_SENT}\t{{\"a\":\"x\\\\ty\"}}\n\\N\t\\N\t\\N\n99999999.99\t{UUID_KEPT}\t12.50\n"
        );
        let batch = tsv(&body).unwrap();
        let (d, u, j) = newer_rows(&batch);
        assert_eq!(d, [Some(-1234), None, Some(9_999_999_999)]);
        assert_eq!(u, [Some(UUID_KEPT), None, Some(UUID_KEPT)]);
        assert_eq!(j, [Some("{\"a\":\"x\\ty\"}"), None, Some("12.50")]);
        for (body, says) in [
            (
                "1\t\\N\t\\N\n1.239\t\\N\t\\N\n",
                "line 2, column 'd': 1.239 has 3 digits after the point",
            ),
            (
                "-100000000\t\\N\t\\N\n",
                "line 1, column 'd': -100000000 has 9 digits before the point",
            ),
            (
                "\\N\t\\N\t\\N\n\\N\t67e55044-10b1-426f\t\\N\n",
                "row 2, column 'u': '67e55044-10b1-426f' is not a UUID",
            ),
            ("\\N\t\\N\t{\"a\":\n", "row 1, column 'j': not JSON"),
        ] {
            let error = tsv(body).unwrap_err();
            assert!(error.starts_with(says), "{body:?}: {error}");
        }
    }

    #[test]
    fn csv_decimals_uuids_and_json() {
        let body = format!(
            "\"-0.01\",{UUID_SENT},\"{{\"\"a\"\":[1,2]}}\"\n,,\n1e2,\\N,\"\"\"text\"\"\"\n"
        );
        let batch = decode_newer(InputFormat::Csv(Header::None), body.as_bytes()).unwrap();
        let (d, u, j) = newer_rows(&batch);
        assert_eq!(d, [Some(-1), None, Some(10_000)]);
        assert_eq!(u, [Some(UUID_KEPT), None, None]);
        assert_eq!(j, [Some("{\"a\":[1,2]}"), None, Some("\"text\"")]);
        let error = decode_newer(InputFormat::Csv(Header::None), b"0.001,,\n").unwrap_err();
        assert!(
            error.starts_with("line 1, column 'd': 0.001 has 3 digits after the point"),
            "{error}"
        );
        let error = decode_newer(InputFormat::Csv(Header::None), b",{},\n").unwrap_err();
        assert!(
            error.starts_with("row 1, column 'u': '{}' is not a UUID"),
            "{error}"
        );
        let error = decode_newer(InputFormat::Csv(Header::None), b",,text\n").unwrap_err();
        assert!(error.starts_with("row 1, column 'j': not JSON"), "{error}");
    }

    #[test]
    fn a_header_of_clickhouse_types_makes_decimal_and_uuid_columns() {
        let tsv = declared_tsv_columns(b"d\tu\nDecimal(38, 38)\tNullable(UUID)\n").unwrap();
        let schema = crate::formats::columns_of(tsv).unwrap();
        let types: Vec<_> = schema
            .columns()
            .iter()
            .map(|c| (c.ty.clone(), c.nullable))
            .collect();
        assert_eq!(
            types,
            [
                (
                    ColumnType::Decimal {
                        precision: 38,
                        scale: 38
                    },
                    false
                ),
                (ColumnType::Uuid, true)
            ]
        );
        let tsv = declared_tsv_columns(b"d\nDecimal(39, 2)\n").unwrap();
        let error = crate::formats::columns_of(tsv).unwrap_err().to_string();
        assert!(error.contains("38"), "{error}");
    }
}
