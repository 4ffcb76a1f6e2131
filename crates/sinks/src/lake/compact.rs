//! Compaction's executor: runs the merges [`CompactionPolicy`] picks, each as one Delta commit,
//! and deletes what they replaced once no reader can need it.
//!
//! Merges run two at a time, taking turns, largest first, at reading and at writing. A merge
//! reads its inputs (in parallel, one thread per core), sorts the rows by the table's sort key,
//! writes one file (fsync, rename, fsync) and swaps it in with
//! [`TableLog::commit_compaction`]: readers see the inputs or the output, never both. Once the
//! inputs are large enough for zstd, the writing streams ([`super::stream`]): a sorted table's
//! merge gathers its rows in sort order a piece at a time as the encoding takes them, and a
//! merge of a table without a sort key encodes each run of inputs as soon as it is read,
//! taking both turns at once, and holds about its output rather than its rows. A merge
//! that loses a race (another compactor got the inputs first) or fails deletes its output; the
//! inputs stay. Inputs are deleted later by [`vacuum`], after the retention: a reader that
//! planned its scan on the old version a moment before the swap can still read them.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arrow::array::RecordBatch;
use arrow::datatypes::{Field, Schema, SchemaRef};
use futures_util::StreamExt;
use parquet::file::metadata::KeyValue;
use sluice_core::compaction::CompactionPolicy;
use sluice_core::{PartitionKey, SinkError, SortOrder, TableDef, conform};
use tokio::sync::Mutex;

use super::config::{LakeConfig, ORPHAN_GRACE};
use super::encoding::encoding_of;
use super::files::{LiveFile, landing_order};
use super::input::{WRITE_BATCH_ROWS, read_run};
use super::log::{TableLog, Then, merged_add_action};
use super::parallel::on_every_core_in_runs;
use super::part::{COMPACTED_FROM_KEY, NewFile, WrittenPart, write_file};
use super::path::{compacted_name, is_part_name};
use super::shrink;
use super::storage::{FileSync, TableFiles};
use super::stream::{Pieces, Streamed, write_streamed};

const SINK: &str = "lake";

/// What a compaction pass did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct CompactionReport {
    /// Merges committed.
    pub merges: u64,
    /// Merges given up because another compactor got their inputs first.
    pub lost_races: u64,
    /// Merges whose commit the store kept but whose answer was lost, found in the log.
    pub answers_lost: u64,
    /// Files merged away.
    pub files_in: u64,
    /// Files written.
    pub files_out: u64,
    /// Bytes of the files merged away.
    pub bytes_in: u64,
    /// Bytes written.
    pub bytes_out: u64,
    /// Rows rewritten.
    pub rows: u64,
    /// Files deleted: replaced longer ago than the retention, or never committed.
    pub files_deleted: u64,
    /// Seconds the pass took.
    pub elapsed_s: f64,
}

/// Progress of a pass, for a progress bar: input files done of the total planned.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// One merge of a pass: a partition and its input files, in the order they landed.
type PlannedMerge = (PartitionKey, Vec<LiveFile>);

/// A merged file, its rows, and how many of the merge's inputs (the first) it holds.
type Merged = (WrittenPart, u64, usize);

