//! ClickHouse's compressed blocks: the body of a request sent with `decompress=1`.
//!
//! This is ClickHouse's own framing (what its `CompressedReadBuffer` reads), not an HTTP
//! Content-Encoding: the Rust `clickhouse` crate and clickhouse-connect send inserts this way.
//! The body is blocks back to back, and a block is bytes, not rows: a row may start in one block
//! and end in the next.
//!
//! ```text
//! +--------------+--------+-----------------+-------------------+---------------------------+
//! | checksum     | method | compressed_size | decompressed_size | payload                   |
//! | 16 bytes     | 1 byte | u32 LE          | u32 LE            | compressed_size - 9 bytes |
//! +--------------+--------+-----------------+-------------------+---------------------------+
//!                |<----------- header: 9 bytes --------------->|
//!                |<------------- checksummed, compressed_size bytes in all ------------------>|
//! ```
//!
//! The checksum is CityHash128 as CityHash 1.0.2 computed it (ClickHouse ships that version;
//! later CityHash releases hash differently), stored as its low 64 bits then its high 64 bits,
//! each little-endian.
//! Methods: `0x02` none, `0x82` an LZ4 block (raw block format, no frame), `0x90` a ZSTD frame.
//!
//! Every size in a header is checked against the body and the limit before anything is
//! allocated for it: a header is outside input and can claim up to 4 GiB.

use std::fmt;

/// The checksum in front of every block.
const CHECKSUM_LEN: usize = 16;
/// The method byte and the two sizes: the header that `compressed_size` counts.
const HEADER_LEN: usize = 9;

const METHOD_NONE: u8 = 0x02;
const METHOD_LZ4: u8 = 0x82;
const METHOD_ZSTD: u8 = 0x90;

/// Why a body in ClickHouse's compressed blocks could not be read.
///
/// Every variant but [`BlockError::TooLarge`] means a malformed body (400);
/// `TooLarge` means the body is fine but decompresses past the limit (413).
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    /// The body ends before a block's 25-byte checksum and header.
    #[error(
        "compressed block {number} at byte {offset}: the body ends inside its header \
         ({available} of {} bytes)",
        CHECKSUM_LEN + HEADER_LEN
    )]
    TruncatedHeader {
        /// The block's number, from 1.
        number: usize,
        /// The block's first byte in the body.
        offset: usize,
        /// Bytes the body has left.
        available: usize,
    },
    /// `compressed_size` is smaller than the 9-byte header it counts.
    #[error(
        "compressed block {number} at byte {offset}: its compressed size {compressed_size} is \
         smaller than its {HEADER_LEN}-byte header"
    )]
    SizeBelowHeader {
        /// The block's number, from 1.
        number: usize,
        /// The block's first byte in the body.
        offset: usize,
        /// The size its header declares after the checksum, header included.
        compressed_size: usize,
    },
    /// The body ends before the payload its header declares.
    #[error(
        "compressed block {number} at byte {offset}: it declares {compressed_size} bytes after \
         its checksum but the body has {available} left"
    )]
    TruncatedPayload {
        /// The block's number, from 1.
        number: usize,
        /// The block's first byte in the body.
        offset: usize,
        /// The size its header declares after the checksum, header included.
        compressed_size: usize,
        /// Bytes the body has left.
        available: usize,
    },
    /// The stored checksum is not the one computed over the header and payload.
    #[error(
        "compressed block {number} at byte {offset}: checksum mismatch, the data is corrupt \
         (expected {expected}, computed {computed})"
    )]
    ChecksumMismatch {
        /// The block's number, from 1.
        number: usize,
        /// The block's first byte in the body.
        offset: usize,
        /// The checksum stored in the block.
        expected: Checksum,
        /// The checksum of its header and payload.
        computed: Checksum,
    },
    /// A method byte sluice does not read.
    #[error(
        "compressed block {number} at byte {offset}: unknown compression method 0x{method:02x} \
         (sluice reads 0x02 none, 0x82 LZ4 and 0x90 ZSTD)"
    )]
    UnknownMethod {
        /// The block's number, from 1.
        number: usize,
        /// The block's first byte in the body.
        offset: usize,
        /// The method byte.
        method: u8,
    },
    /// The payload does not decompress to the size its header declares.
    #[error(
        "compressed block {number} at byte {offset}: it decompresses to {actual} bytes, not the \
         {declared} its header declares"
    )]
    SizeMismatch {
        /// The block's number, from 1.
        number: usize,
        /// The block's first byte in the body.
        offset: usize,
        /// The size its header declares, decompressed.
        declared: usize,
        /// What it decompressed to.
        actual: usize,
    },
    /// The LZ4 or ZSTD payload is corrupt, or decompresses to more than its header declares.
    #[error(
        "compressed block {number} at byte {offset}: the {method} payload does not decompress \
         to the {declared} bytes its header declares: {reason}"
    )]
    Corrupt {
        /// The block's number, from 1.
        number: usize,
        /// The block's first byte in the body.
        offset: usize,
        /// The method's name.
        method: &'static str,
        /// The size its header declares, decompressed.
        declared: usize,
        /// The decoder's words.
        reason: String,
    },
    /// The blocks decompress to more than the limit (refused from the headers, before
    /// decompressing the block that would cross it).
    #[error(
        "compressed block {number} at byte {offset}: the body decompresses to more than the \
         limit of {limit} bytes"
    )]
    TooLarge {
        /// The block's number, from 1.
        number: usize,
        /// The block's first byte in the body.
        offset: usize,
        /// The limit.
        limit: usize,
    },
}

