//! JSON bodies into Arrow, all or nothing, with errors that name the line and column.
//!
//! # Layout
//!
//! Each file imports only from the ones above it.
//!
//! - [`frame`]: a body cut into its rows, by the door's [`JsonDialect`]: one object per line for
//!   sluice's own API, ClickHouse's looser framing for its `JSONEachRow`.
//! - `check`: one serde_json pass over every row that refuses what is not JSON (RFC 8259), and
//!   what arrow-json would take but store differently from what was sent.
//! - [`decode`]: the checked rows through arrow-json into the table's schema; when that fails,
//!   a row-by-row search for the first bad row, so good inserts pay nothing for good messages.
//! - [`infer`]: a new table's schema from its first insert.
//!
//! serde_json is the judge of syntax, and arrow-json builds the columns: arrow-json's tape decoder
//! is built for speed and takes some malformed input (a missing comma, a raw control character).
//! Every row passes serde_json before arrow-json sees it, so what lands is what a strict parser
//! reads.

mod check;
pub mod decode;
pub mod frame;
pub mod infer;

pub use decode::{conform, decode_ndjson};
pub use frame::count_rows;
pub use infer::infer_schema;

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
}

impl JsonDialect {
    /// Whether a number column takes a number in quotes.
    fn takes_quoted_numbers(self) -> bool {
        matches!(self, Self::ClickHouse | Self::Lenient)
    }

    /// Whether rows are lines, so the body as a whole is valid input for arrow-json.
    fn is_line_framed(self) -> bool {
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
}
