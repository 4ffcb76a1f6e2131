//! The log: appends from many producers, one writer thread, one fsync per group.
//!
//! # Lifecycle
//!
//! - **Open**: list the segments, scan each (see `recovery`), cut a torn tail, refuse corruption
//!   (by the recovery mode), and reopen the newest segment at its valid end, zeros past it.
//! - **Replay**: [`Replay::for_each`] hands every recovered frame to the caller, in log order,
//!   before new frames are appended.
//! - **Append**: [`Wal::append`] gives the payload its LSN and queues its frame under one short
//!   lock, and returns at once with a [`Completion`] shared by the whole group.
//! - **Group commit**: the writer thread takes everything queued, writes it with one write and one
//!   `fdatasync`, then completes the group. Producers that arrive during an fsync form the next
//!   group, so the fsync is paid once per group, never once per row.
//! - **Acknowledge**: a caller answers `durable` only after its group's completion says `Ok`.
//! - **Land**: once the store holds a frame's rows, the caller says so with [`Wal::landed`].
//!   Every appended or recovered frame is outstanding until then.
//! - **Release**: after each group the thread deletes the sealed segments that lie wholly below
//!   the oldest outstanding frame. Appends and the outstanding set share one lock, so a frame is
//!   outstanding from the moment it has an LSN: no release can overtake it.
//!
//! # Failures
//!
//! A failed write (a full disk, a short write) cuts the segment back to its last good length and
//! fails that group: its producers get an error, never a false acknowledgement, and the log goes
//! on. A failed fsync **poisons** the log: after it, nobody can say what reached the disk, so
//! every pending and future append fails with the same error until sluice restarts and recovers.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::Notify;

use crate::error::WalError;
use crate::frame;
use crate::recovery::{self, Problem, RecoveryMode, SEGMENT_HEADER_LEN, segment_header};
use crate::reserve::{DEFAULT_RESERVE_BLOCK, Reservation};
use crate::storage::{SegmentFile, Storage, parse_segment_name, segment_path};

/// Segment size: large enough that rotation (a create and two fsyncs) is rare, small enough that
/// a released segment frees space soon after its rows land.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

/// How often the idle writer thread wakes to apply releases.
const DEFAULT_IDLE_WAKE: Duration = Duration::from_millis(500);

/// How far past a group the writer puts zeros into the segment (see [`Active::write_ahead`]).
/// Large enough that few groups pay for it, small enough that the group that does waits little.
const ZEROS_AHEAD: u64 = 1024 * 1024;

/// Groups smaller than this get zeros written ahead of them; larger ones write into reserved
/// space (see [`Active::write_ahead`]).
const SMALL_GROUP: u64 = 64 * 1024;

/// The largest group buffer the writer keeps for the next group: appends fill a kept buffer
/// without growing it and faulting in fresh pages, and a rare huge group does not hold its
/// memory for good.
const KEPT_BUFFER_BYTES: usize = 16 * 1024 * 1024;

/// Where and how the log is kept.
#[derive(Debug, Clone)]
pub struct WalConfig {
    /// The folder of the segments.
    pub dir: PathBuf,
    /// Bytes after which the log moves on to a new segment.
    pub segment_bytes: u64,
    /// What recovery does with a frame that does not check out.
    pub recovery: RecoveryMode,
    /// LSNs reserved at a time (see [`crate::reserve`]).
    pub reserve_block: u64,
    /// How often the writer thread, with no frames to write, wakes to delete released
    /// segments. An append wakes it at once.
    pub idle_wake: Duration,
}

impl WalConfig {
    /// The defaults, in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            recovery: RecoveryMode::default(),
            reserve_block: DEFAULT_RESERVE_BLOCK,
            idle_wake: DEFAULT_IDLE_WAKE,
        }
    }
}

/// The outcome of a group: shared by every append in it.
#[derive(Debug, Default)]
pub struct Completion {
    state: OnceLock<Result<(), String>>,
    done: Notify,
}

impl Completion {
    /// Waits until the group is durable (`Ok`) or failed.
    pub async fn wait(&self) -> Result<(), WalError> {
        loop {
            let notified = self.done.notified();
            if let Some(result) = self.state.get() {
                return result.clone().map_err(WalError::Failed);
            }
            notified.await;
        }
    }

