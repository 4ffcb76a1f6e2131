//! Reading segments back: validating frames, finding the end of the log, and what to do with a
//! frame that does not check out.
//!
//! A crash can only tear the end of the newest segment: older segments were fsynced whole before
//! the log moved on. So the choice depends on where the bad frame is:
//!
//! | mode | bad frame at the end of the newest segment | bad frame anywhere else |
//! |---|---|---|
//! | `tolerate_tail` (default) | torn tail: cut the segment there, start | refuse to start |
//! | `strict` | refuse to start | refuse to start |
//! | `skip_corrupt` | cut there, start | skip the frame if the next one is valid, else refuse |
//!
//! In `tolerate_tail`, a bad frame in the newest segment ends the log there, even when valid
//! frames follow it: a torn write can leave a later page on disk without an earlier one, and such
//! frames were never acknowledged (their fsync never returned). The cost of this choice is that
//! a flipped bit in a frame of the newest segment drops the frames after it; `skip_corrupt`
//! keeps them at the risk of replaying frames that were never acknowledged.
//!
//! Segments are preallocated, so a segment's frames are followed by zeros up to its size. Zeros
//! from a frame boundary to the end of the file are where its frames end, in every mode; zeros
//! followed by anything else are a bad frame like any other.

use std::fmt;
use std::str::FromStr;

use crate::frame::{self, Decoded};

/// The segment header: magic and format version.
pub const SEGMENT_MAGIC: &[u8; 8] = b"SLUICWAL";

/// The on-disk format version new segments get. Version 2 segments are preallocated, so zeros
/// follow their frames; an older sluice, which knows only version 1, refuses them by name rather
/// than reading those zeros as a damaged frame.
pub const FORMAT_VERSION: u32 = 2;

/// The versions recovery reads: version 1 segments grew as they were written.
const READABLE_VERSIONS: [u32; 2] = [1, 2];

/// Bytes of the segment header.
pub const SEGMENT_HEADER_LEN: usize = 16;

/// The segment header bytes.
pub fn segment_header() -> [u8; SEGMENT_HEADER_LEN] {
    let mut header = [0u8; SEGMENT_HEADER_LEN];
    header[..8].copy_from_slice(SEGMENT_MAGIC);
    header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    header
}

/// What recovery does with a frame that does not check out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Cut a torn tail of the newest segment; refuse anything else.
    #[default]
    TolerateTail,
    /// Refuse to start on any bad frame, a torn tail included.
    Strict,
    /// Skip bad frames whose successor is valid; cut a torn tail.
    SkipCorrupt,
}

impl FromStr for RecoveryMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "tolerate_tail" => Ok(Self::TolerateTail),
            "strict" => Ok(Self::Strict),
            "skip_corrupt" => Ok(Self::SkipCorrupt),
            other => Err(format!(
                "unknown recovery mode '{}': use tolerate_tail, strict or skip_corrupt",
                other.escape_debug()
            )),
        }
    }
}

impl fmt::Display for RecoveryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TolerateTail => "tolerate_tail",
            Self::Strict => "strict",
            Self::SkipCorrupt => "skip_corrupt",
        })
    }
}

/// A bad spot in a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Byte offset of the bad frame.
    pub offset: usize,
    /// What is wrong.
    pub reason: &'static str,
}

/// What scanning one segment found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scan {
    /// Bytes that hold the header and valid frames; the log continues from here.
    pub valid_len: usize,
    /// Valid frames read.
    pub frames: u64,
    /// The highest LSN read.
    pub last_lsn: Option<u64>,
    /// The bad spot that ended the scan (cut or refused, by the caller's rules).
    pub end_problem: Option<Problem>,
    /// Bad frames skipped over (`skip_corrupt` only).
    pub skipped: Vec<Problem>,
}

