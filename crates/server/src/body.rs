//! Reading request bodies: the size limit and the idle timeout, then decompression under the
//! same limit, then the row limit.
//!
//! The size limit applies to the bytes on the wire and again to the decompressed bytes, so a
//! small gzip bomb is refused with 413 after reading at most the limit plus one byte. The row
//! limit counts lines before anything is decoded.
//!
//! The Content-Encodings are the ones ClickHouse reads (`chooseCompressionMethod` in its
//! `IO/CompressionMethod.cpp`), under its names and aliases, plus HTTP's `identity` and `x-gzip`.

use std::io::Read;
use std::time::Duration;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::http::header::CONTENT_ENCODING;
use bytes::Bytes;
use sluice_core::JsonDialect;
use sluice_core::json::count_rows;

use crate::Limits;
use crate::error::{ApiError, Kind};

/// Reads the whole body, refusing more than `limits.max_body_bytes` and a body that stops
/// arriving for `limits.body_timeout`, and decompresses it by its `Content-Encoding` (see
/// [`Encoding::ACCEPTED`]).
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limits: &Limits,
) -> Result<Bytes, ApiError> {
    let encoding = match headers.get(CONTENT_ENCODING) {
        None => Encoding::Identity,
        Some(value) => Encoding::parse(value.to_str().unwrap_or("?"))?,
    };
    let raw = read_limited(body, limits.max_body_bytes, limits.body_timeout).await?;
    encoding.decode(raw, limits.max_body_bytes)
}

/// Decompresses `raw`, sent with `Content-Encoding: encoding`, into at most `limit` bytes, as
/// every endpoint does before it reads a body; the error says why not, in words.
pub fn decode_content_encoding(encoding: &str, raw: Bytes, limit: usize) -> Result<Bytes, String> {
    Encoding::parse(encoding)
        .and_then(|encoding| encoding.decode(raw, limit))
        .map_err(|error| error.message)
}

/// How a request body is compressed, by its Content-Encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Identity,
    Gzip,
    Deflate,
    Brotli,
    Zstd,
    Lz4,
    Xz,
    Bzip2,
    Snappy,
}

impl Encoding {
    /// The names the unsupported-encoding error suggests.
    const ACCEPTED: &str = "gzip, deflate, br, zstd, lz4, xz, bz2, snappy or none";

    fn parse(value: &str) -> Result<Self, ApiError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "identity" | "none" | "auto" => Ok(Self::Identity),
            "gzip" | "gz" | "x-gzip" => Ok(Self::Gzip),
            "deflate" => Ok(Self::Deflate),
            "br" | "brotli" => Ok(Self::Brotli),
            "zstd" | "zst" => Ok(Self::Zstd),
            "lz4" => Ok(Self::Lz4),
            "xz" | "lzma" => Ok(Self::Xz),
            "bz2" => Ok(Self::Bzip2),
            "snappy" => Ok(Self::Snappy),
            other => Err(ApiError::new(
                Kind::UnsupportedEncoding,
                format!(
                    "Content-Encoding '{}' is not supported: use {}",
                    other.escape_debug(),
                    Self::ACCEPTED
                ),
            )),
        }
    }

    /// The name error messages use.
    fn name(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::Gzip => "gzip",
            Self::Deflate => "deflate",
            Self::Brotli => "br",
            Self::Zstd => "zstd",
            Self::Lz4 => "lz4",
            Self::Xz => "xz",
            Self::Bzip2 => "bz2",
            Self::Snappy => "snappy",
        }
    }

    /// Decompresses `raw` into at most `limit` bytes.
    fn decode(self, raw: Bytes, limit: usize) -> Result<Bytes, ApiError> {
        let name = self.name();
        let input = raw.as_ref();
        match self {
            Self::Identity => Ok(raw),
            Self::Gzip => inflate(flate2::read::MultiGzDecoder::new(input), limit, name),
            Self::Deflate => inflate_deflate(input, limit),
            Self::Brotli => inflate(
                brotli::Decompressor::new(input, BROTLI_BUFFER_BYTES),
                limit,
                name,
            ),
            Self::Zstd => {
                let decoder = zstd::stream::read::Decoder::new(input).map_err(|e| {
                    ApiError::new(Kind::BadRequest, format!("cannot start zstd decoding: {e}"))
                })?;
                inflate(decoder, limit, name)
            }
            Self::Lz4 => inflate_lz4_frames(input, limit),
            Self::Xz => inflate(
                lzma_rust2::XzReader::new_mem_limit(input, true, XZ_MEMORY_LIMIT_KIB),
                limit,
                name,
            ),
            Self::Bzip2 => inflate(bzip2::read::MultiBzDecoder::new(input), limit, name),
            Self::Snappy => inflate_hadoop_snappy(input, limit),
        }
    }
}