/// A block's CityHash128, its two halves as ClickHouse names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checksum {
    low: u64,
    high: u64,
}

impl Checksum {
    /// CityHash128 (1.0.2) of `bytes`.
    fn of(bytes: &[u8]) -> Self {
        let hash = cityhash_rs::cityhash_102_128(bytes);
        // cityhash-rs returns CityHash's first (ClickHouse's low) half in the upper 64 bits.
        Self {
            low: (hash >> 64) as u64,
            high: hash as u64,
        }
    }

    /// Reads the checksum as stored: low half, then high half, each little-endian.
    fn from_stored(bytes: [u8; CHECKSUM_LEN]) -> Self {
        let stored = u128::from_le_bytes(bytes);
        Self {
            low: stored as u64,
            high: (stored >> 64) as u64,
        }
    }
}

/// The low half then the high half, each as a 16-digit hex number.
impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}{:016x}", self.low, self.high)
    }
}

/// Decompresses a body of ClickHouse compressed blocks, verifying each block's checksum, into
/// at most `limit` bytes.
pub fn decompress_blocks(body: &[u8], limit: usize) -> Result<Vec<u8>, BlockError> {
    let mut out = Vec::new();
    let mut offset = 0;
    let mut number = 1;
    while let Some(rest) = body.get(offset..).filter(|rest| !rest.is_empty()) {
        let block = Block::parse(rest, Position { number, offset })?;
        block.verify_checksum()?;
        block.check_room(out.len(), limit)?;
        block.decompress_into(&mut out)?;
        offset += block.len();
        number += 1;
    }
    Ok(out)
}

/// The length of the block at the start of `bytes`, checksum included, once all of it has
/// arrived; `None` while it has not. For a stream that carries blocks one at a time.
pub fn block_len(bytes: &[u8]) -> Result<Option<usize>, BlockError> {
    let Some(header) = bytes.get(CHECKSUM_LEN..CHECKSUM_LEN + HEADER_LEN) else {
        return Ok(None);
    };
    let compressed_size = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if compressed_size < HEADER_LEN {
        let at = Position {
            number: 1,
            offset: 0,
        };
        return Err(BlockError::SizeBelowHeader {
            number: at.number,
            offset: at.offset,
            compressed_size,
        });
    }
    let len = CHECKSUM_LEN + compressed_size;
    Ok((bytes.len() >= len).then_some(len))
}

