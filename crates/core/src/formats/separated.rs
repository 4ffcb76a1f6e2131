//! `TabSeparated` and `CSV`: a row per line (CSV's quoted values may span lines), values split by
//! a delimiter, after an optional header of names and types.
//!
//! `TabSeparated` escapes instead of quoting: `\t`, `\n`, `\\` and the like inside a value, and
//! `\N` alone for null. CSV quotes with `"` (doubled inside), and takes `\N` for null; an empty
//! value is null in a column that is not a string, as ClickHouse reads it as the default.
//!
//! A `list`, `struct` or `map` value is its ClickHouse text form ([`super::quoted`]): in
//! `TabSeparated` as it is, without `TabSeparated`'s escapes, since its quoted strings escape
//! themselves, and in CSV inside a CSV value. A `struct` in CSV is one value per field, its
//! fields' structs spread out too, as ClickHouse writes and reads a `Tuple` in CSV.

use std::borrow::Cow;

use arrow::array::RecordBatch;

use super::builder::{Builder, Step, Unfit};
use super::columns::Columns;
use super::csv_records::{Record, Records};
use super::quoted;
use super::value::Value;
use super::wire::WireType;
use super::{Header, body_columns, not_the_first_header, pair};
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
    read_tsv_rows(lines, &mut columns)?;
    columns.finish()
}

/// `TabSeparated` bodies whose headers, if they have one, name the first body's columns,
/// decoded into one set of columns, and each body's rows; `None` when any body fails or names
/// other columns, for each to be decoded alone.
pub(crate) fn decode_tsv_many(
    schema: &TableSchema,
    bodies: &[&[u8]],
    header: Header,
    options: &DecodeOptions,
) -> Option<(RecordBatch, Vec<usize>)> {
    let names = match header {
        Header::None => body_columns(schema, options.columns.as_deref()),
        _ => tsv_header(&mut tsv_lines(bodies.first()?).ok()?, header).ok()?,
    };
    let columns = Columns::new(schema, &names, options).ok()?;
    columns.read_each(bodies, |body, columns| {
        let mut lines = tsv_lines(body)?;
        if header != Header::None && tsv_header(&mut lines, header)? != names {
            return Err(not_the_first_header());
        }
        read_tsv_rows(lines, columns)
    })
}

/// Reads `TabSeparated` lines as rows of `columns`.
fn read_tsv_rows<'a>(
    lines: impl Iterator<Item = (usize, &'a str)>,
    columns: &mut Columns<'_>,
) -> Result<(), DecodeError> {
    for (line, text) in lines {
        let at = |e: DecodeError| at_line(line, e);
        let fields: Vec<&str> = text.split('\t').collect();
        check_width(fields.len(), columns.width(), columns.width()).map_err(at)?;
        for (index, field) in fields.into_iter().enumerate() {
            if field == "\\N" {
                columns.put(index, Value::Null).map_err(at)?;
                continue;
            }
            if columns
                .target_type(index)
                .is_some_and(ColumnType::is_nested)
            {
                columns.put(index, Value::Text(field)).map_err(at)?;
                continue;
            }
            let value = unescape(field).map_err(|e| at(DecodeError::new(None, None, e)))?;
            columns.put(index, Value::Text(&value)).map_err(at)?;
        }
        columns.end_row().map_err(at)?;
    }
    Ok(())
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
    let mut records = Records::new(body, delimiter);
    let (names, types) = match header {
        Header::None => (body_columns(schema, listed), None),
        _ => csv_header(&mut records, header)?,
    };
    let mut columns = Columns::new(schema, &names, options)?;
    let spans = csv_spans(&columns, types.as_deref());
    read_csv_records(&mut records, &spans, &mut columns)?;
    columns.finish()
}

/// CSV bodies whose headers, if they have one, are the first body's, decoded into one set of
/// columns, and each body's rows; `None` when any body fails or has another header, for each
/// to be decoded alone.
pub(crate) fn decode_csv_many(
    schema: &TableSchema,
    bodies: &[&[u8]],
    header: Header,
    options: &DecodeOptions,
) -> Option<(RecordBatch, Vec<usize>)> {
    let delimiter = options.csv_delimiter.unwrap_or(b',');
    let first = match header {
        Header::None => (body_columns(schema, options.columns.as_deref()), None),
        _ => csv_header(&mut Records::new(bodies.first()?, delimiter), header).ok()?,
    };
    let columns = Columns::new(schema, &first.0, options).ok()?;
    let spans = csv_spans(&columns, first.1.as_deref());
    columns.read_each(bodies, |body, columns| {
        let mut records = Records::new(body, delimiter);
        if header != Header::None && csv_header(&mut records, header)? != first {
            return Err(not_the_first_header());
        }
        read_csv_records(&mut records, &spans, columns)
    })
}

