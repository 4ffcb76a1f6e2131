//! Insert keys: a resend carrying the key of an insert seen within the window lands once.
//!
//! A producer that got no answer, or a 5xx, cannot know whether its insert landed. With a key
//! (the native API's `Idempotency-Key`, ClickHouse's `insert_deduplication_token`) it resends
//! the same rows under the same key, and sluice answers the resend from the first insert:
//!
//! - the first was accepted and its rows are as safe as the resend asks: the resend is answered
//!   at once, marked a duplicate, and nothing is stored again;
//! - the first is in flight, or its rows are less safe than the resend asks (buffered in
//!   memory, and the resend asks for `durable`): the resend waits, then looks again;
//! - the first was refused, by the door or for good by the store: the resend is a new insert;
//! - the same key with other rows (their hash differs): refused, as a client's mistake.
//!
//! Each table keeps the keys of the last `window`, at most `max_keys` of them, the oldest
//! forgotten first. Their memory counts in the table's share of `max_buffer_bytes`.
//!
//! Keys outlive the process. A logged insert's key is in its log record, so replay recovers it
//! with its rows. When an insert's rows land, the flush writes its key to the table's
//! [`KeyJournal`] before the log may drop the record, so the key of a landed insert is still
//! known after a restart, for the rest of its window.
//!
//! # Layout
//!
//! - `mod.rs`: the keys of one table in memory, and what a keyed insert does.
//! - `journal.rs`: the keys of landed inserts on disk.

mod journal;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque, hash_map};
use std::hash::Hasher;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use std::sync::Arc;

use metrics::Gauge;
use tokio::sync::watch;

use crate::ack::AckMode;
use crate::memory::{MemoryBudget, Reservation};
use crate::stats::names;

pub(crate) use journal::KeyJournal;

/// How long a key is remembered by default.
pub const DEFAULT_KEY_WINDOW: Duration = Duration::from_secs(3600);

/// How many keys a table remembers at most by default.
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// The longest key, in bytes.
pub const MAX_KEY_LEN: usize = 256;

/// Bytes a remembered key takes besides its text: the entry, its place in the map and in the
/// order of arrival. Counted, with the text, in `sluice_insert_keys_bytes`.
pub const KEY_OVERHEAD: usize = 128;

/// How long and how many keys a table remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyWindow {
    /// A key older than this is forgotten.
    pub window: Duration,
    /// Past this many keys the oldest is forgotten.
    pub max_keys: usize,
}

impl Default for KeyWindow {
    fn default() -> Self {
        Self {
            window: DEFAULT_KEY_WINDOW,
            max_keys: DEFAULT_MAX_KEYS,
        }
    }
}

/// Checks a key as a client sent it: 1 to [`MAX_KEY_LEN`] bytes, no control characters.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(format!(
            "an insert key must be 1 to {MAX_KEY_LEN} bytes, not {}",
            key.len()
        ));
    }
    if key.chars().any(char::is_control) {
        return Err("an insert key must not hold control characters".to_owned());
    }
    Ok(())
}

/// A hash of a batch's rows: its columns' values and nulls, not how the body spelled them, so a
/// resend compressed or formatted otherwise is still the same rows. XXH3 with a fixed seed, so
/// the hash a log record or a journal entry keeps means the same after a restart or an upgrade.
pub(crate) fn rows_hash(batch: &arrow::array::RecordBatch) -> u64 {
    let mut hasher = twox_hash::XxHash3_64::with_seed(0);
    hasher.write_u64(batch.num_rows() as u64);
    for column in batch.columns() {
        hash_array(column.as_ref(), &mut hasher);
    }
    hasher.finish()
}

/// Hashes an array's length, offset, nulls and buffers. Primitive and string arrays, what most
/// columns are, are read in place; others through their `ArrayData`, which a 1-row insert
/// would otherwise build for every column.
fn hash_array(array: &dyn arrow::array::Array, hasher: &mut impl Hasher) {
    use arrow::array::AsArray;
    use arrow::datatypes::DataType;
    hasher.write_u64(array.len() as u64);
    hasher.write_u64(array.offset() as u64);
    if let Some(nulls) = array.nulls() {
        hash_bytes(nulls.buffer().as_slice(), hasher);
    }
    arrow::array::downcast_primitive_array!(
        array => hash_bytes(array.values().inner().as_slice(), hasher),
        DataType::Utf8 => {
            let strings = array.as_string::<i32>();
            hash_bytes(strings.offsets().inner().inner().as_slice(), hasher);
            hash_bytes(strings.values().as_slice(), hasher);
        }
        _ => hash_data(&array.to_data(), hasher)
    )
}