/// `bytes` as one LZ4 block with its header and checksum, as ClickHouse writes one.
pub fn compress_block(bytes: &[u8]) -> Vec<u8> {
    let payload = lz4_flex::block::compress(bytes);
    let mut block = vec![0; CHECKSUM_LEN];
    block.push(METHOD_LZ4);
    let sizes = [HEADER_LEN + payload.len(), bytes.len()];
    for size in sizes {
        // A block's sizes are u32: callers hand over far less than 4 GiB.
        block.extend_from_slice(&u32::try_from(size).unwrap_or(u32::MAX).to_le_bytes());
    }
    block.extend_from_slice(&payload);
    let checksum = Checksum::of(&block[CHECKSUM_LEN..]);
    block[..8].copy_from_slice(&checksum.low.to_le_bytes());
    block[8..CHECKSUM_LEN].copy_from_slice(&checksum.high.to_le_bytes());
    block
}

/// Where a block is, for error messages: its number (from 1) and its first byte in the body.
#[derive(Debug, Clone, Copy)]
struct Position {
    number: usize,
    offset: usize,
}

/// One block, its sizes checked against the body (not yet against the limit).
struct Block<'a> {
    at: Position,
    stored: Checksum,
    method: u8,
    decompressed_size: usize,
    /// The header and the payload: what the checksum covers.
    checksummed: &'a [u8],
    payload: &'a [u8],
}

impl<'a> Block<'a> {
    /// Reads the block at the start of `rest`.
    fn parse(rest: &'a [u8], at: Position) -> Result<Self, BlockError> {
        let truncated = || BlockError::TruncatedHeader {
            number: at.number,
            offset: at.offset,
            available: rest.len(),
        };
        let (stored, after_checksum) = rest
            .split_first_chunk::<CHECKSUM_LEN>()
            .ok_or_else(truncated)?;
        let (header, _) = after_checksum
            .split_first_chunk::<HEADER_LEN>()
            .ok_or_else(truncated)?;
        let [method, c0, c1, c2, c3, d0, d1, d2, d3] = *header;
        let compressed_size = u32::from_le_bytes([c0, c1, c2, c3]) as usize;
        let decompressed_size = u32::from_le_bytes([d0, d1, d2, d3]) as usize;
        if compressed_size < HEADER_LEN {
            return Err(BlockError::SizeBelowHeader {
                number: at.number,
                offset: at.offset,
                compressed_size,
            });
        }
        let checksummed =
            after_checksum
                .get(..compressed_size)
                .ok_or(BlockError::TruncatedPayload {
                    number: at.number,
                    offset: at.offset,
                    compressed_size,
                    available: after_checksum.len(),
                })?;
        Ok(Self {
            at,
            stored: Checksum::from_stored(*stored),
            method,
            decompressed_size,
            checksummed,
            payload: checksummed.get(HEADER_LEN..).unwrap_or_default(),
        })
    }

    /// The block's length in the body, checksum included.
    fn len(&self) -> usize {
        CHECKSUM_LEN + self.checksummed.len()
    }

    fn verify_checksum(&self) -> Result<(), BlockError> {
        let computed = Checksum::of(self.checksummed);
        if computed != self.stored {
            return Err(BlockError::ChecksumMismatch {
                number: self.at.number,
                offset: self.at.offset,
                expected: self.stored,
                computed,
            });
        }
        Ok(())
    }

    /// Refuses the block if its declared size would take the output past `limit`.
    fn check_room(&self, decompressed_so_far: usize, limit: usize) -> Result<(), BlockError> {
        let total = decompressed_so_far.checked_add(self.decompressed_size);
        if total.is_none_or(|total| total > limit) {
            return Err(BlockError::TooLarge {
                number: self.at.number,
                offset: self.at.offset,
                limit,
            });
        }
        Ok(())
    }

