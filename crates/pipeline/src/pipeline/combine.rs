//! Small inserts into one table taken in rounds: decoded together, and handed to the table's
//! writer together.
//!
//! A one-row insert costs more than its row: arrow-json builds one set of arrays per decode, and
//! each insert is split by partition, charged to the memory budget, numbered, logged, handed to
//! the writer, buffered and coalesced on its own. So the inserts that arrive for a table at
//! about the same moment with the same decoding options (sluice's NDJSON, or one of
//! ClickHouse's formats with its settings) are decoded in one go
//! ([`sluice_core::formats::decode_together`], which answers each body as if it were decoded
//! alone, errors included: JSON rows are read in one pass, other formats body by body), and
//! those whose rows sit next to each other in the arrays built for all of them, with the same
//! ack mode, are handed over as one: one partition split, one reservation, one log frame holding
//! their bodies one after another, one message to the writer, which counts them as the inserts
//! they are.
//! Each insert then waits only for what its ack mode asks: nothing for `async`, the frame's
//! fsync for `durable`.
//!
//! A round hands inserts over together only when doing so gives each what it would have got
//! alone: no throttle delay in any of their partitions, room in the budget, and no insert over
//! its own limits. Each partition's piece counts the inserts with rows in it. Otherwise, and for `committed` inserts and those that wait for memory,
//! each insert takes its rows as a slice of the round's arrays and goes on alone, charged its
//! share of them by rows.
//!
//! No thread and no timer: the first insert to find the table's queue empty leads a round. It
//! yields once, so that the handlers the runtime already has ready for this table queue up
//! behind it, then takes the queue and answers each insert. An insert that arrives meanwhile
//! starts the next round. Under light load a round holds one insert; under heavy load, many.
//!
//! A slice keeps its parent's arrays alive until the writer has coalesced it (every 256 pieces
//! of a partition, or when the batch is sealed), so memory can run above the charge for that
//! long.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use sluice_core::formats::{BodyRows, Joint, Together};
use sluice_core::{DecodeError, DecodeOptions, Grouped, TableDef};
use sluice_wal::Completion;
use tokio::sync::oneshot;

use super::{Admission, Handed, Pipeline, TableHandle, partition_limit, within};
use crate::ack::AckMode;
use crate::error::InsertError;
use crate::record;
use crate::writer::Measured;

/// The inserts waiting for a table's next round.
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
    options: DecodeOptions,
    body: Vec<u8>,
    terms: RoundTerms,
    answer: oneshot::Sender<Answer>,
}

/// What an insert in a round asks for besides its rows.
#[derive(Debug, Clone, Copy)]
pub(super) struct RoundTerms {
    pub(super) ack: AckMode,
    pub(super) admission: Admission,
    pub(super) max_partitions: Option<usize>,
    pub(super) max_rows: Option<usize>,
}

/// What a round gives an insert.
pub(super) enum Answer {
    /// Its rows and the Arrow memory they take, for the insert to go on alone; or why it was
    /// refused.
    Decoded(Result<(RecordBatch, u64), InsertError>),
    /// Handed over with other inserts of the round: its rows, and the fsync of the frame that
    /// holds them when they were logged.
    HandedOver {
        rows: u64,
        durable: Option<Arc<Completion>>,
    },
}

/// Takes `body`, read with `options` and one that
/// [`may_join`](sluice_core::formats::may_join) others, into `handle`'s next round, and waits
/// for the round's answer.
pub(super) async fn take_in(
    pipeline: &Pipeline,
    handle: &TableHandle,
    (def, options): (Arc<TableDef>, &DecodeOptions),
    body: &[u8],
    terms: RoundTerms,
) -> Answer {
    let (answer, answered) = oneshot::channel();
    let leads = {
        let mut queue = lock(&handle.combiner.queue);
        queue.waiting.push(Waiting {
            def,
            options: options.clone(),
            body: body.to_vec(),
            terms,
            answer,
        });
        !std::mem::replace(&mut queue.led, true)
    };
    if leads {
        let round = Round { pipeline, handle };
        tokio::task::yield_now().await;
        drop(round);
    }
    answered.await.unwrap_or_else(|_| {
        // Every round answers each of its inserts; this is a round that stopped halfway.
        Answer::Decoded(Err(InsertError::NotCommitted(
            "the insert's decoding stopped before it was answered".to_owned(),
        )))
    })
}