/// Plans and runs one compaction pass over `table`: the plan, then the merges side by side in
/// turns, each committed as it finishes.
pub(crate) async fn compact(
    config: &Arc<LakeConfig>,
    log: &Arc<Mutex<TableLog>>,
    table: &TableDef,
    policy: CompactionPolicy,
    progress: Progress<'_>,
) -> Result<CompactionReport, SinkError> {
    let started = Instant::now();
    let (merges, store, read_at) = plan(config, log, table, &policy).await?;
    let total: u64 = merges.iter().map(|(_, inputs)| inputs.len() as u64).sum();
    let mut report = CompactionReport::default();
    let mut done = 0;
    progress(0, total);
    // Merges run side by side and commit one at a time as they finish. Each reads, then
    // writes, in its turn, in the planned order, largest first: a merge's reads and its
    // encoding each use every core, so the next merge reads while one writes and writes while
    // that one commits, and the pass ends on the commit of its smallest merge, the cheapest
    // (its log update has the fewest files to replay). In turns, the pass ends sooner than with
    // the merges running free. After a failure the rest still finish, uncommitted, and their
    // outputs are deleted: nothing is left running when this returns.
    let mut pending = merges.len();
    let mut running = schedule(config, table, &store, policy.target_bytes, merges);
    let mut failure = None;
    while let Some((key, mut inputs, merged)) = running.next().await {
        pending -= 1;
        let planned = inputs.len() as u64;
        let (part, rows) = match merged {
            Ok((part, rows, held)) if failure.is_none() => {
                inputs.truncate(held);
                (part, rows)
            }
            Ok((part, _, _)) => {
                discard(&store, part.relative);
                continue;
            }
            Err(e) => {
                failure.get_or_insert(e);
                continue;
            }
        };
        // After the pass's last commit nothing here reads the state again: it is updated when
        // next needed, off the pass's time (the replay of the files added since the
        // checkpoint, and of the pass's own removals).
        let then = if pending == 0 {
            Then::Defer
        } else {
            Then::Update
        };
        let swap = Swap {
            key: &key,
            inputs: &inputs,
            part,
            rows,
            read_at,
        };
        if let Err(e) = commit_merge(log, &store, swap, &policy, then, &mut report).await {
            failure = Some(e);
            continue;
        }
        done += planned;
        progress(done, total);
    }
    if let Some(e) = failure {
        return Err(e);
    }
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The merges of a pass, running side by side in turns (see [`compact`]), as a stream of each
/// merge's partition, inputs and outcome in the order they finish.
fn schedule<'a>(
    config: &'a Arc<LakeConfig>,
    table: &'a TableDef,
    store: &'a TableFiles,
    target_bytes: u64,
    merges: Vec<PlannedMerge>,
) -> impl futures_util::Stream<Item = (PartitionKey, Vec<LiveFile>, Result<Merged, SinkError>)> + 'a
{
    let width = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_MERGES_AT_ONCE);
    let (reads, writes) = (Arc::new(Turns::default()), Arc::new(Turns::default()));
    let merges = merges
        .into_iter()
        .enumerate()
        .map(move |(turn, (key, inputs))| {
            let (config, def, target) = (config.clone(), table.clone(), store.clone());
            let files = inputs.clone();
            let (read, write) = (reads.turn(turn), writes.turn(turn));
            async move {
                let merged = tokio::task::spawn_blocking(move || {
                    run_merge(&config, &def, &target, &files, target_bytes, (read, write))
                })
                .await
                .map_err(|e| SinkError::retriable(SINK, format!("compaction task failed: {e}")))
                .and_then(|merged| merged);
                (key, inputs, merged)
            }
        });
    futures_util::stream::iter(merges).buffer_unordered(width)
}

