//! The pipeline's clock: tokio's, so that tests can pause it and move it on.

use std::time::Instant;

/// Now on tokio's clock, as the `std` instant the core's batcher takes. In a runtime whose clock
/// is not paused, and outside a runtime, this is the system's monotonic clock.
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}
