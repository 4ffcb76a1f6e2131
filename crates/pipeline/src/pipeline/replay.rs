//! Replay: every logged insert the stores do not hold yet, back to its table's writer.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use sluice_core::{
    DecodeOptions, EmptyValue, InputFormat, PartitionKey, TableName, TableSchema, conform, decode,
};
use sluice_wal::Wal;

use super::TableHandle;
use crate::error::StartError;
use crate::keys::{Held, KeyedInsert};
use crate::record::{self, LoggedKey, Rows};
use crate::writer::{Command, FrameAck, InsertMsg, Measured, Split};

/// What replay found and did at start.
#[derive(Debug, Clone, Default)]
pub struct ReplayReport {
    /// Frames read from the log.
    pub frames: u64,
    /// Rows handed back to writers.
    pub rows: u64,
    /// Partition pieces skipped because the store already held them.
    pub pieces_already_landed: u64,
}

/// The decoding options of a logged insert, replayed against the table's columns as they are
/// now: keys and listed columns the table no longer has are left out. A JSON insert's list is
/// cut to the columns the table still has; another format's values are positional, so its list
/// stays whole and the values of a column dropped since are skipped.
fn replay_options(schema: &TableSchema, logged: &DecodeOptions) -> DecodeOptions {
    let json = logged.format == InputFormat::JsonEachRow;
    DecodeOptions {
        skip_unknown_fields: true,
        columns: logged.columns.as_ref().map(|listed| {
            listed
                .iter()
                .filter(|name| !json || schema.column(name).is_some())
                .cloned()
                .collect()
        }),
        ..logged.clone()
    }
}

/// Hands every logged insert the stores do not hold yet back to its table's writer, and takes
/// in the keys of keyed ones.
pub(super) fn replay_frames(
    replay: &sluice_wal::Replay,
    wal: &Arc<Wal>,
    tables: &HashMap<TableName, Arc<TableHandle>>,
    watermarks: &HashMap<TableName, HashMap<PartitionKey, u64>>,
) -> Result<ReplayReport, StartError> {
    let mut report = ReplayReport::default();
    let mut failure: Option<StartError> = None;
    let mut landed_keys = LandedKeys::default();
    replay.for_each(|lsn, payload| {
        if failure.is_some() {
            return;
        }
        report.frames += 1;
        let logged = match logged_pieces(lsn, payload, tables) {
            Ok(found) => found,
            Err(error) => {
                failure = Some(error);
                return;
            }
        };
        let handle = logged.handle;
        // A table whose store did not answer has no watermarks yet: its writer leaves out what
        // the store holds once it opens the table.
        let held = watermarks.get(handle.def().name());
        let total = logged.pieces.len();
        let split: Split = logged
            .pieces
            .into_iter()
            .filter(|(key, _)| held.and_then(|h| h.get(key)).is_none_or(|w| lsn > *w))
            .collect();
        report.pieces_already_landed += (total - split.len()) as u64;
        let now = crate::clock::now();
        let keyed = logged.key.map(|key| {
            let held = match split.is_empty() {
                true => Held::Committed { flush: None },
                false => Held::Durable,
            };
            handle
                .keys
                .recovered(key.key, key.rows_hash, logged.rows, held, now);
            KeyedInsert::new(Arc::from(key.key), key.rows_hash, logged.rows, split.len())
        });
        if split.is_empty() {
            match keyed {
                Some(keyed) => landed_keys.add(handle, lsn, keyed),
                None => wal.landed(lsn),
            }
            return;
        }
        report.rows += split.iter().map(|(_, b)| b.num_rows() as u64).sum::<u64>();
        // Replayed rows were accepted before the crash: they are admitted even over the budget.
        let measured = Measured::new(split);
        let reserved = handle.memory.force(measured.charge());
        let pieces = measured.reserved(reserved);
        let msg = InsertMsg {
            frame: Some(FrameAck::new(wal.clone(), lsn, pieces.len())),
            pieces,
            seq: lsn,
            arrived: now,
            waiter: None,
            durable: None,
            keyed,
            unfiltered: held.is_none(),
        };
        let _ = handle.tx.send(Command::Insert(msg));
    })?;
    if let Some(error) = failure {
        return Err(error);
    }
    landed_keys.journal_then_release(wal);
    Ok(report)
}

