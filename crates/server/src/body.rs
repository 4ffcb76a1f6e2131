//! Reading request bodies: the size limit and the idle timeout, then decompression under the
//! same limit, then the row limit.
//!
//! The size limit applies to the bytes on the wire and again to the decompressed bytes, so a
//! small gzip bomb is refused with 413 after reading at most the limit plus one byte. The row
//! limit counts lines before anything is decoded.

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
/// arriving for `limits.body_timeout`, and decompresses it by its `Content-Encoding` (`gzip`,
/// `zstd`, `identity`).
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limits: &Limits,
) -> Result<Bytes, ApiError> {
    let limit = limits.max_body_bytes;
    let encoding = match headers.get(CONTENT_ENCODING) {
        None => Encoding::Identity,
        Some(value) => Encoding::parse(value.to_str().unwrap_or("?"))?,
    };
    let raw = read_limited(body, limit, limits.body_timeout).await?;
    match encoding {
        Encoding::Identity => Ok(raw),
        Encoding::Gzip => inflate(
            flate2::read::MultiGzDecoder::new(raw.as_ref()),
            limit,
            "gzip",
        ),
        Encoding::Zstd => {
            let decoder = zstd::stream::read::Decoder::new(raw.as_ref()).map_err(|e| {
                ApiError::new(Kind::BadRequest, format!("cannot start zstd decoding: {e}"))
            })?;
            inflate(decoder, limit, "zstd")
        }
    }
}

enum Encoding {
    Identity,
    Gzip,
    Zstd,
}

impl Encoding {
    fn parse(value: &str) -> Result<Self, ApiError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "identity" => Ok(Self::Identity),
            "gzip" | "x-gzip" => Ok(Self::Gzip),
            "zstd" => Ok(Self::Zstd),
            other => Err(ApiError::new(
                Kind::UnsupportedEncoding,
                format!(
                    "Content-Encoding '{}' is not supported: use gzip, zstd or none",
                    other.escape_debug()
                ),
            )),
        }
    }
}

fn inflate(reader: impl Read, limit: usize, name: &str) -> Result<Bytes, ApiError> {
    let mut out = Vec::new();
    let read = reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| {
            ApiError::new(
                Kind::BadRequest,
                format!("the body is not valid {name}: {e}"),
            )
        })?;
    if read > limit {
        return Err(ApiError::new(
            Kind::TooLarge,
            format!("the {name} body decompresses to more than the limit of {limit} bytes"),
        ));
    }
    Ok(Bytes::from(out))
}

/// How much of a too-large body is read and thrown away before answering 413. A client still
/// sending when the server closes its socket gets a reset instead of the answer (the kernel
/// drops unread data with an RST), so sluice reads on a while; past this it closes anyway.
const DRAIN_BYTES: usize = 32 * 1024 * 1024;

/// The body's bytes, at most `limit` of them: past it, the rest is drained (up to
/// [`DRAIN_BYTES`]) and the answer is 413. A body that goes `idle` without a byte arriving is
/// answered 408, and its connection closed (the rest of the body is never read).
async fn read_limited(body: Body, limit: usize, idle: Duration) -> Result<Bytes, ApiError> {
    use http_body_util::BodyExt;

    let mut body = body;
    let mut buf = bytes::BytesMut::new();
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
        buf.extend_from_slice(&data);
    }
    Ok(buf.freeze())
}

/// Refuses rows holding more than `limit` lines with 413, before they are decoded.
pub(crate) fn check_rows(rows: &[u8], limit: usize, dialect: JsonDialect) -> Result<(), ApiError> {
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
    }

    #[test]
    fn counts_clickhouse_rows_on_one_line_too() {
        let error = check_rows(b"[{},{},{}]", 2, JsonDialect::ClickHouse).unwrap_err();
        assert!(error.message.contains("3 rows"), "{}", error.message);
        assert!(check_rows(b"[{},\n{}]", 2, JsonDialect::ClickHouse).is_ok());
    }
}
