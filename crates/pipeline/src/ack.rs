//! Acknowledgement modes, and the waiter a `committed` insert parks on.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::oneshot;

/// When an insert is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AckMode {
    /// Once the rows are buffered in memory. Lost if the process dies before they flush.
    Async,
    /// Once the rows are fsynced to the write-ahead log. Needs the WAL.
    Durable,
    /// Once the batch holding the rows is committed in the store. The default.
    #[default]
    Committed,
}

impl AckMode {
    /// The mode's name in the HTTP API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Async => "async",
            Self::Durable => "durable",
            Self::Committed => "committed",
        }
    }
}

impl fmt::Display for AckMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AckMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "async" => Ok(Self::Async),
            "durable" => Ok(Self::Durable),
            "committed" => Ok(Self::Committed),
            other => Err(format!(
                "unknown ack mode '{}': use async, durable or committed",
                other.escape_debug()
            )),
        }
    }
}

/// Why a waiter's rows were not committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The store refused the batch for good.
    Refused(String),
    /// sluice gave up on the batch (shutdown timed out while the store was failing).
    Abandoned(String),
}

/// What a waiter learns: committed, or why not.
pub(crate) type Outcome = Result<(), Failure>;

/// One `committed` insert waiting for every partition piece of it to land.
///
/// If the waiter is dropped before all pieces land (the pipeline stopped), the receiving side
/// sees a closed channel, never a false success.
#[derive(Debug)]
pub(crate) struct Waiter {
    pending: AtomicUsize,
    tx: Mutex<Option<oneshot::Sender<Outcome>>>,
}

impl Waiter {
    /// A waiter for an insert split into `pieces` partition pieces.
    pub(crate) fn new(pieces: usize) -> (Self, oneshot::Receiver<Outcome>) {
        let (tx, rx) = oneshot::channel();
        let waiter = Self {
            pending: AtomicUsize::new(pieces),
            tx: Mutex::new(Some(tx)),
        };
        (waiter, rx)
    }

    /// One piece landed; the last one answers the insert.
    pub(crate) fn landed(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.send(Ok(()));
        }
    }

    /// A piece can never land: the insert is answered with the reason at once.
    pub(crate) fn failed(&self, failure: Failure) {
        self.send(Err(failure));
    }

    fn send(&self, outcome: Outcome) {
        let tx = match self.tx.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(tx) = tx {
            // The insert may have stopped waiting (timeout); nothing to do then.
            let _ = tx.send(outcome);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_after_the_last_piece() {
        let (waiter, mut rx) = Waiter::new(2);
        waiter.landed();
        assert!(rx.try_recv().is_err());
        waiter.landed();
        assert_eq!(rx.try_recv().unwrap(), Ok(()));
    }

    #[test]
    fn a_dropped_waiter_is_never_a_success() {
        let (waiter, mut rx) = Waiter::new(1);
        drop(waiter);
        assert!(matches!(
            rx.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
    }

    #[test]
    fn parses_modes() {
        assert_eq!("durable".parse::<AckMode>().unwrap(), AckMode::Durable);
        assert!("sync".parse::<AckMode>().is_err());
    }
}