/// Scans a segment, calling `on_frame` for every valid frame in order.
///
/// `newest` says whether this is the last segment (where a torn tail is expected). The caller
/// decides from the result whether to cut or refuse; `on_frame` sees only frames before any
/// problem the mode does not skip.
pub fn scan(
    bytes: &[u8],
    mode: RecoveryMode,
    after_lsn: u64,
    mut on_frame: impl FnMut(u64, &[u8]),
) -> Scan {
    let mut result = Scan::default();
    if bytes.len() < SEGMENT_HEADER_LEN {
        result.end_problem = Some(Problem {
            offset: 0,
            reason: "the segment header is incomplete",
        });
        return result;
    }
    if is_unwritten(&bytes[..SEGMENT_HEADER_LEN]) {
        // A crash between preallocating a segment and writing its header.
        result.end_problem = Some(Problem {
            offset: 0,
            reason: "the segment header was never written",
        });
        return result;
    }
    if &bytes[..8] != SEGMENT_MAGIC {
        result.end_problem = Some(Problem {
            offset: 0,
            reason: "not a sluice WAL segment (bad magic)",
        });
        return result;
    }
    if !READABLE_VERSIONS
        .iter()
        .any(|v| bytes[8..12] == v.to_le_bytes())
    {
        result.end_problem = Some(Problem {
            offset: 8,
            reason: "unknown WAL format version",
        });
        return result;
    }
    let mut offset = SEGMENT_HEADER_LEN;
    let mut last = after_lsn;
    result.valid_len = offset;
    while offset < bytes.len() {
        match frame::decode(&bytes[offset..]) {
            Decoded::Frame { lsn, payload, size } if lsn > last => {
                on_frame(lsn, payload);
                last = lsn;
                result.frames += 1;
                result.last_lsn = Some(lsn);
                offset += size;
                result.valid_len = offset;
            }
            _ if is_unwritten(&bytes[offset..]) => break,
            decoded => {
                let head = &bytes[offset..bytes.len().min(offset + frame::HEADER_LEN)];
                let reason = match decoded {
                    _ if is_unwritten(head) => "zeros where a frame should start, then data",
                    Decoded::Frame { .. } => "log sequence number went backwards",
                    Decoded::Incomplete => "the frame is cut short",
                    Decoded::Corrupt(reason) => reason,
                };
                let problem = Problem { offset, reason };
                if mode == RecoveryMode::SkipCorrupt
                    && let Some(next) = skip_target(bytes, offset, last)
                {
                    result.skipped.push(problem);
                    offset = next;
                    continue;
                }
                result.end_problem = Some(problem);
                break;
            }
        }
    }
    result
}

/// Whether `bytes` are all zeros: the preallocated rest of a segment that no frame reached yet.
/// No frame starts with zeros, since LSN 0 is never written.
pub fn is_unwritten(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
}