/// Keyed inserts the stores held whole: their keys go to the journal before the log may drop
/// their records, so a crash in between loses neither.
#[derive(Default)]
struct LandedKeys {
    by_table: HashMap<TableName, (Arc<TableHandle>, Vec<Arc<KeyedInsert>>)>,
    lsns: Vec<u64>,
}

impl LandedKeys {
    fn add(&mut self, handle: &Arc<TableHandle>, lsn: u64, keyed: Arc<KeyedInsert>) {
        let (_, landed) = self
            .by_table
            .entry(handle.def().name().clone())
            .or_insert_with(|| (handle.clone(), Vec::new()));
        landed.push(keyed);
        self.lsns.push(lsn);
    }

    /// Journals the keys, then tells the log their records landed. A journal that fails keeps
    /// the records: the next start finds their keys there again.
    fn journal_then_release(self, wal: &Wal) {
        let now = std::time::SystemTime::now();
        for (table, (handle, landed)) in &self.by_table {
            // The flush that landed them is not known: they landed before the crash.
            if let Some(journal) = handle.keys.journal()
                && let Err(e) = journal.append("", landed, now)
            {
                tracing::error!(%table, error = %e, "cannot journal the keys of landed inserts; their log records are kept");
                return;
            }
        }
        for lsn in self.lsns {
            wal.landed(lsn);
        }
    }
}

/// A logged insert, decoded again in its table as it is now.
struct Logged<'t, 'p> {
    handle: &'t Arc<TableHandle>,
    /// Its rows split by partition.
    pieces: Split,
    /// Its rows, all partitions.
    rows: u64,
    key: Option<LoggedKey<'p>>,
}

/// The table a logged insert went to, and its rows decoded again and split by partition in
/// the table as it is now.
fn logged_pieces<'t, 'p>(
    lsn: u64,
    payload: &'p [u8],
    tables: &'t HashMap<TableName, Arc<TableHandle>>,
) -> Result<Logged<'t, 'p>, StartError> {
    let fail = |reason: String| StartError::Replay { lsn, reason };
    let record = record::decode(payload).map_err(fail)?;
    let Some(handle) = TableName::new(record.table)
        .ok()
        .and_then(|name| tables.get(&name))
    else {
        // Its folder (and remembered layout) was deleted with inserts still logged: they
        // were acknowledged, so the start stops rather than drop them.
        let table = sluice_core::name::printable(record.table);
        return Err(fail(format!(
            "table '{table}' no longer exists, and the log holds inserts into it that have \
             not landed: declare it in the config ([tables.{table}]) to land them, or move \
             the log away to drop every insert in it that has not landed"
        )));
    };
    // The insert lands in the table as it is now, which the config may have changed since
    // it was logged: a column dropped since is left out of its rows (as of any insert
    // after the change), and a nullable one added since is null in them.
    let def = handle.def();
    let schema = def.schema();
    let batch = match &record.rows {
        Rows::Body { options, body } => {
            decode(schema, body, &replay_options(schema, options)).map_err(|e| e.to_string())
        }
        Rows::Bodies { options, bodies } => decode_each(schema, bodies, options),
        Rows::Arrow { ipc } => {
            record::read_arrow(ipc).and_then(|batch| conform(schema.arrow(), &batch))
        }
    };
    let rows = batch.as_ref().map_or(0, |b| b.num_rows() as u64);
    // Every logged insert passed the door's checks when it was taken. Should the table
    // have moved since from a store that keeps an empty partition value to a Delta table,
    // refusing such a row now would stop the start: it lands, and reads back as null.
    let pieces = batch.and_then(|b| {
        handle
            .def()
            .partition()
            .split(&b, EmptyValue::Kept)
            .map_err(|e| e.to_string())
    });
    pieces
        .map(|pieces| Logged {
            handle,
            pieces,
            rows,
            key: record.key,
        })
        .map_err(|reason| fail(format!("table '{}': {reason}", record.table)))
}

/// The rows of bodies logged together, each decoded alone as it was at the door, one body's
/// after another.
fn decode_each(
    schema: &TableSchema,
    bodies: &[&[u8]],
    logged: &DecodeOptions,
) -> Result<RecordBatch, String> {
    let options = replay_options(schema, logged);
    let batches = bodies
        .iter()
        .map(|body| decode(schema, body, &options))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    arrow::compute::concat_batches(schema.arrow(), &batches).map_err(|e| e.to_string())
}