    /// The outcome, if the group is finished.
    pub fn result(&self) -> Option<Result<(), WalError>> {
        self.state
            .get()
            .map(|r| r.clone().map_err(WalError::Failed))
    }

    fn complete(&self, result: Result<(), String>) {
        let _ = self.state.set(result);
        self.done.notify_waiters();
    }
}

/// An appended frame: its LSN and the completion of its group.
#[derive(Debug, Clone)]
pub struct Appended {
    /// The frame's log sequence number.
    pub lsn: u64,
    /// Resolves when the frame is durable, or failed.
    pub durable: Arc<Completion>,
}

/// What recovery found.
#[derive(Debug, Clone, Default)]
pub struct Recovered {
    /// Segments found.
    pub segments: usize,
    /// Valid frames found.
    pub frames: u64,
    /// The highest LSN found.
    pub last_lsn: Option<u64>,
    /// A torn tail that was cut: the segment, where, and how many bytes went.
    pub cut_tail: Option<(PathBuf, Problem, u64)>,
    /// Bad frames skipped (`skip_corrupt`).
    pub skipped: Vec<(PathBuf, Problem)>,
}

/// Counters of the log's work since it opened.
#[derive(Debug, Default)]
pub struct WalStats {
    /// Frames appended.
    pub frames: AtomicU64,
    /// Bytes written, frames and headers.
    pub bytes: AtomicU64,
    /// Groups written (one fsync each).
    pub fsyncs: AtomicU64,
    /// Segments deleted after release.
    pub segments_released: AtomicU64,
}

struct Queue {
    next_lsn: u64,
    buf: Vec<u8>,
    frames: u64,
    /// The LSNs of the first and last frames in `buf`.
    group_first: u64,
    group_last: u64,
    group: Arc<Completion>,
    poisoned: Option<String>,
    closing: bool,
    /// The writer thread waits for frames: an append must wake it. While it writes, the frames
    /// queued meanwhile wait for it without a wake-up call.
    writer_waiting: bool,
    /// Frames not yet landed in their store.
    outstanding: BTreeSet<u64>,
    /// Moved ahead of `next_lsn` before an LSN at or above it is handed out.
    reservation: Reservation,
}

impl Queue {
    /// Hands out the next LSN, once the reservation covers it.
    fn take_lsn(&mut self) -> Result<u64, WalError> {
        let lsn = self.next_lsn;
        self.reservation.cover(lsn)?;
        self.next_lsn += 1;
        Ok(lsn)
    }

    /// Every frame below this LSN has landed.
    fn release_point(&self) -> u64 {
        self.outstanding.first().copied().unwrap_or(self.next_lsn)
    }
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    stats: WalStats,
}