fn hash_data(data: &arrow::array::ArrayData, hasher: &mut impl Hasher) {
    hasher.write_u64(data.len() as u64);
    hasher.write_u64(data.offset() as u64);
    if let Some(nulls) = data.nulls() {
        hash_bytes(nulls.buffer().as_slice(), hasher);
    }
    for buffer in data.buffers() {
        hash_bytes(buffer.as_slice(), hasher);
    }
    for child in data.child_data() {
        hash_data(child, hasher);
    }
}

fn hash_bytes(bytes: &[u8], hasher: &mut impl Hasher) {
    hasher.write_u64(bytes.len() as u64);
    hasher.write(bytes);
}

/// How safe an accepted insert's rows are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// In memory only (`async`): lost with the process until they land.
    Buffered,
    /// In the write-ahead log: they land, after a restart if need be.
    Durable,
    /// In the store.
    Committed {
        /// The flush that landed the insert's last rows, `table/partition/first-last` with the
        /// flush's lowest and highest LSN, when this process saw it land.
        flush: Option<Arc<str>>,
    },
}

impl Held {
    /// What an insert answered under `ack` holds.
    pub fn of(ack: AckMode) -> Self {
        match ack {
            AckMode::Async => Self::Buffered,
            AckMode::Durable => Self::Durable,
            AckMode::Committed => Self::Committed { flush: None },
        }
    }

    /// Whether rows held so may answer an insert that asks for `ack`.
    pub fn satisfies(&self, ack: AckMode) -> bool {
        match self {
            Self::Buffered => ack == AckMode::Async,
            Self::Durable => ack != AckMode::Committed,
            Self::Committed { .. } => true,
        }
    }
}

/// What became of a keyed insert, as far as sluice knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyStatus {
    /// No insert with this key within the window.
    Unknown,
    /// Received, not yet answered.
    InFlight,
    /// Answered, its rows held as `held` says.
    Accepted {
        /// Rows accepted.
        rows: u64,
        /// How safe they are now.
        held: Held,
    },
    /// Refused, with the reason; a resend is a new insert.
    Refused(String),
}

/// What an insert with a key does.
#[derive(Debug)]
pub(crate) enum Begin {
    /// It is the first with its key (or the one before was refused): go ahead, then settle.
    /// The key, as the table holds it.
    New(Arc<str>),
    /// An insert with its key and its rows was accepted and is as safe as this one asks:
    /// answer this one from it.
    Duplicate { rows: u64 },
    /// One with its key is in flight, or not yet as safe as this one asks: wait for a change,
    /// then begin again.
    Wait(watch::Receiver<u64>),
    /// The key was used for other rows.
    Conflict,
}

enum State {
    /// Received, not yet answered. `landed`: how its rows are held when they landed before it
    /// was answered (a `committed` insert is answered after its flush).
    InFlight {
        landed: Option<Held>,
    },
    Accepted {
        rows: u64,
        held: Held,
    },
    Refused(String),
}

impl State {
    /// The insert's last rows landed, in `flush` when it is known.
    fn landed(&mut self, flush: Option<&Arc<str>>) {
        let committed = Held::Committed {
            flush: flush.cloned(),
        };
        match self {
            State::InFlight { landed } => *landed = Some(committed),
            State::Accepted { held, .. } => *held = committed,
            State::Refused(_) => {}
        }
    }
}

/// The keys' bytes are held in the memory budget rounded up to this.
const RESERVATION_STEP: u64 = 64 * 1024;

/// Keys a landed flush marks per hold of the table's lock.
const LANDED_PER_LOCK: usize = 256;

struct Entry {
    rows_hash: u64,
    state: State,
    /// Whether the key is in the order of arrival. One in flight when its turn to be forgotten
    /// came is kept out of it until it settles, then queued again.
    queued: bool,
}

/// A keyed insert on its way to the store: told as each of its partition pieces lands, so the
/// key can say `committed` once the last one has.
pub(crate) struct KeyedInsert {
    pub(crate) key: Arc<str>,
    pub(crate) rows_hash: u64,
    /// The insert's rows, all partitions.
    pub(crate) rows: u64,
    pieces: AtomicUsize,
    /// Whether it reached its table's writer (and, with a log, was logged).
    handed_over: AtomicBool,
}

