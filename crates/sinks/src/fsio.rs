//! File operations: the order of fsyncs that makes a file exist, whole, after power loss,
//! writing a large file past the page cache, and reading a file without writing to its inode.
//!
//! Hazard: a rename is durable only once the directory holding it is fsynced, and a new directory
//! only once its parent is. Every helper here fsyncs the file first, then the directory entries.

use std::fs::{self, File};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Fsyncs a directory so that the entries created, renamed or removed in it are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Opens `path` for reading, without updating its access time where the system allows it
/// (Linux's `O_NOATIME`, for files this process owns; others are opened plainly). A part is
/// read once, by the compaction that replaces it, and under the default `relatime` mount
/// option that first read after the write would update the access time: an inode dirtied, and
/// a journal write, per input (`touch_atime` in a profile of a compaction pass).
pub fn open_to_read(path: &Path) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        match fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOATIME)
            .open(path)
        {
            // Only the file's owner (or a process with CAP_FOWNER) may leave the time alone.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
            opened => return opened,
        }
    }
    File::open(path)
}

/// Creates `dir` and any missing parents below `root`, fsyncing each parent whose entries changed.
/// `root` itself must exist.
pub fn create_dir_durably(root: &Path, dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().unwrap_or(root);
    if parent != root && parent.starts_with(root) {
        create_dir_durably(root, parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => sync_dir(parent),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` to `dir/name` atomically: a hidden temporary file, fsync, rename, fsync `dir`.
/// A reader sees the old file or the new one, never a partial one.
pub fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

/// Bytes a [`DurableFile`] writes at a time with direct I/O, and the size below which a file
/// is written through the page cache only.
pub const DIRECT_CHUNK: usize = 4 << 20;

/// What direct I/O asks of a write's memory address, file offset and length: a multiple of the
/// device's logical block size, which is 512 or 4096 bytes on the devices sluice meets.
const DIRECT_ALIGN: usize = 4096;

/// A new file written to be fsynced once whole, its bulk written with direct I/O (Linux's
/// `O_DIRECT`): once it reaches [`DIRECT_CHUNK`], each full chunk goes from this process's
/// memory to the device, bypassing the page cache, and only the last partial chunk is written
/// through the page cache before the closing fsync.
///
/// Written through the page cache, a large file costs a copy of every byte into cache pages
/// (CPU time spent filling fresh pages), and the closing fsync then writes whatever writeback
/// has not yet. Direct chunks cost neither; the price is that the file is not in the page cache
/// afterwards, so its first reader reads it from the device. A small file (a flush's part)
/// never reaches a chunk and is written as before.
///
/// Where the file system refuses direct I/O (the open or a write fails with `EINVAL`: tmpfs
/// before Linux 6.6, some FUSE file systems), the rest of the file is written through the page
/// cache, whole and in place. [`DurableFile::finish`] fsyncs the file either way.
pub struct DurableFile {
    path: PathBuf,
    /// Opened plainly: writes a small file, a large one's last partial chunk, and everything
    /// after direct I/O was refused.
    file: File,
    mode: Mode,
    /// Bytes written to the file so far (not counting those held in memory).
    written: u64,
    /// Chunks written with direct I/O.
    direct_chunks: u32,
}

/// How a [`DurableFile`] writes what it is given.
enum Mode {
    /// Holding the file's bytes until they reach a chunk.
    Gathering(Vec<u8>),
    /// Filling an aligned chunk, written with `file` when full.
    Direct { file: File, chunk: AlignedChunk },
    /// Straight to the plainly opened file.
    Plain,
}

impl DurableFile {
    /// Creates the file `path` (truncating one that is there).
    pub fn create(path: &Path) -> io::Result<Self> {
        Ok(Self {
            path: path.to_owned(),
            file: File::create(path)?,
            mode: Mode::Gathering(Vec::new()),
            written: 0,
            direct_chunks: 0,
        })
    }

    /// Writes what is held in memory, fsyncs the file, and returns it with how many chunks
    /// were written with direct I/O.
    pub fn finish(mut self) -> io::Result<(File, u32)> {
        match std::mem::replace(&mut self.mode, Mode::Plain) {
            Mode::Gathering(bytes) => self.file.write_all(&bytes)?,
            Mode::Direct { chunk, .. } => self.write_plainly(chunk.filled())?,
            Mode::Plain => {}
        }
        self.file.sync_all()?;
        Ok((self.file, self.direct_chunks))
    }

    /// Writes `bytes` at the end of what was written, through the page cache.
    fn write_plainly(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.seek(SeekFrom::Start(self.written))?;
        self.file.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Leaves `Gathering` with `bytes`, a chunk's worth or more: direct I/O from here on if
    /// the file system takes it, otherwise plain writes.
    fn start_direct(&mut self, bytes: &[u8]) -> io::Result<()> {
        let direct = open_direct(&self.path)?
            .and_then(|file| AlignedChunk::new().map(|chunk| (file, chunk)));
        match direct {
            Some((file, chunk)) => {
                self.mode = Mode::Direct { file, chunk };
                self.write_direct(bytes)
            }
            None => {
                self.mode = Mode::Plain;
                self.write_plainly(bytes)
            }
        }
    }

    /// Copies `bytes` into the chunk, writing it each time it is full.
    fn write_direct(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let Mode::Direct { file, chunk } = &mut self.mode else {
                return self.write_plainly(bytes);
            };
            bytes = chunk.fill(bytes);
            if !chunk.is_full() {
                return Ok(());
            }
            match file.write_all(chunk.filled()) {
                Ok(()) => {
                    self.written += DIRECT_CHUNK as u64;
                    self.direct_chunks += 1;
                    chunk.clear();
                }
                // Direct I/O refused after all (an alignment this file system does not take).
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self.fall_back()?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Leaves direct I/O: what the chunk holds, and everything after it, goes through the page
    /// cache.
    fn fall_back(&mut self) -> io::Result<()> {
        if let Mode::Direct { chunk, .. } = std::mem::replace(&mut self.mode, Mode::Plain) {
            self.write_plainly(chunk.filled())?;
        }
        Ok(())
    }
}

impl Write for DurableFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.mode {
            Mode::Gathering(bytes) => {
                bytes.extend_from_slice(buf);
                if bytes.len() >= DIRECT_CHUNK {
                    let bytes = std::mem::take(bytes);
                    self.start_direct(&bytes)?;
                }
            }
            Mode::Direct { .. } => self.write_direct(buf)?,
            Mode::Plain => self.write_plainly(buf)?,
        }
        Ok(buf.len())
    }

    /// Leaves what is held in memory there: a partial chunk cannot be written directly, and
    /// [`DurableFile::finish`] writes it.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Opens `path` to write with direct I/O; `None` where the file system does not take it.
fn open_direct(path: &Path) -> io::Result<Option<File>> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        match fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
        {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
            opened => opened.map(Some),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        Ok(None)
    }
}

/// [`DIRECT_CHUNK`] bytes of memory starting at a [`DIRECT_ALIGN`] boundary (a vector one
/// alignment longer, used from its first aligned byte), and how many of them are filled.
struct AlignedChunk {
    memory: Vec<u8>,
    start: usize,
    filled: usize,
}

impl AlignedChunk {
    /// `None` if the memory's alignment cannot be found (the standard library allows that).
    fn new() -> Option<Self> {
        let memory = vec![0; DIRECT_CHUNK + DIRECT_ALIGN];
        let start = memory.as_ptr().align_offset(DIRECT_ALIGN);
        (start < DIRECT_ALIGN).then_some(Self {
            memory,
            start,
            filled: 0,
        })
    }

    /// Copies what fits of `bytes`; returns the rest.
    fn fill<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        let (now, rest) = bytes.split_at(bytes.len().min(DIRECT_CHUNK - self.filled));
        let at = self.start + self.filled;
        self.memory[at..at + now.len()].copy_from_slice(now);
        self.filled += now.len();
        rest
    }

    fn is_full(&self) -> bool {
        self.filled == DIRECT_CHUNK
    }

    fn filled(&self) -> &[u8] {
        &self.memory[self.start..self.start + self.filled]
    }

    fn clear(&mut self) {
        self.filled = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::time::Duration;

    use super::*;

    /// Two and a half chunks, in writes that do not divide a chunk.
    fn large_file() -> Vec<u8> {
        (0..DIRECT_CHUNK * 5 / 2).map(|i| (i % 251) as u8).collect()
    }

    fn write_in_pieces(writer: &mut DurableFile, bytes: &[u8]) {
        for piece in bytes.chunks(1_000_003) {
            writer.write_all(piece).unwrap();
        }
    }

    #[test]
    fn a_large_file_is_written_past_the_page_cache_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part.parquet");
        let bytes = large_file();
        let mut writer = DurableFile::create(&path).unwrap();
        write_in_pieces(&mut writer, &bytes);
        let (file, direct) = writer.finish().unwrap();
        drop(file);
        assert_eq!(fs::read(&path).unwrap(), bytes);
        // Two full chunks direct, the last half through the page cache; none where the file
        // system refuses direct I/O.
        let probe = dir.path().join("probe");
        fs::write(&probe, b"").unwrap();
        let takes_direct = open_direct(&probe).unwrap().is_some();
        assert_eq!(direct, if takes_direct { 2 } else { 0 });

        // A file smaller than a chunk is written through the page cache alone.
        let small = dir.path().join("small.parquet");
        let mut writer = DurableFile::create(&small).unwrap();
        writer.write_all(b"rows").unwrap();
        let (_, direct) = writer.finish().unwrap();
        assert_eq!(direct, 0);
        assert_eq!(fs::read(&small).unwrap(), b"rows");
    }

    #[test]
    fn a_file_whose_direct_writes_are_refused_midway_is_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part.parquet");
        let bytes = large_file();
        let (before, after) = bytes.split_at(DIRECT_CHUNK * 3 / 2);
        let mut writer = DurableFile::create(&path).unwrap();
        write_in_pieces(&mut writer, before);
        // As on a refused write: half a chunk is held, and one chunk may have gone direct.
        writer.fall_back().unwrap();
        write_in_pieces(&mut writer, after);
        writer.finish().unwrap();
        assert_eq!(fs::read(&path).unwrap(), bytes);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reading_a_file_leaves_its_access_time_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part.parquet");
        fs::write(&path, b"rows").unwrap();
        // An access time before the last write: under `relatime` a plain read would update it.
        let modified = fs::metadata(&path).unwrap().modified().unwrap();
        let accessed = modified - Duration::from_secs(3600);
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_times(fs::FileTimes::new().set_accessed(accessed))
            .unwrap();

        let mut read = String::new();
        open_to_read(&path)
            .unwrap()
            .read_to_string(&mut read)
            .unwrap();
        assert_eq!(read, "rows");
        assert_eq!(fs::metadata(&path).unwrap().accessed().unwrap(), accessed);
    }
}
