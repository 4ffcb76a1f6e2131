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
//! body:  landed at, Unix ms u64 | flush len u16 | flush
//!        | (rows u64 | rows hash u64 | key len u16 | key)*
//! ```
//!
//! An entry holds one flush's keys, so the flush's name and time are written once. Numbers are
//! little-endian. A crash mid-append leaves a torn entry at a file's end: reading stops there
//! and the file is cut back to its last whole entry, so appends go on after it. Each append is
//! fsynced before the flush that wrote it is done, so before the log may drop the records of
//! its inserts.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::KeyedInsert;

/// A landed keyed insert, as the journal gives it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Landing {
    pub(crate) key: String,
    pub(crate) rows_hash: u64,
    pub(crate) rows: u64,
    /// The flush it landed in, when it was known.
    pub(crate) flush: Option<Arc<str>>,
    /// When.
    pub(crate) at: SystemTime,
}

/// One table's journal of landed keys.
pub(crate) struct KeyJournal {
    dir: PathBuf,
    /// The window in seconds: the length of a file's span.
    span_s: u64,
    current: Mutex<Current>,
}

/// The file appends go to.
#[derive(Default)]
struct Current {
    /// The file of the current span, opened for appending.
    open: Option<(u64, File)>,
    /// The span whose file is known to end in a whole entry: read (and cut) at open, or
    /// appended to without error since. Its file need not be read again to be opened.
    whole: Option<u64>,
}

/// The longest entry read back.
const MAX_ENTRY: usize = 1 << 30;

impl KeyJournal {
    /// Opens the journal in `dir` at `now`, creating the folder. Returns it with the landings
    /// of the last window, oldest first, each with when it was written. Files past the window
    /// are deleted.
    pub(crate) fn open(
        dir: PathBuf,
        window: Duration,
        now: SystemTime,
    ) -> io::Result<(Self, Vec<Landing>)> {
        fs::create_dir_all(&dir)?;
        let journal = Self {
            dir,
            span_s: window.as_secs().max(1),
            current: Mutex::default(),
        };
        let span = journal.span_of(now);
        let mut landed = Vec::new();
        for (file_span, path) in journal.files()? {
            if file_span + 1 < span {
                fs::remove_file(&path)?;
                continue;
            }
            for landing in read_file(&path)? {
                if now.duration_since(landing.at).unwrap_or_default() <= window {
                    landed.push(landing);
                }
            }
        }
        // Every file from the span before on was just read, and cut where it was torn.
        journal.lock().whole = Some(span);
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

    /// Writes the keys of `inserts`, landed in `flush` at `at`, and fsyncs them. Blocking:
    /// call it off the runtime.
    pub(crate) fn append(
        &self,
        flush: &str,
        inserts: &[Arc<KeyedInsert>],
        at: SystemTime,
    ) -> io::Result<()> {
        let mut bytes = Vec::new();
        encode(&mut bytes, flush, inserts, at);
        let span = self.span_of(at);
        let mut current = self.lock();
        if current.open.as_ref().is_none_or(|(open, _)| *open != span) {
            let whole = current.whole == Some(span);
            current.open = Some((span, self.open_span(span, whole)?));
            current.whole = Some(span);
        }
        let Some((_, file)) = current.open.as_mut() else {
            return Err(io::Error::other("no journal file"));
        };
        let written = file.write_all(&bytes).and_then(|()| file.sync_data());
        if written.is_err() {
            // Where the file ends now is unknown: the next append opens it again, after
            // cutting a torn tail.
            *current = Current::default();
        }
        written
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        match self.current.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Opens the file of `span` for appending, cut back to its last whole entry unless it is
    /// known to be `whole`, and deletes the files whose keys are all past the window.
    fn open_span(&self, span: u64, whole: bool) -> io::Result<File> {
        let path = self.dir.join(format!("{span:020}.keys"));
        let created = !path.exists();
        if !created && !whole {
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

fn encode(out: &mut Vec<u8>, flush: &str, inserts: &[Arc<KeyedInsert>], at: SystemTime) {
    let at_ms = at
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    let keys: usize = inserts.iter().map(|i| 18 + i.key.len()).sum();
    let mut body = Vec::with_capacity(10 + flush.len() + keys);
    body.extend_from_slice(&at_ms.to_le_bytes());
    put_str(&mut body, flush);
    for insert in inserts {
        body.extend_from_slice(&insert.rows.to_le_bytes());
        body.extend_from_slice(&insert.rows_hash.to_le_bytes());
        put_str(&mut body, &insert.key);
    }
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let len = s.len().min(u16::MAX as usize);
    out.extend_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..len]);
}

/// The landings of the file at `path`, cutting it back to the last whole entry when it ends in
/// a torn one.
fn read_file(path: &Path) -> io::Result<Vec<Landing>> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    let mut landings = Vec::new();
    let mut pos = 0;
    while let Some(len) = decode(&bytes[pos..], &mut landings) {
        pos += len;
    }
    if pos < bytes.len() {
        tracing::warn!(path = %path.display(), torn_bytes = bytes.len() - pos, "the insert-key journal ends in a torn entry; cutting it off");
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(pos as u64)?;
        file.sync_all()?;
    }
    Ok(landings)
}

/// Reads the entry at the start of `bytes` into `landings`; its length, or `None` when it is
/// torn or corrupt.
fn decode(bytes: &[u8], landings: &mut Vec<Landing>) -> Option<usize> {
    let len = u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?);
    if len > MAX_ENTRY {
        return None;
    }
    let body = bytes.get(8..8 + len)?;
    if crc32c::crc32c(body) != crc {
        return None;
    }
    let at = UNIX_EPOCH + Duration::from_millis(take_u64(body)?);
    let (flush, mut rest) = take_str(&body[8..])?;
    // An empty name: the flush was not known (the key was journaled at replay).
    let flush = (!flush.is_empty()).then(|| Arc::<str>::from(flush));
    let mut read = Vec::new();
    while !rest.is_empty() {
        let (rows, rows_hash) = (take_u64(rest)?, take_u64(rest.get(8..)?)?);
        let (key, after) = take_str(rest.get(16..)?)?;
        rest = after;
        read.push(Landing {
            key: key.to_owned(),
            rows_hash,
            rows,
            flush: flush.clone(),
            at,
        });
    }
    landings.append(&mut read);
    Some(8 + len)
}

fn take_u64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(0..8)?.try_into().ok()?))
}