/// The brotli decoder's input buffer.
const BROTLI_BUFFER_BYTES: usize = 8 * 1024;

/// The most an xz block may ask the decoder to hold, in KiB: room for the dictionary of `xz -9`,
/// the largest preset, and the decoder's own buffers. A block header asking for more is refused
/// before its dictionary is allocated, though the format allows far larger dictionaries.
const XZ_MEMORY_LIMIT_KIB: u32 = 65 * 1024;

fn inflate(reader: impl Read, limit: usize, name: &str) -> Result<Bytes, ApiError> {
    let mut out = Vec::new();
    inflate_into(reader, &mut out, limit, name)?;
    Ok(Bytes::from(out))
}

/// Appends what `reader` decompresses to `out`, refusing to let `out` grow past `limit`.
fn inflate_into(
    reader: impl Read,
    out: &mut Vec<u8>,
    limit: usize,
    name: &str,
) -> Result<(), ApiError> {
    let room = limit.saturating_sub(out.len());
    reader
        .take(room as u64 + 1)
        .read_to_end(out)
        .map_err(|e| not_valid(name, e))?;
    if out.len() > limit {
        return Err(too_large(name, limit));
    }
    Ok(())
}

fn not_valid(name: &str, reason: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        Kind::BadRequest,
        format!("the body is not valid {name}: {reason}"),
    )
}

fn too_large(name: &str, limit: usize) -> ApiError {
    ApiError::new(
        Kind::TooLarge,
        format!("the {name} body decompresses to more than the limit of {limit} bytes"),
    )
}

/// HTTP's `deflate` is the zlib format (RFC 9110), which is what ClickHouse reads, but some
/// clients send raw deflate: a body without a zlib header is read as raw deflate.
fn inflate_deflate(input: &[u8], limit: usize) -> Result<Bytes, ApiError> {
    if has_zlib_header(input) {
        inflate(flate2::read::ZlibDecoder::new(input), limit, "deflate")
    } else {
        inflate(flate2::read::DeflateDecoder::new(input), limit, "deflate")
    }
}

/// A zlib header: compression method 8 (deflate), and the two bytes a multiple of 31 (RFC 1950).
fn has_zlib_header(input: &[u8]) -> bool {
    match input {
        [cmf, flg, ..] => cmf & 0x0f == 8 && u16::from_be_bytes([*cmf, *flg]) % 31 == 0,
        _ => false,
    }
}

/// LZ4 frames back to back: clickhouse-connect sends one frame per block. lz4_flex's decoder
/// reads on into the next frame, but reports the end of each frame as the end of the stream.
fn inflate_lz4_frames(input: &[u8], limit: usize) -> Result<Bytes, ApiError> {
    let mut out = Vec::new();
    let mut decoder = lz4_flex::frame::FrameDecoder::new(input);
    loop {
        let unread = decoder.get_ref().len();
        inflate_into(&mut decoder, &mut out, limit, "lz4")?;
        let left = decoder.get_ref().len();
        if left == 0 {
            return Ok(Bytes::from(out));
        }
        // A decoder that stops without reading anything would otherwise loop forever.
        if left == unread {
            return Err(not_valid(
                "lz4",
                format!("decoding stopped {left} bytes before the end"),
            ));
        }
    }
}

