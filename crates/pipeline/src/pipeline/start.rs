//! Starting the pipeline: the declared and stored tables, their stores, the log, replay.
//!
//! Each store says which sequence numbers it already holds, per partition
//! ([`sluice_core::Sink::committed`]). The log is opened so new LSNs start above all of them,
//! above its own frames and above its reservation (every LSN it ever handed out); then every
//! frame is replayed into its table's writer, partition by partition, except the pieces the
//! store already holds. Replayed rows go through the same FIFO as new inserts, so no new insert
//! is acknowledged `committed` before them.
//!
//! With the log on, a store that does not answer at start (a retriable error, or no answer
//! within [`START_OPEN_TIMEOUT`]) does not stop it: its tables' writers open them later
//! (`writer::Opening`), and leave out then the replayed pieces the store holds. This is sound
//! because of the reservation: every new LSN is above anything any store can hold, whether or
//! not the store was asked. So it needs a reservation made at an earlier start: the first start
//! of a log, which has none, asks every store, and so does every start without the log.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use sluice_core::{Catalog, PartitionKey, Sink, TableDef, TableLayout, TableName};
use sluice_wal::{FsStorage, Replay, Storage, Wal};

use super::replay::replay_frames;
use super::{Inner, Pipeline};
use crate::config::PipelineConfig;
use crate::error::StartError;
use crate::memory::MemoryBudget;
use crate::writer::{Opening, open_table};

/// How long the start waits for a store to open a table (with the log on) before it goes on
/// without it and leaves the opening to the table's writer.
pub const START_OPEN_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a store that is down stops a start without the log.
const NO_LOG: &str = "with the write-ahead log on, sluice starts anyway and lands the table's \
                      inserts once its store answers";

/// Why it stops the first start with a log.
const FIRST_START: &str = "this write-ahead log has never numbered inserts with every store \
     answering (a new data directory, or one an older sluice kept), so every store must answer \
     once; later starts go on without a store that is down";

/// A table and the store it lands in.
type Placed = (TableDef, Arc<dyn Sink>);

/// Collects the declared tables before the pipeline starts.
pub struct PipelineBuilder {
    config: PipelineConfig,
    catalog: Arc<dyn Catalog>,
    default_sink: Arc<dyn Sink>,
    declared: Vec<(TableDef, Option<Arc<dyn Sink>>)>,
    wal_storage: Arc<dyn Storage>,
}

/// What the stores said at start: the sequence numbers each table's partitions hold, the
/// tables whose store did not answer (and why), and the highest number any store holds.
#[derive(Default)]
struct Opened {
    watermarks: HashMap<TableName, HashMap<PartitionKey, u64>>,
    unopened: HashMap<TableName, String>,
    highest: u64,
}

impl Pipeline {
    /// Starts building a pipeline over `catalog`, landing tables in `default_sink` unless
    /// declared otherwise.
    pub fn builder(
        config: PipelineConfig,
        catalog: Arc<dyn Catalog>,
        default_sink: Arc<dyn Sink>,
    ) -> PipelineBuilder {
        PipelineBuilder {
            config,
            catalog,
            default_sink,
            declared: Vec::new(),
            wal_storage: Arc::new(FsStorage),
        }
    }
}

impl PipelineBuilder {
    /// Declares a table (from the config file), landing in `sink` or the default sink.
    pub fn table(mut self, def: TableDef, sink: Option<Arc<dyn Sink>>) -> Self {
        self.declared.push((def, sink));
        self
    }

    /// The file access the write-ahead log uses: real files unless a test injects faults.
    pub fn wal_storage(mut self, storage: Arc<dyn Storage>) -> Self {
        self.wal_storage = storage;
        self
    }