fn take_str(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let len = u16::from_le_bytes(bytes.get(0..2)?.try_into().ok()?) as usize;
    let text = std::str::from_utf8(bytes.get(2..2 + len)?).ok()?;
    Some((text, &bytes[2 + len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn landed(keys: &[&str]) -> Vec<Arc<KeyedInsert>> {
        keys.iter()
            .map(|key| KeyedInsert::new(Arc::from(*key), 7, 3, 1))
            .collect()
    }

    fn keys_of(found: &[Landing]) -> Vec<&str> {
        found.iter().map(|l| l.key.as_str()).collect()
    }

    #[test]
    fn landings_come_back_within_their_window_and_old_files_go() {
        let dir = tempfile::tempdir().unwrap();
        let window = Duration::from_secs(100);
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let (journal, found) = KeyJournal::open(dir.path().into(), window, t0).unwrap();
        assert!(found.is_empty());
        journal.append("t/p/1-9", &landed(&["a", "b"]), t0).unwrap();
        journal
            .append("t/p/10-10", &landed(&["c"]), t0 + Duration::from_secs(150))
            .unwrap();
        let (_, found) =
            KeyJournal::open(dir.path().into(), window, t0 + Duration::from_secs(60)).unwrap();
        assert_eq!(keys_of(&found), ["a", "b", "c"]);
        let expected = Landing {
            key: "a".to_owned(),
            rows_hash: 7,
            rows: 3,
            flush: Some(Arc::from("t/p/1-9")),
            at: t0,
        };
        assert_eq!(found[0], expected);
        // Later, a and b are past the window; c is not.
        let later = t0 + Duration::from_secs(180);
        let (journal, found) = KeyJournal::open(dir.path().into(), window, later).unwrap();
        assert_eq!(keys_of(&found), ["c"]);
        // Two spans on, every key before is past the window: their files are deleted.
        journal
            .append("t/p/11-11", &landed(&["d"]), t0 + Duration::from_secs(300))
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
        journal.append("f", &landed(&["a"]), now).unwrap();
        let (_, path) = journal.files().unwrap().pop().unwrap();
        let whole = fs::metadata(&path).unwrap().len();
        // A crash in the middle of the next entry.
        let mut torn = Vec::new();
        encode(&mut torn, "f", &landed(&["b"]), now);
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&torn[..torn.len() - 3])
            .unwrap();
        let (journal, found) = KeyJournal::open(dir.path().into(), window, now).unwrap();
        assert_eq!(keys_of(&found), ["a"]);
        journal.append("f", &landed(&["c"]), now).unwrap();
        assert!(fs::metadata(&path).unwrap().len() > whole);
        let (_, found) = KeyJournal::open(dir.path().into(), window, now).unwrap();
        assert_eq!(keys_of(&found), ["a", "c"]);
    }
}
