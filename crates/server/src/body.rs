//! Reading request bodies: the size limit, then decompression under the same limit.
//!
//! The limit applies to the bytes on the wire and again to the decompressed bytes, so a small
//! gzip bomb is refused with 413 after reading at most the limit plus one byte.

use std::io::Read;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::http::header::CONTENT_ENCODING;
use bytes::Bytes;

use crate::error::{ApiError, Kind};

/// Reads the whole body, refusing more than `limit` bytes, and decompresses it by its
/// `Content-Encoding` (`gzip`, `zstd`, `identity`).
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let encoding = match headers.get(CONTENT_ENCODING) {
        None => Encoding::Identity,
        Some(value) => Encoding::parse(value.to_str().unwrap_or("?"))?,
    };
    let raw = axum::body::to_bytes(body, limit).await.map_err(|e| {
        if is_length_limit(&e) {
            ApiError::new(
                Kind::TooLarge,
                format!("the body is larger than the limit of {limit} bytes"),
            )
        } else {
            ApiError::new(Kind::BadRequest, format!("cannot read the body: {e}"))
        }
    })?;
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

/// Whether reading stopped at the size limit (rather than the client going away).
fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = e.source();
    }
    false
}
