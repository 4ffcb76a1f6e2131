//! Insert keys: a resend carrying the key of an insert seen within the window lands once.
//!
//! A producer that got no answer, or a 5xx, cannot know whether its insert landed. With a key
//! (the native API's `Idempotency-Key`, ClickHouse's `insert_deduplication_token`) it resends
//! the same rows under the same key, and sluice answers the resend from the first insert:
//!
//! - the first was accepted: the resend is answered as it was, marked a duplicate, and nothing
//!   is stored again;
//! - the first is still in flight: the resend waits for its outcome;
//! - the first was refused: the resend is a new insert;
//! - the same key with other rows (their hash differs): refused, as a client's mistake.
//!
//! Each table keeps the keys of the last `window`, at most `max_keys` of them, the oldest
//! forgotten first. Their memory counts in the table's share of `max_buffer_bytes`. Keys live
//! in memory: a restart forgets them.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use std::sync::Arc;

use metrics::Gauge;
use tokio::sync::watch;

use crate::ack::AckMode;
use crate::memory::{MemoryBudget, Reservation};
use crate::stats::names;

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
/// resend compressed or formatted otherwise is still the same rows.
pub(crate) fn rows_hash(batch: &arrow::array::RecordBatch) -> u64 {
    use std::hash::{Hash, Hasher};
    // Fixed keys: the hash only has to tell a key's rows apart within one process.
    let mut hasher = std::hash::DefaultHasher::new();
    batch.num_rows().hash(&mut hasher);
    for column in batch.columns() {
        let data = column.to_data();
        hash_data(&data, &mut hasher);
    }
    hasher.finish()
}

fn hash_data(data: &arrow::array::ArrayData, hasher: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    data.len().hash(hasher);
    data.offset().hash(hasher);
    if let Some(nulls) = data.nulls() {
        nulls.buffer().as_slice().hash(hasher);
    }
    for buffer in data.buffers() {
        buffer.as_slice().hash(hasher);
    }
    for child in data.child_data() {
        hash_data(child, hasher);
    }
}

/// What became of a keyed insert, as far as sluice knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyStatus {
    /// No insert with this key within the window.
    Unknown,
    /// Received, not yet answered.
    InFlight,
    /// Answered: its rows are held as its ack mode promised (`async`: buffered in memory,
    /// `durable`: in the write-ahead log, `committed`: in the store).
    Accepted {
        /// Rows accepted.
        rows: u64,
        /// How safe they were when answered.
        ack: AckMode,
    },
    /// Refused, with the reason; a resend is a new insert.
    Refused(String),
}

/// What an insert with a key does.
#[derive(Debug)]
pub(crate) enum Begin {
    /// It is the first with its key (or the one before was refused): go ahead, then settle.
    New,
    /// An insert with its key and its rows was accepted: answer this one the same.
    Duplicate { rows: u64, ack: AckMode },
    /// One with its key is in flight: wait for it, then begin again.
    Wait(watch::Receiver<bool>),
    /// The key was used for other rows.
    Conflict,
}

enum State {
    /// In flight: the sender turns true when it settles.
    InFlight(watch::Sender<bool>),
    Accepted {
        rows: u64,
        ack: AckMode,
    },
    Refused(String),
}

struct Entry {
    rows_hash: u64,
    state: State,
    /// Whether the key is in the order of arrival. One in flight when its turn to be forgotten
    /// came is kept out of it until it settles, then queued again.
    queued: bool,
}

/// One table's keys.
pub(crate) struct KeyTable {
    window: KeyWindow,
    inner: Mutex<Keys>,
}

struct Keys {
    entries: HashMap<String, Entry>,
    /// Keys in the order they came, with when: the oldest is forgotten first.
    arrivals: VecDeque<(Instant, String)>,
    bytes: usize,
    /// The keys' bytes, held in the table's memory budget.
    reservation: Reservation,
    /// `sluice_insert_keys` and `sluice_insert_keys_bytes` of the table.
    held_gauge: Gauge,
    bytes_gauge: Gauge,
}

