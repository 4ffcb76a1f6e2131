//! Spreading per-file work (reading a merge's inputs, writing a bulk load's files) over one
//! thread per core.

use sluice_core::SinkError;

const SINK: &str = "lake";

/// Runs `work` on every item, the items split into one contiguous chunk per core, and returns
/// the outputs in item order. The first error (or a panicking thread) fails the whole call.
pub(crate) fn on_every_core<T, R>(
    items: &[T],
    work: impl Fn(&T) -> Result<Vec<R>, SinkError> + Sync,
) -> Result<Vec<R>, SinkError>
where
    T: Sync,
    R: Send,
{
    on_every_core_chunk(items, |chunk| {
        let mut out = Vec::new();
        for item in chunk {
            out.extend(work(item)?);
        }
        Ok(out)
    })
}

/// Runs `work` once per core, each time on one contiguous chunk of `items` (for work that
/// carries state from one item to the next), and returns the outputs in item order. The first
/// error (or a panicking thread) fails the whole call.
pub(crate) fn on_every_core_chunk<T, R>(
    items: &[T],
    work: impl Fn(&[T]) -> Result<Vec<R>, SinkError> + Sync,
) -> Result<Vec<R>, SinkError>
where
    T: Sync,
    R: Send,
{
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len().max(1));
    let chunk = items.len().div_ceil(threads).max(1);
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|items| scope.spawn(move || work(items)))
            .collect();
        let mut out = Vec::new();
        for handle in handles {
            out.extend(
                handle.join().unwrap_or_else(|_| {
                    Err(SinkError::retriable(SINK, "a worker thread panicked"))
                })?,
            );
        }
        Ok(out)
    })
}
