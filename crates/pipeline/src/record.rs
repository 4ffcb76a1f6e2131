//! What one write-ahead-log frame holds: an insert as it arrived, so replay decodes it again.
//!
//! ```text
//! version u8 (1) | kind u8 | table len u16 | table | kind-specific
//! version u8 (2) | kind u8 | table len u16 | table | key len u16 | key | rows hash u64
//!                | kind-specific
//! kind 1, NDJSON:    flags u8 (1 = skip unknown fields, 2 = column list,
//!                              4 = JSON checked strictly, 8 = ClickHouse's framing,
//!                              16 = a number for a timestamp is seconds,
//!                              32 = a null for a required column is its default)
//!                    [count u16 | (len u16 | name)*]  when flag 2
//!                    body (the rest)
//! kind 2, Arrow IPC: an IPC stream with one batch (the rest)
//! kind 3, ClickHouse format: flags u8 (1, 2 and 32 as kind 1)
//!                    [count u16 | (len u16 | name)*]  when flag 2
//!                    format u8 | header u8 | CSV delimiter u8
//!                    body (the rest)
//! kind 4, ClickHouse format, several bodies: as kind 3 up to the delimiter, then
//!                    count u32 | (len u32)* | the bodies one after another (the rest)
//! ```
//!
//! The raw body is logged rather than the decoded batch: it costs a copy, not an encode, and it
//! decodes to the same rows against the same schema.
//!
//! Flags 4 and 8 name the JSON dialect the door took the insert under. A record with neither was
//! logged before sluice checked JSON syntax, and replays under the rules it was taken by
//! ([`JsonDialect::Lenient`]); an older sluice reading a newer log ignores both. Flag 16 marks
//! a ClickHouse record taken since a number for a timestamp is Unix seconds on that door; one
//! with flag 8 and without it replays with such numbers as microseconds, as it was acknowledged
//! ([`JsonDialect::ClickHouseMicros`]).
//!
//! A keyed insert is logged as version 2, with its key and the hash of its decoded rows, so
//! replay recovers the key with the rows and a resend after a crash is still recognised. An
//! insert without a key stays version 1, which every sluice reads; an older one refuses a
//! version 2 record rather than lose its key.
//!
//! Bodies in ClickHouse's other formats are kind 3, which a sluice that does not read them
//! refuses by kind rather than misreading. Kind 4 holds the bodies of several inserts of one
//! round in such a format, each decoded alone at replay: unlike JSON rows, their bodies do not
//! always read as the same rows once they follow one another (a CSV body may end inside a
//! quote). An older sluice refuses kind 4 the same way. A positional body (no header) is logged
//! with the column names its values were read by, so a column added to the table since does
//! not shift them at replay.

use arrow::array::RecordBatch;
use sluice_core::{DecodeOptions, Header, InputFormat, JsonDialect};

const VERSION: u8 = 1;
const VERSION_KEYED: u8 = 2;
const KIND_NDJSON: u8 = 1;
const KIND_ARROW: u8 = 2;
const KIND_FORMAT: u8 = 3;
const KIND_BODIES: u8 = 4;
const FLAG_SKIP_UNKNOWN: u8 = 1;
const FLAG_COLUMNS: u8 = 2;
const FLAG_STRICT: u8 = 4;
const FLAG_CLICKHOUSE: u8 = 8;
const FLAG_SECONDS: u8 = 16;
const FLAG_NULL_AS_DEFAULT: u8 = 32;

/// A logged insert.
#[derive(Debug, Clone)]
pub(crate) struct Record<'a> {
    /// The table the insert went to.
    pub(crate) table: &'a str,
    /// Its key, when it had one.
    pub(crate) key: Option<LoggedKey<'a>>,
    /// Its rows.
    pub(crate) rows: Rows<'a>,
}

/// An insert's key and the hash of its decoded rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoggedKey<'a> {
    pub(crate) key: &'a str,
    pub(crate) rows_hash: u64,
}

/// A logged insert's rows.
#[derive(Debug, Clone)]
pub(crate) enum Rows<'a> {
    /// A body (NDJSON, or one of ClickHouse's formats) with its decoding options.
    Body {
        options: DecodeOptions,
        body: &'a [u8],
    },
    /// Bodies in one of ClickHouse's formats, each read alone with the same options, their rows
    /// one body after another.
    Bodies {
        options: DecodeOptions,
        bodies: Vec<&'a [u8]>,
    },
    /// An Arrow IPC stream (from the library API).
    Arrow { ipc: &'a [u8] },
}