/// Snappy as ClickHouse reads it (its `HadoopSnappyReadBuffer`): Hadoop's block stream, neither
/// raw snappy nor the snappy framing format. A block is its decompressed length (u32
/// big-endian), then chunks, each its compressed length (u32 big-endian) and raw snappy, until
/// the chunks add up to that length.
fn inflate_hadoop_snappy(input: &[u8], limit: usize) -> Result<Bytes, ApiError> {
    let truncated = || not_valid("snappy", "it ends inside a block");
    let mut out = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let declared = take_be_u32(&mut rest).ok_or_else(truncated)?;
        let end = out
            .len()
            .checked_add(declared)
            .filter(|&end| end <= limit)
            .ok_or_else(|| too_large("snappy", limit))?;
        while out.len() < end {
            let chunk_len = take_be_u32(&mut rest).ok_or_else(truncated)?;
            let chunk = take_bytes(&mut rest, chunk_len).ok_or_else(truncated)?;
            snappy_chunk_into(chunk, &mut out, end)?;
        }
    }
    Ok(Bytes::from(out))
}

/// Appends one raw snappy chunk to `out`, refusing one that would take `out` past `end` (its
/// block's declared end) before allocating for it.
fn snappy_chunk_into(chunk: &[u8], out: &mut Vec<u8>, end: usize) -> Result<(), ApiError> {
    let len = snap::raw::decompress_len(chunk).map_err(|e| not_valid("snappy", e))?;
    let start = out.len();
    if len > end - start {
        return Err(not_valid(
            "snappy",
            "a block decompresses to more than its declared length",
        ));
    }
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(chunk, &mut out[start..])
        .map_err(|e| not_valid("snappy", e))?;
    Ok(())
}

/// Takes a big-endian u32 off the front of `rest`, if it holds one.
fn take_be_u32(rest: &mut &[u8]) -> Option<usize> {
    let (bytes, tail) = rest.split_first_chunk::<4>()?;
    *rest = tail;
    Some(u32::from_be_bytes(*bytes) as usize)
}

/// Takes `len` bytes off the front of `rest`, if it holds them.
fn take_bytes<'a>(rest: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
    let (bytes, tail) = rest.split_at_checked(len)?;
    *rest = tail;
    Some(bytes)
}

/// How much of a too-large body is read and thrown away before answering 413. A client still
/// sending when the server closes its socket gets a reset instead of the answer (the kernel
/// drops unread data with an RST), so sluice reads on a while; past this it closes anyway.
const DRAIN_BYTES: usize = 32 * 1024 * 1024;

/// The most of a body's announced length that is reserved before it arrives.
const RESERVED_AHEAD: usize = 1024 * 1024;

/// The body's bytes, at most `limit` of them: past it, the rest is drained (up to
/// [`DRAIN_BYTES`]) and the answer is 413. A body that goes `idle` without a byte arriving is
/// answered 408, and its connection closed (the rest of the body is never read).
async fn read_limited(body: Body, limit: usize, idle: Duration) -> Result<Bytes, ApiError> {
    use axum::body::HttpBody as _;
    use http_body_util::BodyExt;

    let mut body = body;
    // A body of one frame is kept as hyper read it; the frames of a longer one are gathered in
    // a buffer sized by its Content-Length up to `RESERVED_AHEAD`, so that a body of a usual
    // size grows once, and a client that announces a large body and stalls holds no more.
    let mut single: Option<Bytes> = None;
    let mut buf = bytes::BytesMut::new();
    let announced = body.size_hint().upper().unwrap_or(0);
    let expected = announced.min(limit.min(RESERVED_AHEAD) as u64) as usize;
    let mut total = 0usize;
    let read_error =
        |e: axum::Error| ApiError::new(Kind::BadRequest, format!("cannot read the body: {e}"));
    loop {
        let Ok(frame) = tokio::time::timeout(idle, body.frame()).await else {
            return Err(ApiError::new(
                Kind::BodyTimeout,
                format!(
                    "the body stopped arriving: nothing for {idle:?} after {total} bytes \
                     (body_timeout); nothing of this insert was taken"
                ),
            ));
        };
        let Some(frame) = frame else { break };
        let Ok(data) = frame.map_err(read_error)?.into_data() else {
            continue;
        };
        total = total.saturating_add(data.len());
        if total > limit {
            while total <= limit.saturating_add(DRAIN_BYTES) {
                match tokio::time::timeout(idle, body.frame()).await {
                    Ok(Some(Ok(frame))) => {
                        total += frame.data_ref().map_or(0, Bytes::len);
                    }
                    _ => break,
                }
            }
            return Err(ApiError::new(
                Kind::TooLarge,
                format!("the body is larger than the limit of {limit} bytes"),
            ));
        }
        match single.take() {
            None if buf.is_empty() => single = Some(data),
            None => buf.extend_from_slice(&data),
            Some(first) => {
                buf.reserve(expected.max(first.len() + data.len()));
                buf.extend_from_slice(&first);
                buf.extend_from_slice(&data);
            }
        }
    }
    Ok(single.unwrap_or_else(|| buf.freeze()))
}