/// Where the next frame starts if the bad frame at `offset` has a usable length and is followed
/// by a valid frame with a higher LSN.
fn skip_target(bytes: &[u8], offset: usize, last: u64) -> Option<usize> {
    let header = bytes.get(offset..offset + frame::HEADER_LEN)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if len > frame::MAX_PAYLOAD {
        return None;
    }
    let next = offset + frame::HEADER_LEN + len;
    match frame::decode(bytes.get(next..)?) {
        Decoded::Frame { lsn, .. } if lsn > last => Some(next),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(frames: &[(u64, &[u8])]) -> Vec<u8> {
        let mut bytes = segment_header().to_vec();
        for (lsn, payload) in frames {
            frame::encode(*lsn, payload, &mut bytes);
        }
        bytes
    }

    fn lsns(bytes: &[u8], mode: RecoveryMode) -> (Vec<u64>, Scan) {
        let mut seen = Vec::new();
        let scan = scan(bytes, mode, 0, |lsn, _| seen.push(lsn));
        (seen, scan)
    }

    #[test]
    fn reads_every_frame_of_a_clean_segment() {
        let bytes = segment(&[(1, b"a"), (2, b"bb"), (5, b"")]);
        let (seen, scan) = lsns(&bytes, RecoveryMode::Strict);
        assert_eq!(seen, [1, 2, 5]);
        assert_eq!(scan.valid_len, bytes.len());
        assert_eq!(scan.end_problem, None);
    }

    #[test]
    fn a_torn_tail_ends_the_log_at_the_last_whole_frame() {
        let whole = segment(&[(1, b"a"), (2, b"bb")]);
        let mut torn = segment(&[(1, b"a"), (2, b"bb"), (3, b"ccc")]);
        torn.truncate(torn.len() - 2);
        let (seen, scan) = lsns(&torn, RecoveryMode::TolerateTail);
        assert_eq!(seen, [1, 2]);
        assert_eq!(scan.valid_len, whole.len());
        assert_eq!(scan.end_problem.unwrap().reason, "the frame is cut short");
    }

    #[test]
    fn skip_corrupt_steps_over_a_flipped_bit() {
        let mut bytes = segment(&[(1, b"aaaa"), (2, b"bbbb"), (3, b"cccc")]);
        let second = SEGMENT_HEADER_LEN + frame::encoded_len(4);
        bytes[second + frame::HEADER_LEN + 1] ^= 0x10;
        let (seen, scan) = lsns(&bytes, RecoveryMode::SkipCorrupt);
        assert_eq!(seen, [1, 3]);
        assert_eq!(scan.skipped.len(), 1);
        assert_eq!(scan.valid_len, bytes.len());
        let (seen, scan) = lsns(&bytes, RecoveryMode::TolerateTail);
        assert_eq!(seen, [1]);
        assert_eq!(scan.end_problem.unwrap().offset, second);
    }

    #[test]
    fn zeros_to_the_end_are_the_unwritten_rest() {
        let written = segment(&[(1, b"a"), (2, b"bb")]);
        let mut bytes = written.clone();
        bytes.resize(written.len() + 4096, 0);
        let (seen, scan) = lsns(&bytes, RecoveryMode::Strict);
        assert_eq!(seen, [1, 2]);
        assert_eq!(scan.valid_len, written.len());
        assert_eq!(scan.end_problem, None);
    }

    #[test]
    fn zeros_followed_by_data_are_a_bad_frame() {
        let written = segment(&[(1, b"a")]);
        let mut bytes = written.clone();
        bytes.resize(written.len() + 64, 0);
        frame::encode(2, b"after a gap", &mut bytes);
        let (seen, scan) = lsns(&bytes, RecoveryMode::TolerateTail);
        assert_eq!(seen, [1]);
        assert_eq!(scan.valid_len, written.len());
        assert_eq!(
            scan.end_problem.unwrap().reason,
            "zeros where a frame should start, then data"
        );
    }

    #[test]
    fn a_preallocated_segment_without_its_header_holds_nothing() {
        let scan = scan(&[0u8; 4096], RecoveryMode::TolerateTail, 0, |_, _| {});
        assert_eq!(scan.valid_len, 0);
        assert_eq!(
            scan.end_problem.unwrap().reason,
            "the segment header was never written"
        );
    }

    #[test]
    fn lsns_must_rise() {
        let bytes = segment(&[(5, b"a"), (4, b"b")]);
        let (seen, scan) = lsns(&bytes, RecoveryMode::TolerateTail);
        assert_eq!(seen, [5]);
        assert_eq!(
            scan.end_problem.unwrap().reason,
            "log sequence number went backwards"
        );
    }

    #[test]
    fn bad_headers_are_problems() {
        assert!(
            lsns(b"SLUIC", RecoveryMode::TolerateTail)
                .1
                .end_problem
                .is_some()
        );
        let mut bytes = segment(&[(1, b"a")]);
        bytes[0] = b'X';
        assert_eq!(
            lsns(&bytes, RecoveryMode::TolerateTail)
                .1
                .end_problem
                .unwrap()
                .offset,
            0
        );
    }
}