/// An encoded record as the pieces its frame is written from: what is encoded here, then the
/// bodies it carries as they came. The log copies each piece into the frame, so a large body is
/// copied once rather than first behind its record's head.
#[derive(Debug)]
pub(crate) struct Encoded<'a> {
    head: Vec<u8>,
    bodies: Vec<&'a [u8]>,
}

impl Encoded<'_> {
    /// The pieces in order, for [`sluice_wal::Wal::append_pieces`].
    pub(crate) fn pieces(&self) -> Vec<&[u8]> {
        std::iter::once(self.head.as_slice())
            .chain(self.bodies.iter().copied())
            .collect()
    }

    /// The record's bytes in one piece, as a frame's payload holds them.
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        self.pieces().concat()
    }
}

/// Encodes an insert's body with its decoding options and its key.
pub(crate) fn encode_body<'a>(
    table: &str,
    key: Option<LoggedKey<'_>>,
    options: &DecodeOptions,
    body: &'a [u8],
) -> Encoded<'a> {
    Encoded {
        head: encode_body_head(table, key, options),
        bodies: vec![body],
    }
}

/// What [`encode_body`] puts before the body.
fn encode_body_head(table: &str, key: Option<LoggedKey<'_>>, options: &DecodeOptions) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + table.len());
    let json = options.format == InputFormat::JsonEachRow;
    head(
        &mut out,
        if json { KIND_NDJSON } else { KIND_FORMAT },
        table,
        key,
    );
    put_options(&mut out, options);
    out
}

/// The decoding options of a body record: flags, the column list, and for a format other than
/// JSON rows, the format, its header and the CSV delimiter.
fn put_options(out: &mut Vec<u8>, options: &DecodeOptions) {
    let json = options.format == InputFormat::JsonEachRow;
    let mut flags = 0;
    if options.skip_unknown_fields {
        flags |= FLAG_SKIP_UNKNOWN;
    }
    if options.columns.is_some() {
        flags |= FLAG_COLUMNS;
    }
    if options.null_as_default {
        flags |= FLAG_NULL_AS_DEFAULT;
    }
    if json {
        flags |= match options.dialect {
            JsonDialect::Ndjson => FLAG_STRICT,
            JsonDialect::ClickHouse => FLAG_STRICT | FLAG_CLICKHOUSE | FLAG_SECONDS,
            JsonDialect::ClickHouseMicros => FLAG_STRICT | FLAG_CLICKHOUSE,
            _ => 0,
        };
    }
    out.push(flags);
    if let Some(columns) = &options.columns {
        put_u16(out, columns.len());
        for column in columns {
            put_str(out, column);
        }
    }
    if !json {
        let (format, header) = format_code(options.format);
        out.extend_from_slice(&[format, header, options.csv_delimiter.unwrap_or(b',')]);
    }
}

/// Encodes several bodies read with `options`, and no key, as one record that decodes to their
/// rows in order. Bodies of JSON rows are logged as one body, each ending in a newline; bodies
/// in another format are kind 4, each read alone at replay. Only for bodies that
/// [`may_join`](sluice_core::formats::may_join) others.
pub(crate) fn encode_bodies<'a>(
    table: &str,
    options: &DecodeOptions,
    bodies: impl ExactSizeIterator<Item = &'a [u8]>,
) -> Encoded<'a> {
    if options.format != InputFormat::JsonEachRow {
        return encode_format_bodies(table, options, bodies);
    }
    let mut pieces = Vec::new();
    for body in bodies {
        pieces.push(body);
        if body.last() != Some(&b'\n') {
            pieces.push(b"\n".as_slice());
        }
    }
    Encoded {
        head: encode_body_head(table, None, options),
        bodies: pieces,
    }
}

/// Kind 4: bodies in one of ClickHouse's formats, with their lengths.
fn encode_format_bodies<'a>(
    table: &str,
    options: &DecodeOptions,
    bodies: impl ExactSizeIterator<Item = &'a [u8]>,
) -> Encoded<'a> {
    let mut out = Vec::with_capacity(24 + table.len() + 4 * bodies.len());
    head(&mut out, KIND_BODIES, table, None);
    put_options(&mut out, options);
    put_u32(&mut out, bodies.len());
    let bodies: Vec<&[u8]> = bodies.collect();
    for body in &bodies {
        put_u32(&mut out, body.len());
    }
    Encoded { head: out, bodies }
}