    /// Appends the decompressed block to `out`; its size must have passed [`Block::check_room`].
    fn decompress_into(&self, out: &mut Vec<u8>) -> Result<(), BlockError> {
        let written = match self.method {
            METHOD_NONE => {
                out.extend_from_slice(self.payload);
                self.payload.len()
            }
            METHOD_LZ4 => self.decode_into(out, "LZ4", |payload, tail| {
                lz4_flex::block::decompress_into(payload, tail).map_err(|e| e.to_string())
            })?,
            METHOD_ZSTD => self.decode_into(out, "ZSTD", |payload, tail| {
                zstd::bulk::decompress_to_buffer(payload, tail).map_err(|e| e.to_string())
            })?,
            method => {
                return Err(BlockError::UnknownMethod {
                    number: self.at.number,
                    offset: self.at.offset,
                    method,
                });
            }
        };
        if written != self.decompressed_size {
            return Err(BlockError::SizeMismatch {
                number: self.at.number,
                offset: self.at.offset,
                declared: self.decompressed_size,
                actual: written,
            });
        }
        Ok(())
    }

    /// Runs `decode` into `decompressed_size` new bytes at the end of `out` and returns how many
    /// it wrote; a payload that would decompress to more is an error of `decode`'s.
    fn decode_into(
        &self,
        out: &mut Vec<u8>,
        method: &'static str,
        decode: impl FnOnce(&[u8], &mut [u8]) -> Result<usize, String>,
    ) -> Result<usize, BlockError> {
        let start = out.len();
        out.resize(start + self.decompressed_size, 0);
        let written =
            decode(self.payload, &mut out[start..]).map_err(|reason| BlockError::Corrupt {
                number: self.at.number,
                offset: self.at.offset,
                method,
                declared: self.decompressed_size,
                reason,
            })?;
        out.truncate(start + written);
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One block as a client writes it: header, payload, then the checksum over both in front.
    fn block(method: u8, payload: &[u8], decompressed_size: usize) -> Vec<u8> {
        let mut checksummed = vec![method];
        let compressed_size = u32::try_from(HEADER_LEN + payload.len()).expect("small payload");
        let decompressed_size = u32::try_from(decompressed_size).expect("small block");
        checksummed.extend_from_slice(&compressed_size.to_le_bytes());
        checksummed.extend_from_slice(&decompressed_size.to_le_bytes());
        checksummed.extend_from_slice(payload);
        let checksum = Checksum::of(&checksummed);
        let mut block = Vec::new();
        block.extend_from_slice(&checksum.low.to_le_bytes());
        block.extend_from_slice(&checksum.high.to_le_bytes());
        block.extend_from_slice(&checksummed);
        block
    }

    fn none_block(data: &[u8]) -> Vec<u8> {
        block(METHOD_NONE, data, data.len())
    }

    fn lz4_block(data: &[u8]) -> Vec<u8> {
        compress_block(data)
    }

    #[test]
    fn a_written_block_reads_back_and_is_measured_once_whole() {
        let data = b"a block of rows, a block of rows, a block of rows".repeat(10);
        let written = compress_block(&data);
        assert_eq!(
            written,
            block(METHOD_LZ4, &lz4_flex::block::compress(&data), data.len())
        );
        assert_eq!(decompress_blocks(&written, 1 << 20).unwrap(), data);
        let stream = [written.clone(), none_block(b"next")].concat();
        assert_eq!(block_len(&stream).unwrap(), Some(written.len()));
        for end in 0..written.len() {
            assert_eq!(block_len(&stream[..end]).unwrap(), None, "cut at {end}");
        }
        let mut small = written;
        small[17..21].copy_from_slice(&3_u32.to_le_bytes());
        assert!(matches!(
            block_len(&small),
            Err(BlockError::SizeBelowHeader { .. })
        ));
    }

    fn zstd_block(data: &[u8]) -> Vec<u8> {
        let payload = zstd::bulk::compress(data, 3).expect("zstd compresses");
        block(METHOD_ZSTD, &payload, data.len())
    }

    fn rows(count: usize) -> Vec<u8> {
        (0..count)
            .flat_map(|i| format!("{{\"id\":{i},\"msg\":\"row {i}\"}}\n").into_bytes())
            .collect()
    }

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digits"))
            .collect()
    }

    #[test]
    fn reads_a_block_of_each_method() {
        let data = rows(100);
        for body in [none_block(&data), lz4_block(&data), zstd_block(&data)] {
            assert_eq!(decompress_blocks(&body, 1 << 20).expect("reads"), data);
        }
    }