/// A round that an insert leads: taken and answered when the leader resumes, or when it is
/// dropped (its request went away), so no insert behind it is left waiting.
struct Round<'a> {
    pipeline: &'a Pipeline,
    handle: &'a TableHandle,
}

impl Drop for Round<'_> {
    fn drop(&mut self) {
        let mut waiting = {
            let mut queue = lock(&self.handle.combiner.queue);
            queue.led = false;
            std::mem::take(&mut queue.waiting)
        };
        // The bodies of one table definition and one set of options are decoded together.
        while let Some(first) = waiting.first() {
            let (def, options) = (first.def.clone(), first.options.clone());
            let (mut same, rest): (Vec<Waiting>, Vec<Waiting>) = waiting
                .into_iter()
                .partition(|w| Arc::ptr_eq(&w.def, &def) && w.options == options);
            waiting = rest;
            // Inserts that may be handed over together go next to each other, so that each
            // ack mode's rows make one run. Inserts of one round arrived together: none is
            // owed an order before another.
            same.sort_by_key(|w| run_order(&w.terms));
            let bodies: Vec<&[u8]> = same.iter().map(|w| w.body.as_slice()).collect();
            let together = sluice_core::formats::decode_together(def.schema(), &bodies, &options);
            answer_round(self.pipeline, self.handle, same, together);
        }
    }
}

/// Inserts whose rows sit next to each other in a round's arrays and that may be handed over
/// together.
struct Run {
    ack: AckMode,
    rows: Range<usize>,
    members: Vec<(Waiting, Range<usize>)>,
}

/// Answers each insert of a round: hands over together the runs of those that allow it, and
/// gives every other its own rows or error.
fn answer_round(
    pipeline: &Pipeline,
    handle: &TableHandle,
    waiting: Vec<Waiting>,
    together: Together,
) {
    let (joint, bodies) = match together {
        Together::Joint(joint, bodies) => (joint, bodies),
        Together::Apart(batches) => {
            for (waiter, decoded) in waiting.into_iter().zip(batches) {
                let answer = checked(&waiter.terms, decoded);
                let _ = waiter.answer.send(Answer::Decoded(answer));
            }
            return;
        }
    };
    let mut runs: Vec<Run> = Vec::new();
    for (waiter, body) in waiting.into_iter().zip(bodies) {
        match body {
            Ok(BodyRows::Joint(rows))
                if may_hand_over(&waiter.terms)
                    && within(waiter.terms.max_rows, rows.len()).is_ok() =>
            {
                join(&mut runs, waiter, rows);
            }
            body => {
                let answer = checked(&waiter.terms, body.map(|rows| joint.batch_of(rows)));
                // A waiter whose request went away takes no answer.
                let _ = waiter.answer.send(Answer::Decoded(answer));
            }
        }
    }
    for run in runs {
        hand_over_run(pipeline, handle, &joint, run);
    }
}

/// Adds an insert to the last run of its ack mode when its rows follow that run's, or starts a
/// run of its own.
fn join(runs: &mut Vec<Run>, waiter: Waiting, rows: Range<usize>) {
    let ack = waiter.terms.ack;
    match runs.iter_mut().rev().find(|run| run.ack == ack) {
        Some(run) if run.rows.end == rows.start => {
            run.rows.end = rows.end;
            run.members.push((waiter, rows));
        }
        _ => runs.push(Run {
            ack,
            rows: rows.clone(),
            members: vec![(waiter, rows)],
        }),
    }
}

/// A decoded body, refused when it holds more rows than its insert allows.
fn checked(
    terms: &RoundTerms,
    decoded: Result<(RecordBatch, u64), DecodeError>,
) -> Result<(RecordBatch, u64), InsertError> {
    let (batch, bytes) = decoded?;
    within(terms.max_rows, batch.num_rows())?;
    Ok((batch, bytes))
}

