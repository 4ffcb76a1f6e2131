//! Small result sets written in ClickHouse's output formats: what the handshake reads answer.
//!
//! The results are a few rows of strings and integers, so each format is written by hand here
//! rather than through a general serializer: the layouts are ClickHouse's own (tab-indented JSON
//! with 64-bit integers quoted, TSV escaping, `RowBinary` with LEB128 lengths, `Native` blocks
//! as the HTTP interface writes them without `client_protocol_version`).

use std::fmt::Write as _;

/// The type of a result column, as ClickHouse names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CellType {
    String,
    UInt8,
    UInt64,
}

impl CellType {
    fn name(self) -> &'static str {
        match self {
            Self::String => "String",
            Self::UInt8 => "UInt8",
            Self::UInt64 => "UInt64",
        }
    }
}

/// One value. A number's width comes from its column's [`CellType`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cell {
    Text(String),
    Number(u64),
}

/// A result: named, typed columns and rows of cells in the same order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ResultSet {
    pub(crate) columns: Vec<(String, CellType)>,
    pub(crate) rows: Vec<Vec<Cell>>,
}

impl ResultSet {
    /// A result of one row.
    pub(crate) fn row(columns: Vec<(String, CellType)>, row: Vec<Cell>) -> Self {
        Self {
            columns,
            rows: vec![row],
        }
    }
}

/// An output format sluice writes, by its ClickHouse name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputFormat {
    TabSeparated { names: bool, types: bool },
    Csv { names: bool, types: bool },
    Json,
    JsonCompact,
    JsonEachRow,
    JsonCompactEachRow,
    RowBinary { names: bool, types: bool },
    Native,
}

impl OutputFormat {
    /// The format named `name` (as ClickHouse spells it, aliases included), if sluice writes it.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        let (names, types) = (true, true);
        Some(match name {
            "TabSeparated" | "TSV" => Self::TabSeparated {
                names: false,
                types: false,
            },
            "TabSeparatedWithNames" | "TSVWithNames" => Self::TabSeparated {
                names,
                types: false,
            },
            "TabSeparatedWithNamesAndTypes" | "TSVWithNamesAndTypes" => {
                Self::TabSeparated { names, types }
            }
            "CSV" => Self::Csv {
                names: false,
                types: false,
            },
            "CSVWithNames" => Self::Csv {
                names,
                types: false,
            },
            "CSVWithNamesAndTypes" => Self::Csv { names, types },
            "JSON" => Self::Json,
            "JSONCompact" => Self::JsonCompact,
            "JSONEachRow" | "JSONLines" | "NDJSON" => Self::JsonEachRow,
            "JSONCompactEachRow" => Self::JsonCompactEachRow,
            "RowBinary" => Self::RowBinary {
                names: false,
                types: false,
            },
            "RowBinaryWithNames" => Self::RowBinary {
                names,
                types: false,
            },
            "RowBinaryWithNamesAndTypes" => Self::RowBinary { names, types },
            "Native" => Self::Native,
            _ => return None,
        })
    }

    /// The `Content-Type` ClickHouse sends with the format.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Self::TabSeparated { .. } => "text/tab-separated-values; charset=UTF-8",
            Self::Csv { .. } => "text/csv; charset=UTF-8; header=absent",
            Self::Json | Self::JsonCompact => "application/json; charset=UTF-8",
            Self::JsonEachRow | Self::JsonCompactEachRow => "application/x-ndjson; charset=UTF-8",
            Self::RowBinary { .. } | Self::Native => "application/octet-stream",
        }
    }

    /// The result written in this format.
    pub(crate) fn write(self, result: &ResultSet) -> Vec<u8> {
        match self {
            Self::TabSeparated { names, types } => text_rows(result, names, types, b'\t', tsv),
            Self::Csv { names, types } => text_rows(result, names, types, b',', csv),
            Self::Json => json(result, false),
            Self::JsonCompact => json(result, true),
            Self::JsonEachRow => json_each_row(result, false),
            Self::JsonCompactEachRow => json_each_row(result, true),
            Self::RowBinary { names, types } => row_binary(result, names, types),
            Self::Native => native(result),
        }
    }
}

/// TSV and CSV: an optional row of names, an optional row of types, then the rows.
fn text_rows(
    result: &ResultSet,
    names: bool,
    types: bool,
    delimiter: u8,
    escape: fn(&str, &mut Vec<u8>),
) -> Vec<u8> {
    let mut out = Vec::new();
    let line = |cells: &mut dyn Iterator<Item = String>, out: &mut Vec<u8>| {
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                out.push(delimiter);
            }
            escape(&cell, out);
        }
        out.push(b'\n');
    };
    if names {
        line(&mut result.columns.iter().map(|(n, _)| n.clone()), &mut out);
    }
    if types {
        line(
            &mut result.columns.iter().map(|(_, t)| t.name().to_string()),
            &mut out,
        );
    }
    for row in &result.rows {
        line(&mut row.iter().map(plain), &mut out);
    }
    out
}

