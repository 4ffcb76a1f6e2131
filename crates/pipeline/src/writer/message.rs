//! What the pipeline sends a table's writer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use sluice_core::{PartitionKey, Sealed};
use sluice_wal::{Completion, Wal};

use crate::ack::Waiter;
use crate::keys::{KeyTable, KeyedInsert};
use crate::memory::{INSERT_OVERHEAD, Reservation};

/// A message to a table's writer.
pub(crate) enum Command {
    /// Rows to buffer.
    Insert(InsertMsg),
    /// The table's new definition, with columns added (`evolve`): flushes from now on use
    /// it, and rows taken before it get the new columns as null.
    Relayout(Arc<sluice_core::TableDef>),
    /// Stop taking messages, flush everything, exit.
    Close,
}

/// One accepted insert, split by partition, each piece holding its memory.
pub(crate) struct InsertMsg {
    pub(crate) pieces: Vec<Piece>,
    pub(crate) seq: u64,
    pub(crate) arrived: Instant,
    pub(crate) waiter: Option<Arc<Waiter>>,
    /// The fsync of its frame, when it was logged and that fsync may still be running.
    pub(crate) durable: Option<Arc<Completion>>,
    /// Its frame, when it was logged (or replayed): told when every piece has landed.
    pub(crate) frame: Option<Arc<FrameAck>>,
    /// Its key, when it has one: told as each piece lands.
    pub(crate) keyed: Option<Arc<KeyedInsert>>,
    /// Replayed from the log at start, with the pieces the store holds not yet left out (its
    /// store did not answer then; see [`super::Opening`]).
    pub(crate) unfiltered: bool,
}

impl InsertMsg {
    /// Leaves out the pieces the store already holds (`held`: its watermark per partition),
    /// releasing their memory and telling their frame and `keys`. `false` when nothing is left.
    ///
    /// The frame of a keyed insert is not told: its key is in no journal yet, so the record
    /// stays in the log until the next start journals the key and lets it go.
    pub(super) fn keep_unlanded(
        &mut self,
        held: &HashMap<PartitionKey, u64>,
        keys: &KeyTable,
    ) -> bool {
        let seq = self.seq;
        self.pieces.retain(|piece| {
            let landed = held.get(&piece.key).is_some_and(|w| seq <= *w);
            if landed {
                match (&self.keyed, &self.frame) {
                    (Some(keyed), _) => {
                        if keyed.piece_landed() {
                            keys.landed([&*keyed.key], None);
                        }
                    }
                    (None, Some(frame)) => frame.piece_done(),
                    (None, None) => {}
                }
            }
            !landed
        });
        self.unfiltered = false;
        !self.pieces.is_empty()
    }
}

/// A logged insert's frame, landed once every partition piece of it is in the store.
pub(crate) struct FrameAck {
    pub(super) lsn: u64,
    pub(super) pieces: std::sync::atomic::AtomicUsize,
    pub(super) wal: Arc<Wal>,
}

impl FrameAck {
    pub(crate) fn new(wal: Arc<Wal>, lsn: u64, pieces: usize) -> Arc<Self> {
        Arc::new(Self {
            lsn,
            pieces: std::sync::atomic::AtomicUsize::new(pieces),
            wal,
        })
    }

    /// One piece is in the store (or will never be: refused for good, or never logged).
    pub(crate) fn piece_done(&self) {
        if self
            .pieces
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
            == 1
        {
            self.wal.landed(self.lsn);
        }
    }
}

/// An insert's rows, split by partition.
pub(crate) type Split = Vec<(PartitionKey, RecordBatch)>;

/// The rows of one insert that fall in one partition, and the memory they hold.
pub(crate) struct Piece {
    pub(crate) key: PartitionKey,
    pub(crate) batch: RecordBatch,
    /// Its Arrow memory.
    pub(crate) bytes: u64,
    /// Its Arrow memory and [`INSERT_OVERHEAD`] in the table's budget, given back when the piece
    /// is dropped.
    pub(crate) held: Reservation,
    /// The client inserts with rows in it: one, or those of a round taken in together, which
    /// count as that many towards the flush policy's `max_inserts`.
    pub(crate) inserts: u64,
}

/// An insert's rows split by partition, each with its Arrow memory, measured once: what they
/// reserve, and then what each piece holds.
pub(crate) struct Measured(Vec<(PartitionKey, RecordBatch, u64)>);

impl Measured {
    pub(crate) fn new(split: Split) -> Self {
        Self(
            split
                .into_iter()
                .map(|(key, batch)| {
                    let bytes = batch.get_array_memory_size() as u64;
                    (key, batch, bytes)
                })
                .collect(),
        )
    }

    /// One piece whose rows take `bytes` of Arrow memory, for a batch that is a slice of
    /// larger arrays (whose size it reports whole).
    pub(crate) fn sized(split: Split, bytes: u64) -> Self {
        Self(
            split
                .into_iter()
                .map(|(key, batch)| (key, batch, bytes))
                .collect(),
        )
    }

    /// What the rows hold of the memory budget: their Arrow memory and [`INSERT_OVERHEAD`] for
    /// each piece.
    pub(crate) fn charge(&self) -> u64 {
        self.0
            .iter()
            .map(|(_, _, bytes)| bytes + INSERT_OVERHEAD)
            .sum()
    }

    /// The pieces, each holding its share of `whole`, which was reserved for [`Self::charge`].
    pub(crate) fn reserved(self, mut whole: Reservation) -> Vec<Piece> {
        self.0
            .into_iter()
            .map(|(key, batch, bytes)| Piece {
                key,
                batch,
                bytes,
                held: whole.split(bytes + INSERT_OVERHEAD),
                inserts: 1,
            })
            .collect()
    }
}

/// What a sealed batch holds of the memory budget: its Arrow memory and [`INSERT_OVERHEAD`] for
/// each insert piece in it.
pub(super) fn charge(sealed: &Sealed<Token>) -> u64 {
    sealed.bytes + INSERT_OVERHEAD * sealed.tokens.len() as u64
}

/// What each buffered insert carries until its rows land.
pub(crate) struct Token {
    pub(super) waiter: Option<Arc<Waiter>>,
    pub(super) frame: Option<Arc<FrameAck>>,
    pub(super) keyed: Option<Arc<KeyedInsert>>,
    pub(super) arrived: Instant,
    /// Rows of this insert in this partition.
    pub(super) rows: u64,
}
