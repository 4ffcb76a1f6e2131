//! ClickHouse's native protocol over TCP, the door of `clickhouse-client`, the Go client,
//! Python's `clickhouse-driver` and the OpenTelemetry Collector's exporter. Off unless
//! `[clickhouse] tcp_listen` is set.
//!
//! A connection says `Hello`, then sends queries one at a time. An `INSERT` is answered with a
//! block naming the columns and types to send, and the client sends its rows in `Native`
//! blocks, plain or in ClickHouse's compressed blocks, ending with an empty block. The reads
//! clients send when they connect are answered as over HTTP; any other statement gets an
//! exception with ClickHouse's code. Users, ack modes and limits are the HTTP door's.
//!
//! # Layout
//!
//! - `packets.rs`: the packets, read from and written to bytes (pure).
//! - `connection.rs`: one connection's handshake, queries and inserts.
//! - this file: accepting connections, TLS, and the shutdown.

mod connection;
pub mod packets;
#[cfg(test)]
mod tests;

use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use self::connection::Timeouts;
use crate::AppState;
use crate::tls::{HANDSHAKE_TIMEOUT, Tls};

/// Serves the native protocol on `listener` until `closed` turns true, when the doors close.
/// Then it stops accepting; connections between queries close, and those in the middle of one
/// finish it. The caller bounds how long that may take. Before that, while the instance is
/// stopping, each connection closes after its query, as `connection.rs` says.
pub(crate) async fn serve(
    listener: TcpListener,
    state: AppState,
    tls: Option<Tls>,
    mut closed: watch::Receiver<bool>,
) {
    let timeouts = Timeouts {
        handshake: HANDSHAKE_TIMEOUT,
        idle: state.limits.idle_timeout,
        stall: state.limits.body_timeout,
    };
    let mut connections = JoinSet::new();
    loop {
        let (tcp, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, say: wait a moment rather than spin.
                    tracing::warn!(error = %e, "cannot accept a native-protocol connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = closed.wait_for(|close| *close) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        // Each packet is answered whole; waiting to fill a segment only adds latency.
        let _ = tcp.set_nodelay(true);
        let (state, closed, tls) = (state.clone(), closed.clone(), tls.clone());
        connections.spawn(async move {
            match tls {
                None => connection::serve(tcp, state, timeouts, closed).await,
                Some(tls) => {
                    if let Ok(Ok(stream)) =
                        tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor().accept(tcp)).await
                    {
                        connection::serve(stream, state, timeouts, closed).await;
                    }
                }
            }
        });
    }
    while connections.join_next().await.is_some() {}
}