fn plain(cell: &Cell) -> String {
    match cell {
        Cell::Text(text) => text.clone(),
        Cell::Number(n) => n.to_string(),
    }
}

/// TabSeparated's escaping: backslash, tab, newline and a few control characters.
fn tsv(text: &str, out: &mut Vec<u8>) {
    for byte in text.bytes() {
        match byte {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\0' => out.extend_from_slice(b"\\0"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            other => out.push(other),
        }
    }
}

/// CSV's quoting: every value in double quotes, quotes doubled.
fn csv(text: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for byte in text.bytes() {
        if byte == b'"' {
            out.push(b'"');
        }
        out.push(byte);
    }
    out.push(b'"');
}

/// A cell as JSON: strings escaped, `UInt64` quoted (ClickHouse's
/// `output_format_json_quote_64bit_integers`), narrower numbers bare.
fn json_cell(cell: &Cell, ty: CellType) -> String {
    match (cell, ty) {
        (Cell::Number(n), CellType::UInt64) => format!("\"{n}\""),
        (Cell::Number(n), _) => n.to_string(),
        (Cell::Text(text), _) => json_string(text),
    }
}

fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// `JSON` and `JSONCompact`: meta, data, rows and statistics, tab-indented as ClickHouse does.
fn json(result: &ResultSet, compact: bool) -> Vec<u8> {
    let mut out = String::from("{\n\t\"meta\":\n\t[\n");
    for (i, (name, ty)) in result.columns.iter().enumerate() {
        let comma = if i + 1 < result.columns.len() {
            ","
        } else {
            ""
        };
        let _ = write!(
            out,
            "\t\t{{\n\t\t\t\"name\": {},\n\t\t\t\"type\": \"{}\"\n\t\t}}{comma}\n",
            json_string(name),
            ty.name()
        );
    }
    out.push_str("\t],\n\n\t\"data\":\n\t[\n");
    for (i, row) in result.rows.iter().enumerate() {
        let comma = if i + 1 < result.rows.len() { "," } else { "" };
        let cells = row.iter().zip(&result.columns);
        if compact {
            let values: Vec<String> = cells.map(|(c, (_, ty))| json_cell(c, *ty)).collect();
            let _ = writeln!(out, "\t\t[{}]{comma}", values.join(", "));
        } else {
            let fields: Vec<String> = cells
                .map(|(c, (name, ty))| {
                    format!("\t\t\t{}: {}", json_string(name), json_cell(c, *ty))
                })
                .collect();
            let _ = writeln!(out, "\t\t{{\n{}\n\t\t}}{comma}", fields.join(",\n"));
        }
    }
    let _ = write!(
        out,
        "\t],\n\n\t\"rows\": {},\n\n\t\"statistics\":\n\t{{\n\t\t\"elapsed\": 0,\n\t\t\"rows_read\": 0,\n\t\t\"bytes_read\": 0\n\t}}\n}}\n",
        result.rows.len()
    );
    out.into_bytes()
}

/// `JSONEachRow` (an object per line) and `JSONCompactEachRow` (an array per line).
fn json_each_row(result: &ResultSet, compact: bool) -> Vec<u8> {
    let mut out = String::new();
    for row in &result.rows {
        let cells = row.iter().zip(&result.columns);
        if compact {
            let values: Vec<String> = cells.map(|(c, (_, ty))| json_cell(c, *ty)).collect();
            let _ = writeln!(out, "[{}]", values.join(","));
        } else {
            let fields: Vec<String> = cells
                .map(|(c, (name, ty))| format!("{}:{}", json_string(name), json_cell(c, *ty)))
                .collect();
            let _ = writeln!(out, "{{{}}}", fields.join(","));
        }
    }
    out.into_bytes()
}

/// `RowBinary`: an optional header (count, names, types), then each row's values in order.
fn row_binary(result: &ResultSet, names: bool, types: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if names {
        leb128(result.columns.len() as u64, &mut out);
        for (name, _) in &result.columns {
            binary_string(name, &mut out);
        }
    }
    if types {
        for (_, ty) in &result.columns {
            binary_string(ty.name(), &mut out);
        }
    }
    for row in &result.rows {
        for (cell, (_, ty)) in row.iter().zip(&result.columns) {
            binary_cell(cell, *ty, &mut out);
        }
    }
    out
}

/// `Native`, one block: column and row counts, then per column its name, type and values.
/// Without `client_protocol_version` the HTTP interface writes no block info, and neither does
/// this.
fn native(result: &ResultSet) -> Vec<u8> {
    let mut out = Vec::new();
    leb128(result.columns.len() as u64, &mut out);
    leb128(result.rows.len() as u64, &mut out);
    for (i, (name, ty)) in result.columns.iter().enumerate() {
        binary_string(name, &mut out);
        binary_string(ty.name(), &mut out);
        for row in &result.rows {
            if let Some(cell) = row.get(i) {
                binary_cell(cell, *ty, &mut out);
            }
        }
    }
    out
}

