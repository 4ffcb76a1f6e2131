//! The memory budget: a byte counter shared by every table's buffers, and one per table within
//! it (a table's share), so one hot table cannot take all of it and starve the others.
//!
//! Inserts reserve their decoded size, plus [`INSERT_OVERHEAD`], before they are buffered; the
//! [`Reservation`] travels with the rows and gives the bytes back when dropped, which is when the
//! batch lands, is refused for good, or is given up at shutdown. The HTTP edge uses [`MemoryBudget::try_reserve`] and
//! answers 503 when it fails; the library API waits in [`MemoryBudget::reserve`]. Nothing
//! already accepted is ever dropped to make room. A table's budget is a child of the pipeline's:
//! a reservation must fit both.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// What the budget counts for each buffered insert (each partition piece of one) besides its
/// rows: what sluice keeps to acknowledge it and to release its place in the write-ahead log, and
/// the allocator's share of its small allocations. Without it a flood of one-row inserts held
/// during an outage took nine times the budget (`sluice lab overload --rows-per-insert 1`).
pub const INSERT_OVERHEAD: u64 = 1024;

/// Bytes of buffered Arrow memory, against a limit.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
    freed: Notify,
    /// The budget this one is a share of.
    parent: Option<Arc<MemoryBudget>>,
}

/// Why a reservation did not fit: the budget that was full, as (bytes used, limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// Bytes reserved in the budget that was full.
    pub used: u64,
    /// Its limit.
    pub limit: u64,
    /// Whether it was the table's share (rather than the whole pipeline's budget).
    pub share: bool,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            used: AtomicU64::new(0),
            freed: Notify::new(),
            parent: None,
        }
    }

    /// A share of `parent`: at most `limit` bytes of it.
    pub fn share(parent: Arc<MemoryBudget>, limit: u64) -> Self {
        Self {
            limit,
            used: AtomicU64::new(0),
            freed: Notify::new(),
            parent: Some(parent),
        }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes reserved now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// The budget (this one or the one it is a share of) that is spent, if any: a cheap check
    /// before decoding a body.
    pub fn full(&self) -> Option<Full> {
        if self.used() >= self.limit {
            return Some(self.full_here());
        }
        self.parent.as_ref().and_then(|p| p.full())
    }

    fn full_here(&self) -> Full {
        Full {
            used: self.used(),
            limit: self.limit,
            share: self.parent.is_some(),
        }
    }

    /// Reserves `bytes` if they fit here and in the budget this is a share of. An empty budget
    /// always admits one reservation, however large, so an insert bigger than the whole budget
    /// is not refused forever.
    pub fn try_reserve(self: &Arc<Self>, bytes: u64) -> Result<Reservation, Full> {
        self.try_take(bytes)?;
        Ok(self.held(bytes))
    }

    /// Reserves `bytes`, waiting for releases until they fit.
    pub async fn reserve(self: &Arc<Self>, bytes: u64) -> Reservation {
        loop {
            // Every release reaches the root budget, so that is where to wait.
            let freed = self.root().freed.notified();
            if let Ok(reservation) = self.try_reserve(bytes) {
                return reservation;
            }
            freed.await;
        }
    }

    /// Reserves `bytes` without checking the limit: memory already allocated that must be
    /// counted, such as rows replayed from the log.
    pub fn force(self: &Arc<Self>, bytes: u64) -> Reservation {
        self.add(bytes);
        self.held(bytes)
    }

    fn held(self: &Arc<Self>, bytes: u64) -> Reservation {
        Reservation {
            budget: self.clone(),
            bytes,
        }
    }

    fn try_take(&self, bytes: u64) -> Result<(), Full> {
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            if used > 0 && used.saturating_add(bytes) > self.limit {
                return Err(self.full_here());
            }
            match self.used.compare_exchange_weak(
                used,
                used + bytes,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => used = now,
            }
        }
        if let Some(parent) = &self.parent
            && let Err(full) = parent.try_take(bytes)
        {
            self.give_back(bytes);
            return Err(full);
        }
        Ok(())
    }

    fn root(&self) -> &MemoryBudget {
        match &self.parent {
            Some(parent) => parent.root(),
            None => self,
        }
    }

    fn add(&self, bytes: u64) {
        self.used.fetch_add(bytes, Ordering::AcqRel);
        if let Some(parent) = &self.parent {
            parent.add(bytes);
        }
    }

    /// Returns `bytes` to the budget (and the one it is a share of) and wakes waiters.
    fn release(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.give_back(bytes);
        match &self.parent {
            Some(parent) => parent.release(bytes),
            None => self.freed.notify_waiters(),
        }
    }

    fn give_back(&self, bytes: u64) {
        let before = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(bytes))
            })
            .unwrap_or_default();
        debug_assert!(before >= bytes, "released more than reserved");
    }
}

/// Bytes held in a budget, given back when dropped. It travels with the rows it pays for: from
/// the insert to its partition pieces, into a table's buffer, into the sealed batch, until the
/// batch lands or is given up. No path can forget to release it.
#[derive(Debug)]
#[must_use = "dropping a reservation releases it at once"]
pub struct Reservation {
    budget: Arc<MemoryBudget>,
    bytes: u64,
}