impl KeyedInsert {
    /// A keyed insert of `rows` split in `pieces` partition pieces.
    pub(crate) fn new(key: Arc<str>, rows_hash: u64, rows: u64, pieces: usize) -> Arc<Self> {
        Arc::new(Self {
            key,
            rows_hash,
            rows,
            pieces: AtomicUsize::new(pieces),
            handed_over: AtomicBool::new(false),
        })
    }

    /// Its rows are split in `pieces` partition pieces, handed over next.
    pub(crate) fn split_in(&self, pieces: usize) {
        self.pieces.store(pieces, Ordering::Release);
    }

    /// It reached its table's writer: its rows land, unless the log fails to write them.
    pub(crate) fn handed_over(&self) {
        self.handed_over.store(true, Ordering::Release);
    }

    /// One piece landed; `true` when it was the last.
    pub(crate) fn piece_landed(&self) -> bool {
        self.pieces.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

/// Settles the key of an insert [`KeyTable::begin`] let through, however its submit ends.
/// Dropped unsettled (the client went away mid-insert), it settles what is known: refused when
/// the insert never reached its writer, else accepted as buffered; a landing, or a log that
/// fails to write it, moves that on. So no key is left in flight, with its resends waiting.
pub(crate) struct Settling<'a> {
    keys: &'a KeyTable,
    insert: Arc<KeyedInsert>,
    settled: bool,
}

impl<'a> Settling<'a> {
    pub(crate) fn new(keys: &'a KeyTable, insert: Arc<KeyedInsert>) -> Self {
        Self {
            keys,
            insert,
            settled: false,
        }
    }

    /// The insert whose key this settles.
    pub(crate) fn insert(&self) -> &Arc<KeyedInsert> {
        &self.insert
    }

    /// Settles the key with the insert's outcome.
    pub(crate) fn settle(mut self, outcome: Result<(u64, Held), String>) {
        self.settled = true;
        let now = crate::clock::now();
        self.keys.settle(&self.insert.key, outcome, now);
    }
}

impl Drop for Settling<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let outcome = if self.insert.handed_over.load(Ordering::Acquire) {
            Ok((self.insert.rows, Held::Buffered))
        } else {
            Err("the client went away before the insert was taken".to_owned())
        };
        self.keys
            .settle(&self.insert.key, outcome, crate::clock::now());
    }
}

/// One table's keys.
pub(crate) struct KeyTable {
    window: KeyWindow,
    journal: Option<KeyJournal>,
    inner: Mutex<Keys>,
    /// Bumped, under the lock, whenever a key settles, lands or is refused by the store:
    /// whoever waits on a key looks again.
    changed: watch::Sender<u64>,
}

struct Keys {
    entries: HashMap<Arc<str>, Entry>,
    /// Keys in the order they came, with when: the oldest is forgotten first.
    arrivals: VecDeque<(Instant, Arc<str>)>,
    bytes: usize,
    /// The keys' bytes, held in the table's memory budget.
    reservation: Reservation,
    /// `sluice_insert_keys` and `sluice_insert_keys_bytes` of the table.
    held_gauge: Gauge,
    bytes_gauge: Gauge,
}

impl KeyTable {
    /// The keys of `table`, their memory counted in `budget`, with the keys of landed inserts
    /// kept in `journal` (a folder of the table's own), read back first.
    pub(crate) fn new(
        table: &str,
        window: KeyWindow,
        budget: &Arc<MemoryBudget>,
        journal: Option<PathBuf>,
    ) -> Self {
        let name = table.to_owned();
        let keys = Self {
            window,
            journal: None,
            inner: Mutex::new(Keys {
                entries: HashMap::new(),
                arrivals: VecDeque::new(),
                bytes: 0,
                reservation: Reservation::empty(budget),
                held_gauge: metrics::gauge!(names::KEYS_HELD, "table" => name.clone()),
                bytes_gauge: metrics::gauge!(names::KEYS_BYTES, "table" => name),
            }),
            changed: watch::Sender::new(0),
        };
        match journal {
            Some(dir) => keys.with_journal(table, dir),
            None => keys,
        }
    }