fn binary_cell(cell: &Cell, ty: CellType, out: &mut Vec<u8>) {
    match (cell, ty) {
        (Cell::Text(text), _) => binary_string(text, out),
        (Cell::Number(n), CellType::UInt8) => out.push(u8::try_from(*n).unwrap_or(u8::MAX)),
        (Cell::Number(n), CellType::UInt64) => out.extend_from_slice(&n.to_le_bytes()),
        (Cell::Number(n), CellType::String) => binary_string(&n.to_string(), out),
    }
}

fn binary_string(text: &str, out: &mut Vec<u8>) {
    leb128(text.len() as u64, out);
    out.extend_from_slice(text.as_bytes());
}

/// An unsigned LEB128 number, as ClickHouse's `writeVarUInt`.
pub(crate) fn leb128(mut value: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version_and_timezone() -> ResultSet {
        ResultSet::row(
            vec![
                ("version()".into(), CellType::String),
                ("timezone()".into(), CellType::String),
            ],
            vec![Cell::Text("25.8.1.1".into()), Cell::Text("UTC".into())],
        )
    }

    fn written(format: &str, result: &ResultSet) -> Vec<u8> {
        OutputFormat::parse(format).unwrap().write(result)
    }

    #[test]
    fn text_formats_as_clickhouse_writes_them() {
        let result = version_and_timezone();
        assert_eq!(written("TabSeparated", &result), b"25.8.1.1\tUTC\n");
        assert_eq!(
            written("TSVWithNamesAndTypes", &result),
            b"version()\ttimezone()\nString\tString\n25.8.1.1\tUTC\n"
        );
        assert_eq!(
            written("CSVWithNames", &result),
            b"\"version()\",\"timezone()\"\n\"25.8.1.1\",\"UTC\"\n"
        );
        let tricky = ResultSet::row(
            vec![("x".into(), CellType::String)],
            vec![Cell::Text("a\tb\\c\nd\"e".into())],
        );
        assert_eq!(written("TSV", &tricky), b"a\\tb\\\\c\\nd\"e\n");
        assert_eq!(written("CSV", &tricky), b"\"a\tb\\c\nd\"\"e\"\n");
    }

    #[test]
    fn json_formats_parse_and_quote_64_bit_integers() {
        let result = ResultSet::row(
            vec![
                ("count()".into(), CellType::UInt64),
                ("check".into(), CellType::UInt8),
                ("name".into(), CellType::String),
            ],
            vec![
                Cell::Number(1),
                Cell::Number(1),
                Cell::Text("q\"uote".into()),
            ],
        );
        let json: serde_json::Value = serde_json::from_slice(&written("JSON", &result)).unwrap();
        assert_eq!(json["meta"][0]["type"], "UInt64");
        assert_eq!(json["data"][0]["count()"], "1");
        assert_eq!(json["data"][0]["check"], 1);
        assert_eq!(json["data"][0]["name"], "q\"uote");
        assert_eq!(json["rows"], 1);
        let compact: serde_json::Value =
            serde_json::from_slice(&written("JSONCompact", &result)).unwrap();
        assert_eq!(compact["data"][0], serde_json::json!(["1", 1, "q\"uote"]));
        assert_eq!(
            written("JSONEachRow", &result),
            b"{\"count()\":\"1\",\"check\":1,\"name\":\"q\\\"uote\"}\n"
        );
        assert_eq!(
            written("JSONCompactEachRow", &result),
            b"[\"1\",1,\"q\\\"uote\"]\n"
        );
    }

    #[test]
    fn binary_formats_as_clickhouse_writes_them() {
        let result = version_and_timezone();
        let mut expected = vec![2, 9];
        expected.extend_from_slice(b"version()");
        expected.push(10);
        expected.extend_from_slice(b"timezone()");
        expected.extend_from_slice(b"\x06String\x06String\x0825.8.1.1\x03UTC");
        assert_eq!(written("RowBinaryWithNamesAndTypes", &result), expected);
        assert_eq!(written("RowBinary", &result), b"\x0825.8.1.1\x03UTC");

        let mut native = vec![2, 1, 9];
        native.extend_from_slice(b"version()\x06String\x0825.8.1.1\x0atimezone()\x06String\x03UTC");
        assert_eq!(written("Native", &result), native);

        // Zero rows, the answer clickhouse-connect takes for its settings query.
        let settings = ResultSet {
            columns: vec![
                ("name".into(), CellType::String),
                ("value".into(), CellType::String),
                ("readonly".into(), CellType::UInt8),
            ],
            rows: vec![],
        };
        assert_eq!(
            written("Native", &settings),
            b"\x03\x00\x04name\x06String\x05value\x06String\x08readonly\x05UInt8"
        );
    }

    #[test]
    fn leb128_spans_bytes_past_127() {
        let mut out = Vec::new();
        leb128(300, &mut out);
        assert_eq!(out, [0xac, 0x02]);
    }
}
