//! The ClickHouse-compatible doors: HTTP, `POST /?query=INSERT INTO t FORMAT <format>`, and the
//! native protocol over TCP ([`tcp`]).
//!
//! Existing ClickHouse HTTP clients work unchanged: the query comes in the URL (rows in the body)
//! or at the start of the body (rows after it); `db.table`, a column list, ClickHouse's input
//! formats ([`sluice_core::InputFormat`]), its Content-Encodings and its compressed blocks
//! (`decompress=1`), `wait_for_async_insert=0` (answer once buffered) and
//! `input_format_skip_unknown_fields=1` are understood. The reads clients send when they connect (`SELECT version()`, `DESCRIBE TABLE`,
//! ...) are answered in the format they ask for. Errors come back as ClickHouse writes them:
//! `Code: 62. DB::Exception: Syntax error: ... (SYNTAX_ERROR)`.
//!
//! The database part of `db.table` is accepted and ignored: sluice's tables are one namespace.
//!
//! # Layout
//!
//! - `query.rs`: the statement lexer and the INSERT parser (pure; bytes in,
//!   [`query::InsertQuery`] out).
//! - `types.rs`: the ClickHouse type announced for each column, to each client.
//! - `handshake.rs`: the reads sluice answers, parsed and answered (pure).
//! - `output.rs`: small results written in ClickHouse's output formats.
//! - `compressed.rs`: ClickHouse's compressed blocks (`decompress=1`): checksums verified,
//!   LZ4 and ZSTD.
//! - `handler.rs`: insert or read, parameters, settings, the call into the pipeline,
//!   ClickHouse-style answers and headers.
//! - `tcp/`: the native protocol, the other door, which shares the parsers, the reads' answers
//!   and the insert settings above.

pub mod compressed;
mod handler;
pub mod handshake;
mod output;
pub mod query;
pub mod tcp;
mod types;

pub(crate) use handler::{post, query_get};
