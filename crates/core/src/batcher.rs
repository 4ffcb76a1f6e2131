//! The batcher: what accumulates for one (table, partition), when it is full, how old it may get.
//!
//! It is a plain state machine. Time is passed in, so tests control it; no clock, no I/O.
//!
//! - **Accumulate**: each insert's rows arrive as a small Arrow batch with a token (whatever the
//!   caller needs to acknowledge the insert later) and a sequence number. Small batches are
//!   coalesced every [`COALESCE_PIECES`] inserts, so a million one-row inserts do not keep a
//!   million tiny Arrow allocations alive.
//! - **Full**: after each push the policy is checked; the first insert always fits, so an insert
//!   larger than the limits makes a batch of its own.
//! - **Old**: the age timer arms when the first row arrives; [`Batcher::deadline`] says when it
//!   fires, given the age limit the caller computed from the policy and the table's rate.
//!
//! [`Batcher::take`] coalesces the last small pieces too, seals the batch and leaves the batcher
//! empty: a sealed batch that waits (the store is down) holds few allocations however small its
//! inserts were. Its chunks go to the store as they are.

use std::time::{Duration, Instant};

use arrow::array::RecordBatch;

use crate::policy::{FlushPolicy, FlushReason};

/// Small batches kept apart before they are coalesced into one.
pub const COALESCE_PIECES: usize = 256;

/// Accumulates one partition's rows until the policy says flush.
#[derive(Debug)]
pub struct Batcher<T> {
    policy: FlushPolicy,
    chunks: Vec<RecordBatch>,
    pieces: Vec<RecordBatch>,
    pieces_bytes: u64,
    rows: u64,
    bytes: u64,
    inserts: u64,
    opened_at: Option<Instant>,
    seqs: Option<(u64, u64)>,
    tokens: Vec<T>,
}

/// A batch that is full (or old) and ready to be written.
#[derive(Debug)]
pub struct Sealed<T> {
    /// The rows, in arrival order, in one or more Arrow batches.
    pub chunks: Vec<RecordBatch>,
    /// Rows in all chunks.
    pub rows: u64,
    /// Arrow memory of all chunks, in bytes.
    pub bytes: u64,
    /// Inserts that contributed rows.
    pub inserts: u64,
    /// When the first row arrived.
    pub opened_at: Instant,
    /// Lowest sequence number of the inserts in it.
    pub first_seq: u64,
    /// Highest sequence number of the inserts in it.
    pub last_seq: u64,
    /// One token per insert, in arrival order.
    pub tokens: Vec<T>,
    /// Why it was sealed.
    pub reason: FlushReason,
}

impl<T> Batcher<T> {
    /// An empty batcher.
    pub fn new(policy: FlushPolicy) -> Self {
        Self {
            policy,
            chunks: Vec::new(),
            pieces: Vec::new(),
            pieces_bytes: 0,
            rows: 0,
            bytes: 0,
            inserts: 0,
            opened_at: None,
            seqs: None,
            tokens: Vec::new(),
        }
    }

    /// Adds one insert's rows. Returns the limit the batch reached, if it is now full.
    ///
    /// The batch's memory can shrink during a push (coalescing); callers that account for
    /// memory read [`Batcher::bytes`] before and after.
    pub fn push(
        &mut self,
        batch: RecordBatch,
        seq: u64,
        token: T,
        now: Instant,
    ) -> Option<FlushReason> {
        let size = batch.get_array_memory_size() as u64;
        self.push_sized(batch, size, (seq, 1), token, now)
    }

    /// [`Batcher::push`] of rows that take `size` bytes of Arrow memory, for a batch that is a
    /// slice of larger arrays (whose size it reports whole), and that hold the rows of `inserts`
    /// inserts taken in together under one sequence number.
    pub fn push_sized(
        &mut self,
        batch: RecordBatch,
        size: u64,
        (seq, inserts): (u64, u64),
        token: T,
        now: Instant,
    ) -> Option<FlushReason> {
        if self.opened_at.is_none() {
            self.opened_at = Some(now);
        }
        self.rows += batch.num_rows() as u64;
        self.bytes += size;
        self.inserts += inserts;
        self.pieces_bytes += size;
        self.pieces.push(batch);
        self.tokens.push(token);
        self.seqs = Some(match self.seqs {
            None => (seq, seq),
            Some((lo, hi)) => (lo.min(seq), hi.max(seq)),
        });
        if self.pieces.len() >= COALESCE_PIECES {
            self.coalesce();
        }
        self.policy.full(self.rows, self.bytes, self.inserts)
    }