/// A format and its header as two bytes.
fn format_code(format: InputFormat) -> (u8, u8) {
    let header = |h: Header| match h {
        Header::None => 0,
        Header::Names => 1,
        Header::NamesAndTypes => 2,
    };
    match format {
        InputFormat::JsonCompactEachRow(h) => (1, header(h)),
        InputFormat::TabSeparated(h) => (2, header(h)),
        InputFormat::Csv(h) => (3, header(h)),
        InputFormat::Values => (4, 0),
        InputFormat::RowBinary(h) => (5, header(h)),
        InputFormat::JsonStringsEachRow => (6, 0),
        InputFormat::Native => (7, 0),
        _ => (0, 0),
    }
}

fn format_of(format: u8, header: u8) -> Result<InputFormat, String> {
    let header = match header {
        0 => Header::None,
        1 => Header::Names,
        2 => Header::NamesAndTypes,
        other => return Err(format!("unknown header code {other}")),
    };
    Ok(match format {
        1 => InputFormat::JsonCompactEachRow(header),
        2 => InputFormat::TabSeparated(header),
        3 => InputFormat::Csv(header),
        4 => InputFormat::Values,
        5 => InputFormat::RowBinary(header),
        6 => InputFormat::JsonStringsEachRow,
        7 => InputFormat::Native,
        other => return Err(format!("unknown format code {other}")),
    })
}

/// Encodes an Arrow batch as an IPC stream.
pub(crate) fn encode_arrow(table: &str, batch: &RecordBatch) -> Result<Encoded<'static>, String> {
    let mut out = Vec::new();
    head(&mut out, KIND_ARROW, table, None);
    let mut writer = arrow::ipc::writer::StreamWriter::try_new(&mut out, &batch.schema())
        .map_err(|e| e.to_string())?;
    writer.write(batch).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    drop(writer);
    Ok(Encoded {
        head: out,
        bodies: Vec::new(),
    })
}

/// Decodes a frame's payload.
pub(crate) fn decode(payload: &[u8]) -> Result<Record<'_>, String> {
    let mut r = Reader {
        buf: payload,
        pos: 0,
    };
    let version = r.u8()?;
    if version != VERSION && version != VERSION_KEYED {
        return Err(format!("unknown record version {version}"));
    }
    let kind = r.u8()?;
    let table = r.str()?;
    let key = match version {
        VERSION_KEYED => Some(LoggedKey {
            key: r.str()?,
            rows_hash: r.u64()?,
        }),
        _ => None,
    };
    let rows = decode_rows(kind, &mut r)?;
    Ok(Record { table, key, rows })
}

/// The rows of a record of `kind`, from `r` on.
fn decode_rows<'a>(kind: u8, r: &mut Reader<'a>) -> Result<Rows<'a>, String> {
    match kind {
        KIND_NDJSON | KIND_FORMAT | KIND_BODIES => {
            let flags = r.u8()?;
            let columns = if flags & FLAG_COLUMNS != 0 {
                let n = r.u16()?;
                let mut columns = Vec::with_capacity(n);
                for _ in 0..n {
                    columns.push(r.str()?.to_owned());
                }
                Some(columns)
            } else {
                None
            };
            let mut options = DecodeOptions {
                dialect: dialect(flags),
                skip_unknown_fields: flags & FLAG_SKIP_UNKNOWN != 0,
                columns,
                null_as_default: flags & FLAG_NULL_AS_DEFAULT != 0,
                ..DecodeOptions::default()
            };
            if kind != KIND_NDJSON {
                let (format, header, delimiter) = (r.u8()?, r.u8()?, r.u8()?);
                options.format = format_of(format, header)?;
                options.csv_delimiter = Some(delimiter);
            }
            if kind == KIND_BODIES {
                let bodies = read_bodies(r)?;
                return Ok(Rows::Bodies { options, bodies });
            }
            Ok(Rows::Body {
                options,
                body: r.rest(),
            })
        }
        KIND_ARROW => Ok(Rows::Arrow { ipc: r.rest() }),
        other => Err(format!("unknown record kind {other}")),
    }
}

/// The bodies of a kind 4 record: their count, their lengths, then the bodies, which must take
/// the rest of it exactly.
fn read_bodies<'a>(r: &mut Reader<'a>) -> Result<Vec<&'a [u8]>, String> {
    let count = r.u32()?;
    // Each length takes four bytes: a count the record cannot hold is refused before it is
    // allocated for.
    if count > r.remaining() / 4 {
        return Err(format!("the record cannot hold {count} bodies"));
    }
    let lens = (0..count).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
    let bodies = lens
        .into_iter()
        .map(|len| r.take(len))
        .collect::<Result<Vec<_>, _>>()?;
    if r.remaining() > 0 {
        return Err("the record holds more than its bodies".to_owned());
    }
    Ok(bodies)
}