impl KeyTable {
    /// The keys of `table`, their memory counted in `budget`.
    pub(crate) fn new(table: &str, window: KeyWindow, budget: &Arc<MemoryBudget>) -> Self {
        let table = table.to_owned();
        Self {
            window,
            inner: Mutex::new(Keys {
                entries: HashMap::new(),
                arrivals: VecDeque::new(),
                bytes: 0,
                reservation: Reservation::empty(budget),
                held_gauge: metrics::gauge!(names::KEYS_HELD, "table" => table.clone()),
                bytes_gauge: metrics::gauge!(names::KEYS_BYTES, "table" => table),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Keys> {
        match self.inner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Starts an insert with `key` whose rows hash to `rows_hash`, at `now`.
    pub(crate) fn begin(&self, key: &str, rows_hash: u64, now: Instant) -> Begin {
        let mut keys = self.lock();
        keys.forget_before(now, self.window);
        match keys.entries.get(key) {
            Some(entry) if entry.rows_hash != rows_hash => match &entry.state {
                State::Refused(_) => {}
                _ => return Begin::Conflict,
            },
            Some(entry) => match &entry.state {
                State::InFlight(sender) => return Begin::Wait(sender.subscribe()),
                State::Accepted { rows, ack } => {
                    return Begin::Duplicate {
                        rows: *rows,
                        ack: *ack,
                    };
                }
                State::Refused(_) => {}
            },
            None => {}
        }
        let (sender, _) = watch::channel(false);
        let entry = Entry {
            rows_hash,
            state: State::InFlight(sender),
            queued: true,
        };
        keys.add(key, entry, now, self.window.max_keys);
        Begin::New
    }

    /// Settles the insert with `key` that [`KeyTable::begin`] let through, at `now`: accepted
    /// with `rows` at `ack`, or refused for `reason`. Whoever waits on it begins again.
    pub(crate) fn settle(&self, key: &str, outcome: Result<(u64, AckMode), String>, now: Instant) {
        let mut keys = self.lock();
        let Some(entry) = keys.entries.get_mut(key) else {
            return;
        };
        let state = match outcome {
            Ok((rows, ack)) => State::Accepted { rows, ack },
            Err(reason) => State::Refused(reason),
        };
        if let State::InFlight(sender) = std::mem::replace(&mut entry.state, state) {
            let _ = sender.send(true);
        }
        if !entry.queued {
            entry.queued = true;
            keys.arrivals.push_back((now, key.to_owned()));
        }
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

    /// What became of the insert with `key`.
    pub(crate) fn status(&self, key: &str, now: Instant) -> KeyStatus {
        let mut keys = self.lock();
        keys.forget_before(now, self.window);
        match keys.entries.get(key).map(|entry| &entry.state) {
            None => KeyStatus::Unknown,
            Some(State::InFlight(_)) => KeyStatus::InFlight,
            Some(State::Accepted { rows, ack }) => KeyStatus::Accepted {
                rows: *rows,
                ack: *ack,
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
    fn add(&mut self, key: &str, entry: Entry, now: Instant, max_keys: usize) {
        if self.entries.insert(key.to_owned(), entry).is_none() {
            self.bytes += key.len() + KEY_OVERHEAD;
            self.arrivals.push_back((now, key.to_owned()));
            while self.arrivals.len() > max_keys {
                self.forget_oldest();
            }
        }
        self.count();
    }

    /// Holds the keys' bytes in the memory budget (already allocated, so never refused), and
    /// shows the keys and their bytes in the table's gauges.
    fn count(&mut self) {
        self.reservation.resize(self.bytes as u64);
        self.held_gauge.set(self.entries.len() as f64);
        self.bytes_gauge.set(self.bytes as f64);
    }

    /// Forgets keys older than the window, except one still in flight, which is kept until
    /// it settles so that its resends wait for it.
    fn forget_before(&mut self, now: Instant, window: KeyWindow) {
        while let Some((at, _)) = self.arrivals.front() {
            if now.saturating_duration_since(*at) <= window.window {
                break;
            }
            self.forget_oldest();
        }
        self.count();
    }

    fn forget_oldest(&mut self) {
        let Some((_, key)) = self.arrivals.pop_front() else {
            return;
        };
        if let Some(entry) = self.entries.get_mut(&key)
            && matches!(entry.state, State::InFlight(_))
        {
            entry.queued = false;
            return;
        }
        self.entries.remove(&key);
        self.bytes -= key.len() + KEY_OVERHEAD;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(max_keys: usize) -> KeyTable {
        let window = KeyWindow {
            window: Duration::from_secs(60),
            max_keys,
        };
        KeyTable::new("t", window, &Arc::new(MemoryBudget::new(1 << 30)))
    }

    #[test]
    fn an_accepted_key_answers_its_resend_as_a_duplicate() {
        let keys = table(10);
        let now = Instant::now();
        assert!(matches!(keys.begin("k", 1, now), Begin::New));
        keys.settle("k", Ok((3, AckMode::Durable)), now);
        assert!(matches!(
            keys.begin("k", 1, now),
            Begin::Duplicate {
                rows: 3,
                ack: AckMode::Durable
            }
        ));
        assert_eq!(
            keys.status("k", now),
            KeyStatus::Accepted {
                rows: 3,
                ack: AckMode::Durable
            }
        );
        assert!(matches!(keys.begin("k", 2, now), Begin::Conflict));
    }

    #[test]
    fn a_resend_waits_for_the_first_then_follows_its_outcome() {
        let keys = table(10);
        let now = Instant::now();
        assert!(matches!(keys.begin("k", 1, now), Begin::New));
        let Begin::Wait(settled) = keys.begin("k", 1, now) else {
            panic!("the first is in flight");
        };
        assert_eq!(keys.status("k", now), KeyStatus::InFlight);
        keys.settle("k", Err("overloaded".to_owned()), now);
        assert!(*settled.borrow(), "the waiter sees it settled");
        assert_eq!(
            keys.status("k", now),
            KeyStatus::Refused("overloaded".to_owned())
        );
        assert!(
            matches!(keys.begin("k", 2, now), Begin::New),
            "a refused key is free, even for other rows"
        );
    }

    #[test]
    fn keys_are_forgotten_past_the_window_or_the_count_but_not_in_flight() {
        let keys = table(2);
        let start = Instant::now();
        for key in ["a", "b", "c"] {
            assert!(matches!(keys.begin(key, 1, start), Begin::New));
            keys.settle(key, Ok((1, AckMode::Async)), start);
        }
        assert_eq!(keys.status("a", start), KeyStatus::Unknown);
        assert_eq!(keys.held(), (2, 2 * (1 + KEY_OVERHEAD)));
        assert_eq!(
            keys.lock().reservation.bytes(),
            2 * (1 + KEY_OVERHEAD) as u64
        );
        assert!(matches!(keys.begin("d", 1, start), Begin::New));
        let later = start + Duration::from_secs(61);
        assert_eq!(keys.status("c", later), KeyStatus::Unknown);
        assert_eq!(keys.status("d", later), KeyStatus::InFlight);
        keys.settle("d", Ok((1, AckMode::Async)), later);
        assert_eq!(keys.held().0, 1, "d is kept until it settles");
        let much_later = later + Duration::from_secs(61);
        assert_eq!(keys.status("d", much_later), KeyStatus::Unknown);
        assert_eq!(keys.held(), (0, 0), "then it ages out from when it settled");
        assert_eq!(
            keys.lock().reservation.bytes(),
            0,
            "and gives its memory back"
        );
        assert!(check_key("").is_err());
        assert!(check_key(&"x".repeat(257)).is_err());
        assert!(check_key("a\nb").is_err());
        assert!(check_key("batch-2026-12-06/17").is_ok());
    }
}