    /// Whether the batch has reached `age_limit` at `now`.
    pub fn due(&self, now: Instant, age_limit: Duration) -> Option<FlushReason> {
        match self.deadline(age_limit) {
            Some(deadline) if now >= deadline => Some(FlushReason::Age),
            _ => None,
        }
    }

    /// When the batch reaches `age_limit`, if it holds anything. The limit is the policy's
    /// [`FlushPolicy::age_limit`] at the table's current rate, which the batcher does not see.
    pub fn deadline(&self, age_limit: Duration) -> Option<Instant> {
        self.opened_at.map(|t| t + age_limit)
    }

    /// Seals what is buffered and leaves the batcher empty. `None` when there is nothing.
    /// [`Batcher::bytes`] just before tells what was buffered; the sealed batch's `bytes` may be
    /// less (its last pieces coalesced).
    pub fn take(&mut self, reason: FlushReason) -> Option<Sealed<T>> {
        let opened_at = self.opened_at.take()?;
        if self.pieces.len() > 1 {
            self.coalesce();
        }
        let (first_seq, last_seq) = self.seqs.take().unwrap_or_default();
        let mut chunks = std::mem::take(&mut self.chunks);
        chunks.append(&mut self.pieces);
        let sealed = Sealed {
            chunks,
            rows: self.rows,
            bytes: self.bytes,
            inserts: self.inserts,
            opened_at,
            first_seq,
            last_seq,
            tokens: std::mem::take(&mut self.tokens),
            reason,
        };
        self.rows = 0;
        self.bytes = 0;
        self.inserts = 0;
        self.pieces_bytes = 0;
        Some(sealed)
    }

    /// Rows buffered.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Arrow memory buffered, in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Inserts buffered.
    pub fn inserts(&self) -> u64 {
        self.inserts
    }

