//! Frames: the unit the log writes and recovery reads back.
//!
//! ```text
//! 0        4        8                16
//! +--------+--------+----------------+---------------------------+
//! | len    | crc    | lsn            | payload (len bytes)       |
//! | u32 LE | u32 LE | u64 LE         |                           |
//! +--------+--------+----------------+---------------------------+
//! crc = CRC32C over the len field, the lsn field and the payload
//! ```
//!
//! Decoding never panics and never trusts `len` beyond the bytes it was given: whatever the input,
//! it answers a frame, "need more bytes", or "this is not a frame".

/// Bytes before the payload.
pub const HEADER_LEN: usize = 16;

/// The largest payload a frame may carry. Larger lengths are corruption, not frames.
pub const MAX_PAYLOAD: usize = 1 << 30;

/// What the bytes at the start of a buffer are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole, valid frame of `size` bytes (header and payload).
    Frame {
        /// The frame's log sequence number.
        lsn: u64,
        /// Its payload.
        payload: &'a [u8],
        /// Header plus payload.
        size: usize,
    },
    /// The buffer ends inside a frame (a torn tail, if it is the end of the log).
    Incomplete,
    /// Not a valid frame: the reason, for the operator.
    Corrupt(&'static str),
}

/// Appends one encoded frame to `out`.
pub fn encode(lsn: u64, payload: &[u8], out: &mut Vec<u8>) {
    encode_pieces(lsn, &[payload], out);
}

/// Appends one encoded frame to `out` whose payload is `pieces` one after another: the same
/// frame as [`encode`] of their concatenation, without building it first.
pub fn encode_pieces(lsn: u64, pieces: &[&[u8]], out: &mut Vec<u8>) {
    let payload_len: usize = pieces.iter().map(|piece| piece.len()).sum();
    let len = u32::try_from(payload_len).unwrap_or(u32::MAX);
    let len_bytes = len.to_le_bytes();
    let lsn_bytes = lsn.to_le_bytes();
    let mut crc = crc32c::crc32c(&len_bytes);
    crc = crc32c::crc32c_append(crc, &lsn_bytes);
    for piece in pieces {
        crc = crc32c::crc32c_append(crc, piece);
    }
    out.reserve(HEADER_LEN + payload_len);
    out.extend_from_slice(&len_bytes);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&lsn_bytes);
    for piece in pieces {
        out.extend_from_slice(piece);
    }
}

/// The encoded size of a frame carrying `payload_len` bytes.
pub fn encoded_len(payload_len: usize) -> usize {
    HEADER_LEN + payload_len
}

/// Decodes the frame at the start of `buf`.
pub fn decode(buf: &[u8]) -> Decoded<'_> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Decoded::Incomplete;
    };
    let word = |i: usize| [header[i], header[i + 1], header[i + 2], header[i + 3]];
    let len = u32::from_le_bytes(word(0)) as usize;
    let crc = u32::from_le_bytes(word(4));
    let mut lsn_bytes = [0u8; 8];
    lsn_bytes.copy_from_slice(&header[8..16]);
    let lsn = u64::from_le_bytes(lsn_bytes);
    if len > MAX_PAYLOAD {
        return Decoded::Corrupt("frame length is larger than any frame");
    }
    let Some(payload) = buf.get(HEADER_LEN..HEADER_LEN + len) else {
        return Decoded::Incomplete;
    };
    let mut expected = crc32c::crc32c(&header[0..4]);
    expected = crc32c::crc32c_append(expected, &header[8..16]);
    expected = crc32c::crc32c_append(expected, payload);
    if expected != crc {
        return Decoded::Corrupt("checksum mismatch");
    }
    if lsn == 0 {
        return Decoded::Corrupt("log sequence number 0 is never written");
    }
    Decoded::Frame {
        lsn,
        payload,
        size: HEADER_LEN + len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let mut buf = Vec::new();
        encode(7, b"hello", &mut buf);
        encode(8, b"", &mut buf);
        let Decoded::Frame { lsn, payload, size } = decode(&buf) else {
            panic!("not a frame");
        };
        assert_eq!((lsn, payload, size), (7, &b"hello"[..], HEADER_LEN + 5));
        assert!(matches!(
            decode(&buf[size..]),
            Decoded::Frame { lsn: 8, .. }
        ));
    }

    #[test]
    fn a_frame_of_pieces_is_the_frame_of_their_concatenation() {
        let mut whole = Vec::new();
        encode(9, b"head|body one|body two", &mut whole);
        let mut pieces = Vec::new();
        encode_pieces(9, &[b"head|", b"", b"body one", b"|body two"], &mut pieces);
        assert_eq!(pieces, whole);
    }

    #[test]
    fn every_truncation_is_incomplete() {
        let mut buf = Vec::new();
        encode(1, b"payload bytes", &mut buf);
        for cut in 0..buf.len() {
            assert_eq!(decode(&buf[..cut]), Decoded::Incomplete, "cut at {cut}");
        }
    }

    #[test]
    fn every_flipped_bit_is_caught() {
        let mut buf = Vec::new();
        encode(3, b"some payload", &mut buf);
        for byte in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[byte] ^= 1 << bit;
                assert!(
                    !matches!(decode(&bad), Decoded::Frame { lsn: 3, payload, .. } if payload == b"some payload"),
                    "flip {byte}:{bit} went unnoticed"
                );
            }
        }
    }
}