/// The JSON dialect a record's flags name.
fn dialect(flags: u8) -> JsonDialect {
    if flags & FLAG_CLICKHOUSE != 0 && flags & FLAG_SECONDS != 0 {
        JsonDialect::ClickHouse
    } else if flags & FLAG_CLICKHOUSE != 0 {
        JsonDialect::ClickHouseMicros
    } else if flags & FLAG_STRICT != 0 {
        JsonDialect::Ndjson
    } else {
        JsonDialect::Lenient
    }
}

/// Reads the one batch of an Arrow IPC stream.
pub(crate) fn read_arrow(ipc: &[u8]) -> Result<RecordBatch, String> {
    let mut reader =
        arrow::ipc::reader::StreamReader::try_new(ipc, None).map_err(|e| e.to_string())?;
    match reader.next() {
        Some(batch) => batch.map_err(|e| e.to_string()),
        None => Err("the IPC stream holds no batch".into()),
    }
}

fn head(out: &mut Vec<u8>, kind: u8, table: &str, key: Option<LoggedKey<'_>>) {
    out.push(if key.is_some() {
        VERSION_KEYED
    } else {
        VERSION
    });
    out.push(kind);
    put_str(out, table);
    if let Some(key) = key {
        put_str(out, key.key);
        out.extend_from_slice(&key.rows_hash.to_le_bytes());
    }
}

