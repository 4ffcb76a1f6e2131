//! Keys a store already holds: before a flush to a store that keeps insert keys, the rows of
//! keyed inserts another sluice process landed are left out, and the rest of the keys go to
//! the store with the flush ([`sluice_core::Sink::keeps_keys`]).

use std::ops::Range;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow::array::{BooleanArray, RecordBatch};
use sluice_core::{FlushId, InsertKey, KeysToKeep, Sink, SinkError};

use super::Queued;

/// A keyed insert in a flush: its key, and its rows among the flush's chunks (before sorting).
pub(super) struct KeyedRows {
    key: InsertKey,
    rows: Range<usize>,
}

/// The keyed inserts of `batch` with their rows, when `sink` keeps keys; none otherwise.
pub(super) fn keyed_rows(sink: &dyn Sink, batch: &Queued) -> Vec<KeyedRows> {
    if !sink.keeps_keys() {
        return Vec::new();
    }
    let mut start = 0;
    let mut keyed = Vec::new();
    for token in &batch.sealed.tokens {
        let rows = start..start + token.rows as usize;
        start = rows.end;
        if let Some(insert) = &token.keyed {
            keyed.push(KeyedRows {
                key: InsertKey {
                    key: insert.key.to_string(),
                    rows_hash: insert.rows_hash,
                },
                rows,
            });
        }
    }
    keyed
}

/// What a flush hands its store once the keys the store holds are known.
pub(super) struct Kept {
    pub(super) chunks: Vec<RecordBatch>,
    pub(super) keys: KeysToKeep,
    /// Rows left out: their inserts landed through another process.
    pub(super) left_out: u64,
}

/// Asks `sink` which of `keyed` it holds for the flush `id` within `window`, and leaves their
/// rows out of `chunks`. A key held with other rows (another producer's insert under the same
/// key) is not taken as the same insert: its rows land, and the key is not kept again.
pub(super) async fn leave_out_held(
    sink: &dyn Sink,
    id: &FlushId,
    chunks: Vec<RecordBatch>,
    keyed: Vec<KeyedRows>,
    window: Duration,
) -> Result<Kept, SinkError> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64;
    let since_ms = now_ms.saturating_sub(window.as_millis() as i64);
    let asked: Vec<InsertKey> = keyed.iter().map(|k| k.key.clone()).collect();
    let held = sink
        .held_keys(&id.table, &id.partition, &asked, since_ms)
        .await?;
    let mut keep = Vec::new();
    let mut drop = Vec::new();
    for KeyedRows { key, rows } in keyed {
        match held.iter().find(|h| h.key == key.key) {
            None => keep.push(key),
            Some(h) if h.rows_hash == key.rows_hash => drop.push(rows),
            Some(_) => tracing::warn!(
                table = %id.table, key = %key.key.escape_debug(),
                "a store holds this insert key for other rows; this insert's rows land too"
            ),
        }
    }
    let left_out = drop.iter().map(|r| r.len() as u64).sum();
    let chunks = if drop.is_empty() {
        chunks
    } else {
        without_rows(chunks, &drop)
            .map_err(|e| SinkError::permanent(sink.name(), format!("cannot leave rows out: {e}")))?
    };
    let keys = KeysToKeep {
        keys: keep,
        now_ms,
        expired_before_ms: since_ms,
    };
    Ok(Kept {
        chunks,
        keys,
        left_out,
    })
}

/// `chunks` without the rows in `drop` (ranges over the chunks one after another, in order).
fn without_rows(
    chunks: Vec<RecordBatch>,
    drop: &[Range<usize>],
) -> Result<Vec<RecordBatch>, arrow::error::ArrowError> {
    let total = chunks.iter().map(RecordBatch::num_rows).sum();
    let mut keep = vec![true; total];
    for rows in drop {
        if let Some(dropped) = keep.get_mut(rows.clone()) {
            dropped.fill(false);
        }
    }
    let mut kept = Vec::with_capacity(chunks.len());
    let mut start = 0;
    for chunk in chunks {
        let rows = start..start + chunk.num_rows();
        start = rows.end;
        let mask = BooleanArray::from(keep[rows].to_vec());
        let filtered = arrow::compute::filter_record_batch(&chunk, &mask)?;
        if filtered.num_rows() > 0 {
            kept.push(filtered);
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    use super::*;

    #[test]
    fn the_rows_of_held_inserts_are_left_out_across_chunks() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let chunk = |ids: Vec<i64>| {
            RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(ids))]).unwrap()
        };
        let chunks = vec![chunk(vec![0, 1, 2]), chunk(vec![3, 4]), chunk(vec![5])];
        let kept = without_rows(chunks, &[1..4, 5..6]).unwrap();
        let ids: Vec<i64> = kept
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(ids, [0, 4]);
        assert_eq!(kept.len(), 2, "an emptied chunk is dropped");
    }
}
