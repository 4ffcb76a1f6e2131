//! The keys of landed inserts, on disk for the window: a resend after a restart is still
//! recognised once the log has dropped its first's record.
//!
//! A table's journal is a folder of files, one per span of `window`, named by the span's
//! number (Unix seconds divided by the window). An entry goes to the file of the span it was
//! written in, so the files of spans that ended more than a window ago hold only keys past
//! their window: they are deleted whole, and no file is ever rewritten.
//!
//! ```text
//! entry: len u32 | crc32c u32 (of the body) | body
//! body:  landed at, Unix ms u64 | rows u64 | rows hash u64 | key len u16 | key
//!        | flush len u16 | flush
//! ```
//!
//! Numbers are little-endian. A crash mid-append leaves a torn entry at a file's end: reading
//! stops there and the file is cut back to its last whole entry, so appends go on after it.
//! Each append is fsynced before the flush that wrote it is done, so before the log may drop
//! the records of its inserts.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A landed keyed insert, as its journal entry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Landing {
    pub(crate) key: String,
    pub(crate) rows_hash: u64,
    pub(crate) rows: u64,
    /// The flush it landed in.
    pub(crate) flush: String,
}

/// One table's journal of landed keys.
pub(crate) struct KeyJournal {
    dir: PathBuf,
    /// The window in seconds: the length of a file's span.
    span_s: u64,
    /// The file of the current span, opened for appending.
    current: Mutex<Option<(u64, File)>>,
}

/// The longest entry read back: a key and a flush name of at most 64 KiB each.
const MAX_ENTRY: usize = 28 + 2 * (u16::MAX as usize + 2);

impl KeyJournal {
    /// Opens the journal in `dir` at `now`, creating the folder. Returns it with the landings
    /// of the last window, oldest first, each with when it was written. Files past the window
    /// are deleted.
    pub(crate) fn open(
        dir: PathBuf,
        window: Duration,
        now: SystemTime,
    ) -> io::Result<(Self, Vec<(Landing, SystemTime)>)> {
        fs::create_dir_all(&dir)?;
        let journal = Self {
            dir,
            span_s: window.as_secs().max(1),
            current: Mutex::new(None),
        };
        let span = journal.span_of(now);
        let mut landed = Vec::new();
        for (file_span, path) in journal.files()? {
            if file_span + 1 < span {
                fs::remove_file(&path)?;
                continue;
            }
            for (landing, at) in read_file(&path)? {
                if now.duration_since(at).unwrap_or_default() <= window {
                    landed.push((landing, at));
                }
            }
        }
        Ok((journal, landed))
    }

    fn span_of(&self, at: SystemTime) -> u64 {
        at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() / self.span_s
    }

    /// The journal's files with their spans, oldest first.
    fn files(&self) -> io::Result<Vec<(u64, PathBuf)>> {
        let mut files = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let path = entry?.path();
            let span = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".keys"))
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(span) = span {
                files.push((span, path));
            }
        }
        files.sort();
        Ok(files)
    }

    /// Writes `landings`, landed at `at`, and fsyncs them. Blocking: call it off the runtime.
    pub(crate) fn append(&self, landings: &[Landing], at: SystemTime) -> io::Result<()> {
        let mut bytes = Vec::new();
        let at_ms = at
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        for landing in landings {
            encode(&mut bytes, landing, at_ms);
        }
        let span = self.span_of(at);
        let mut current = match self.current.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if current.as_ref().is_none_or(|(open, _)| *open != span) {
            *current = Some((span, self.open_span(span)?));
        }
        let Some((_, file)) = current.as_mut() else {
            return Err(io::Error::other("no journal file"));
        };
        let written = file.write_all(&bytes).and_then(|()| file.sync_data());
        if written.is_err() {
            // Where the file ends now is unknown: the next append opens it again, after
            // cutting a torn tail.
            *current = None;
        }
        written
    }

    /// Opens the file of `span` for appending, cut back to its last whole entry, and deletes
    /// the files whose keys are all past the window.
    fn open_span(&self, span: u64) -> io::Result<File> {
        let path = self.dir.join(format!("{span:020}.keys"));
        let created = !path.exists();
        if !created {
            read_file(&path)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        if created {
            File::open(&self.dir)?.sync_all()?;
        }
        for (old, path) in self.files()? {
            if old + 1 < span {
                fs::remove_file(path)?;
            }
        }
        Ok(file)
    }
}

fn encode(out: &mut Vec<u8>, landing: &Landing, at_ms: u64) {
    let mut body = Vec::with_capacity(28 + landing.key.len() + landing.flush.len());
    body.extend_from_slice(&at_ms.to_le_bytes());
    body.extend_from_slice(&landing.rows.to_le_bytes());
    body.extend_from_slice(&landing.rows_hash.to_le_bytes());
    put_str(&mut body, &landing.key);
    put_str(&mut body, &landing.flush);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let len = s.len().min(u16::MAX as usize);
    out.extend_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..len]);
}