/// Reads CSV records as rows of `columns`, each column taking its span of values.
fn read_csv_records(
    records: &mut Records<'_>,
    spans: &[usize],
    columns: &mut Columns<'_>,
) -> Result<(), DecodeError> {
    let width: usize = spans.iter().sum();
    while let Some(record) = records.next_record() {
        let line = record.line;
        let at = |e: DecodeError| at_line(line, e);
        check_width(record.len(), width, columns.width()).map_err(at)?;
        let texts = record
            .iter()
            .map(std::str::from_utf8)
            .collect::<Result<Vec<&str>, _>>()
            .map_err(|_| {
                let e = "the text is not valid UTF-8".to_owned();
                at(DecodeError::new(None, None, e))
            })?;
        let mut fields = texts.into_iter();
        for (index, span) in spans.iter().enumerate() {
            if columns.target_type(index).is_some_and(is_struct) {
                let read =
                    |builder: &mut Builder, ty: &ColumnType| csv_struct(builder, ty, &mut fields);
                columns.put_nested(index, read).map_err(at)?;
                continue;
            }
            let mut field = fields.by_ref().take(*span);
            let text = field.next().unwrap_or_default();
            field.for_each(drop);
            let value = csv_value(text, columns.target_type(index));
            columns.put(index, value).map_err(at)?;
        }
        columns.end_row().map_err(at)?;
    }
    Ok(())
}

fn is_struct(ty: &ColumnType) -> bool {
    matches!(ty, ColumnType::Struct(_))
}

/// How many CSV values each of the body's columns takes: one, or for a struct one per field,
/// its fields' structs spread out too. An unknown column takes as many as its type in the
/// header says, or one.
fn csv_spans(columns: &Columns<'_>, types: Option<&[String]>) -> Vec<usize> {
    (0..columns.width())
        .map(|index| match columns.target_type(index) {
            Some(ty) => struct_width(ty),
            None => types
                .and_then(|types| types.get(index))
                .and_then(|ty| WireType::parse(ty).ok())
                .map_or(1, |ty| tuple_width(&ty)),
        })
        .collect()
}

fn struct_width(ty: &ColumnType) -> usize {
    match ty {
        ColumnType::Struct(fields) => fields.iter().map(|f| struct_width(&f.ty)).sum(),
        _ => 1,
    }
}

fn tuple_width(ty: &WireType) -> usize {
    match ty {
        WireType::Tuple(elements) => elements.iter().map(|(_, ty)| tuple_width(ty)).sum(),
        _ => 1,
    }
}

/// A struct spread over CSV values, one per field, taken from `fields`.
fn csv_struct<'a>(
    builder: &mut Builder,
    ty: &ColumnType,
    fields: &mut impl Iterator<Item = &'a str>,
) -> Result<(), Unfit> {
    let (ColumnType::Struct(members), Builder::Struct(record)) = (ty, builder) else {
        return Err(Unfit::new(format!("{ty} is not a struct")));
    };
    for (index, member) in members.iter().enumerate() {
        let child = record.child(index);
        let read = match &member.ty {
            ColumnType::Struct(_) => csv_struct(child, &member.ty, fields),
            ty => {
                let text = fields.next().unwrap_or_default();
                quoted::push(child, ty, csv_value(text, Some(ty)))
            }
        };
        read.map_err(|e| e.at(Step::Field(member.name.clone())))?;
    }
    record.close(1);
    Ok(())
}

fn csv_value<'a>(text: &'a str, ty: Option<&ColumnType>) -> Value<'a> {
    match (text, ty) {
        ("\\N", _) => Value::Null,
        ("", Some(ty)) if *ty != ColumnType::String => Value::Null,
        _ => Value::Text(text),
    }
}

/// The header's names, and its types when it has them.
fn csv_header(
    records: &mut Records<'_>,
    header: Header,
) -> Result<(Vec<String>, Option<Vec<String>>), DecodeError> {
    let Some(record) = records.next_record() else {
        return Ok((Vec::new(), None));
    };
    let names = utf8_fields(&record).map_err(|e| at_line(record.line, e))?;
    let mut types = None;
    if header == Header::NamesAndTypes
        && let Some(record) = records.next_record()
    {
        types = Some(utf8_fields(&record).map_err(|e| at_line(record.line, e))?);
    }
    Ok((names, types))
}

fn utf8_fields(record: &Record<'_>) -> Result<Vec<String>, DecodeError> {
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
    let mut records = Records::new(body, delimiter);
    let mut next = || -> Result<Vec<String>, DecodeError> {
        let record = records.next_record().ok_or_else(|| {
            DecodeError::new(
                None,
                None,
                "the header of names and types is missing".to_owned(),
            )
        })?;
        utf8_fields(&record).map_err(|e| at_line(record.line, e))
    };
    let names = next()?;
    let types = next()?;
    pair(names, types)
}