/// Where an insert goes in its round: `async`, then `durable`, then those that go on alone.
fn run_order(terms: &RoundTerms) -> u8 {
    match terms.ack {
        _ if !may_hand_over(terms) => 2,
        AckMode::Async => 0,
        _ => 1,
    }
}

/// Whether an insert may be handed over with others: it is answered before its rows land, and
/// is refused rather than kept waiting when the budget is spent.
fn may_hand_over(terms: &RoundTerms) -> bool {
    matches!(terms.ack, AckMode::Async | AckMode::Durable) && terms.admission == Admission::Refuse
}

/// Gives each insert its rows, to go on alone.
fn go_alone(joint: &Joint, members: Vec<(Waiting, Range<usize>)>) {
    for (waiter, rows) in members {
        let _ = waiter.answer.send(Answer::Decoded(Ok(joint.rows(rows))));
    }
}

/// Hands a run's rows to the writer as one insert of many, and answers its inserts; or, when
/// that would not give each insert what it would get alone, lets each go alone.
fn hand_over_run(pipeline: &Pipeline, handle: &TableHandle, joint: &Joint, run: Run) {
    let (batch, bytes) = joint.rows(run.rows.clone());
    let Some(handed) = prepare(pipeline, handle, &run, &batch, bytes) else {
        go_alone(joint, run.members);
        return;
    };
    let body_bytes: u64 = run.members.iter().map(|(w, _)| w.body.len() as u64).sum();
    let inserts = run.members.len() as u64;
    match pipeline.hand_over(handle, handed) {
        Ok(durable) => {
            handle.inserts.increment(inserts);
            handle.rows_received.increment(batch.num_rows() as u64);
            handle.bytes_received.increment(body_bytes);
            for (waiter, rows) in run.members {
                let _ = waiter.answer.send(Answer::HandedOver {
                    rows: rows.len() as u64,
                    durable: durable.clone(),
                });
            }
        }
        Err(error) => {
            for (waiter, _) in run.members {
                let _ = waiter.answer.send(Answer::Decoded(Err(error.clone())));
            }
        }
    }
}

/// What the writer is handed for a run's rows, with their memory reserved: `None` when an
/// insert would span more partitions than it may, a partition is one the throttle would delay
/// or refuse, or the rows need more memory than the budget has left.
fn prepare<'run>(
    pipeline: &Pipeline,
    handle: &TableHandle,
    run: &'run Run,
    batch: &RecordBatch,
    bytes: u64,
) -> Option<Handed<'run>> {
    let first = &run.members.first()?.0;
    let def = &first.def;
    let grouped = def
        .partition()
        .group(batch, handle.store.empty_partition_value())
        .ok()?;
    let spans = Spans::of(&grouped, run);
    let configured = pipeline.inner.config.max_partitions_per_insert;
    let within_limits = run
        .members
        .iter()
        .zip(&spans.partitions)
        .all(|((w, _), n)| {
            let (limit, _) = partition_limit(configured, w.terms.max_partitions);
            limit == 0 || *n <= limit
        });
    if !within_limits {
        return None;
    }
    let split = grouped.split().ok()?;
    if !matches!(pipeline.throttle_delay(handle, &split), Ok(delay) if delay.is_zero()) {
        return None;
    }
    let measured = match split.len() {
        1 => Measured::sized(split, bytes),
        _ => Measured::new(split),
    };
    let reserved = handle.memory.try_reserve(measured.charge()).ok()?;
    let mut pieces = measured.reserved(reserved);
    for (piece, inserts) in pieces.iter_mut().zip(spans.inserts) {
        piece.inserts = inserts;
    }
    let payload = match pipeline.inner.wal {
        Some(_) if run.ack != AckMode::Async => {
            let bodies = run.members.iter().map(|(w, _)| w.body.as_slice());
            Some(record::encode_bodies(
                def.name().as_str(),
                &first.options,
                bodies,
            ))
        }
        _ => None,
    };
    Some(Handed {
        pieces,
        payload,
        waiter: None,
        keyed: None,
    })
}

/// How a run's inserts and the partitions of its rows overlap.
#[derive(Debug, PartialEq)]
struct Spans {
    /// For each partition, in the order the rows are split: the inserts with rows in it.
    inserts: Vec<u64>,
    /// For each insert of the run: the partitions it has rows in.
    partitions: Vec<usize>,
}