/// The write-ahead log.
pub struct Wal {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The recovered frames, to hand to the pipeline before anything new is appended.
pub struct Replay {
    storage: Arc<dyn Storage>,
    segments: Vec<(PathBuf, usize)>,
    mode: RecoveryMode,
}

impl Replay {
    /// Calls `f` with every recovered frame, in log order.
    pub fn for_each(&self, mut f: impl FnMut(u64, &[u8])) -> Result<(), WalError> {
        let mut last = 0;
        for (path, valid_len) in &self.segments {
            let bytes = self
                .storage
                .read_prefix(path, *valid_len as u64)
                .map_err(|e| WalError::io(format!("cannot read {}", path.display()), e))?;
            let scan = recovery::scan(&bytes, self.mode, last, &mut f);
            last = scan.last_lsn.unwrap_or(last);
        }
        Ok(())
    }
}

fn lock(queue: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    match queue.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Wal {
    /// Opens (or creates) the log in `config.dir` and recovers it. New LSNs start above the
    /// log's last frame, `min_next_lsn` (the highest LSN the stores already hold, plus one) and
    /// the reservation (every LSN the log ever handed out, logged or not, plus one), so an LSN
    /// is never reused, even after every segment was released and with no store to ask.
    pub fn open(
        config: WalConfig,
        storage: Arc<dyn Storage>,
        min_next_lsn: u64,
    ) -> Result<(Wal, Replay, Recovered), WalError> {
        let dir = config.dir.clone();
        let names = list_segments(storage.as_ref(), &dir)?;
        let Scanned {
            recovered,
            mut kept,
            recovered_lsns,
            last,
        } = recover_segments(&config, storage.as_ref(), &dir, &names)?;
        let (reservation, next_lsn) =
            reserve_next_lsn(&storage, &dir, config.reserve_block, last, min_next_lsn)?;

        // A frame of a torn tail that was cut never reaches replay: keep only what replay sees.
        let outstanding: BTreeSet<u64> = recovered_lsns
            .into_iter()
            .filter(|lsn| *lsn <= last)
            .collect();
        let replay = Replay {
            storage: storage.clone(),
            segments: kept.iter().map(|(_, p, len)| (p.clone(), *len)).collect(),
            mode: config.recovery,
        };

        let segment_bytes = config.segment_bytes.max(SEGMENT_HEADER_LEN as u64 + 1);
        let active = open_active(storage.as_ref(), &dir, &mut kept, next_lsn, segment_bytes)?;
        let segments: VecDeque<(u64, PathBuf)> = kept
            .into_iter()
            .map(|(first, path, _)| (first, path))
            .collect();

        let queue = Queue {
            next_lsn,
            buf: Vec::new(),
            frames: 0,
            group_first: 0,
            group_last: 0,
            group: Arc::new(Completion::default()),
            poisoned: None,
            closing: false,
            writer_waiting: false,
            outstanding,
            reservation,
        };
        let writer = Writer {
            shared: Arc::new(Shared {
                queue: Mutex::new(queue),
                wake: Condvar::new(),
                stats: WalStats::default(),
            }),
            storage,
            dir,
            segment_bytes,
            idle_wake: config.idle_wake,
            active,
            segments,
            spare: Vec::new(),
        };
        let wal = Wal::start(writer)?;
        Ok((wal, replay, recovered))
    }

    /// Starts the writer thread.
    fn start(writer: Writer) -> Result<Wal, WalError> {
        let shared = writer.shared.clone();
        let thread = std::thread::Builder::new()
            .name("sluice-wal".into())
            .spawn(move || writer.run())
            .map_err(|e| WalError::io("cannot start the WAL thread".into(), e))?;
        Ok(Wal {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues `payload` as a frame with the next LSN. Returns at once; await
    /// [`Appended::durable`] before acknowledging anything that depends on it.
    pub fn append(&self, payload: &[u8]) -> Result<Appended, WalError> {
        self.append_pieces(&[payload])
    }

    /// [`Wal::append`] of `pieces` one after another as one payload, copied once, into the
    /// frame: a caller with a large body need not copy it behind its own header first.
    pub fn append_pieces(&self, pieces: &[&[u8]]) -> Result<Appended, WalError> {
        let mut queue = lock(&self.shared.queue);
        if let Some(reason) = &queue.poisoned {
            return Err(WalError::Poisoned(reason.clone()));
        }
        if queue.closing {
            return Err(WalError::Closed);
        }
        let lsn = queue.take_lsn()?;
        if queue.frames == 0 {
            queue.group_first = lsn;
        }
        queue.group_last = lsn;
        frame::encode_pieces(lsn, pieces, &mut queue.buf);
        queue.frames += 1;
        queue.outstanding.insert(lsn);
        let durable = queue.group.clone();
        let wake = queue.writer_waiting;
        drop(queue);
        if wake {
            self.shared.wake.notify_one();
        }
        Ok(Appended { lsn, durable })
    }

    /// Takes the next LSN without writing a frame (for rows that are not logged). LSNs stay
    /// unique and rising across logged and unlogged rows, and across restarts (the
    /// reservation). Fails only when the reservation cannot be moved.
    pub fn next_lsn(&self) -> Result<u64, WalError> {
        lock(&self.shared.queue).take_lsn()
    }

    /// Says that the store holds the rows of frame `lsn` (or that they will never land and must
    /// not be replayed). Segments wholly below the oldest outstanding frame are then deleted.
    pub fn landed(&self, lsn: u64) {
        lock(&self.shared.queue).outstanding.remove(&lsn);
    }

    /// Frames appended or recovered and not yet landed.
    pub fn outstanding(&self) -> usize {
        lock(&self.shared.queue).outstanding.len()
    }

    /// Why the log refuses appends, if it does.
    pub fn poisoned(&self) -> Option<String> {
        lock(&self.shared.queue).poisoned.clone()
    }

    /// Counters since open.
    pub fn stats(&self) -> &WalStats {
        &self.shared.stats
    }

    /// Writes what is queued, stops the writer thread and waits for it.
    pub fn close(&self) {
        lock(&self.shared.queue).closing = true;
        self.shared.wake.notify_all();
        let thread = match self.thread.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.close();
    }
}

struct Active {
    file: Box<dyn SegmentFile>,
    len: u64,
    /// Up to here the segment's blocks have been written, with frames or zeros; past it they
    /// may only be reserved.
    written: u64,
}

impl Active {
    fn new(file: Box<dyn SegmentFile>, len: u64) -> Self {
        Self {
            file,
            len,
            written: len,
        }
    }

    /// Before a group of `group_len` bytes is written at `len`: writes zeros from the group's
    /// end to [`ZEROS_AHEAD`] past it, within the segment's `size`, when the group is small
    /// and reaches past what was written.
    ///
    /// Space the segment reserved at creation is marked unwritten until written, and the first
    /// write into it changes the file's extent map: `fdatasync` must then write the inode as
    /// well as the data, a second synchronous write in the group. Written zeros spare the small
    /// groups that follow that write. A large group pays it once for much data, while zeros
    /// would write its bytes twice, so it writes into reserved space. Best effort: a failure
    /// leaves space that still reads as zeros, only slower to sync.
    fn write_ahead(&mut self, group_len: u64, size: u64) {
        let end = self.len + group_len;
        if end <= self.written {
            return;
        }
        self.written = end;
        let to = end.saturating_add(ZEROS_AHEAD).min(size);
        if group_len >= SMALL_GROUP || to <= end {
            return;
        }
        if let Err(e) = self.file.write_zeros(end, to - end) {
            tracing::debug!(error = %e, "cannot write zeros ahead in the WAL segment");
        }
        self.written = to;
    }
}

struct Writer {
    shared: Arc<Shared>,
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    segment_bytes: u64,
    idle_wake: Duration,
    active: Active,
    /// Every segment on disk, oldest first, by first LSN; the last is the active one.
    segments: VecDeque<(u64, PathBuf)>,
    /// The buffer of the group before, emptied, for the queue to fill next.
    spare: Vec<u8>,
}

impl Writer {
    fn run(mut self) {
        loop {
            let (buf, frames, group, (first_lsn, last_lsn), closing) = {
                let mut queue = lock(&self.shared.queue);
                while queue.buf.is_empty() && !queue.closing {
                    queue.writer_waiting = true;
                    let (guard, _) = match self.shared.wake.wait_timeout(queue, self.idle_wake) {
                        Ok(woken) => woken,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    queue = guard;
                    queue.writer_waiting = false;
                    if queue.buf.is_empty() {
                        break;
                    }
                }
                let lsns = (queue.group_first, queue.group_last);
                let buf = std::mem::replace(&mut queue.buf, std::mem::take(&mut self.spare));
                let frames = std::mem::take(&mut queue.frames);
                let group = std::mem::replace(&mut queue.group, Arc::new(Completion::default()));
                (buf, frames, group, lsns, queue.closing)
            };
            if !buf.is_empty() {
                let result = self.write_group(&buf, first_lsn);
                if result.is_ok() {
                    let stats = &self.shared.stats;
                    stats.frames.fetch_add(frames, Ordering::Relaxed);
                    stats.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
                    stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                }
                if result.is_err() {
                    // The group's frames are not in the log: nothing to wait for.
                    let mut queue = lock(&self.shared.queue);
                    for lsn in first_lsn..=last_lsn {
                        queue.outstanding.remove(&lsn);
                    }
                }
                group.complete(result);
            }
            self.keep_spare(buf);
            self.apply_release();
            if closing && lock(&self.shared.queue).buf.is_empty() {
                return;
            }
        }
    }

    /// Keeps a written group's buffer, emptied, for the queue to fill next, unless it grew past
    /// [`KEPT_BUFFER_BYTES`].
    fn keep_spare(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() <= KEPT_BUFFER_BYTES {
            buf.clear();
            self.spare = buf;
        }
    }

    /// Writes one group and fsyncs it. A failed write is undone; a failed fsync poisons the log.
    fn write_group(&mut self, buf: &[u8], first_lsn: u64) -> Result<(), String> {
        if let Some(reason) = lock(&self.shared.queue).poisoned.clone() {
            return Err(reason);
        }
        if self.active.len > SEGMENT_HEADER_LEN as u64
            && self.active.len + buf.len() as u64 > self.segment_bytes
        {
            self.rotate(first_lsn)?;
        }
        self.active
            .write_ahead(buf.len() as u64, self.segment_bytes);
        if let Err(e) = self.active.file.write_all_at(buf, self.active.len) {
            let message = format!("cannot write to the WAL in {}: {e}", self.dir.display());
            // Drop whatever part of the group reached the file, so the next group follows the
            // last good frame.
            if let Err(cut) = self.active.file.truncate(self.active.len) {
                return Err(self.poison(format!("{message}; then cannot cut it back: {cut}")));
            }
            self.active.written = self.active.len;
            return Err(message);
        }
        if let Err(e) = self.active.file.sync_data() {
            return Err(self.poison(format!(
                "fsync of the WAL in {} failed: {e}",
                self.dir.display()
            )));
        }
        self.active.len += buf.len() as u64;
        Ok(())
    }

    fn rotate(&mut self, first_lsn: u64) -> Result<(), String> {
        let (file, path) = create_segment(
            self.storage.as_ref(),
            &self.dir,
            first_lsn,
            self.segment_bytes,
        )
        .map_err(|e| e.to_string())?;
        self.active = Active::new(file, SEGMENT_HEADER_LEN as u64);
        self.segments.push_back((first_lsn, path));
        Ok(())
    }

    fn poison(&self, reason: String) -> String {
        tracing::error!(error = %reason, "the WAL is poisoned: durable and committed inserts are refused until restart");
        lock(&self.shared.queue).poisoned = Some(reason.clone());
        reason
    }

    /// Deletes sealed segments whose every LSN is below the release point.
    fn apply_release(&mut self) {
        let before = lock(&self.shared.queue).release_point();
        let mut removed = false;
        while self.segments.len() > 1 && self.segments[1].0 <= before {
            let Some((first, path)) = self.segments.pop_front() else {
                break;
            };
            if let Err(e) = self.storage.remove(&path) {
                tracing::warn!(segment = %path.display(), error = %e, "cannot delete a released WAL segment");
                self.segments.push_front((first, path));
                break;
            }
            self.shared
                .stats
                .segments_released
                .fetch_add(1, Ordering::Relaxed);
            removed = true;
        }
        if removed && let Err(e) = self.storage.sync_dir(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot fsync the WAL folder after deleting segments");
        }
    }
}

/// What the scan of the segments at open found.
struct Scanned {
    /// The report of recovery.
    recovered: Recovered,
    /// The segments to keep, oldest first: first LSN, path and valid length.
    kept: Vec<(u64, PathBuf, usize)>,
    /// The LSN of every valid frame seen, torn tail included.
    recovered_lsns: Vec<u64>,
    /// The highest LSN that replay will see, or 0.
    last: u64,
}

/// Creates the log's folder if needed and lists its segments, sorted by first LSN.
fn list_segments(storage: &dyn Storage, dir: &Path) -> Result<Vec<(u64, String)>, WalError> {
    storage
        .create_dir_all(dir)
        .map_err(|e| WalError::io(format!("cannot create {}", dir.display()), e))?;
    let mut names: Vec<(u64, String)> = storage
        .list(dir)
        .map_err(|e| WalError::io(format!("cannot list {}", dir.display()), e))?
        .into_iter()
        .filter_map(|name| parse_segment_name(&name).map(|first| (first, name)))
        .collect();
    names.sort();
    Ok(names)
}

/// Scans every segment in order, refuses corruption by the recovery mode, cuts a torn tail of
/// the newest segment and removes a newest segment whose header never reached the disk.
fn recover_segments(
    config: &WalConfig,
    storage: &dyn Storage,
    dir: &Path,
    names: &[(u64, String)],
) -> Result<Scanned, WalError> {
    let mut recovered = Recovered {
        segments: names.len(),
        ..Recovered::default()
    };
    let mut kept: Vec<(u64, PathBuf, usize)> = Vec::new();
    let mut recovered_lsns: Vec<u64> = Vec::new();
    let mut last = 0u64;
    for (i, (first, name)) in names.iter().enumerate() {
        let path = dir.join(name);
        let newest = i + 1 == names.len();
        let bytes = storage
            .read(&path)
            .map_err(|e| WalError::io(format!("cannot read {}", path.display()), e))?;
        let scan = recovery::scan(&bytes, config.recovery, last, |lsn, _| {
            recovered_lsns.push(lsn);
        });
        recovered.frames += scan.frames;
        for problem in &scan.skipped {
            tracing::error!(segment = %path.display(), offset = problem.offset, reason = problem.reason, "skipped a corrupt WAL frame");
            recovered.skipped.push((path.clone(), problem.clone()));
        }
        if let Some(problem) = scan.end_problem {
            let tolerable = newest && config.recovery != RecoveryMode::Strict;
            if !tolerable {
                return Err(WalError::Corrupt {
                    segment: path,
                    offset: problem.offset,
                    reason: problem.reason,
                    mode: config.recovery,
                });
            }
            let written = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            let cut = written.saturating_sub(scan.valid_len);
            tracing::warn!(segment = %path.display(), offset = problem.offset, reason = problem.reason, bytes = cut, "cutting the torn tail of the WAL");
            recovered.cut_tail = Some((path.clone(), problem, cut as u64));
        }
        if let Some(lsn) = scan.last_lsn {
            last = lsn;
        }
        if scan.valid_len < SEGMENT_HEADER_LEN {
            // Only the newest segment gets here (anything else was refused above): its header
            // never made it to disk, so it holds nothing. A fresh segment replaces it.
            storage
                .remove(&path)
                .map_err(|e| WalError::io(format!("cannot remove {}", path.display()), e))?;
            continue;
        }
        kept.push((*first, path, scan.valid_len));
    }
    recovered.last_lsn = (last > 0).then_some(last);
    Ok(Scanned {
        recovered,
        kept,
        recovered_lsns,
        last,
    })
}

/// Reads the reservation, decides the first new LSN (above `last`, `min_next_lsn` and the
/// reservation) and moves the reservation to cover it.
fn reserve_next_lsn(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    reserve_block: u64,
    last: u64,
    min_next_lsn: u64,
) -> Result<(Reservation, u64), WalError> {
    let mut reservation = Reservation::open(storage.clone(), dir, reserve_block)?;
    let next_lsn = (last + 1)
        .max(min_next_lsn)
        .max(reservation.reserved())
        .max(1);
    reservation.cover(next_lsn)?;
    Ok((reservation, next_lsn))
}

/// Reopens the newest kept segment at its valid end, with zeros past it, or, when none is
/// kept, creates a fresh segment starting at `next_lsn` and adds it to `kept`. Either is
/// `segment_bytes` long.
fn open_active(
    storage: &dyn Storage,
    dir: &Path,
    kept: &mut Vec<(u64, PathBuf, usize)>,
    next_lsn: u64,
    segment_bytes: u64,
) -> Result<Active, WalError> {
    // The newest segment takes new frames unless it is missing or unusable.
    let active = match kept.last() {
        Some((_, path, valid_len)) => {
            let file = storage
                .open_at(path, *valid_len as u64, segment_bytes)
                .map_err(|e| WalError::io(format!("cannot reopen {}", path.display()), e))?;
            Active::new(file, *valid_len as u64)
        }
        _ => {
            let (file, path) = create_segment(storage, dir, next_lsn, segment_bytes)?;
            kept.push((next_lsn, path, SEGMENT_HEADER_LEN));
            Active::new(file, SEGMENT_HEADER_LEN as u64)
        }
    };
    Ok(active)
}

/// Creates a segment named for `first_lsn`, `segment_bytes` long, writes its header and makes
/// both durable.
fn create_segment(
    storage: &dyn Storage,
    dir: &Path,
    first_lsn: u64,
    segment_bytes: u64,
) -> Result<(Box<dyn SegmentFile>, PathBuf), WalError> {
    let path = segment_path(dir, first_lsn);
    let io = |what: &str, e| WalError::io(format!("cannot {what} {}", path.display()), e);
    let mut file = storage
        .create(&path, segment_bytes)
        .map_err(|e| io("create", e))?;
    file.write_all_at(&segment_header(), 0)
        .map_err(|e| io("write", e))?;
    file.sync_data().map_err(|e| io("fsync", e))?;
    storage
        .sync_dir(dir)
        .map_err(|e| io("fsync the folder of", e))?;
    Ok((file, path))
}