impl Reservation {
    /// An empty reservation in `budget`, to absorb others into.
    pub fn empty(budget: &Arc<MemoryBudget>) -> Self {
        budget.held(0)
    }

    /// The bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Splits off `bytes` (at most all of them) into a reservation of their own.
    pub fn split(&mut self, bytes: u64) -> Reservation {
        let bytes = bytes.min(self.bytes);
        self.bytes -= bytes;
        self.budget.held(bytes)
    }

    /// Takes over what `other` holds. Both must be in the same budget.
    pub fn absorb(&mut self, mut other: Reservation) {
        debug_assert!(
            Arc::ptr_eq(&self.budget, &other.budget),
            "absorbed a reservation of another budget"
        );
        self.bytes += std::mem::take(&mut other.bytes);
    }

    /// Holds `bytes` from now on, for memory that changed size (rows coalesced into fewer
    /// arrays): gives back the difference, or takes it without checking the limit, since the
    /// memory is already allocated.
    pub fn resize(&mut self, bytes: u64) {
        if bytes < self.bytes {
            self.budget.release(self.bytes - bytes);
        } else {
            self.budget.add(bytes - self.bytes);
        }
        self.bytes = bytes;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn refuses_past_the_limit_but_admits_one_into_an_empty_budget() {
        let budget = Arc::new(MemoryBudget::new(100));
        let huge = budget.try_reserve(1000).unwrap();
        assert!(budget.try_reserve(1).is_err());
        drop(huge);
        let _sixty = budget.try_reserve(60).unwrap();
        let _forty = budget.try_reserve(40).unwrap();
        assert!(budget.try_reserve(1).is_err());
        assert!(budget.full().is_some());
    }

    #[test]
    fn a_hot_table_fills_its_share_and_leaves_the_rest_to_others() {
        let all = Arc::new(MemoryBudget::new(100));
        let hot = Arc::new(MemoryBudget::share(all.clone(), 50));
        let quiet = Arc::new(MemoryBudget::share(all.clone(), 50));
        let hot_rows = hot.try_reserve(50).unwrap();
        let refused = hot.try_reserve(1).unwrap_err();
        assert_eq!(
            refused,
            Full {
                used: 50,
                limit: 50,
                share: true
            }
        );
        assert_eq!(
            all.used(),
            50,
            "a refused reservation leaves nothing behind"
        );
        let _quiet_rows = quiet.try_reserve(50).unwrap();
        // Both shares fit, the whole is full: the whole says so.
        let more = Arc::new(MemoryBudget::share(all.clone(), 50));
        assert!(!more.try_reserve(1).unwrap_err().share);
        assert_eq!((more.used(), all.used()), (0, 100));
        drop(hot_rows);
        assert_eq!((hot.used(), all.used()), (0, 50));
        let _replayed = hot.force(10);
        assert_eq!(all.used(), 60);
    }

    #[test]
    fn a_reservation_split_absorbed_and_resized_gives_back_exactly_what_it_holds() {
        let all = Arc::new(MemoryBudget::new(1000));
        let table = Arc::new(MemoryBudget::share(all.clone(), 1000));
        let mut insert = table.try_reserve(300).unwrap();
        let first = insert.split(100);
        let second = insert.split(500);
        assert_eq!(
            (first.bytes(), second.bytes(), insert.bytes()),
            (100, 200, 0)
        );
        let mut buffer = Reservation::empty(&table);
        buffer.absorb(first);
        buffer.absorb(second);
        assert_eq!((buffer.bytes(), table.used(), all.used()), (300, 300, 300));
        buffer.resize(120);
        assert_eq!((table.used(), all.used()), (120, 120));
        buffer.resize(2000);
        assert_eq!(all.used(), 2000, "a resize counts memory already allocated");
        drop(insert);
        assert_eq!(all.used(), 2000);
        drop(buffer);
        assert_eq!((table.used(), all.used()), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn reserve_waits_for_a_release() {
        let budget = Arc::new(MemoryBudget::new(100));
        let mut full = budget.try_reserve(100).unwrap();
        let waiter = {
            let budget = budget.clone();
            tokio::spawn(async move { budget.reserve(50).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        drop(full.split(60));
        let _admitted = waiter.await.unwrap();
        assert_eq!(budget.used(), 90);
    }

    #[tokio::test(start_paused = true)]
    async fn a_share_waits_for_releases_in_the_whole() {
        let all = Arc::new(MemoryBudget::new(100));
        let other = Arc::new(MemoryBudget::share(all.clone(), 100));
        let mut others = other.try_reserve(100).unwrap();
        let table = Arc::new(MemoryBudget::share(all.clone(), 50));
        let waiter = {
            let table = table.clone();
            tokio::spawn(async move { table.reserve(30).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        others.resize(60);
        let _admitted = waiter.await.unwrap();
        assert_eq!((table.used(), all.used()), (30, 90));
    }
}
