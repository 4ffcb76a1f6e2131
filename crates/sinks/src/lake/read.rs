//! Reading a lake table's current state from outside the sink: the files its log holds now.
//! For `sluice parts`, the lab's exactly-once checks and tests; a reader never lists folders,
//! which also hold files no commit references (an interrupted flush, a compaction's inputs
//! awaiting deletion).

use std::path::Path;

use deltalake_core::DeltaTableError;
use sluice_core::compaction::{CompactionPolicy, Merge};
use sluice_core::{SinkError, TableDef};

use super::config::{LakeConfig, LakeRoot};
use super::files::{LiveFile, files_of, landing_order};
use super::log::existing_table;
use super::parallel::on_every_core;
use super::storage::TableFiles;

const SINK: &str = "lake";

/// A lake table opened to read: the files its log holds at its newest version.
pub struct LakeTable {
    config: LakeConfig,
    files: TableFiles,
    live: Vec<LiveFile>,
}

impl LakeTable {
    /// Opens table `name` of the lake `config` describes; `None` when there is no Delta table
    /// there.
    pub async fn open(config: &LakeConfig, name: &str) -> Result<Option<Self>, SinkError> {
        let location = config.root.table(name);
        let Some(mut table) = existing_table(config, &location).await? else {
            return Ok(None);
        };
        let failed = |e: DeltaTableError| {
            SinkError::retriable(
                SINK,
                format!("cannot read the Delta log of {location}: {e}"),
            )
        };
        table.load().await.map_err(failed)?;
        let mut live = files_of(table.snapshot().map_err(failed)?);
        live.sort_by(|a, b| a.relative.cmp(&b.relative));
        let store = table.log_store().object_store(None);
        Ok(Some(Self {
            config: config.clone(),
            files: TableFiles::new(&config.root, &location, store),
            live,
        }))
    }

    /// The files the table holds, by path.
    pub fn live_files(&self) -> &[LiveFile] {
        &self.live
    }

    /// The merges a compaction pass would make of `files` (one partition's) now, as the
    /// compactor plans them for `table` (reading a sample of a backlog's small parts to
    /// estimate their merged size), packed in the order the files landed as the compactor
    /// packs them: each merge's inputs index `files`, in that order. Blocks: call it off the
    /// runtime's worker threads.
    pub fn plan(
        &self,
        table: &TableDef,
        policy: &CompactionPolicy,
        files: &[LiveFile],
    ) -> Vec<Merge> {
        let mut order: Vec<usize> = (0..files.len()).collect();
        order.sort_by(|&a, &b| landing_order(&files[a], &files[b]));
        let landed: Vec<LiveFile> = order.iter().map(|&i| files[i].clone()).collect();
        let mut merges = super::shrink::plan(&self.config, table, &self.files, policy, &landed);
        for input in merges.iter_mut().flat_map(|m| m.inputs.iter_mut()) {
            *input = order[*input];
        }
        merges
    }

    /// The footer size of each of `files` (metadata plus the 8-byte tail), read from their
    /// tails, several at a time. Blocks: call it off the runtime's worker threads.
    pub fn footer_bytes(&self, files: &[LiveFile]) -> Result<Vec<u64>, SinkError> {
        on_every_core(files, |file| {
            Ok(vec![self.files.footer_bytes(&file.relative, file.bytes)?])
        })
    }
}

/// The files the Delta table in the folder `dir` holds at its newest version; none when `dir`
/// holds no Delta table.
pub async fn live_files(dir: &Path) -> Result<Vec<LiveFile>, SinkError> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Ok(Vec::new());
    };
    let config = LakeConfig {
        root: LakeRoot::Folder(parent.to_owned()),
        ..LakeConfig::new(parent)
    };
    Ok(LakeTable::open(&config, &name.to_string_lossy())
        .await?
        .map(|table| table.live)
        .unwrap_or_default())
}

/// [`live_files`] for callers without an async runtime (or inside one they may not block):
/// runs on a thread of its own.
pub fn live_files_blocking(dir: &Path) -> Result<Vec<LiveFile>, SinkError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| {
                        SinkError::retriable(SINK, format!("cannot start a runtime: {e}"))
                    })?
                    .block_on(live_files(dir))
            })
            .join()
            .unwrap_or_else(|_| Err(SinkError::retriable(SINK, "the log reader panicked")))
    })
}
