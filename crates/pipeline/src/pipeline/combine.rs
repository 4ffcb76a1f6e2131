//! Small NDJSON bodies of one table decoded together.
//!
//! Decoding a one-row body costs more than its row: arrow-json builds one set of arrays per
//! decode, and every insert's arrays are then copied, freed and accounted for one by one. So
//! the inserts that arrive for a table at about the same moment are decoded in one go, and each
//! takes its rows as a slice of the arrays built for all of them
//! ([`sluice_core::formats::decode_together`], which answers each body as if it were decoded
//! alone, errors included).
//!
//! No thread and no timer: the first insert to find the table's queue empty leads a round. It
//! yields once, so that the handlers the runtime already has ready for this table queue up
//! behind it, then takes the queue, decodes it and hands each insert its result. An insert that
//! arrives while the round decodes starts the next one. Under light load a round holds one
//! body, decoded as before; under heavy load, many.
//!
//! A slice reports its parent's arrays whole, so each insert is charged its share by rows. The
//! parent stays alive until the writer has coalesced every slice of it (every 256 pieces of a
//! partition, or when the batch is sealed), so memory can run above the charge for that long.

use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use sluice_core::{DecodeError, TableDef};
use tokio::sync::oneshot;

use crate::error::InsertError;

/// A decoded body: its rows, and the Arrow memory they take (a slice's share of its parent's).
type Decoded = Result<(RecordBatch, u64), DecodeError>;

/// The bodies waiting for a table's next round.
#[derive(Default)]
pub(super) struct Combiner {
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    /// Whether an insert has taken the lead of the next round and not yet taken the queue.
    led: bool,
}

struct Waiting {
    def: Arc<TableDef>,
    body: Vec<u8>,
    answer: oneshot::Sender<Decoded>,
}

impl Combiner {
    /// Decodes `body`, sluice's NDJSON with default options, into `def`'s schema, in a round
    /// with the bodies that arrive with it.
    pub(super) async fn decode(
        &self,
        def: Arc<TableDef>,
        body: &[u8],
    ) -> Result<(RecordBatch, u64), InsertError> {
        let (answer, decoded) = oneshot::channel();
        let leads = {
            let mut queue = lock(&self.queue);
            queue.waiting.push(Waiting {
                def,
                body: body.to_vec(),
                answer,
            });
            !std::mem::replace(&mut queue.led, true)
        };
        if leads {
            let round = Round(self);
            tokio::task::yield_now().await;
            drop(round);
        }
        match decoded.await {
            Ok(decoded) => Ok(decoded?),
            // Every round answers each of its bodies; this is a round that stopped halfway.
            Err(_) => Err(InsertError::NotCommitted(
                "the insert's decoding stopped before it was answered".to_owned(),
            )),
        }
    }
}

/// A round that an insert leads: taken and decoded when the leader resumes, or when it is
/// dropped (its request went away), so no insert behind it is left waiting.
struct Round<'a>(&'a Combiner);

impl Drop for Round<'_> {
    fn drop(&mut self) {
        let waiting = {
            let mut queue = lock(&self.0.queue);
            queue.led = false;
            std::mem::take(&mut queue.waiting)
        };
        decode_round(waiting);
    }
}

/// Decodes a round's bodies, those of one table definition together, and answers each.
fn decode_round(mut waiting: Vec<Waiting>) {
    while let Some(first) = waiting.first() {
        let def = first.def.clone();
        let (same, rest): (Vec<Waiting>, Vec<Waiting>) =
            waiting.into_iter().partition(|w| Arc::ptr_eq(&w.def, &def));
        waiting = rest;
        let bodies: Vec<&[u8]> = same.iter().map(|w| w.body.as_slice()).collect();
        let results = sluice_core::formats::decode_together(def.schema(), &bodies);
        for (waiter, result) in same.into_iter().zip(results) {
            // A waiter whose request went away takes no answer.
            let _ = waiter.answer.send(result);
        }
    }
}

fn lock(queue: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    match queue.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;
    use sluice_core::{Column, ColumnType, DecodeOptions, FlushPolicy, TableLayout, TableName};

    use super::*;

    fn def() -> Arc<TableDef> {
        let layout = TableLayout {
            columns: vec![
                Column::new("id", ColumnType::Int64).required(),
                Column::new("name", ColumnType::String),
            ],
            partition_by: String::new(),
            sort_by: Vec::new(),
        };
        Arc::new(
            TableDef::new(TableName::new("t").unwrap(), layout, FlushPolicy::default()).unwrap(),
        )
    }

    fn ids(batch: &RecordBatch) -> Vec<i64> {
        batch
            .column(0)
            .as_primitive::<Int64Type>()
            .values()
            .to_vec()
    }

    /// Many inserts at once on a runtime of two threads: each gets its own rows, a bad body its
    /// own error naming its line, and every good body lands whatever its neighbours sent.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bodies_decoded_together_each_get_their_own_rows_and_errors() {
        let combiner = Arc::new(Combiner::default());
        let def = def();
        let tasks: Vec<_> = (0..200i64)
            .map(|i| {
                let (combiner, def) = (combiner.clone(), def.clone());
                tokio::spawn(async move {
                    let body = match i % 10 {
                        // A missing comma: arrow-json would take it, the strict check does not.
                        3 => format!(
                            "{{\"id\": {i}, \"name\": \"a\"}}\n{{\"id\": 1 \"name\": \"b\"}}\n"
                        ),
                        7 => format!("{{\"id\": \"{i}\"}}\n"),
                        _ => format!(
                            "{{\"id\": {i}, \"name\": \"n\"}}\n{{\"id\": {}}}\n",
                            i + 1000
                        ),
                    };
                    (i, combiner.decode(def, body.as_bytes()).await)
                })
            })
            .collect();
        for task in tasks {
            let (i, decoded) = task.await.unwrap();
            match i % 10 {
                3 => {
                    let error = decoded.unwrap_err().to_string();
                    assert!(error.contains("line 2"), "{i}: {error}");
                }
                7 => assert!(decoded.is_err(), "{i}: a string for an integer was taken"),
                _ => {
                    let (batch, bytes) = decoded.unwrap();
                    assert_eq!(ids(&batch), [i, i + 1000]);
                    assert!(bytes > 0);
                }
            }
        }
    }

    /// A body decoded in a round answers as the same body decoded alone.
    #[test]
    fn together_or_alone_a_body_decodes_to_the_same_rows() {
        let def = def();
        let bodies: Vec<Vec<u8>> = (0..5)
            .map(|i| format!("{{\"id\": {i}, \"name\": \"x{i}\"}}\n").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
        let together = sluice_core::formats::decode_together(def.schema(), &refs);
        let mut shares = 0;
        for (body, result) in bodies.iter().zip(together) {
            let (batch, bytes) = result.unwrap();
            let alone = sluice_core::decode(def.schema(), body, &DecodeOptions::default()).unwrap();
            assert_eq!(batch, alone);
            shares += bytes;
        }
        assert!(shares > 0);
    }
}