    #[test]
    fn reads_an_empty_body_and_empty_blocks() {
        assert_eq!(decompress_blocks(b"", 0).expect("reads"), b"");
        let body = [none_block(b""), lz4_block(b""), zstd_block(b"")].concat();
        assert_eq!(decompress_blocks(&body, 0).expect("reads"), b"");
    }

    #[test]
    fn joins_blocks_whose_boundaries_fall_inside_rows() {
        let data = rows(50);
        let (first, rest) = data.split_at(101);
        let (second, third) = rest.split_at(333);
        let body = [lz4_block(first), zstd_block(second), none_block(third)].concat();
        assert_eq!(decompress_blocks(&body, data.len()).expect("reads"), data);
    }

    #[test]
    fn refuses_a_flipped_payload_byte_by_its_checksum() {
        let body = [none_block(b"first"), lz4_block(&rows(10))].concat();
        let mut corrupt = body.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0x01;
        let error = decompress_blocks(&corrupt, 1 << 20).unwrap_err();
        assert!(
            matches!(
                error,
                BlockError::ChecksumMismatch {
                    number: 2,
                    offset: 30,
                    ..
                }
            ),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("block 2 at byte 30"), "{message}");
        assert!(message.contains("checksum mismatch"), "{message}");
    }

    #[test]
    fn refuses_a_body_cut_short_in_a_header_or_a_payload() {
        let body = [lz4_block(&rows(10)), lz4_block(&rows(10))].concat();
        let second = body.len() / 2;
        let error = decompress_blocks(&body[..second + 20], 1 << 20).unwrap_err();
        assert!(
            matches!(
                error,
                BlockError::TruncatedHeader {
                    number: 2,
                    available: 20,
                    ..
                }
            ),
            "{error:?}"
        );
        let error = decompress_blocks(&body[..body.len() - 1], 1 << 20).unwrap_err();
        assert!(
            matches!(error, BlockError::TruncatedPayload { number: 2, .. }),
            "{error:?}"
        );
    }