impl Spans {
    fn of(grouped: &Grouped<'_>, run: &Run) -> Self {
        // Each insert's rows end here, counted from the run's first row.
        let ends: Vec<usize> = run
            .members
            .iter()
            .map(|(_, rows)| rows.end - run.rows.start)
            .collect();
        Self::from_rows(grouped.rows(), &ends)
    }

    /// From each partition's rows (rising, or `None` for all of them) and where each insert's
    /// rows end.
    fn from_rows<'a>(groups: impl Iterator<Item = Option<&'a [u32]>>, ends: &[usize]) -> Self {
        let mut partitions = vec![0; ends.len()];
        let inserts = groups
            .map(|rows| {
                let Some(rows) = rows else {
                    partitions.iter_mut().for_each(|n| *n += 1);
                    return ends.len() as u64;
                };
                let (mut member, mut last, mut count) = (0, None, 0);
                for &row in rows {
                    while ends.get(member).is_some_and(|end| row as usize >= *end) {
                        member += 1;
                    }
                    if last != Some(member) && member < ends.len() {
                        last = Some(member);
                        partitions[member] += 1;
                        count += 1;
                    }
                }
                count
            })
            .collect();
        Self {
            inserts,
            partitions,
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
    use sluice_core::{Column, ColumnType, FlushPolicy, TableLayout, TableName};

    use super::*;

    fn waiting(ack: AckMode) -> Waiting {
        let layout = TableLayout {
            columns: vec![Column::new("id", ColumnType::Int64)],
            partition_by: String::new(),
            sort_by: Vec::new(),
        };
        let name = TableName::new("t").unwrap();
        let def = TableDef::new(name, layout, FlushPolicy::default()).unwrap();
        let terms = RoundTerms {
            ack,
            admission: Admission::Refuse,
            max_partitions: None,
            max_rows: None,
        };
        Waiting {
            def: Arc::new(def),
            options: DecodeOptions::default(),
            body: Vec::new(),
            terms,
            answer: oneshot::channel().0,
        }
    }

    /// Inserts join the last run of their ack mode when their rows follow it, and start a run
    /// otherwise: runs hold rows next to each other and one ack mode.
    #[test]
    fn runs_hold_adjacent_rows_of_one_ack_mode() {
        let mut runs = Vec::new();
        let arrivals = [
            (AckMode::Durable, 0..2),
            (AckMode::Durable, 2..3),
            (AckMode::Async, 3..5),
            (AckMode::Durable, 5..6),
            (AckMode::Async, 6..8),
            (AckMode::Async, 9..10),
        ];
        for (ack, rows) in arrivals {
            join(&mut runs, waiting(ack), rows);
        }
        let found: Vec<(AckMode, Range<usize>, usize)> = runs
            .iter()
            .map(|run| (run.ack, run.rows.clone(), run.members.len()))
            .collect();
        assert_eq!(
            found,
            [
                (AckMode::Durable, 0..3, 2),
                (AckMode::Async, 3..5, 1),
                (AckMode::Durable, 5..6, 1),
                (AckMode::Async, 6..8, 1),
                (AckMode::Async, 9..10, 1),
            ]
        );
    }

    /// Each partition counts the inserts with rows in it, and each insert the partitions it
    /// has rows in.
    #[test]
    fn spans_count_inserts_per_partition_and_partitions_per_insert() {
        // Three inserts: rows 0..2, 2..3 and 3..6.
        let ends = [2, 3, 6];
        let a: &[u32] = &[0, 3, 5];
        let b: &[u32] = &[1, 4];
        let c: &[u32] = &[2];
        let spans = Spans::from_rows([Some(a), Some(b), Some(c)].into_iter(), &ends);
        assert_eq!(
            spans,
            Spans {
                inserts: vec![2, 2, 1],
                partitions: vec![2, 1, 2],
            }
        );
        let whole = Spans::from_rows([None].into_iter(), &ends);
        assert_eq!(
            whole,
            Spans {
                inserts: vec![3],
                partitions: vec![1, 1, 1],
            }
        );
    }
}