/// Refuses rows holding more than `limit` lines with 413, before they are decoded.
pub(crate) fn check_rows(rows: &[u8], limit: usize, dialect: JsonDialect) -> Result<(), ApiError> {
    // Every row or line takes a byte at least, so a body no longer than the limit cannot hold
    // more: most bodies are not counted at all.
    if rows.len() <= limit {
        return Ok(());
    }
    let count = count_rows(rows, dialect);
    if count > limit {
        let unit = if dialect == JsonDialect::ClickHouse {
            "rows"
        } else {
            "lines"
        };
        return Err(ApiError::new(
            Kind::TooLarge,
            format!(
                "the insert holds {count} {unit}, more than the limit of {limit} rows per insert \
                 (max_rows_per_insert); split it"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lines_with_or_without_a_final_newline() {
        let ndjson = JsonDialect::Ndjson;
        assert!(check_rows(b"", 0, ndjson).is_ok());
        assert!(check_rows(b"{}\n{}\n", 2, ndjson).is_ok());
        assert!(check_rows(b"{}\n{}", 2, ndjson).is_ok());
        assert!(check_rows(b"{}\n{}\n{}", 2, ndjson).is_err());
        let error = check_rows(&b"{}\n".repeat(3), 2, ndjson).unwrap_err();
        assert_eq!(error.kind, Kind::TooLarge);
        assert!(error.message.contains("3 lines"), "{}", error.message);
        // The shortest rows, a byte or two each: a body no longer than the limit is within it,
        // and one row more than the limit is refused.
        assert!(check_rows(b"\n\n\n", 3, ndjson).is_ok());
        assert!(check_rows(b"\n\n\n", 2, ndjson).is_err());
        let clickhouse = JsonDialect::ClickHouse;
        assert!(check_rows(b"{}{}{}", 3, clickhouse).is_ok());
        assert!(check_rows(b"{}{}{}", 2, clickhouse).is_err());
    }

    /// A body that arrives as `frames`, one after another.
    fn streamed(frames: &[&'static [u8]]) -> Body {
        let frames = frames
            .iter()
            .map(|f| Ok::<_, std::io::Error>(Bytes::from_static(f)));
        Body::from_stream(futures_util::stream::iter(frames.collect::<Vec<_>>()))
    }

    #[tokio::test]
    async fn a_body_is_its_frames_in_order_however_it_arrives() {
        let idle = Duration::from_secs(5);
        let cases: [&[&'static [u8]]; 5] = [
            &[b"{\"a\":1}\n"],
            &[b"{\"a\":", b"1}\n{\"a\"", b":2}\n"],
            &[b"", b"{}", b""],
            &[b"", b""],
            &[],
        ];
        for frames in cases {
            let read = read_limited(streamed(frames), 1024, idle).await.unwrap();
            assert_eq!(read.as_ref(), frames.concat().as_slice(), "{frames:?}");
        }
        let too_large = read_limited(streamed(&[b"12345", b"67890"]), 8, idle).await;
        assert_eq!(too_large.unwrap_err().kind, Kind::TooLarge);
    }

    #[test]
    fn counts_clickhouse_rows_on_one_line_too() {
        let error = check_rows(b"[{},{},{}]", 2, JsonDialect::ClickHouse).unwrap_err();
        assert!(error.message.contains("3 rows"), "{}", error.message);
        assert!(check_rows(b"[{},\n{}]", 2, JsonDialect::ClickHouse).is_ok());
    }

    use std::io::Write;

    fn rows(count: usize) -> Vec<u8> {
        (0..count)
            .flat_map(|i| format!("{{\"id\":{i},\"msg\":\"row {i}\"}}\n").into_bytes())
            .collect()
    }

    fn write_all<W: Write>(mut writer: W, data: &[u8]) -> W {
        writer.write_all(data).expect("writes");
        writer
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        write_all(encoder, data).finish().expect("gzip")
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        write_all(encoder, data).finish().expect("zlib")
    }

    fn raw_deflate(data: &[u8]) -> Vec<u8> {
        let encoder = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        write_all(encoder, data).finish().expect("deflate")
    }

    fn brotli(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        drop(write_all(
            brotli::CompressorWriter::new(&mut out, 4096, 5, 22),
            data,
        ));
        out
    }

    fn zstd(data: &[u8]) -> Vec<u8> {
        zstd::bulk::compress(data, 3).expect("zstd")
    }

    fn lz4_frame(data: &[u8]) -> Vec<u8> {
        let encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
        write_all(encoder, data).finish().expect("lz4")
    }

    fn xz(data: &[u8]) -> Vec<u8> {
        let options = lzma_rust2::XzOptions::with_preset(1);
        let encoder = lzma_rust2::XzWriter::new(Vec::new(), options).expect("xz");
        write_all(encoder, data).finish().expect("xz")
    }

    fn bz2(data: &[u8]) -> Vec<u8> {
        let encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        write_all(encoder, data).finish().expect("bz2")
    }

    /// Hadoop's snappy block: the block's length, then its chunks, each with its length.
    fn hadoop_snappy(chunks: &[&[u8]]) -> Vec<u8> {
        let total: usize = chunks.iter().map(|chunk| chunk.len()).sum();
        let mut out = be_u32(total);
        for chunk in chunks {
            let compressed = snap::raw::Encoder::new()
                .compress_vec(chunk)
                .expect("snappy");
            out.extend(be_u32(compressed.len()));
            out.extend(compressed);
        }
        out
    }

    fn be_u32(value: usize) -> Vec<u8> {
        u32::try_from(value).expect("small").to_be_bytes().to_vec()
    }

    fn decode(encoding: &str, body: Vec<u8>, limit: usize) -> Result<Bytes, ApiError> {
        Encoding::parse(encoding)?.decode(Bytes::from(body), limit)
    }

    #[test]
    fn round_trips_every_encoding() {
        let data = rows(200);
        let (first, second) = data.split_at(1000);
        let bodies = [
            ("identity", data.clone()),
            ("gzip", gzip(&data)),
            ("gzip", [gzip(first), gzip(second)].concat()),
            ("deflate", zlib(&data)),
            ("br", brotli(&data)),
            ("zstd", zstd(&data)),
            ("zstd", [zstd(first), zstd(second)].concat()),
            ("lz4", lz4_frame(&data)),
            ("xz", xz(&data)),
            ("xz", [xz(first), xz(second)].concat()),
            ("bz2", bz2(&data)),
            ("bz2", [bz2(first), bz2(second)].concat()),
            ("snappy", hadoop_snappy(&[&data])),
        ];
        for (encoding, body) in bodies {
            let decoded = decode(encoding, body, data.len()).expect(encoding);
            assert_eq!(decoded, data, "{encoding}");
        }
    }

    #[test]
    fn reads_raw_deflate_without_a_zlib_header() {
        let data = rows(50);
        assert!(!has_zlib_header(&raw_deflate(&data)));
        assert_eq!(
            decode("deflate", raw_deflate(&data), 1 << 20).expect("reads"),
            data
        );
    }

    #[test]
    fn reads_lz4_frames_back_to_back_as_clickhouse_connect_sends_them() {
        let data = rows(100);
        let (first, rest) = data.split_at(777);
        let (second, third) = rest.split_at(1);
        let body = [lz4_frame(first), lz4_frame(second), lz4_frame(third)].concat();
        assert_eq!(decode("lz4", body, data.len()).expect("reads"), data);
    }

    #[test]
    fn reads_hadoop_snappy_blocks_of_several_chunks() {
        let data = rows(100);
        let (first, rest) = data.split_at(500);
        let (second, third) = rest.split_at(1500);
        let body = [hadoop_snappy(&[first, second]), hadoop_snappy(&[third])].concat();
        assert_eq!(decode("snappy", body, data.len()).expect("reads"), data);
    }

    #[test]
    fn refuses_truncated_or_overlong_hadoop_snappy() {
        let data = rows(10);
        let body = hadoop_snappy(&[&data]);
        for end in 1..body.len() {
            let error = decode("snappy", body[..end].to_vec(), 1 << 20).unwrap_err();
            assert_eq!(error.kind, Kind::BadRequest, "cut at {end}");
        }
        let mut overlong = body.clone();
        overlong[..4].copy_from_slice(&be_u32(data.len() - 1));
        let error = decode("snappy", overlong, 1 << 20).unwrap_err();
        assert!(
            error.message.contains("declared length"),
            "{}",
            error.message
        );
    }

    #[test]
    fn refuses_bombs_at_the_limit_in_every_new_encoding() {
        let zeros = vec![0u8; 4 << 20];
        let limit = 1 << 20;
        let bombs = [
            ("deflate", zlib(&zeros)),
            ("br", brotli(&zeros)),
            ("lz4", lz4_frame(&zeros)),
            ("xz", xz(&zeros)),
            ("bz2", bz2(&zeros)),
            ("snappy", hadoop_snappy(&[&zeros])),
        ];
        for (encoding, bomb) in bombs {
            assert!(
                bomb.len() < limit,
                "{encoding} bomb is {} bytes",
                bomb.len()
            );
            let error = decode(encoding, bomb, limit).unwrap_err();
            assert_eq!(error.kind, Kind::TooLarge, "{encoding}: {}", error.message);
            assert!(error.message.contains(encoding), "{}", error.message);
        }
    }

    #[test]
    fn refuses_snappy_lengths_before_allocating_for_them() {
        // A chunk whose snappy header claims 4 GiB in a block of 100 bytes, and nothing else.
        let mut body = be_u32(100);
        body.extend(be_u32(5));
        body.extend([0xff, 0xff, 0xff, 0xff, 0x0f]);
        let error = decode("snappy", body, 1 << 20).unwrap_err();
        assert_eq!(error.kind, Kind::BadRequest, "{}", error.message);
        let error = decode("snappy", be_u32(u32::MAX as usize), 1 << 20).unwrap_err();
        assert_eq!(error.kind, Kind::TooLarge, "{}", error.message);
    }

    #[test]
    fn refuses_corrupt_bodies_as_bad_requests() {
        for encoding in ["gzip", "deflate", "br", "zstd", "lz4", "xz", "bz2"] {
            let error = decode(encoding, b"not compressed at all".to_vec(), 1 << 20).unwrap_err();
            assert_eq!(
                error.kind,
                Kind::BadRequest,
                "{encoding}: {}",
                error.message
            );
        }
    }

    #[test]
    fn names_encodings_as_clickhouse_does_in_any_case() {
        let names = [
            ("", Encoding::Identity),
            ("identity", Encoding::Identity),
            ("none", Encoding::Identity),
            ("GZIP", Encoding::Gzip),
            ("gz", Encoding::Gzip),
            ("x-gzip", Encoding::Gzip),
            ("Deflate", Encoding::Deflate),
            ("br", Encoding::Brotli),
            ("brotli", Encoding::Brotli),
            ("zstd", Encoding::Zstd),
            ("zst", Encoding::Zstd),
            ("LZ4", Encoding::Lz4),
            ("xz", Encoding::Xz),
            ("lzma", Encoding::Xz),
            ("bz2", Encoding::Bzip2),
            (" snappy ", Encoding::Snappy),
        ];
        for (name, encoding) in names {
            assert_eq!(Encoding::parse(name).expect(name), encoding, "{name}");
        }
        let error = Encoding::parse("compress").unwrap_err();
        assert_eq!(error.kind, Kind::UnsupportedEncoding);
        assert!(
            error.message.contains(Encoding::ACCEPTED),
            "{}",
            error.message
        );
    }
}