    /// Loads the catalog, prepares every table in its sink and starts the writers.
    /// Must be called inside a tokio runtime.
    pub async fn start(self) -> Result<Pipeline, StartError> {
        let config = self.config;
        config.check_policy("flush", &config.default_policy)?;
        for (def, _) in &self.declared {
            config.check_policy(&format!("tables.{}.flush", def.name()), def.policy())?;
        }
        let catalog = self.catalog.clone();
        let stored = tokio::task::spawn_blocking(move || catalog.load())
            .await
            .map_err(|e| sluice_core::CatalogError::new(format!("catalog task failed: {e}")))??;
        let tables = every_table(&config, self.declared, stored, &self.default_sink)?;
        // Each store says what it holds; the log's numbering starts above all of it. With a log
        // whose reservation is above everything (see `sluice_wal::reserve`), a store that does
        // not answer is opened later by its tables' writers.
        let deferrable = match &config.wal {
            None => Err(NO_LOG),
            Some(wal) if sluice_wal::reserve::exists(self.wal_storage.as_ref(), &wal.dir) => Ok(()),
            Some(_) => Err(FIRST_START),
        };
        let opened = open_stores(&tables, &self.catalog, deferrable).await?;
        let (wal, replay) = open_wal(&config, &self.wal_storage, opened.highest)?;
        let pipeline = Pipeline {
            inner: Arc::new(Inner {
                memory: Arc::new(MemoryBudget::new(config.max_buffer_bytes)),
                config,
                catalog: self.catalog,
                default_sink: self.default_sink,
                tables: RwLock::new(HashMap::new()),
                creating: tokio::sync::Mutex::new(()),
                seq: AtomicU64::new(opened.highest + 1),
                wal,
                replay: std::sync::OnceLock::new(),
                accepting: AtomicBool::new(true),
                writers: Mutex::new(Vec::new()),
            }),
        };
        for (def, sink) in tables {
            let opening = opened
                .unopened
                .get(def.name())
                .map(|error| Opening::new(pipeline.inner.catalog.clone(), error));
            pipeline.register(def, sink, opening);
        }
        if let Some(replay) = replay {
            pipeline.replay(replay, opened.watermarks).await?;
        }
        Ok(pipeline)
    }
}

/// The declared tables, then the ones the catalog holds that the config does not declare, each
/// with the store it lands in.
fn every_table(
    config: &PipelineConfig,
    declared: Vec<(TableDef, Option<Arc<dyn Sink>>)>,
    stored: Vec<(TableName, TableLayout)>,
    default_sink: &Arc<dyn Sink>,
) -> Result<Vec<Placed>, StartError> {
    let mut tables: Vec<Placed> = Vec::new();
    for (def, sink) in declared {
        let stored_layout = stored.iter().find(|(n, _)| n == def.name()).map(|(_, l)| l);
        let def = match stored_layout {
            Some(layout) if def.evolves() => with_evolved_columns(def, layout)?,
            _ => def,
        };
        if let Some(layout) = stored_layout
            && *layout != def.layout()
        {
            tracing::warn!(
                table = %def.name(),
                "the config changes the table's layout; its store fits the table to it as it \
                 opens it (rows landed before read added columns as null)"
            );
        }
        tables.push((def, sink.unwrap_or_else(|| default_sink.clone())));
    }
    for (name, layout) in stored {
        if tables.iter().any(|(d, _)| d.name() == &name) {
            continue;
        }
        let def = TableDef::new(name.clone(), layout, config.default_policy)
            .map_err(|e| e.within(&format!("stored table {name}")))?
            .with_throttle(config.default_throttle)
            .with_evolve(config.evolve);
        tables.push((def, default_sink.clone()));
    }
    Ok(tables)
}

/// A declared table that evolves, with the columns it took from inserts (the stored layout's
/// columns the config does not declare) after the declared ones: the inserts in the log may
/// hold values for them.
fn with_evolved_columns(def: TableDef, stored: &TableLayout) -> Result<TableDef, StartError> {
    let evolved: Vec<_> = stored
        .columns
        .iter()
        .filter(|c| def.schema().column(&c.name).is_none())
        .cloned()
        .collect();
    if evolved.is_empty() {
        return Ok(def);
    }
    let name = def.name().to_string();
    Ok(def
        .with_columns(evolved)
        .map_err(|e| e.within(&format!("table {name}")))?)
}

