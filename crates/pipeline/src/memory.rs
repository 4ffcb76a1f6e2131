//! The memory budget: a byte counter shared by every table's buffers, and one per table within
//! it (a table's share), so one hot table cannot take all of it and starve the others.
//!
//! Inserts reserve their decoded size, plus [`INSERT_OVERHEAD`], before they are buffered and
//! writers release it when the batch lands. The HTTP edge uses [`MemoryBudget::try_reserve`] and
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
    pub fn try_reserve(&self, bytes: u64) -> Result<(), Full> {
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
            && let Err(full) = parent.try_reserve(bytes)
        {
            self.give_back(bytes);
            return Err(full);
        }
        Ok(())
    }

    /// Reserves `bytes`, waiting for releases until they fit.
    pub async fn reserve(&self, bytes: u64) {
        loop {
            // Every release reaches the root budget, so that is where to wait.
            let freed = self.root().freed.notified();
            if self.try_reserve(bytes).is_ok() {
                return;
            }
            freed.await;
        }
    }

    fn root(&self) -> &MemoryBudget {
        match &self.parent {
            Some(parent) => parent.root(),
            None => self,
        }
    }

    /// Adds `bytes` without checking the limit (memory already allocated that must be counted).
    pub fn force(&self, bytes: u64) {
        self.used.fetch_add(bytes, Ordering::AcqRel);
        if let Some(parent) = &self.parent {
            parent.force(bytes);
        }
    }

    /// Returns `bytes` to the budget (and the one it is a share of) and wakes waiters.
    pub fn release(&self, bytes: u64) {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn refuses_past_the_limit_but_admits_one_into_an_empty_budget() {
        let budget = MemoryBudget::new(100);
        assert!(budget.try_reserve(1000).is_ok());
        assert!(budget.try_reserve(1).is_err());
        budget.release(1000);
        assert!(budget.try_reserve(60).is_ok());
        assert!(budget.try_reserve(40).is_ok());
        assert!(budget.try_reserve(1).is_err());
        assert!(budget.full().is_some());
    }

    #[test]
    fn a_hot_table_fills_its_share_and_leaves_the_rest_to_others() {
        let all = Arc::new(MemoryBudget::new(100));
        let hot = MemoryBudget::share(all.clone(), 50);
        let quiet = MemoryBudget::share(all.clone(), 50);
        assert!(hot.try_reserve(50).is_ok());
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
        assert!(quiet.try_reserve(50).is_ok());
        // Both shares fit, the whole is full: the whole says so.
        let more = MemoryBudget::share(all.clone(), 50);
        assert!(!more.try_reserve(1).unwrap_err().share);
        assert_eq!((more.used(), all.used()), (0, 100));
        hot.release(50);
        assert_eq!((hot.used(), all.used()), (0, 50));
        hot.force(10);
        assert_eq!(all.used(), 60);
    }

    #[tokio::test(start_paused = true)]
    async fn reserve_waits_for_a_release() {
        let budget = Arc::new(MemoryBudget::new(100));
        assert!(budget.try_reserve(100).is_ok());
        let waiter = {
            let budget = budget.clone();
            tokio::spawn(async move { budget.reserve(50).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        budget.release(60);
        waiter.await.unwrap();
        assert_eq!(budget.used(), 90);
    }

    #[tokio::test(start_paused = true)]
    async fn a_share_waits_for_releases_in_the_whole() {
        let all = Arc::new(MemoryBudget::new(100));
        let other = MemoryBudget::share(all.clone(), 100);
        assert!(other.try_reserve(100).is_ok());
        let table = Arc::new(MemoryBudget::share(all.clone(), 50));
        let waiter = {
            let table = table.clone();
            tokio::spawn(async move { table.reserve(30).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        other.release(40);
        waiter.await.unwrap();
        assert_eq!((table.used(), all.used()), (30, 90));
    }
}
