//! JSON bodies into Arrow, all or nothing, with errors that name the line and column.
//!
//! # Layout
//!
//! Each file imports only from the ones above it.
//!
//! - [`frame`]: a body cut into its rows, by the door's [`JsonDialect`]: one object per line for
//!   sluice's own API, ClickHouse's looser framing for its `JSONEachRow`.
//! - `leaf`, `nested`: `list`, `struct` and `map` columns built from their values' text, as
//!   strictly as the table's own columns, with errors naming the path inside the value.
//! - `check`: one serde_json pass over every row that refuses what is not JSON (RFC 8259), and
//!   what arrow-json would take but store differently from what was sent.
//! - `rewrite`: rows rewritten for ClickHouse's rules arrow-json does not know: a timestamp
//!   sent as a number is Unix seconds on the ClickHouse door, and with
//!   `input_format_null_as_default=1` a null for a column that is not nullable is its default.
//! - `kept`: arrow-json decoders kept per thread between small bodies of one schema.
//! - `direct`: rows of tables whose columns are all plain read once by serde_json, straight
//!   into Arrow builders, when they hold nothing that `check` and arrow-json would treat apart.
//! - [`decode`]: `direct` first; else the checked rows through arrow-json into the table's
//!   schema, and when that fails, a row-by-row search for the first bad row, so good inserts pay
//!   nothing for good messages.
//! - [`shape`]: the type of a new column whose values are arrays or objects.
//! - [`infer`]: a new table's schema from its first insert.
//!
//! serde_json is the judge of syntax, and arrow-json builds the columns: arrow-json's tape decoder
//! is built for speed and takes some malformed input (a missing comma, a raw control character).
//! Every row passes serde_json before arrow-json sees it, so what lands is what a strict parser
//! reads. `direct` builds what arrow-json would from that same serde_json pass, for the rows it
//! is sure of, and leaves every other body to the two passes.

mod check;
pub mod decode;
pub(crate) mod direct;
pub mod frame;
pub mod infer;
mod kept;
mod leaf;
mod nested;
mod rewrite;
pub mod shape;

pub use decode::{conform, decode_ndjson};
pub use frame::count_rows;
pub use infer::{infer_schema, new_columns};
pub(crate) use nested::Entries;

pub use crate::options::{DecodeOptions, JsonDialect};