/// The entries of the file at `path`, cutting it back to the last whole one when it ends in a
/// torn entry.
fn read_file(path: &Path) -> io::Result<Vec<(Landing, SystemTime)>> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    let mut entries = Vec::new();
    let mut pos = 0;
    while let Some((landing, at, len)) = decode(&bytes[pos..]) {
        entries.push((landing, at));
        pos += len;
    }
    if pos < bytes.len() {
        tracing::warn!(path = %path.display(), torn_bytes = bytes.len() - pos, "the insert-key journal ends in a torn entry; cutting it off");
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(pos as u64)?;
        file.sync_all()?;
    }
    Ok(entries)
}

/// One entry from the start of `bytes`, with its length; `None` when it is torn or corrupt.
fn decode(bytes: &[u8]) -> Option<(Landing, SystemTime, usize)> {
    let len = u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?);
    if len > MAX_ENTRY {
        return None;
    }
    let body = bytes.get(8..8 + len)?;
    if crc32c::crc32c(body) != crc {
        return None;
    }
    let u64_at = |at: usize| Some(u64::from_le_bytes(body.get(at..at + 8)?.try_into().ok()?));
    let at = UNIX_EPOCH + Duration::from_millis(u64_at(0)?);
    let (rows, rows_hash) = (u64_at(8)?, u64_at(16)?);
    let (key, rest) = take_str(&body[24..])?;
    let (flush, _) = take_str(rest)?;
    let landing = Landing {
        key: key.to_owned(),
        rows_hash,
        rows,
        flush: flush.to_owned(),
    };
    Some((landing, at, 8 + len))
}

fn take_str(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let len = u16::from_le_bytes(bytes.get(0..2)?.try_into().ok()?) as usize;
    let text = std::str::from_utf8(bytes.get(2..2 + len)?).ok()?;
    Some((text, &bytes[2 + len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn landing(key: &str) -> Landing {
        Landing {
            key: key.to_owned(),
            rows_hash: 7,
            rows: 3,
            flush: "t/p/1-9".to_owned(),
        }
    }

    #[test]
    fn landings_come_back_within_their_window_and_old_files_go() {
        let dir = tempfile::tempdir().unwrap();
        let window = Duration::from_secs(100);
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let (journal, found) = KeyJournal::open(dir.path().into(), window, t0).unwrap();
        assert!(found.is_empty());
        journal.append(&[landing("a"), landing("b")], t0).unwrap();
        journal
            .append(&[landing("c")], t0 + Duration::from_secs(150))
            .unwrap();
        let (_, found) =
            KeyJournal::open(dir.path().into(), window, t0 + Duration::from_secs(60)).unwrap();
        let keys: Vec<_> = found.iter().map(|(l, _)| l.key.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        assert_eq!(found[0].0, landing("a"));
        // 180 s on, a and b are past the window; c is not.
        let later = t0 + Duration::from_secs(180);
        let (journal, found) = KeyJournal::open(dir.path().into(), window, later).unwrap();
        let keys: Vec<_> = found.iter().map(|(l, _)| l.key.as_str()).collect();
        assert_eq!(keys, ["c"]);
        // Two spans on, every key before is past the window: their files are deleted.
        journal
            .append(&[landing("d")], t0 + Duration::from_secs(300))
            .unwrap();
        let spans: Vec<u64> = journal
            .files()
            .unwrap()
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(spans, [10_003]);
    }

    #[test]
    fn a_torn_tail_is_cut_off_and_appends_go_on_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let window = Duration::from_secs(3600);
        let now = SystemTime::now();
        let (journal, _) = KeyJournal::open(dir.path().into(), window, now).unwrap();
        journal.append(&[landing("a")], now).unwrap();
        let (_, path) = journal.files().unwrap().pop().unwrap();
        let whole = fs::metadata(&path).unwrap().len();
        // A crash in the middle of the next entry.
        let mut torn = Vec::new();
        encode(&mut torn, &landing("b"), 0);
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&torn[..torn.len() - 3])
            .unwrap();
        let (journal, found) = KeyJournal::open(dir.path().into(), window, now).unwrap();
        assert_eq!(found.len(), 1);
        journal.append(&[landing("c")], now).unwrap();
        assert!(fs::metadata(&path).unwrap().len() > whole);
        let (_, found) = KeyJournal::open(dir.path().into(), window, now).unwrap();
        let keys: Vec<_> = found.iter().map(|(l, _)| l.key.as_str()).collect();
        assert_eq!(keys, ["a", "c"]);
    }
}