fn put_u16(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u16::try_from(n).unwrap_or(u16::MAX).to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u16(out, s.len());
    out.extend_from_slice(&s.as_bytes()[..s.len().min(u16::MAX as usize)]);
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let bytes = self
            .buf
            .get(self.pos..self.pos + n)
            .ok_or_else(|| "the record is cut short".to_owned())?;
        self.pos += n;
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<usize, String> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]) as usize)
    }

    fn u32(&mut self) -> Result<usize, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    fn str(&mut self) -> Result<&'a str, String> {
        let n = self.u16()?;
        std::str::from_utf8(self.take(n)?)
            .map_err(|_| "a name in the record is not UTF-8".to_owned())
    }

    fn rest(&mut self) -> &'a [u8] {
        let rest = &self.buf[self.pos.min(self.buf.len())..];
        self.pos = self.buf.len();
        rest
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    #[test]
    fn ndjson_round_trips_with_its_dialect() {
        for dialect in [JsonDialect::Ndjson, JsonDialect::ClickHouse] {
            let options = DecodeOptions {
                dialect,
                skip_unknown_fields: true,
                columns: Some(vec!["a".into(), "b c".into()]),
                ..DecodeOptions::default()
            };
            let bytes = encode_body("events", None, &options, b"{\"a\":1}\n").to_vec();
            let record = decode(&bytes).unwrap();
            let Rows::Body { options: got, body } = record.rows else {
                panic!("wrong kind");
            };
            assert_eq!((record.table, body), ("events", &b"{\"a\":1}\n"[..]));
            assert_eq!(bytes[0], 1, "an insert without a key is version 1");
            assert_eq!(got, options);
        }
        let plain = encode_body("t", None, &DecodeOptions::default(), b"x").to_vec();
        let Rows::Body { options, .. } = decode(&plain).unwrap().rows else {
            panic!("wrong kind");
        };
        assert_eq!(options, DecodeOptions::default());
    }

    #[test]
    fn clickhouse_formats_round_trip_with_their_header_and_delimiter() {
        for name in InputFormat::NAMES {
            let format = InputFormat::parse(name).unwrap();
            let options = DecodeOptions {
                format,
                csv_delimiter: Some(b';'),
                columns: Some(vec!["a".into()]),
                null_as_default: true,
                ..DecodeOptions::default()
            };
            let bytes = encode_body("t", None, &options, b"\x01\x02").to_vec();
            let Rows::Body { options: got, body } = decode(&bytes).unwrap().rows else {
                panic!("wrong kind");
            };
            assert_eq!(body, b"\x01\x02", "{name}");
            assert_eq!(got.format, format, "{name}");
            assert_eq!(got.columns, options.columns, "{name}");
            assert!(got.null_as_default, "{name}");
            if format != InputFormat::JsonEachRow {
                assert_eq!(got.csv_delimiter, Some(b';'), "{name}");
            }
        }
    }

    /// Bodies in one of ClickHouse's formats logged together come back one by one, with their
    /// options; a record whose lengths do not add up to its bodies is refused.
    #[test]
    fn format_bodies_round_trip_one_by_one() {
        let options = DecodeOptions {
            format: InputFormat::Csv(Header::Names),
            csv_delimiter: Some(b';'),
            columns: Some(vec!["a".into()]),
            ..DecodeOptions::default()
        };
        let bodies: [&[u8]; 3] = [b"a\n1,\"x", b"", b"a\n2\n"];
        let bytes = encode_bodies("t", &options, bodies.into_iter()).to_vec();
        let record = decode(&bytes).unwrap();
        let Rows::Bodies {
            options: got,
            bodies: logged,
        } = record.rows
        else {
            panic!("wrong kind");
        };
        assert_eq!((record.table, record.key), ("t", None));
        assert_eq!(logged, bodies);
        assert_eq!(
            (got.format, got.columns, got.csv_delimiter),
            (options.format, options.columns, options.csv_delimiter)
        );
        assert!(
            decode(&bytes[..bytes.len() - 1]).is_err(),
            "a body cut short"
        );
        let mut longer = bytes.clone();
        longer.push(b'\n');
        assert!(decode(&longer).is_err(), "bytes past the bodies");
        let json = encode_bodies("t", &DecodeOptions::default(), bodies.into_iter()).to_vec();
        assert!(matches!(decode(&json).unwrap().rows, Rows::Body { .. }));
    }

    #[test]
    fn a_record_logged_before_strict_json_replays_leniently() {
        // version 1, NDJSON, table "t", flags 1 (skip unknown fields), the body.
        let logged = b"\x01\x01\x01\x00t\x01{\"a\": 1 \"b\": 2}";
        let Rows::Body { options, body } = decode(logged).unwrap().rows else {
            panic!("wrong kind");
        };
        assert_eq!(options.dialect, JsonDialect::Lenient);
        assert!(options.skip_unknown_fields);
        assert_eq!(body, b"{\"a\": 1 \"b\": 2}");
    }

    #[test]
    fn a_clickhouse_record_logged_before_seconds_replays_in_microseconds() {
        // version 1, NDJSON, table "t", flags 4 | 8 (strict, ClickHouse), the body.
        let logged = b"\x01\x01\x01\x00t\x0c{\"ts\": 1795953600000000}";
        let Rows::Body { options, .. } = decode(logged).unwrap().rows else {
            panic!("wrong kind");
        };
        assert_eq!(options.dialect, JsonDialect::ClickHouseMicros);
        let now = DecodeOptions {
            dialect: JsonDialect::ClickHouse,
            ..DecodeOptions::default()
        };
        assert_eq!(encode_body("t", None, &now, b"{}").to_vec()[5], 4 | 8 | 16);
    }

    #[test]
    fn arrow_round_trips() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2, 3]))]).unwrap();
        let bytes = encode_arrow("t", &batch).unwrap().to_vec();
        let record = decode(&bytes).unwrap();
        let Rows::Arrow { ipc } = record.rows else {
            panic!("wrong kind");
        };
        assert_eq!(record.table, "t");
        assert_eq!(read_arrow(ipc).unwrap(), batch);
    }

    #[test]
    fn a_key_travels_with_its_insert() {
        let key = LoggedKey {
            key: "batch-17",
            rows_hash: 0x0123_4567_89ab_cdef,
        };
        let options = DecodeOptions::default();
        let bytes = encode_body("t", Some(key), &options, b"{\"a\":1}\n").to_vec();
        assert_eq!(bytes[0], 2);
        let record = decode(&bytes).unwrap();
        assert_eq!((record.table, record.key), ("t", Some(key)));
        let Rows::Body { options: got, body } = record.rows else {
            panic!("wrong kind");
        };
        assert_eq!((got, body), (options, &b"{\"a\":1}\n"[..]));
        assert!(decode(&bytes[..12]).is_err(), "a key cut short");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bytes in [
            &b""[..],
            b"\x01",
            b"\x02\x01\x00\x00",
            b"\x01\x01\xff\xff",
            b"\x01\x09\x00\x00",
            b"\x03\x01\x00\x00",
            b"\x02\x01\x01\x00t\x01\x00k\x00",
            // Kind 4, CSV, a count of bodies no record of this size holds.
            b"\x01\x04\x01\x00t\x00\x03\x00,\xff\xff\xff\xff\x01\x00\x00\x00",
        ] {
            assert!(decode(bytes).is_err(), "{bytes:?}");
        }
    }
}
