//! How one insert's body is to be read: its format, and for JSON the door's dialect.

/// How a door frames its rows and which looseness it takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JsonDialect {
    /// sluice's own API: NDJSON, one object per line, each line RFC 8259 JSON. Blank lines are
    /// skipped. A number column takes JSON numbers only.
    #[default]
    Ndjson,
    /// ClickHouse's `JSONEachRow` as ClickHouse reads it: objects separated by whitespace or one
    /// comma, optionally all inside `[` `]`, an object may span lines, and a number column also
    /// takes a number in quotes (ClickHouse clients send 64-bit integers quoted). Each object is
    /// RFC 8259 JSON.
    ClickHouse,
    /// What sluice took before it checked JSON syntax: one object per line, with syntax left to
    /// arrow-json and quoted numbers taken. Only for replaying a write-ahead log written then,
    /// whose inserts were acknowledged under those rules.
    Lenient,
    /// [`JsonDialect::ClickHouse`] as sluice took it before it read a number for a timestamp as
    /// Unix seconds: such a number is microseconds. Only for replaying a write-ahead log written
    /// then, whose inserts were acknowledged under that rule.
    ClickHouseMicros,
}

impl JsonDialect {
    /// Whether a number column takes a number in quotes.
    pub(crate) fn takes_quoted_numbers(self) -> bool {
        matches!(
            self,
            Self::ClickHouse | Self::ClickHouseMicros | Self::Lenient
        )
    }

    /// Whether rows are lines, so the body as a whole is valid input for arrow-json.
    pub(crate) fn is_line_framed(self) -> bool {
        matches!(self, Self::Ndjson | Self::Lenient)
    }
}

/// How to decode one insert.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    /// How the door frames rows and which looseness it takes.
    pub dialect: JsonDialect,
    /// Keys that are not columns of the table are dropped instead of refused (ClickHouse's
    /// `input_format_skip_unknown_fields=1`).
    pub skip_unknown_fields: bool,
    /// Only these columns may appear (ClickHouse's `INSERT INTO t (a, b)`); the others are
    /// filled with nulls. `None` means every column may appear.
    pub columns: Option<Vec<String>>,
    /// The body's format: JSON objects (by `dialect`) unless it is one of ClickHouse's others.
    pub format: InputFormat,
    /// The field delimiter of `CSV` (ClickHouse's `format_csv_delimiter`); `None` is a comma.
    pub csv_delimiter: Option<u8>,
    /// A null for a column that is not nullable is stored as its type's default (zero, false,
    /// the empty string, 1970-01-01) instead of refused: ClickHouse's
    /// `input_format_null_as_default=1`, asked for per insert.
    pub null_as_default: bool,
}

/// Whether a text or binary body starts with a row of column names, and one of types.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Header {
    /// Rows only: values come in the order of the insert's column list, or the table's.
    #[default]
    None,
    /// A row of column names first (`...WithNames`).
    Names,
    /// A row of names, then one of ClickHouse types (`...WithNamesAndTypes`).
    NamesAndTypes,
}

/// A body format, by the name ClickHouse gives it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InputFormat {
    /// JSON objects, framed by the door's [`JsonDialect`]: `JSONEachRow`, sluice's NDJSON.
    #[default]
    JsonEachRow,
    /// JSON arrays, a value per column: `JSONCompactEachRow`, and `JSONCompactStringsEachRow`,
    /// whose values are all strings.
    JsonCompactEachRow(Header),
    /// JSON objects whose values are all strings: `JSONStringsEachRow`.
    JsonStringsEachRow,
    /// `TabSeparated`, with ClickHouse's escapes (`\t`, `\n`, `\N` for null, ...).
    TabSeparated(Header),
    /// `CSV`, values optionally in double quotes, `\N` for null.
    Csv(Header),
    /// SQL tuples: `(1, 'a'), (2, NULL)`.
    Values,
    /// ClickHouse's binary row layout.
    RowBinary(Header),
    /// ClickHouse's blocks of columns, each named and typed.
    Native,
}

impl InputFormat {
    /// The format ClickHouse calls `name` (aliases included, in any case), if sluice reads it.
    pub fn parse(name: &str) -> Option<Self> {
        let name = name.to_ascii_lowercase();
        let with = |base: &str| -> Option<Header> {
            match name.strip_prefix(base)? {
                "" => Some(Header::None),
                "withnames" => Some(Header::Names),
                "withnamesandtypes" => Some(Header::NamesAndTypes),
                _ => None,
            }
        };
        match name.as_str() {
            "jsoneachrow" | "jsonlines" | "ndjson" => return Some(Self::JsonEachRow),
            "jsonstringseachrow" => return Some(Self::JsonStringsEachRow),
            "values" => return Some(Self::Values),
            "native" => return Some(Self::Native),
            _ => {}
        }
        if let Some(header) =
            with("jsoncompacteachrow").or_else(|| with("jsoncompactstringseachrow"))
        {
            return Some(Self::JsonCompactEachRow(header));
        }
        if let Some(header) = with("tabseparated").or_else(|| with("tsv")) {
            return Some(Self::TabSeparated(header));
        }
        if let Some(header) = with("csv") {
            return Some(Self::Csv(header));
        }
        with("rowbinary").map(Self::RowBinary)
    }

    /// Every format sluice reads, by one of its ClickHouse names: for messages and tests.
    pub const NAMES: [&'static str; 17] = [
        "JSONEachRow",
        "JSONStringsEachRow",
        "JSONCompactEachRow",
        "JSONCompactEachRowWithNames",
        "JSONCompactEachRowWithNamesAndTypes",
        "JSONCompactStringsEachRow",
        "TabSeparated",
        "TabSeparatedWithNames",
        "TabSeparatedWithNamesAndTypes",
        "CSV",
        "CSVWithNames",
        "CSVWithNamesAndTypes",
        "Values",
        "RowBinary",
        "RowBinaryWithNames",
        "RowBinaryWithNamesAndTypes",
        "Native",
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_parses_and_aliases_agree() {
        for name in InputFormat::NAMES {
            assert!(InputFormat::parse(name).is_some(), "{name}");
        }
        assert_eq!(
            InputFormat::parse("TSVWithNames"),
            InputFormat::parse("TabSeparatedWithNames")
        );
        assert_eq!(InputFormat::parse("NDJSON"), Some(InputFormat::JsonEachRow));
        assert_eq!(
            InputFormat::parse("jsoncompacteachrowwithnames"),
            Some(InputFormat::JsonCompactEachRow(Header::Names))
        );
        for unknown in [
            "Parquet",
            "CSVWithNamesAndStuff",
            "RowBinaryX",
            "TSVRaw",
            "Arrow",
        ] {
            assert_eq!(InputFormat::parse(unknown), None, "{unknown}");
        }
    }
}