/// Refuses a row of other than `width` values, for an insert of `columns` columns.
fn check_width(fields: usize, width: usize, columns: usize) -> Result<(), DecodeError> {
    if fields == width {
        return Ok(());
    }
    let message = if width == columns {
        format!("the row has {fields} values, and the insert has {width} columns")
    } else {
        format!(
            "the row has {fields} values, and the insert's {columns} columns take {width}, \
             a value per field of a struct"
        )
    };
    Err(DecodeError::new(None, None, message))
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

    /// What ClickHouse 18.16.1 answered for `SELECT * FROM v ORDER BY id FORMAT TSV`, `v` being
    /// [`nested_table`]'s and holding [`nested_rows`]: each value in its text form, its strings
    /// quoted and escaped by the quoting's rules, not `TabSeparated`'s.
    const CLICKHOUSE_TSV: &str = "1\t['a',NULL,'it\\'s\\ttab']\t(200,['x'])\t[[1,NULL],[],[-3]]\n\
                                  2\t[]\t(NULL,[])\t[]\n";

    /// The same rows as ClickHouse 18.16.1 answered them in `CSV`: the tuple spread over a value
    /// per element.
    const CLICKHOUSE_CSV: &str = "1,\"['a',NULL,'it\\'s\\ttab']\",200,\"['x']\",\"[[1,NULL],[],[-3]]\"\n\
                                  2,\"[]\",\\N,\"[]\",\"[]\"\n";

    #[test]
    fn nested_values_in_clickhouses_own_text() {
        let table = nested_table();
        let tsv = InputFormat::TabSeparated(Header::None);
        assert_eq!(
            decode_json(&table, tsv, CLICKHOUSE_TSV.as_bytes()),
            Ok(nested_rows())
        );
        let csv = InputFormat::Csv(Header::None);
        assert_eq!(
            decode_json(&table, csv, CLICKHOUSE_CSV.as_bytes()),
            Ok(nested_rows())
        );
        // 18.16's `TSVWithNamesAndTypes` and `CSVWithNames` headers of `v`.
        let types = "Int64\tArray(Nullable(String))\tTuple(code Nullable(Int32), tags \
                     Array(Nullable(String)))\tArray(Array(Nullable(Int64)))";
        let body = format!("id\ttags\tpair\tgrid\n{types}\n{CLICKHOUSE_TSV}");
        let with_types = InputFormat::TabSeparated(Header::NamesAndTypes);
        assert_eq!(
            decode_json(&table, with_types, body.as_bytes()),
            Ok(nested_rows())
        );
        let declared = declared_tsv_columns(body.as_bytes()).unwrap();
        let inferred = crate::formats::columns_of(declared).unwrap();
        let columns: Vec<_> = inferred.columns().iter().map(|c| c.ty.clone()).collect();
        let expected: Vec<_> = table.columns().iter().map(|c| c.ty.clone()).collect();
        assert_eq!(columns, expected);
        let body = format!("\"id\",\"tags\",\"pair\",\"grid\"\n{CLICKHOUSE_CSV}");
        let with_names = InputFormat::Csv(Header::Names);
        assert_eq!(
            decode_json(&table, with_names, body.as_bytes()),
            Ok(nested_rows())
        );
    }

    #[test]
    fn csv_skips_an_unknown_tuple_by_the_width_its_header_type_gives() {
        let body = "id,extra,grid\nInt64,\"Tuple(a UInt8, b Tuple(String, UInt8))\",\
                    Array(Array(Int64))\n5,1,x,2,\"[[7]]\"\n";
        let batch = decode_csv(
            &nested_table(),
            body.as_bytes(),
            Header::NamesAndTypes,
            &csv_options(b',', None, true),
        )
        .unwrap();
        let rows = rows_json(&batch);
        assert_eq!(rows[0]["grid"], serde_json::json!([[7]]));
        assert_eq!(rows[0]["pair"], serde_json::Value::Null);
    }

    #[test]
    fn a_nested_value_that_does_not_fit_is_named_by_its_line_and_its_way() {
        let table = nested_table();
        let tsv = |body: &str| {
            decode_json(
                &table,
                InputFormat::TabSeparated(Header::None),
                body.as_bytes(),
            )
            .unwrap_err()
        };
        for (body, says) in [
            (
                "1\t[]\t(1,[])\t[[1,'x']]\n",
                "line 1, column 'grid[0][1]': 'x' is not a whole number",
            ),
            (
                "1\t[]\t(1,[])\t[]\n2\t['a'\t(1,[])\t[]\n",
                "line 2, column 'tags': the text ends where ',' or ']' comes next",
            ),
            (
                "1\t[]\t(1)\t[]\n",
                "line 1, column 'pair': unexpected ')' at byte 3 where ',' separates a \
                 tuple's values",
            ),
            (
                "1\t[]\t('a',[])\t[]\n",
                "line 1, column 'pair.code': 'a' is not a whole number",
            ),
            (
                "1\t[] x\t(1,[])\t[]\n",
                "line 1, column 'tags': unexpected 'x' at byte 4 after the value",
            ),
            (
                "1\t[]\t(1,['a','b\\'])\t[]\n",
                "line 1, column 'pair.tags[1]': the string at byte 9 is not closed",
            ),
        ] {
            assert_eq!(tsv(body), says, "{body:?}");
        }
        let error = decode_json(
            &table,
            InputFormat::Csv(Header::None),
            b"1,\"[]\",\"(1,[])\",\"[]\"\n",
        )
        .unwrap_err();
        assert_eq!(
            error,
            "line 1: the row has 4 values, and the insert's 4 columns take 5, a value per \
             field of a struct"
        );
    }
}
