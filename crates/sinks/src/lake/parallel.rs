//! Spreading per-file work (reading a merge's inputs, writing a bulk load's files) over one
//! thread per core.

use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_core::SinkError;

const SINK: &str = "lake";

/// Runs `work` on every item on one thread per core, each thread taking the next item as it
/// finishes one, and returns the outputs in item order. The first error (or a panicking
/// thread) fails the whole call.
pub(crate) fn on_every_core<T, R>(
    items: &[T],
    work: impl Fn(&T) -> Result<Vec<R>, SinkError> + Sync,
) -> Result<Vec<R>, SinkError>
where
    T: Sync,
    R: Send,
{
    on_every_core_in_runs(items, 1, |run| {
        let mut out = Vec::new();
        for item in run {
            out.extend(work(item)?);
        }
        Ok(out)
    })
}

/// Runs `work` on runs of `run_len` consecutive items (the last may be shorter; for work that
/// carries state from one item to the next) on one thread per core, and returns the outputs in
/// item order. Each thread takes the next run as it finishes one, so a thread that is slowed
/// down (by a larger file, by another process) holds the others up by one run at most, not by
/// its whole share. The first error (or a panicking thread) fails the whole call; the other
/// threads stop after their current run.
pub(crate) fn on_every_core_in_runs<T, R>(
    items: &[T],
    run_len: usize,
    work: impl Fn(&[T]) -> Result<Vec<R>, SinkError> + Sync,
) -> Result<Vec<R>, SinkError>
where
    T: Sync,
    R: Send,
{
    let runs: Vec<&[T]> = items.chunks(run_len.max(1)).collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(runs.len().max(1));
    let next = AtomicUsize::new(0);
    let (runs, next, work) = (&runs, &next, &work);
    // Each run's output, by run.
    let mut outputs: Vec<Option<Vec<R>>> =
        std::iter::repeat_with(|| None).take(runs.len()).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(run) = runs.get(index) else {
                            return Ok(done);
                        };
                        match work(run) {
                            Ok(out) => done.push((index, out)),
                            Err(e) => {
                                // The others take no new run.
                                next.store(runs.len(), Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                })
            })
            .collect();
        let mut failure = None;
        for handle in handles {
            let done = handle.join().unwrap_or_else(|_| {
                next.store(runs.len(), Ordering::Relaxed);
                Err(SinkError::retriable(SINK, "a worker thread panicked"))
            });
            match done {
                Ok(done) => {
                    for (index, out) in done {
                        outputs[index] = Some(out);
                    }
                }
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        failure.map_or(Ok(()), Err)
    })?;
    Ok(outputs.into_iter().flatten().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_come_in_item_order_whichever_thread_ran_them() {
        let items: Vec<u64> = (0..1000).collect();
        // Uneven work: some runs take much longer, so threads finish them out of order.
        let out = on_every_core_in_runs(&items, 7, |run| {
            if run[0] % 3 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Ok(run.iter().map(|i| i * 2).collect())
        })
        .unwrap();
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        let out = on_every_core(&items, |&i| Ok(vec![i, i])).unwrap();
        assert_eq!(out.len(), 2000);
        assert!(out.chunks(2).zip(&items).all(|(pair, &i)| pair == [i, i]));
    }

    #[test]
    fn a_failing_run_fails_the_call() {
        let items: Vec<u64> = (0..100).collect();
        let result = on_every_core_in_runs(&items, 10, |run| {
            if run.contains(&42) {
                Err(SinkError::permanent(SINK, "no 42"))
            } else {
                Ok(run.to_vec())
            }
        });
        assert!(result.unwrap_err().to_string().contains("no 42"));
        let empty: Vec<u64> =
            on_every_core_in_runs(&[], 4, |run: &[u64]| Ok(run.to_vec())).unwrap();
        assert!(empty.is_empty());
    }
}