    #[test]
    fn refuses_a_compressed_size_below_the_header() {
        let mut body = none_block(b"abc");
        body[17..21].copy_from_slice(&8u32.to_le_bytes());
        let error = decompress_blocks(&body, 1 << 20).unwrap_err();
        assert!(
            matches!(
                error,
                BlockError::SizeBelowHeader {
                    compressed_size: 8,
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn refuses_an_unknown_method_by_its_byte() {
        let body = [none_block(b"ok"), block(0x91, b"abc", 3)].concat();
        let error = decompress_blocks(&body, 1 << 20).unwrap_err();
        assert!(
            matches!(
                error,
                BlockError::UnknownMethod {
                    number: 2,
                    method: 0x91,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("0x91"), "{error}");
    }

    #[test]
    fn refuses_a_declared_size_that_does_not_match() {
        let uncompressed = block(METHOD_NONE, b"abcd", 5);
        let error = decompress_blocks(&uncompressed, 1 << 20).unwrap_err();
        assert!(
            matches!(
                error,
                BlockError::SizeMismatch {
                    declared: 5,
                    actual: 4,
                    ..
                }
            ),
            "{error:?}"
        );
        let data = rows(10);
        let short = block(
            METHOD_LZ4,
            &lz4_flex::block::compress(&data),
            data.len() + 1,
        );
        let error = decompress_blocks(&short, 1 << 20).unwrap_err();
        assert!(
            matches!(error, BlockError::SizeMismatch { .. }),
            "{error:?}"
        );
        let long = block(
            METHOD_ZSTD,
            &zstd::bulk::compress(&data, 1).expect("compresses"),
            10,
        );
        let error = decompress_blocks(&long, 1 << 20).unwrap_err();
        assert!(
            matches!(error, BlockError::Corrupt { method: "ZSTD", .. }),
            "{error:?}"
        );
    }

    #[test]
    fn refuses_a_corrupt_lz4_payload() {
        let body = block(METHOD_LZ4, &[0xff, 0xff, 0xff], 100);
        let error = decompress_blocks(&body, 1 << 20).unwrap_err();
        assert!(
            matches!(error, BlockError::Corrupt { method: "LZ4", .. }),
            "{error:?}"
        );
    }

    #[test]
    fn refuses_a_declared_size_over_the_limit_before_allocating_it() {
        // A 4 GiB claim in a 30-byte body: refused from the header alone.
        let bomb = block(METHOD_LZ4, &[0x00], u32::MAX as usize);
        let error = decompress_blocks(&bomb, 1 << 20).unwrap_err();
        assert!(
            matches!(
                error,
                BlockError::TooLarge {
                    number: 1,
                    limit: 1_048_576,
                    ..
                }
            ),
            "{error:?}"
        );
        let body = [none_block(&[b'x'; 600]), none_block(&[b'y'; 600])].concat();
        let error = decompress_blocks(&body, 1000).unwrap_err();
        assert!(
            matches!(
                error,
                BlockError::TooLarge {
                    number: 2,
                    offset: 625,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(decompress_blocks(&body, 1200).expect("fits").len(), 1200);
    }

    #[test]
    fn survives_every_truncation_and_byte_flip() {
        let body = [lz4_block(&rows(5)), zstd_block(&rows(5))].concat();
        for end in 0..body.len() {
            let _ = decompress_blocks(&body[..end], 1 << 20);
        }
        for at in 0..body.len() {
            let mut corrupt = body.clone();
            corrupt[at] ^= 0x80;
            assert!(
                decompress_blocks(&corrupt, 1 << 20).is_err(),
                "flip at {at}"
            );
        }
    }

    /// CityHash 1.0.2 of bytes `(i * 31 + 7) % 251`, from ClickHouse's own C++ CityHash (the
    /// `clickhouse-cityhash` Python package): (length, low, high). The lengths take every path
    /// of the hash (under 16, 16 to 128, 128 and more).
    const CITYHASH_102: [(usize, u64, u64); 12] = [
        (0, 0x3df09dfc64c09a2b, 0x3cb540c392e51e29),
        (1, 0x8be55b379cce0e40, 0x05ab4744478b1cba),
        (15, 0x0ad116bbd3047d98, 0x6fd4ee609e9af7d8),
        (16, 0x5dc1f7f665acdceb, 0xd24a302840fcd5c0),
        (17, 0x286f33552773b697, 0x5eccdb1ec3d53119),
        (33, 0xcab728eee7adf1f8, 0x723c18e938a6b5e9),
        (64, 0x4807b8e59f3ca2fb, 0x81790353b25f9d93),
        (127, 0xbcdd8a6ae5611d1f, 0x7fe73ed89b5b9136),
        (128, 0x02470e33ab431528, 0xd22184bc03949339),
        (129, 0x26904e5bddff8870, 0x38da211e778016ce),
        (300, 0xb69df73cbc3eb6bf, 0xb71f67a365c3a32a),
        (1000, 0x2eeb6e28e3291c34, 0xb7c0e14f0392601c),
    ];

    #[test]
    fn checksum_is_cityhash_1_0_2() {
        for (len, low, high) in CITYHASH_102 {
            let data: Vec<u8> = (0..len).map(|i| ((i * 31 + 7) % 251) as u8).collect();
            assert_eq!(Checksum::of(&data), Checksum { low, high }, "length {len}");
        }
    }

    #[test]
    fn reads_blocks_written_by_clickhouses_cityhash_and_python_lz4() {
        // Made with clickhouse-cityhash and python-lz4, outside sluice.
        let uncompressed = hex("309eda51e7d33c3feb39988dbe3c5da9\
             02160000000d000000\
             68656c6c6f2c20736c75696365");
        let lz4 = hex("b1b94e288236719322fa027b2bcdff2b\
             822000000034000000\
             df68656c6c6f2c20736c756963650d000f506c75696365");
        assert_eq!(
            decompress_blocks(&uncompressed, 100).expect("reads"),
            b"hello, sluice"
        );
        assert_eq!(
            decompress_blocks(&lz4, 100).expect("reads"),
            b"hello, sluice".repeat(4)
        );
        assert_eq!(uncompressed, none_block(b"hello, sluice"));
    }
}
