//! The graceful stop of an instance behind a load balancer.
//!
//! A balancer learns that an instance is going away only from its health check. If the doors
//! closed at the signal, every request the balancer sent before its next failed checks would be
//! refused. So a stop goes in three steps:
//!
//! 1. The first signal marks the instance [`Stopping`]. `GET /health` answers 503 `stopping`,
//!    and every HTTP answer carries `Connection: close`, so a client with a kept-alive
//!    connection opens a new one, which the balancer sends elsewhere. A native-protocol
//!    connection is closed at its next point between queries, for the same reason: after the
//!    query in progress is answered, at once when it waits idle, and after its first query when
//!    it opens during the delay. Inserts are still taken.
//! 2. After `drain_delay`, or at once on a second signal, the doors stop accepting: HTTP and
//!    ClickHouse's native protocol at the same moment.
//! 3. The requests in flight are answered, within `drain_timeout`. The caller then lands what
//!    is buffered.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderValue;
use axum::http::header::CONNECTION;
use axum::response::Response;
use tokio::sync::{mpsc, watch};

/// How long an instance keeps taking inserts after the first signal, while it reports itself
/// unhealthy, by default: not at all, which suits an instance with no load balancer in front.
/// Behind one, it must exceed the balancer's check interval times its fall count.
pub const DEFAULT_DRAIN_DELAY: Duration = Duration::ZERO;

/// The signals that stop the server, one message each: SIGTERM or SIGINT, as often as they
/// come. A channel whose senders are all gone sends no more signals; it stops nothing.
pub type Signals = mpsc::Receiver<()>;

/// Whether this instance is stopping: set at the first signal, never cleared. `GET /health`
/// and the console read it, and so does the layer that closes kept-alive connections. Native
/// connections wait on it, since one waiting idle for its next query must close when it is set.
#[derive(Debug, Clone)]
pub struct Stopping(Arc<watch::Sender<bool>>);

impl Default for Stopping {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(false)))
    }
}

impl Stopping {
    /// Marks the instance stopping, and wakes whoever waits for it.
    pub fn set(&self) {
        self.0.send_replace(true);
    }

    /// Whether it is stopping.
    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    /// Returns once the instance is stopping.
    pub async fn wait(&self) {
        // The sender lives as long as `self`, so the wait cannot fail.
        let _ = self.0.subscribe().wait_for(|stopping| *stopping).await;
    }
}

/// Adds `Connection: close` to every answer once the instance is stopping. hyper then closes
/// the connection after writing the answer, so no client sends its next request to a door about
/// to close.
pub(crate) async fn close_when_stopping(
    State(stopping): State<Stopping>,
    mut response: Response,
) -> Response {
    if stopping.is_set() {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Waits for the moment the doors close: the first signal marks the instance stopping, then
/// `delay` passes or a second signal comes, whichever is first.
pub(crate) async fn until_doors_close(mut signals: Signals, stopping: Stopping, delay: Duration) {
    next(&mut signals).await;
    stopping.set();
    if delay.is_zero() {
        return;
    }
    tracing::info!(
        delay_s = delay.as_secs_f64(),
        "stopping: /health answers 503 while inserts are still taken, so a load balancer stops \
         sending here; a second signal closes the doors at once"
    );
    tokio::select! {
        () = tokio::time::sleep(delay) => {}
        () = next(&mut signals) => tracing::info!("a second signal: the doors close now"),
    }
}

/// The next signal; never, once no sender is left.
async fn next(signals: &mut Signals) {
    if signals.recv().await.is_none() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_doors_close_after_the_delay_or_at_a_second_signal() {
        let delay = Duration::from_secs(10);
        // One signal: stopping at once, the doors close after the delay.
        let (send, signals) = mpsc::channel(4);
        let stopping = Stopping::default();
        let closing = tokio::spawn(until_doors_close(signals, stopping.clone(), delay));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!stopping.is_set());
        send.send(()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert!(stopping.is_set());
        assert!(!closing.is_finished());
        tokio::time::sleep(Duration::from_millis(1001)).await;
        assert!(closing.is_finished());

        // A second signal skips the rest of the delay.
        let (send, signals) = mpsc::channel(4);
        let stopping = Stopping::default();
        let closing = tokio::spawn(until_doors_close(signals, stopping.clone(), delay));
        send.send(()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(stopping.is_set() && !closing.is_finished());
        send.send(()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(closing.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_for_stopping_returns_once_it_is_set() {
        let stopping = Stopping::default();
        let waiting = tokio::spawn({
            let stopping = stopping.clone();
            async move { stopping.wait().await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        stopping.set();
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("the waiter wakes when stopping is set")
            .unwrap();
        // Once set, a wait returns at once.
        tokio::time::timeout(Duration::from_millis(1), stopping.wait())
            .await
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn without_signals_nothing_stops() {
        let (send, signals) = mpsc::channel::<()>(1);
        drop(send);
        let stopping = Stopping::default();
        let closing = tokio::spawn(until_doors_close(signals, stopping.clone(), Duration::ZERO));
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!stopping.is_set() && !closing.is_finished());
    }
}