/// Opens every table in its store. `deferrable` is `Ok` when a store that does not answer may
/// be left to the table's writer, and otherwise says why it stops the start.
async fn open_stores(
    tables: &[Placed],
    catalog: &Arc<dyn Catalog>,
    deferrable: Result<(), &'static str>,
) -> Result<Opened, StartError> {
    let mut opened = Opened::default();
    // Stores that did not answer: their other tables are not tried again now, so a store
    // that times out costs the start one timeout, not one per table.
    let mut down: Vec<&Arc<dyn Sink>> = Vec::new();
    for (def, sink) in tables {
        if down.iter().any(|d| Arc::ptr_eq(d, sink)) {
            tracing::warn!(
                table = %def.name(), sink = sink.name(),
                "the table's store did not answer for another table; sluice starts without it"
            );
            let error = "it did not answer for another table at start".to_owned();
            opened.unopened.insert(def.name().clone(), error);
            continue;
        }
        let open = open_table(sink.as_ref(), catalog, def);
        let answer = match deferrable {
            Err(_) => open.await,
            Ok(()) => tokio::time::timeout(START_OPEN_TIMEOUT, open)
                .await
                .unwrap_or_else(|_| {
                    let reason = format!("no answer within {START_OPEN_TIMEOUT:?}");
                    Err(sluice_core::SinkError::retriable(sink.name(), reason).into())
                }),
        };
        match answer {
            Ok(held) => {
                opened.highest = held.values().copied().fold(opened.highest, u64::max);
                opened.watermarks.insert(def.name().clone(), held);
            }
            Err(StartError::Sink(error)) if error.is_retriable() && deferrable.is_ok() => {
                tracing::warn!(
                    table = %def.name(), sink = sink.name(), error = %error,
                    "the table's store does not answer; sluice starts without it: the \
                     table's inserts are logged and held, and land once the store answers"
                );
                opened
                    .unopened
                    .insert(def.name().clone(), error.to_string());
                down.push(sink);
            }
            Err(StartError::Sink(error)) if error.is_retriable() => {
                return Err(StartError::StoreDown {
                    table: def.name().to_string(),
                    error,
                    why: deferrable.err().unwrap_or_default(),
                });
            }
            Err(error) => return Err(error),
        }
    }
    Ok(opened)
}

/// Opens and recovers the write-ahead log, numbering new inserts above `highest`, when the
/// config turns it on.
fn open_wal(
    config: &PipelineConfig,
    storage: &Arc<dyn Storage>,
    highest: u64,
) -> Result<(Option<Arc<Wal>>, Option<Replay>), StartError> {
    let Some(wal_config) = &config.wal else {
        return Ok((None, None));
    };
    let (wal, replay, recovered) = Wal::open(wal_config.clone(), storage.clone(), highest + 1)?;
    tracing::info!(
        dir = %wal_config.dir.display(),
        segments = recovered.segments,
        frames = recovered.frames,
        last_lsn = recovered.last_lsn,
        "write-ahead log recovered"
    );
    Ok((Some(Arc::new(wal)), Some(replay)))
}

impl Pipeline {
    /// Hands every logged insert the stores do not hold yet back to its table's writer, and
    /// keeps the report.
    async fn replay(
        &self,
        replay: Replay,
        watermarks: HashMap<TableName, HashMap<PartitionKey, u64>>,
    ) -> Result<(), StartError> {
        let Some(wal) = self.inner.wal.clone() else {
            return Ok(());
        };
        let handles = self.read_tables().clone();
        let report = tokio::task::spawn_blocking(move || {
            replay_frames(&replay, &wal, &handles, &watermarks)
        })
        .await
        .map_err(|e| StartError::Replay {
            lsn: 0,
            reason: format!("replay task failed: {e}"),
        })??;
        if report.frames > 0 {
            tracing::info!(
                frames = report.frames,
                rows = report.rows,
                already_landed = report.pieces_already_landed,
                "replayed the write-ahead log"
            );
        }
        let _ = self.inner.replay.set(report);
        Ok(())
    }
}