    /// Opens the journal in `dir` and takes in the keys it holds. A journal that cannot be
    /// opened is logged and left out: keys then live in memory and in the log only.
    fn with_journal(mut self, table: &str, dir: PathBuf) -> Self {
        match KeyJournal::open(dir, self.window.window, SystemTime::now()) {
            Ok((journal, landed)) => {
                let now = crate::clock::now();
                let wall = SystemTime::now();
                for landing in landed {
                    let age = wall.duration_since(landing.at).unwrap_or_default();
                    let arrived = now.checked_sub(age).unwrap_or(now);
                    let held = Held::Committed {
                        flush: landing.flush,
                    };
                    self.recovered(&landing.key, landing.rows_hash, landing.rows, held, arrived);
                }
                self.journal = Some(journal);
            }
            Err(e) => {
                tracing::error!(table, error = %e, "cannot open the insert-key journal: keys of landed inserts are forgotten at restart");
            }
        }
        self
    }

    /// How long a key is remembered.
    pub(crate) fn window(&self) -> Duration {
        self.window.window
    }

    /// The journal the flushes write landed keys to, when there is one.
    pub(crate) fn journal(&self) -> Option<&KeyJournal> {
        self.journal.as_ref()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Keys> {
        match self.inner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Tells whoever waits on a key to look again. Called under the lock, so a waiter that
    /// subscribed after looking cannot miss it.
    fn bump(&self) {
        if self.changed.receiver_count() > 0 {
            self.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Starts an insert with `key` whose rows hash to `rows_hash`, answered under `ack`, at
    /// `now`.
    pub(crate) fn begin(&self, key: &str, rows_hash: u64, ack: AckMode, now: Instant) -> Begin {
        let mut keys = self.lock();
        keys.forget_before(now, self.window);
        if let Some(entry) = keys.entries.get(key) {
            let refused = matches!(entry.state, State::Refused(_));
            if !refused && entry.rows_hash != rows_hash {
                return Begin::Conflict;
            }
            match &entry.state {
                State::InFlight { .. } => return Begin::Wait(self.changed.subscribe()),
                State::Accepted { rows, held } if held.satisfies(ack) => {
                    return Begin::Duplicate { rows: *rows };
                }
                State::Accepted { .. } => return Begin::Wait(self.changed.subscribe()),
                State::Refused(_) => {}
            }
        }
        let entry = Entry {
            rows_hash,
            state: State::InFlight { landed: None },
            queued: true,
        };
        Begin::New(keys.add(key, entry, now, self.window.max_keys))
    }

    /// Settles the insert with `key` that [`KeyTable::begin`] let through, at `now`: accepted
    /// with `rows` held as `held`, or refused for `reason`. Whoever waits on it looks again.
    pub(crate) fn settle(&self, key: &str, outcome: Result<(u64, Held), String>, now: Instant) {
        let mut keys = self.lock();
        let Some(entry) = keys.entries.get_mut(key) else {
            return;
        };
        let landed = match &mut entry.state {
            State::InFlight { landed } => landed.take(),
            _ => None,
        };
        entry.state = match outcome {
            Ok((rows, held)) => State::Accepted {
                rows,
                held: landed.unwrap_or(held),
            },
            Err(reason) => State::Refused(reason),
        };
        if !entry.queued {
            entry.queued = true;
            let key = keys.entries.get_key_value(key).map(|(k, _)| k.clone());
            keys.arrivals.extend(key.map(|key| (now, key)));
        }
        self.bump();
    }

    /// Notes that an insert with `key` was refused before its rows were read (they did not
    /// decode), unless an insert with the key is in flight or was accepted: a bad resend
    /// changes nothing of its first.
    pub(crate) fn refused_unread(&self, key: &str, reason: String, now: Instant) {
        let mut keys = self.lock();
        match keys.entries.get_mut(key) {
            Some(entry) if matches!(entry.state, State::Refused(_)) => {
                entry.state = State::Refused(reason);
            }
            Some(_) => {}
            None => {
                let entry = Entry {
                    rows_hash: 0,
                    state: State::Refused(reason),
                    queued: true,
                };
                keys.add(key, entry, now, self.window.max_keys);
            }
        }
    }

    /// Takes in a key found at start, in the journal or in a log record being replayed, its
    /// rows held as `held`, as of `arrived`. A key already known keeps what it has.
    pub(crate) fn recovered(
        &self,
        key: &str,
        rows_hash: u64,
        rows: u64,
        held: Held,
        arrived: Instant,
    ) {
        let mut keys = self.lock();
        if keys.entries.contains_key(key) {
            return;
        }
        let entry = Entry {
            rows_hash,
            state: State::Accepted { rows, held },
            queued: true,
        };
        keys.add(key, entry, arrived, self.window.max_keys);
    }

    /// The last rows of the inserts with `landed_keys` landed, in `flush` when it is known.
    /// Taken a few hundred at a time, so a large flush does not hold up the inserts waiting for
    /// the lock.
    pub(crate) fn landed<'k>(
        &self,
        landed_keys: impl IntoIterator<Item = &'k str>,
        flush: Option<&Arc<str>>,
    ) {
        let mut landed_keys = landed_keys.into_iter().peekable();
        while landed_keys.peek().is_some() {
            let mut keys = self.lock();
            for key in landed_keys.by_ref().take(LANDED_PER_LOCK) {
                if let Some(entry) = keys.entries.get_mut(key) {
                    entry.state.landed(flush);
                }
            }
            self.bump();
        }
    }

    /// The store refused the rows of the accepted insert with `key` for good, for `reason`:
    /// a resend is a new insert.
    pub(crate) fn store_refused(&self, key: &str, reason: &str) {
        let mut keys = self.lock();
        if let Some(entry) = keys.entries.get_mut(key)
            && matches!(entry.state, State::Accepted { .. })
        {
            entry.state = State::Refused(reason.to_owned());
            self.bump();
        }
    }

    /// What became of the insert with `key`.
    pub(crate) fn status(&self, key: &str, now: Instant) -> KeyStatus {
        let mut keys = self.lock();
        keys.forget_before(now, self.window);
        match keys.entries.get(key).map(|entry| &entry.state) {
            None => KeyStatus::Unknown,
            Some(State::InFlight { .. }) => KeyStatus::InFlight,
            Some(State::Accepted { rows, held }) => KeyStatus::Accepted {
                rows: *rows,
                held: held.clone(),
            },
            Some(State::Refused(reason)) => KeyStatus::Refused(reason.clone()),
        }
    }

    /// Keys held, and the bytes they take.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        let keys = self.lock();
        (keys.entries.len(), keys.bytes)
    }
}

impl Keys {
    /// Puts `entry` under `key`, new or replacing a refused one, and forgets the oldest keys
    /// past `max_keys`.
    /// Returns the key as the table holds it.
    fn add(&mut self, key: &str, entry: Entry, now: Instant, max_keys: usize) -> Arc<str> {
        let key: Arc<str> = Arc::from(key);
        if self.entries.insert(key.clone(), entry).is_none() {
            self.bytes += key.len() + KEY_OVERHEAD;
            self.arrivals.push_back((now, key.clone()));
            while self.arrivals.len() > max_keys {
                self.forget_oldest();
            }
        }
        self.count();
        key
    }

    /// Holds the keys' bytes in the memory budget (already allocated, so never refused), and
    /// shows the keys and their bytes in the table's gauges.
    fn count(&mut self) {
        // Held in steps, so that most keys move no shared counter of the budget.
        let held = (self.bytes as u64).div_ceil(RESERVATION_STEP) * RESERVATION_STEP;
        if held != self.reservation.bytes() {
            self.reservation.resize(held);
        }
        self.held_gauge.set(self.entries.len() as f64);
        self.bytes_gauge.set(self.bytes as f64);
    }

    /// Forgets keys older than the window, except one still in flight, which is kept until
    /// it settles so that its resends wait for it.
    fn forget_before(&mut self, now: Instant, window: KeyWindow) {
        let held = self.entries.len();
        while let Some((at, _)) = self.arrivals.front() {
            if now.saturating_duration_since(*at) <= window.window {
                break;
            }
            self.forget_oldest();
        }
        if self.entries.len() != held {
            self.count();
        }
    }

    fn forget_oldest(&mut self) {
        let Some((_, key)) = self.arrivals.pop_front() else {
            return;
        };
        let len = key.len();
        if let hash_map::Entry::Occupied(mut held) = self.entries.entry(key) {
            if matches!(held.get().state, State::InFlight { .. }) {
                held.get_mut().queued = false;
                return;
            }
            held.remove();
        }
        self.bytes -= len + KEY_OVERHEAD;
    }
}