/// The pass's merges, largest first, with where the table's files live and the log version
/// they were planned at.
async fn plan(
    config: &Arc<LakeConfig>,
    log: &Arc<Mutex<TableLog>>,
    table: &TableDef,
    policy: &CompactionPolicy,
) -> Result<(Vec<PlannedMerge>, TableFiles, u64), SinkError> {
    let (files, partition_of, store, read_at) = {
        let mut log = log.lock().await;
        let (files, read_at) = log.live_files().await?;
        let keys: Vec<PartitionKey> = files
            .iter()
            .map(|f| log.partition_of(&f.partition_values))
            .collect();
        (files, keys, log.files().clone(), read_at)
    };
    // Each partition's files in the order they landed: the policy packs them in the order
    // given, and a merge writes its inputs in that order.
    let mut by_partition: BTreeMap<PartitionKey, Vec<LiveFile>> = BTreeMap::new();
    let mut keyed: Vec<(LiveFile, PartitionKey)> = files.into_iter().zip(partition_of).collect();
    keyed.sort_by(|(a, _), (b, _)| landing_order(a, b));
    for (file, key) in keyed {
        if is_ours(&file.relative) {
            by_partition.entry(key).or_default().push(file);
        }
    }
    let mut merges: Vec<PlannedMerge> = Vec::new();
    // Planning may read a sample of a partition's parts (a backlog's: `super::shrink`).
    let planned = {
        let (config, def, store, policy) = (config.clone(), table.clone(), store.clone(), *policy);
        tokio::task::spawn_blocking(move || {
            by_partition
                .into_iter()
                .map(|(key, files)| {
                    let plan = shrink::plan(&config, &def, &store, &policy, &files);
                    (key, files, plan)
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| SinkError::retriable(SINK, format!("compaction planning failed: {e}")))?
    };
    for (key, files, plan) in planned {
        for merge in plan {
            let inputs = merge.inputs.iter().map(|&i| files[i].clone()).collect();
            merges.push((key.clone(), inputs));
        }
    }
    merges.sort_by_key(|(_, inputs)| std::cmp::Reverse(inputs.len()));
    Ok((merges, store, read_at))
}

/// Runs one merge, taking its read and write turns: the merged file, its rows, and how many
/// of the inputs (the first) it holds.
fn run_merge(
    config: &LakeConfig,
    def: &TableDef,
    target: &TableFiles,
    files: &[LiveFile],
    target_bytes: u64,
    (read, write): (Turn, Turn),
) -> Result<Merged, SinkError> {
    let all = files.len();
    if streams(config, def, files) {
        // A streamed merge reads and encodes at once: it takes both turns.
        read.wait();
        write.wait();
        let passed = move || drop((read, write));
        if let Some((part, rows)) = merge_streaming(config, def, target, files, passed)? {
            return Ok((part, rows, all));
        }
        // Inputs of several layouts, brought into one first, which holds all their rows: no
        // more of them than the target's worth (a merge packed by its merged size may have
        // more; the rest wait for the next pass).
        let held = &files[..held_inputs(files, target_bytes)];
        let batches = read_inputs(target, held)?;
        return merge(config, def, target, held, batches, || {})
            .map(|(part, rows)| (part, rows, held.len()));
    }
    read.wait();
    let batches = read_inputs(target, files);
    drop(read);
    let batches = batches?;
    write.wait();
    // The next merge encodes while this one finishes its last column chunks and its file is
    // made durable.
    merge(config, def, target, files, batches, || drop(write)).map(|(part, rows)| (part, rows, all))
}

/// A finished merge to commit: its inputs became `part`, of `rows` rows.
struct Swap<'a> {
    key: &'a PartitionKey,
    inputs: &'a [LiveFile],
    part: WrittenPart,
    rows: u64,
    /// The log version the pass was planned at.
    read_at: u64,
}

/// Commits one merge's swap and counts it in `report`; a merge that lost its race to another
/// compactor, or failed for sure, has its file deleted.
async fn commit_merge(
    log: &Arc<Mutex<TableLog>>,
    store: &TableFiles,
    swap: Swap<'_>,
    policy: &CompactionPolicy,
    then: Then,
    report: &mut CompactionReport,
) -> Result<(), SinkError> {
    let Swap {
        key,
        inputs,
        part,
        rows,
        read_at,
    } = swap;
    let mut log = log.lock().await;
    let add = merged_add_action(&part, inputs);
    let lost_before = log.answers_lost();
    let committed = log
        .commit_compaction(inputs, read_at, add, policy.target_bytes, then)
        .await;
    report.answers_lost += log.answers_lost() - lost_before;
    match committed {
        Ok(true) => {
            report.merges += 1;
            report.files_in += inputs.len() as u64;
            report.files_out += 1;
            report.bytes_in += inputs.iter().map(|f| f.bytes).sum::<u64>();
            report.bytes_out += part.bytes;
            report.rows += rows;
            tracing::debug!(partition = %key, inputs = inputs.len(), bytes = part.bytes, "merged");
            Ok(())
        }
        Ok(false) => {
            report.lost_races += 1;
            discard(store, part.relative);
            Ok(())
        }
        Err(e) => {
            if !log.is_uncertain() {
                discard(store, part.relative);
            }
            Err(e)
        }
    }
}

/// How many of `inputs`, from the first, a merge that holds all its rows takes: those within
/// `target_bytes` of files, and at least two.
fn held_inputs(inputs: &[LiveFile], target_bytes: u64) -> usize {
    let mut bytes = 0u64;
    let within = inputs
        .iter()
        .take_while(|f| {
            bytes = bytes.saturating_add(f.bytes);
            bytes <= target_bytes
        })
        .count();
    within.max(2).min(inputs.len())
}

/// Merges at most this many at once: each holds its inputs' rows in memory, or (streamed)
/// its output's encoded pages and a few runs of rows.
const MAX_MERGES_AT_ONCE: usize = 2;

/// Whose turn it is, for a step merges take one after another in the order they were planned.
#[derive(Default)]
struct Turns {
    state: std::sync::Mutex<TurnState>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct TurnState {
    /// The first turn not yet passed.
    next: usize,
    /// Turns passed out of order, waiting for those before them.
    passed: HashSet<usize>,
}

impl Turns {
    /// Turn number `turn`, passed when dropped.
    fn turn(self: &Arc<Self>, turn: usize) -> Turn {
        Turn {
            turns: self.clone(),
            turn,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TurnState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A merge's turn at a step. Dropping it passes it, whether the merge took the step, failed,
/// panicked or never ran: a later merge never waits on one that will not take it.
struct Turn {
    turns: Arc<Turns>,
    turn: usize,
}

impl Turn {
    /// Blocks until every turn before this one has passed.
    fn wait(&self) {
        let mut state = self.turns.state();
        while state.next < self.turn {
            state = self
                .turns
                .changed
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut state = self.turns.state();
        let TurnState { next, passed } = &mut *state;
        passed.insert(self.turn);
        while passed.remove(next) {
            *next += 1;
        }
        self.turns.changed.notify_all();
    }
}

/// Whether a merge of `inputs` streams ([`merge_streaming`]): when the table has no sort key
/// (so the rows keep the inputs' order) and the inputs are large enough to make a zstd file
/// ([`LakeConfig::lz4_below`], judged by their file sizes). A small merge holds little, and a
/// sorted one needs all its rows at once to sort them.
fn streams(config: &LakeConfig, table: &TableDef, inputs: &[LiveFile]) -> bool {
    let bytes: u64 = inputs.iter().map(|f| f.bytes).sum();
    table.sort_by().is_empty() && bytes >= config.lz4_below
}

/// Writes the rows of `inputs`, in their order, as one file in the inputs' folder, encoding
/// them as they are read ([`write_streamed`]): the inputs are read in runs as
/// [`read_inputs`] reads them, each run's rows packed into large batches, and a run is freed
/// once it is encoded, so the merge holds about its output's size rather than its rows.
/// `all_read` is called once every input has been read. `None` when the inputs are not all
/// of one layout: nothing was written.
fn merge_streaming(
    config: &LakeConfig,
    table: &TableDef,
    files: &TableFiles,
    inputs: &[LiveFile],
    all_read: impl FnOnce() + Send,
) -> Result<Option<(WrittenPart, u64)>, SinkError> {
    let bytes: u64 = inputs.iter().map(|f| f.bytes).sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runs: Vec<&[LiveFile]> = inputs
        .chunks(inputs.len().div_ceil(cores * RUNS_PER_CORE).max(1))
        .collect();
    let pieces = Pieces {
        count: runs.len(),
        read: |run: usize| read_run(files, runs[run]),
        rows: inputs.iter().map(|f| f.rows).sum(),
    };
    let name = compacted_name();
    let file = merged_file(inputs, &name);
    let encoding = encoding_of(config, bytes)?;
    match write_streamed(config, table, files, file, encoding, pieces, all_read)? {
        Streamed::Written(part, rows) => Ok(Some((part, rows))),
        Streamed::NotStreamable => Ok(None),
    }
}

/// The file a merge of `inputs` writes, named `name`: in the inputs' folder, its footer saying
/// how many parts it replaced.
fn merged_file<'a>(inputs: &'a [LiveFile], name: &'a str) -> NewFile<'a> {
    let folder = inputs
        .first()
        .and_then(|input| input.relative.rsplit_once('/'))
        .map(|(folder, _)| folder);
    let footer = KeyValue::new(COMPACTED_FROM_KEY.to_owned(), inputs.len().to_string());
    NewFile {
        folder,
        name,
        footer,
        sync: FileSync::Durable,
    }
}

/// Sorts the rows of `inputs` (read as `batches`) by the table's sort key and writes them as
/// one file in the inputs' folder: the new file and the rows in it. `winding_down` is called
/// once the encoding leaves cores idle ([`write_file`]), or, for a streamed one, once every row
/// is gathered ([`write_streamed`]). Once the inputs are large enough for zstd, the rows in sort
/// order are gathered from `batches` a piece at a time as the encoding takes them
/// ([`merge_sorted_streaming`]), never all at once.
fn merge(
    config: &LakeConfig,
    table: &TableDef,
    files: &TableFiles,
    inputs: &[LiveFile],
    batches: Vec<RecordBatch>,
    winding_down: impl FnOnce() + Send,
) -> Result<(WrittenPart, u64), SinkError> {
    let batches = one_layout(batches)?;
    let bytes: u64 = inputs.iter().map(|f| f.bytes).sum();
    if bytes >= config.lz4_below
        && let Some(order) = table.sort_order(&batches).map_err(sort_failed)?
    {
        if let Some(merged) =
            merge_sorted_streaming(config, table, files, inputs, &batches, &order, winding_down)?
        {
            return Ok(merged);
        }
        // Dropping `winding_down` passed it: nothing to call once more.
        return merge_held(config, table, files, inputs, &batches, || {});
    }
    merge_held(config, table, files, inputs, &batches, winding_down)
}

/// [`merge`] holding the rows in sort order: sorted all at once, then written.
fn merge_held(
    config: &LakeConfig,
    table: &TableDef,
    files: &TableFiles,
    inputs: &[LiveFile],
    batches: &[RecordBatch],
    winding_down: impl FnOnce() + Send,
) -> Result<(WrittenPart, u64), SinkError> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    // Inputs are sorted runs; their concatenation is not.
    let batches = table
        .sort_chunks(batches, WRITE_BATCH_ROWS)
        .map_err(sort_failed)?;
    let name = compacted_name();
    let file = merged_file(inputs, &name);
    let part = write_file(config, table, files, file, &batches, winding_down)?;
    Ok((part, rows as u64))
}

/// The failure of a merge whose rows could not be put in sort order (a sort key column missing
/// from them, say): permanent, as the same rows would fail again.
fn sort_failed(e: arrow::error::ArrowError) -> SinkError {
    SinkError::permanent(SINK, format!("cannot sort merged rows: {e}"))
}

/// Writes the rows of `batches` (the rows of `inputs`, one layout) in the sort `order` as one
/// file, streaming ([`write_streamed`]): each piece of [`WRITE_BATCH_ROWS`] rows is gathered in
/// sort order when an encoding thread is ready for it and freed once encoded, so the merge
/// holds its inputs' rows and a few pieces, not a second, sorted copy of every row. `None` when
/// the rows cannot be streamed (nested columns, no rows): nothing was written.
fn merge_sorted_streaming(
    config: &LakeConfig,
    table: &TableDef,
    files: &TableFiles,
    inputs: &[LiveFile],
    batches: &[RecordBatch],
    order: &SortOrder,
    all_gathered: impl FnOnce() + Send,
) -> Result<Option<(WrittenPart, u64)>, SinkError> {
    let rows = order.rows();
    let pieces = Pieces {
        count: rows.div_ceil(WRITE_BATCH_ROWS),
        read: |piece: usize| {
            let from = piece * WRITE_BATCH_ROWS;
            order
                .gather(batches, from..rows.min(from + WRITE_BATCH_ROWS))
                .map(|batch| vec![batch])
                .map_err(sort_failed)
        },
        rows: Some(rows as u64),
    };
    let name = compacted_name();
    let file = merged_file(inputs, &name);
    let encoding = encoding_of(config, inputs.iter().map(|f| f.bytes).sum())?;
    match write_streamed(config, table, files, file, encoding, pieces, all_gathered)? {
        Streamed::Written(part, rows) => Ok(Some((part, rows))),
        Streamed::NotStreamable => Ok(None),
    }
}

/// Deletes files the table no longer references: those a compaction replaced more than
/// `retention` ago, and those no commit ever referenced, after [`ORPHAN_GRACE`]. A replaced file
/// is never taken for an orphan, however old the file: only its removal's age counts. Returns
/// how many it deleted.
pub(crate) async fn vacuum(
    log: &Arc<Mutex<TableLog>>,
    retention: Duration,
) -> Result<u64, SinkError> {
    let (files, referenced, expired) = {
        let mut log = log.lock().await;
        let mut referenced: HashSet<String> = log
            .live_files()
            .await?
            .0
            .into_iter()
            .map(|f| f.relative)
            .collect();
        let cutoff = chrono::Utc::now().timestamp_millis()
            - i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
        let mut expired = Vec::new();
        for (relative, at) in log.removed().await? {
            if at < cutoff && !referenced.contains(&relative) && is_ours(&relative) {
                expired.push(relative.clone());
            }
            referenced.insert(relative);
        }
        (log.files().clone(), referenced, expired)
    };
    tokio::task::spawn_blocking(move || {
        let mut deleted = 0;
        for relative in expired {
            if files.delete(&relative) {
                deleted += 1;
            }
        }
        let now = SystemTime::now();
        for (relative, modified) in files.unreferenced_files(&referenced)? {
            let old = now
                .duration_since(modified)
                .is_ok_and(|age| age > ORPHAN_GRACE);
            if old && files.delete(&relative) {
                deleted += 1;
            }
        }
        Ok(deleted)
    })
    .await
    .map_err(|e| SinkError::retriable(SINK, format!("vacuum task failed: {e}")))?
}

/// Deletes a file no commit references, off the runtime's threads, without waiting: a file
/// left behind is an orphan the vacuum deletes later.
pub(crate) fn discard(files: &TableFiles, relative: String) {
    let files = files.clone();
    tokio::task::spawn_blocking(move || files.delete(&relative));
}

/// Whether sluice wrote this file. Compaction rewrites only its own files, whose paths it knows
/// to round-trip through the log's URI escaping, so a removal names a file exactly as its
/// addition did; and the vacuum deletes only its own: another writer's removed files are for
/// that writer's vacuum and retention (Delta's default keeps them a week, for time travel).
fn is_ours(relative: &str) -> bool {
    is_part_name(relative.rsplit('/').next().unwrap_or(relative))
}

/// Reads every input file on one thread per core, in runs of consecutive files that the
/// threads take in turn ([`on_every_core_in_runs`]): about [`RUNS_PER_CORE`] runs per core,
/// so the threads finish together, without one left reading its share alone at the end. Each
/// run's rows are packed into batches of up to [`WRITE_BATCH_ROWS`] as they are read
/// ([`read_run`]): the writer gets large arrays without a pass on one thread after the reads,
/// and the small batches are never all held at once. A sorted table's merge reads this way: it
/// holds its rows until they are gathered in sort order, and held as a few large arrays they
/// take less memory than as thousands of small ones, and are gathered from faster.
fn read_inputs(files: &TableFiles, inputs: &[LiveFile]) -> Result<Vec<RecordBatch>, SinkError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let run_len = inputs.len().div_ceil(cores * RUNS_PER_CORE);
    on_every_core_in_runs(inputs, run_len, |run| read_run(files, run))
}

/// How many runs a merge's reads are cut into per core. More runs even out the threads' ends
/// (a thread holds the others up by one run at most); fewer make larger batches of a coalesced
/// read.
const RUNS_PER_CORE: usize = 32;

/// The rows of a merge in one layout: the columns of all its inputs, in the order they first
/// appear. Files written before a column was dropped from the table's config still hold it,
/// and the Delta table still has it: the merged file keeps their values (null in the rows of
/// files without it), where writing every batch as the first one's layout would lose them.
fn one_layout(batches: Vec<RecordBatch>) -> Result<Vec<RecordBatch>, SinkError> {
    let Some(first) = batches.first().map(RecordBatch::schema) else {
        return Ok(batches);
    };
    if batches.iter().all(|b| b.schema() == first) {
        return Ok(batches);
    }
    let failed = |e: String| {
        SinkError::permanent(
            SINK,
            format!("cannot merge files of different layouts: {e}"),
        )
    };
    let mut fields: Vec<Field> = Vec::new();
    for schema in batches.iter().map(RecordBatch::schema) {
        for field in schema.fields() {
            match fields.iter_mut().find(|f| f.name() == field.name()) {
                Some(known) if known.data_type() != field.data_type() => {
                    return Err(failed(format!(
                        "column '{}' is {} in one and {} in another",
                        field.name(),
                        known.data_type(),
                        field.data_type()
                    )));
                }
                Some(known) => {
                    let nullable = known.is_nullable() || field.is_nullable();
                    known.set_nullable(nullable);
                }
                None => fields.push(field.as_ref().clone()),
            }
        }
    }
    // A column some inputs lack is null in their rows.
    for field in &mut fields {
        if batches
            .iter()
            .any(|b| b.schema().field_with_name(field.name()).is_err())
        {
            field.set_nullable(true);
        }
    }
    let union: SchemaRef = Arc::new(Schema::new(fields));
    batches
        .iter()
        .map(|batch| conform(&union, batch).map_err(failed))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_go_in_order_and_a_dropped_one_holds_no_one_up() {
        let turns = Arc::new(Turns::default());
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        // Turn 0 never takes its step: dropping it must let the others go.
        let skipped = turns.turn(0);
        let waiting: Vec<_> = (1..=3)
            .rev()
            .map(|n| {
                let (turn, order) = (turns.turn(n), order.clone());
                std::thread::spawn(move || {
                    turn.wait();
                    order.lock().unwrap().push(n);
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            order.lock().unwrap().is_empty(),
            "a turn went before turn 0 passed"
        );
        drop(skipped);
        for thread in waiting {
            thread.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![1, 2, 3]);
    }
}
