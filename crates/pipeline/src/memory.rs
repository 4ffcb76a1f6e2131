//! The memory budget: a byte counter shared by every table's buffers.
//!
//! Inserts reserve their decoded size before they are buffered and writers release it when the
//! batch lands. The HTTP edge uses [`MemoryBudget::try_reserve`] and answers 503 when it fails;
//! the library API waits in [`MemoryBudget::reserve`]. Nothing already accepted is ever dropped
//! to make room.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// Bytes of buffered Arrow memory, against a limit.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
    freed: Notify,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            used: AtomicU64::new(0),
            freed: Notify::new(),
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

    /// Whether the budget is spent (a cheap check before decoding a body).
    pub fn is_full(&self) -> bool {
        self.used() >= self.limit
    }

    /// Reserves `bytes` if they fit. An empty budget always admits one reservation, however
    /// large, so an insert bigger than the whole budget is not refused forever.
    pub fn try_reserve(&self, bytes: u64) -> bool {
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            if used > 0 && used.saturating_add(bytes) > self.limit {
                return false;
            }
            match self.used.compare_exchange_weak(
                used,
                used + bytes,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    /// Reserves `bytes`, waiting for releases until they fit.
    pub async fn reserve(&self, bytes: u64) {
        loop {
            let freed = self.freed.notified();
            if self.try_reserve(bytes) {
                return;
            }
            freed.await;
        }
    }

    /// Adds `bytes` without checking the limit (memory already allocated that must be counted).
    pub fn force(&self, bytes: u64) {
        self.used.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Returns `bytes` to the budget and wakes waiters.
    pub fn release(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let before = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(bytes))
            })
            .unwrap_or_default();
        debug_assert!(before >= bytes, "released more than reserved");
        self.freed.notify_waiters();
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
        assert!(budget.try_reserve(1000));
        assert!(!budget.try_reserve(1));
        budget.release(1000);
        assert!(budget.try_reserve(60));
        assert!(budget.try_reserve(40));
        assert!(!budget.try_reserve(1));
        assert!(budget.is_full());
    }

    #[tokio::test(start_paused = true)]
    async fn reserve_waits_for_a_release() {
        let budget = Arc::new(MemoryBudget::new(100));
        assert!(budget.try_reserve(100));
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
}