    /// Whether nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.opened_at.is_none()
    }

    /// The policy this batcher flushes by.
    pub fn policy(&self) -> &FlushPolicy {
        &self.policy
    }

    /// Concatenates the small pieces into one chunk. If concatenation fails (it cannot for
    /// batches of one schema) the pieces are kept as they are.
    fn coalesce(&mut self) {
        let Some(first) = self.pieces.first() else {
            return;
        };
        let schema = first.schema();
        if let Ok(chunk) = arrow::compute::concat_batches(&schema, &self.pieces) {
            let size = chunk.get_array_memory_size() as u64;
            self.bytes = self.bytes - self.pieces_bytes + size;
            self.pieces.clear();
            self.pieces_bytes = 0;
            self.chunks.push(chunk);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    use super::*;
    use crate::policy::{ByteSize, FlushPolicyConfig};

    fn rows(ids: &[i64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(ids.to_vec()))]).unwrap()
    }

    fn policy(config: FlushPolicyConfig) -> FlushPolicy {
        config.validate().unwrap()
    }

    #[test]
    fn flushes_on_rows() {
        let mut b = Batcher::new(policy(FlushPolicyConfig {
            max_rows: Some(5),
            ..Default::default()
        }));
        let t0 = Instant::now();
        assert_eq!(b.push(rows(&[1, 2]), 1, (), t0), None);
        assert_eq!(b.push(rows(&[3, 4]), 2, (), t0), None);
        assert_eq!(b.push(rows(&[5]), 3, (), t0), Some(FlushReason::Rows));
        let sealed = b.take(FlushReason::Rows).unwrap();
        assert_eq!((sealed.rows, sealed.inserts), (5, 3));
        assert_eq!((sealed.first_seq, sealed.last_seq), (1, 3));
        assert!(b.is_empty());
        assert_eq!((b.rows(), b.bytes(), b.inserts()), (0, 0, 0));
    }

    #[test]
    fn flushes_on_inserts() {
        let mut b = Batcher::new(policy(FlushPolicyConfig {
            max_inserts: Some(3),
            ..Default::default()
        }));
        let t0 = Instant::now();
        assert_eq!(b.push(rows(&[1]), 1, (), t0), None);
        assert_eq!(b.push(rows(&[2]), 2, (), t0), None);
        assert_eq!(b.push(rows(&[3]), 3, (), t0), Some(FlushReason::Inserts));
    }

    #[test]
    fn flushes_on_bytes() {
        let one = rows(&[1]).get_array_memory_size() as u64;
        let mut b = Batcher::new(policy(FlushPolicyConfig {
            max_bytes: Some(ByteSize(one * 3)),
            ..Default::default()
        }));
        let t0 = Instant::now();
        assert_eq!(b.push(rows(&[1]), 1, (), t0), None);
        assert_eq!(b.push(rows(&[2]), 2, (), t0), None);
        assert_eq!(b.push(rows(&[3]), 3, (), t0), Some(FlushReason::Bytes));
    }

    #[test]
    fn age_timer_arms_on_first_row() {
        let mut b = Batcher::new(policy(FlushPolicyConfig {
            max_age: Some(Duration::from_millis(200)),
            ..Default::default()
        }));
        let t0 = Instant::now();
        let age = b.policy().max_age();
        assert_eq!(b.deadline(age), None);
        assert_eq!(b.due(t0 + Duration::from_secs(10), age), None);
        b.push(rows(&[1]), 1, (), t0 + Duration::from_millis(50));
        // A later row does not move the deadline.
        b.push(rows(&[2]), 2, (), t0 + Duration::from_millis(200));
        assert_eq!(b.deadline(age), Some(t0 + Duration::from_millis(250)));
        assert_eq!(b.due(t0 + Duration::from_millis(249), age), None);
        assert_eq!(
            b.due(t0 + Duration::from_millis(250), age),
            Some(FlushReason::Age)
        );
        // A shorter limit (a light load with `min_age`) makes the batch due sooner.
        let short = Duration::from_millis(100);
        assert_eq!(
            b.due(t0 + Duration::from_millis(150), short),
            Some(FlushReason::Age)
        );
        let sealed = b.take(FlushReason::Age).unwrap();
        assert_eq!(sealed.opened_at, t0 + Duration::from_millis(50));
        assert_eq!(b.deadline(age), None);
    }

    #[test]
    fn first_insert_always_fits() {
        let mut b = Batcher::new(policy(FlushPolicyConfig {
            max_rows: Some(2),
            ..Default::default()
        }));
        let reason = b.push(rows(&[1, 2, 3, 4, 5]), 7, "a", Instant::now());
        assert_eq!(reason, Some(FlushReason::Rows));
        let sealed = b.take(FlushReason::Rows).unwrap();
        assert_eq!(sealed.rows, 5);
        assert_eq!(sealed.tokens, ["a"]);
    }

    #[test]
    fn coalescing_shrinks_memory_and_keeps_order() {
        let mut b = Batcher::new(FlushPolicy::default());
        let t0 = Instant::now();
        let n = COALESCE_PIECES as i64 * 3 + 7;
        let mut before = 0;
        for i in 0..n {
            before += rows(&[i]).get_array_memory_size() as u64;
            b.push(rows(&[i]), i as u64, i, t0);
        }
        assert!(b.bytes() < before / 4, "{} vs {before}", b.bytes());
        let buffered = b.bytes();
        let sealed = b.take(FlushReason::Shutdown).unwrap();
        // Three coalesced chunks, and the last seven pieces coalesced when sealing.
        assert_eq!(sealed.chunks.len(), 3 + 1);
        assert!(sealed.bytes < buffered, "{} vs {buffered}", sealed.bytes);
        assert_eq!(sealed.tokens.len(), n as usize);
        let all =
            arrow::compute::concat_batches(&sealed.chunks[0].schema(), &sealed.chunks).unwrap();
        let ids = all.column(0).as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(ids, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn empty_batcher_seals_nothing() {
        let mut b: Batcher<()> = Batcher::new(FlushPolicy::default());
        assert!(b.take(FlushReason::Shutdown).is_none());
    }
}
