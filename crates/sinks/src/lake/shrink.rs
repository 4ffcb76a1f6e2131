//! How much small parts shrink when merged: the estimate that lets a merge's *output*, not its
//! inputs, come near the compaction target.
//!
//! A small part is LZ4 with plain values and carries a footer of its own; merged, its rows are zstd
//! with dictionaries under one footer, and take several times fewer bytes. Packing merges by their
//! inputs' bytes therefore made files of a fraction of the target, which a later pass would merge
//! again, rewriting their rows. Where a partition's small parts add up to more than the target (a
//! backlog: only then does packing cut a tier into several merges), a sample of them is read and
//! encoded in memory as a merge would encode it, and the ratio of its size to the sample's files
//! scales each small part's expected share of a merged file ([`CompactionPolicy::plan_by`]).
//!
//! The estimate errs large: the sample's rows share one footer and build dictionaries over
//! fewer rows than a merge does. It is never taken below [`MIN_SHRINK`], so a merge reads at
//! most four times the target in small parts, whatever the sample says. Only merges that
//! stream ([`super::stream`]: tables without a sort key) are packed by it: they hold about
//! their output, where a sorted merge holds its inputs' rows. (A streamed merge that meets
//! inputs of several layouts, which the sample may have missed, holds their rows too, and then
//! takes only the target's worth of them: `compact.rs`.)

use arrow::array::RecordBatch;
use parquet::file::metadata::KeyValue;
use sluice_core::TableDef;
use sluice_core::compaction::{CompactionPolicy, Merge};

use super::config::LakeConfig;
use super::encoding::encoding_of;
use super::files::{LiveFile, part_sizes};
use super::input::read_run;
use super::part::{COMPACTED_FROM_KEY, encoded_size};
use super::storage::TableFiles;

/// The estimate's floor: a merged file is taken to hold at least this share of its small
/// inputs' bytes.
const MIN_SHRINK: f64 = 0.25;

/// At most this many files are read for the sample, spread evenly over the small parts...
const SAMPLE_FILES: usize = 64;

/// ...and at most about this many bytes of them.
const SAMPLE_BYTES: u64 = 4 << 20;

/// Whether a part counts as small here: smaller than [`LakeConfig::lz4_below`], as the LZ4 and
/// plain parts are (a flush of more rows than that in memory is zstd, and may land smaller: the
/// sample takes the parts as they come).
fn is_small(config: &LakeConfig, file: &LiveFile) -> bool {
    file.bytes < config.lz4_below
}

/// The merges `policy` picks among `files` (one partition's, of `table`, stored in `store`):
/// packed by the merged file's estimated size where a backlog of small parts calls for it
/// ([`sample`]), by the inputs' bytes otherwise. Blocks on the sample's reads: call it off the
/// runtime's worker threads.
pub(crate) fn plan(
    config: &LakeConfig,
    table: &TableDef,
    store: &TableFiles,
    policy: &CompactionPolicy,
    files: &[LiveFile],
) -> Vec<Merge> {
    let sizes = part_sizes(files);
    let shrink = sample(config, table, policy, files)
        .and_then(|sample| estimate(config, table, store, policy, &sample));
    match shrink {
        Some(shrink) => {
            tracing::debug!(table = %table.name(), shrink, "merged size estimated");
            policy.plan_by(&sizes, |i| expected_out(config, &files[i], shrink))
        }
        None => policy.plan(&sizes),
    }
}

/// The files to sample for an estimate of how much the small parts among `files` (one
/// partition's) shrink when merged; `None` when there is no need to estimate: the table is
/// sorted, or its small parts fit in one merge anyway.
fn sample(
    config: &LakeConfig,
    table: &TableDef,
    policy: &CompactionPolicy,
    files: &[LiveFile],
) -> Option<Vec<LiveFile>> {
    if !table.sort_by().is_empty() {
        return None;
    }
    let small: Vec<&LiveFile> = files
        .iter()
        .filter(|f| is_small(config, f) && !policy.is_near_target(f.bytes))
        .collect();
    let small_bytes: u64 = small.iter().map(|f| f.bytes).sum();
    if small_bytes <= policy.target_bytes {
        return None;
    }
    // Evenly spread: a backlog's old and new parts may differ.
    let step = small.len().div_ceil(SAMPLE_FILES).max(1);
    let mut sample = Vec::new();
    let mut sample_bytes = 0;
    for file in small.into_iter().step_by(step) {
        if sample_bytes >= SAMPLE_BYTES {
            break;
        }
        sample_bytes += file.bytes;
        sample.push(file.clone());
    }
    Some(sample)
}

/// The expected size of a merged file per byte of small parts, from `sample` ([`sample`]'s),
/// in `[MIN_SHRINK, 1]`; `None` when the sample cannot be read or holds several layouts:
/// merges are then packed by their inputs' bytes. Blocks on reads: call it off the runtime's
/// worker threads.
fn estimate(
    config: &LakeConfig,
    table: &TableDef,
    store: &TableFiles,
    policy: &CompactionPolicy,
    sample: &[LiveFile],
) -> Option<f64> {
    let sample_bytes: u64 = sample.iter().map(|f| f.bytes).sum();
    let estimated = read_run(store, sample).and_then(|batches| {
        let Some(first) = batches.first().map(RecordBatch::schema) else {
            return Ok(None);
        };
        if batches.iter().any(|b| b.schema() != first) {
            return Ok(None);
        }
        // Encoded as a merge near the target is.
        let encoding =
            encoding_of(config, policy.target_bytes)?.fitted_to(&batches, config.row_group_rows);
        let footer = KeyValue::new(COMPACTED_FROM_KEY.to_owned(), sample.len().to_string());
        let out = encoded_size(config, table, &batches, encoding, footer)?;
        Ok(Some(out as f64 / sample_bytes.max(1) as f64))
    });
    match estimated {
        Ok(shrink) => shrink.map(|s| s.clamp(MIN_SHRINK, 1.0)),
        Err(e) => {
            // The merges read these files too, and say what is wrong with them.
            tracing::debug!(table = %table.name(), error = %e, "no estimate of merged sizes");
            None
        }
    }
}

/// Each file's expected share of a merged file, by [`estimate`]'s `shrink`: a small part's
/// bytes times `shrink`, any other part's own bytes.
fn expected_out(config: &LakeConfig, file: &LiveFile, shrink: f64) -> u64 {
    if is_small(config, file) {
        (file.bytes as f64 * shrink).ceil() as u64
    } else {
        file.bytes
    }
}
