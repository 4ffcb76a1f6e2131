//! The ClickHouse sink: a flush is one `INSERT ... FORMAT JSONEachRow` per shard it reaches,
//! then the ledger and the part counts are brought up to date.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow::array::RecordBatch;
use futures_util::future::join_all;

use sluice_core::sink::BoxFuture;
use sluice_core::{
    FlushBatch, FlushId, Landed, PartitionKey, PartitionSpec, Sink, SinkError, TableDef,
};

use super::SINK;
use super::client::{ChError, Client, TOO_MANY_PARTS, UNKNOWN_TABLE, gzip};
use super::config::ClickHouseConfig;
use super::nested::{self, Server, Shape, TUPLE_OBJECTS, column_ddl};
use super::pacing::{self, CHECK_EVERY, DEFAULT_DELAY_AT};
use super::rows::{ndjson, prepare};
use super::sharding;
use super::types::{literal, quote};
use crate::fit::{self, Abilities, StoreColumn};
use crate::ledger::{LEDGER_TABLE, LedgerWriter};

/// The ledger is rewritten to one row per table and partition at start once it holds more rows
/// than this: a row per flush adds up to about a million rows a week per busy partition.
pub const LEDGER_COMPACT_ROWS: u64 = 100_000;

/// What the sink knows about one table.
#[derive(Debug)]
struct TableState {
    /// `parts_to_delay_insert` in effect for the table.
    delay_at: u64,
    /// The part counts of the table on each shard.
    shards: Vec<ShardParts>,
    /// The table went missing; create it again before the next insert.
    missing: bool,
    /// How each nested column's values go, by the column's position; `None` for the others.
    shapes: Shapes,
}

/// How each column of a table's layout goes in `JSONEachRow`, when it is nested.
type Shapes = Arc<[Option<Shape>]>;

/// The active parts of a table's fullest partition on one shard.
#[derive(Debug, Clone, Default)]
struct ShardParts {
    /// When they were last read, and how many there were.
    read: Option<(Instant, u64)>,
    /// Inserts landed since that read: each added a part (merges only ever lower the count), so
    /// between reads the count is estimated as read + inserts.
    since_read: u64,
}

/// A flush's rows for one shard: the shard's index and its batches.
type Routed = Vec<(usize, Vec<RecordBatch>)>;

/// `(table, ledger key) -> last_seq` landed and not in the ledger yet (its write failed).
type LedgerBacklog = HashMap<(String, String), u64>;

/// Lands flushes in one ClickHouse database over HTTP, on one server or straight into the
/// shards of a cluster.
#[derive(Clone)]
pub struct ClickHouseSink {
    /// The server at `url`: the ledger's.
    client: Client,
    /// The servers rows land on: `url` alone, or the shards.
    shards: Arc<[Client]>,
    /// The shard the next whole flush lands on, when there is no shard key.
    next_shard: Arc<AtomicUsize>,
    /// The shards each partly landed flush reached, until its retry lands the rest.
    partly_landed: Arc<Mutex<HashMap<FlushId, Vec<usize>>>>,
    config: Arc<ClickHouseConfig>,
    /// Set once the server has answered: the database and the ledger exist, and this is the
    /// server's own `parts_to_delay_insert` and what its version can take.
    server_delay_at: Arc<tokio::sync::OnceCell<(u64, Server)>>,
    tables: Arc<Mutex<HashMap<String, TableState>>>,
    /// Held while the ledger is written, so writes go one at a time.
    ledger: Arc<tokio::sync::Mutex<LedgerBacklog>>,
    /// Whose rows of the ledger are this sink's.
    writer: LedgerWriter,
}

impl std::fmt::Debug for ClickHouseSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClickHouseSink")
            .field("url", &self.config.url)
            .field("database", &self.config.database)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ClickHouseSink {
    /// The sink, without asking the server anything yet: the first table it opens creates the
    /// database and the ledger and reads the server's part thresholds, so a server that is down
    /// when sluice starts is an error of that table's opening, which sluice retries. Fails only
    /// for settings no server could take (a bad URL).
    pub fn new(config: ClickHouseConfig) -> Result<Self, SinkError> {
        let bad = |e| SinkError::permanent(SINK, e);
        let client = Client::new(&config, &config.url).map_err(bad)?;
        let shards = config
            .shard_urls()
            .into_iter()
            .map(|url| Client::new(&config, url))
            .collect::<Result<Arc<[Client]>, String>>()
            .map_err(bad)?;
        Ok(Self {
            client,
            shards,
            next_shard: Arc::default(),
            partly_landed: Arc::default(),
            config: Arc::new(config),
            server_delay_at: Arc::default(),
            tables: Arc::default(),
            ledger: Arc::default(),
            writer: LedgerWriter::default(),
        })
    }

    /// The sink keeping `writer`'s rows of the ledger (see [`crate::ledger`]).
    pub fn with_writer(mut self, writer: LedgerWriter) -> Self {
        self.writer = writer;
        self
    }

    /// Sets the server up for sluice once (the database, the ledger) and says its
    /// `parts_to_delay_insert` and what its version can take. The shards are taken to run the
    /// version of the server at `url`.
    async fn server(&self) -> Result<(u64, Server), SinkError> {
        let delay_at = self.server_delay_at.get_or_try_init(|| async {
            let sql = format!(
                "CREATE DATABASE IF NOT EXISTS {}",
                quote(&self.config.database)
            );
            for server in std::iter::once(&self.client).chain(self.shards.iter()) {
                server.query(&sql).await.map_err(|e| {
                    e.into_sink_error(&format!("cannot create the database on {}", server.url()))
                })?;
            }
            open_ledger(&self.client, &self.config.database).await?;
            let delay_at = self
                .client
                .query(
                    "SELECT value FROM system.merge_tree_settings \
                     WHERE name = 'parts_to_delay_insert' FORMAT TabSeparated",
                )
                .await
                .ok()
                .and_then(|text| text.trim().parse().ok())
                .unwrap_or(DEFAULT_DELAY_AT);
            Ok::<_, SinkError>((delay_at, self.abilities().await?))
        });
        delay_at.await.copied()
    }

    /// What the server at `url` can take, as its catalog lists its types and settings.
    async fn abilities(&self) -> Result<Server, SinkError> {
        let ask = async |sql: &str| {
            self.client
                .query(sql)
                .await
                .map(|text| !text.trim().is_empty())
                .map_err(|e| e.into_sink_error("cannot read what the server can take"))
        };
        Ok(Server {
            maps: ask(
                "SELECT name FROM system.data_type_families WHERE name = 'Map' \
                 FORMAT TabSeparated",
            )
            .await?,
            tuple_objects: ask(&format!(
                "SELECT name FROM system.settings WHERE name = {} FORMAT TabSeparated",
                literal(TUPLE_OBJECTS)
            ))
            .await?,
        })
    }

    /// The sink's settings.
    pub fn config(&self) -> &ClickHouseConfig {
        &self.config
    }

    fn table_path(&self, table: &str) -> String {
        format!("{}.{}", quote(&self.config.database), quote(table))
    }

    /// `CREATE TABLE IF NOT EXISTS` with the table's partitioning as `PARTITION BY` and its sort
    /// key as `ORDER BY`, so that one flush (one sluice partition) is one ClickHouse part.
    fn create_sql(&self, table: &TableDef, server: Server) -> Result<String, SinkError> {
        let schema = table.schema();
        let keys = table
            .partition()
            .source_column()
            .into_iter()
            .chain(table.sort_by().iter().map(String::as_str));
        for key in keys {
            if schema.column(key).is_some_and(|c| c.nullable) {
                return Err(SinkError::permanent(
                    SINK,
                    format!(
                        "table {}: ClickHouse cannot partition or sort by nullable column '{key}'; \
                         declare it with nullable = false",
                        table.name()
                    ),
                ));
            }
        }
        let mut columns = Vec::new();
        for field in schema.arrow().fields() {
            columns.push(column_ddl(field, server).map_err(|e| SinkError::permanent(SINK, e))?);
        }
        let is_date = |c: &str| {
            schema
                .column(c)
                .is_some_and(|c| c.ty == sluice_core::ColumnType::Date)
        };
        let partition = match table.partition() {
            PartitionSpec::None => String::new(),
            PartitionSpec::Column(c) => format!(" PARTITION BY {}", quote(c)),
            PartitionSpec::Day(c) if is_date(c) => format!(" PARTITION BY {}", quote(c)),
            PartitionSpec::Day(c) => format!(" PARTITION BY toDate({})", quote(c)),
            PartitionSpec::Hour(c) => format!(" PARTITION BY toStartOfHour({})", quote(c)),
        };
        let order = match table.sort_by() {
            [] => "tuple()".to_owned(),
            keys => format!(
                "({})",
                keys.iter().map(|k| quote(k)).collect::<Vec<_>>().join(", ")
            ),
        };
        Ok(format!(
            "CREATE TABLE IF NOT EXISTS {} ({}) ENGINE = MergeTree(){partition} ORDER BY {order}",
            self.table_path(table.name().as_str()),
            columns.join(", ")
        ))
    }

    /// Creates the table on every shard, or fits the one that exists to the layout ([`fit`]):
    /// a column the config added is added (the rows the table holds get its default: null, or
    /// the type's zero for a column that may not be null, as ClickHouse does for any column an
    /// insert leaves out).
    async fn create_table(&self, table: &TableDef) -> Result<(), SinkError> {
        if let Some(key) = &self.config.shard_key {
            sharding::check_key(table, key).map_err(|e| SinkError::permanent(SINK, e))?;
        }
        let (server_delay_at, server) = self.server().await?;
        let sql = self.create_sql(table, server)?;
        let mut shapes: Option<Shapes> = None;
        for shard in self.shards.iter() {
            shard.query(&sql).await.map_err(|e| {
                e.into_sink_error(&format!(
                    "cannot create table {} on {}",
                    table.name(),
                    shard.url()
                ))
            })?;
            let fitted = self.fit(shard, table, server).await?;
            if shapes.as_ref().is_some_and(|known| *known != fitted) {
                return Err(SinkError::permanent(
                    SINK,
                    format!(
                        "table {} has other types for its nested columns on {} than on the \
                         shards before it; give it the same types on every shard",
                        table.name(),
                        shard.url()
                    ),
                ));
            }
            shapes = Some(fitted);
        }
        // The table may have existed with settings of its own.
        let query = format!(
            "SELECT create_table_query FROM system.tables WHERE database = {} AND name = {} \
             FORMAT JSONEachRow",
            literal(&self.config.database),
            literal(table.name().as_str())
        );
        let delay_at = self.shards[0]
            .query(&query)
            .await
            .ok()
            .and_then(|text| {
                let row: serde_json::Value = serde_json::from_str(text.lines().next()?).ok()?;
                pacing::table_setting(row["create_table_query"].as_str()?, "parts_to_delay_insert")
            })
            .unwrap_or(server_delay_at);
        lock(&self.tables).insert(
            table.name().to_string(),
            TableState {
                delay_at,
                shards: vec![ShardParts::default(); self.shards.len()],
                missing: false,
                shapes: shapes.unwrap_or_default(),
            },
        );
        Ok(())
    }

    /// Adds the columns the table on `server` lacks, one `ALTER TABLE` each (a column another
    /// process added meanwhile is found there when the columns are read again). Says how the
    /// table's nested columns take their values, by their types there.
    async fn fit(
        &self,
        server: &Client,
        table: &TableDef,
        can_take: Server,
    ) -> Result<Shapes, SinkError> {
        let name = table.name().as_str();
        let holds = |ty: &sluice_core::ColumnType, store: &str| nested::holds(can_take, ty, store);
        let can = Abilities {
            any_case: false,
            adds_required: true,
            holds: &holds,
        };
        let existing = self.store_columns(server, name).await?;
        split_columns(table, &existing)?;
        let fit = fit::plan(SINK, table, &existing, can)?;
        for field in &fit.add {
            let sql = format!(
                "ALTER TABLE {} ADD COLUMN {}",
                self.table_path(name),
                column_ddl(field, can_take).map_err(|e| SinkError::permanent(SINK, e))?
            );
            if let Err(error) = server.query(&sql).await {
                let added = self
                    .store_columns(server, name)
                    .await?
                    .iter()
                    .any(|c| c.name == *field.name());
                if !added {
                    return Err(error.into_sink_error(&format!(
                        "cannot add column {} to {name} on {}",
                        field.name(),
                        server.url()
                    )));
                }
            }
        }
        fit.log(
            name,
            "it is not Nullable, and a row without a value for it lands with the type's default \
             (0, an empty string)",
        );
        shapes(table, &existing, can_take)
    }

    /// The table's columns on `server` as `system.columns` lists them. ClickHouse fills a
    /// column an insert leaves out with its default, so none is required; one that is not
    /// `Nullable` holds no null (the JSON sluice sends leaves nulls out, so such a column gets
    /// its default).
    async fn store_columns(
        &self,
        server: &Client,
        table: &str,
    ) -> Result<Vec<StoreColumn>, SinkError> {
        let query = format!(
            "SELECT name, type FROM system.columns WHERE database = {} AND table = {} \
             FORMAT JSONEachRow",
            literal(&self.config.database),
            literal(table)
        );
        let text = server
            .query(&query)
            .await
            .map_err(|e| e.into_sink_error(&format!("cannot read the columns of {table}")))?;
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                let row: serde_json::Value = serde_json::from_str(line).map_err(|e| {
                    SinkError::retriable(SINK, format!("cannot read the columns of {table}: {e}"))
                })?;
                let ty = row["type"].as_str().unwrap_or_default();
                // An Array, Tuple or Map cannot be Nullable: a null lands as an empty one.
                let never_null = ["Array(", "Tuple(", "Map("]
                    .iter()
                    .any(|nested| ty.starts_with(nested));
                Ok(StoreColumn {
                    name: row["name"].as_str().unwrap_or_default().to_owned(),
                    required: false,
                    not_null: !ty.starts_with("Nullable(") && !never_null,
                    keeps_not_null: true,
                    ty: ty.to_owned(),
                })
            })
            .collect()
    }

    async fn write(&self, flush: FlushBatch<'_>) -> Result<Landed, SinkError> {
        let name = flush.table.name().as_str();
        let missing = lock(&self.tables).get(name).is_none_or(|t| t.missing);
        if missing {
            self.create_table(flush.table).await?;
        }
        let shapes = lock(&self.tables)
            .get(name)
            .map(|t| t.shapes.clone())
            .unwrap_or_default();
        let done = lock(&self.partly_landed)
            .get(&flush.id)
            .cloned()
            .unwrap_or_default();
        let mut routed = self.route(flush.batches)?;
        routed.retain(|(shard, _)| !done.contains(shard));
        // Named tuples go as JSON objects, which the server reads only when told to.
        let settings = match shapes.iter().flatten().any(Shape::has_keyed_tuple) {
            true => format!(" SETTINGS {TUPLE_OBJECTS} = 1"),
            false => String::new(),
        };
        let bodies = encode(routed, self.client.gzip(), shapes).await?;
        let sql = format!(
            "INSERT INTO {}{settings} FORMAT JSONEachRow",
            self.table_path(name)
        );
        let inserts = bodies.into_iter().map(|(shard, body)| {
            let sql = &sql;
            async move {
                let bytes = body.len() as u64;
                let result = self.shards[shard]
                    .insert(sql, body, self.client.gzip())
                    .await;
                (shard, bytes, result)
            }
        });
        let (mut landed, mut bytes, mut failure) = (Vec::new(), 0, None);
        for (shard, size, result) in join_all(inserts).await {
            match result {
                Ok(()) => {
                    landed.push(shard);
                    bytes += size;
                }
                Err(error) => {
                    self.note_failure(name, shard, &error);
                    failure.get_or_insert((shard, error));
                }
            }
        }
        if let Some((shard, error)) = failure {
            return Err(self.partly_failed(&flush.id, done, &landed, shard, error));
        }
        lock(&self.partly_landed).remove(&flush.id);
        self.note_landed(&flush.id).await;
        let pause = self.pace(name, &landed).await;
        Ok(Landed {
            parts: landed.len() as u64,
            bytes,
            pause,
            ..Landed::default()
        })
    }

    /// The shards a flush's rows go to: split by the shard key, or all to the next shard in
    /// turn (a retry moves on too, so a shard that is down is passed over).
    fn route(&self, batches: Vec<RecordBatch>) -> Result<Routed, SinkError> {
        let count = self.shards.len();
        match &self.config.shard_key {
            Some(key) if count > 1 => Ok(sharding::split_by_key(&batches, key, count)
                .map_err(|e| SinkError::permanent(SINK, e))?
                .into_iter()
                .enumerate()
                .filter(|(_, batches)| !batches.is_empty())
                .collect()),
            _ => Ok(vec![(
                self.next_shard.fetch_add(1, Ordering::Relaxed) % count,
                batches,
            )]),
        }
    }

    /// The error of a flush that failed on `shard`. When other shards took their rows, the
    /// sink remembers them and asks for the same flush again, so its retry lands only the rest.
    fn partly_failed(
        &self,
        id: &FlushId,
        mut done: Vec<usize>,
        landed: &[usize],
        shard: usize,
        error: ChError,
    ) -> SinkError {
        let context = format!(
            "cannot insert into {} on {}",
            id.table,
            self.shards[shard].url()
        );
        let error = error.into_sink_error(&context);
        done.extend_from_slice(landed);
        let mut partly = lock(&self.partly_landed);
        if done.is_empty() || !error.is_retriable() {
            // A flush refused for good goes to the dead letters whole; nothing will retry it.
            partly.remove(id);
            return error;
        }
        partly.insert(id.clone(), done);
        error.with_part_landed()
    }

    fn note_failure(&self, table: &str, shard: usize, error: &ChError) {
        let mut tables = lock(&self.tables);
        let Some(state) = tables.get_mut(table) else {
            return;
        };
        match error.code {
            Some(UNKNOWN_TABLE) => state.missing = true,
            // Read the part count afresh after the retry lands.
            Some(TOO_MANY_PARTS) => {
                if let Some(parts) = state.shards.get_mut(shard) {
                    parts.read = None;
                }
            }
            _ => {}
        }
    }

    /// Records the flush in the ledger, together with any earlier entry whose write failed. The
    /// rows are in ClickHouse already: a failed ledger write is logged, not returned (that would
    /// insert them again), and its entry is written with the next flush.
    async fn note_landed(&self, id: &FlushId) {
        let mut backlog = self.ledger.lock().await;
        let entry = backlog
            .entry((id.table.to_string(), self.writer.key(&id.partition)))
            .or_default();
        *entry = (*entry).max(id.last_seq);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut rows = Vec::new();
        for ((table, partition), last_seq) in backlog.iter() {
            let row = serde_json::json!({
                "table_name": table,
                "partition": partition,
                "last_seq": last_seq,
                "landed_at": now,
            });
            rows.extend_from_slice(row.to_string().as_bytes());
            rows.push(b'\n');
        }
        let sql = format!(
            "INSERT INTO {} FORMAT JSONEachRow",
            self.table_path(LEDGER_TABLE)
        );
        // A few dozen bytes: not worth compressing.
        match self.client.insert(&sql, rows, false).await {
            Ok(()) => backlog.clear(),
            Err(e) => tracing::warn!(
                error = %e.message,
                "cannot write the ClickHouse ledger; a crash now would land some rows twice"
            ),
        }
    }

    /// The pause the table calls for after a flush landed on `shards`: the longest that the
    /// fullest partition on any of them calls for. A failed read pauses nothing.
    async fn pace(&self, table: &str, shards: &[usize]) -> Duration {
        if self.config.max_pause().is_zero() {
            return Duration::ZERO;
        }
        let mut pause = Duration::ZERO;
        for &shard in shards {
            pause = pause.max(self.pace_shard(table, shard).await);
        }
        pause
    }

    /// The pause the table's fullest partition on `shard` calls for: its active parts read
    /// from `system.parts` at most once per [`CHECK_EVERY`], plus the inserts since.
    async fn pace_shard(&self, table: &str, shard: usize) -> Duration {
        let max_pause = self.config.max_pause();
        let delay_at = {
            let mut tables = lock(&self.tables);
            let Some(state) = tables.get_mut(table) else {
                return Duration::ZERO;
            };
            let delay_at = state.delay_at;
            let Some(parts) = state.shards.get_mut(shard) else {
                return Duration::ZERO;
            };
            if let Some((at, active)) = parts.read
                && at.elapsed() < CHECK_EVERY
            {
                parts.since_read += 1;
                return pacing::pause(active + parts.since_read, delay_at, max_pause);
            }
            delay_at
        };
        let query = format!(
            "SELECT max(c) FROM (SELECT count() AS c FROM system.parts WHERE database = {} \
             AND table = {} AND active GROUP BY partition_id) FORMAT TabSeparated",
            literal(&self.config.database),
            literal(table)
        );
        let active: u64 = match self.shards[shard].query(&query).await {
            Ok(text) => text.trim().parse().unwrap_or(0),
            Err(e) => {
                tracing::debug!(error = %e.message, "cannot read system.parts");
                return Duration::ZERO;
            }
        };
        if let Some(parts) = lock(&self.tables)
            .get_mut(table)
            .and_then(|state| state.shards.get_mut(shard))
        {
            parts.read = Some((Instant::now(), active));
            parts.since_read = 0;
        }
        let pause = pacing::pause(active, delay_at, max_pause);
        if !pause.is_zero() {
            tracing::debug!(
                table,
                shard = self.shards[shard].url(),
                active,
                delay_at,
                pause_ms = pause.as_millis() as u64,
                "parts pile up; pausing flushes"
            );
        }
        pause
    }

    async fn committed(&self, table: &TableDef) -> Result<Vec<(PartitionKey, u64)>, SinkError> {
        self.server().await?;
        let query = format!(
            "SELECT partition, max(last_seq) AS last_seq FROM {} WHERE table_name = {} \
             GROUP BY partition FORMAT JSONEachRow",
            self.table_path(LEDGER_TABLE),
            literal(table.name().as_str())
        );
        let text = self
            .client
            .query(&query)
            .await
            .map_err(|e| e.into_sink_error("cannot read the ledger"))?;
        let mut rows = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let row: serde_json::Value = serde_json::from_str(line).map_err(|e| {
                SinkError::retriable(SINK, format!("unreadable ledger row {line:?}: {e}"))
            })?;
            // UInt64 comes back quoted (output_format_json_quote_64bit_integers).
            let last_seq = match &row["last_seq"] {
                serde_json::Value::String(s) => s.parse().ok(),
                other => other.as_u64(),
            };
            if let (Some(key), Some(last_seq)) = (row["partition"].as_str(), last_seq) {
                rows.push((key.to_owned(), last_seq));
            }
        }
        Ok(self
            .writer
            .watermarks(rows.iter().map(|(k, s)| (k.as_str(), *s))))
    }
}

impl Sink for ClickHouseSink {
    fn name(&self) -> &'static str {
        SINK
    }

    fn create_table<'a>(&'a self, table: &'a TableDef) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(ClickHouseSink::create_table(self, table))
    }

    fn write<'a>(&'a self, flush: FlushBatch<'a>) -> BoxFuture<'a, Result<Landed, SinkError>> {
        Box::pin(ClickHouseSink::write(self, flush))
    }

    fn committed<'a>(
        &'a self,
        table: &'a TableDef,
    ) -> BoxFuture<'a, Result<Vec<(PartitionKey, u64)>, SinkError>> {
        Box::pin(ClickHouseSink::committed(self, table))
    }
}

/// Each shard's rows as the body of its insert: `JSONEachRow`, gzipped when `compress`.
async fn encode(
    routed: Routed,
    compress: bool,
    shapes: Shapes,
) -> Result<Vec<(usize, Vec<u8>)>, SinkError> {
    tokio::task::spawn_blocking(move || {
        routed
            .into_iter()
            .map(|(shard, batches)| {
                let mut json = Vec::new();
                for batch in &batches {
                    let prepared =
                        prepare(batch, &shapes).map_err(|e| SinkError::permanent(SINK, e))?;
                    ndjson(&prepared, &mut json).map_err(|e| SinkError::permanent(SINK, e))?;
                }
                let body = if compress {
                    gzip(&json)
                        .map_err(|e| SinkError::retriable(SINK, format!("cannot gzip: {e}")))?
                } else {
                    json
                };
                Ok((shard, body))
            })
            .collect()
    })
    .await
    .map_err(|e| SinkError::retriable(SINK, format!("encoding task failed: {e}")))?
}

/// Refuses a layout column that the table holds as subcolumns (`pairs.1`, `pairs.2`): ClickHouse
/// 18.16 splits an `Array` of `Tuple`s into an array per element, and its `JSONEachRow` fills
/// no such column. Without this the fit would try to add the column and fail on its name.
fn split_columns(table: &TableDef, existing: &[StoreColumn]) -> Result<(), SinkError> {
    for column in table.schema().columns() {
        if existing.iter().any(|c| c.name == column.name) {
            continue;
        }
        let prefix = format!("{}.", column.name);
        let parts: Vec<&str> = existing
            .iter()
            .filter(|c| c.name.starts_with(&prefix))
            .map(|c| c.name.as_str())
            .collect();
        if !parts.is_empty() {
            return Err(SinkError::permanent(
                SINK,
                format!(
                    "table {} exists in the store and its column '{}' is split into the \
                     subcolumns {}, as ClickHouse keeps an Array of Tuples or a Nested column, \
                     which sluice cannot fill from JSONEachRow; give it a String for the \
                     column's JSON",
                    table.name(),
                    column.name,
                    parts.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// How each column of `table`'s layout takes its values in the table whose columns are
/// `existing`: a nested column by its type there, or, for one the fit added, by the type sluice
/// gives it.
fn shapes(table: &TableDef, existing: &[StoreColumn], server: Server) -> Result<Shapes, SinkError> {
    let refuse = |column: &str, why: String| {
        SinkError::permanent(
            SINK,
            format!("table {}: column '{column}': {why}", table.name()),
        )
    };
    table
        .schema()
        .columns()
        .iter()
        .map(|column| {
            if !column.ty.is_nested() {
                return Ok(None);
            }
            let shape = match existing.iter().find(|c| c.name == column.name) {
                Some(store) => nested::fitted(&column.ty, &store.ty, server),
                None => nested::created(&column.ty, column.nullable, server).map(|(_, s)| s),
            };
            shape.map(Some).map_err(|why| refuse(&column.name, why))
        })
        .collect()
}

/// Creates the ledger if missing, and compacts it to one row per table and partition once it
/// has grown past [`LEDGER_COMPACT_ROWS`]. The ledger is a `Log` table: an insert appends to its
/// files and makes no part, so writing it after every flush adds nothing for merges to do.
async fn open_ledger(client: &Client, database: &str) -> Result<(), SinkError> {
    let db = quote(database);
    let ledger = format!("{db}.{}", quote(LEDGER_TABLE));
    let fresh = format!("{db}.{}", quote(&format!("{LEDGER_TABLE}_compact")));
    let old = format!("{db}.{}", quote(&format!("{LEDGER_TABLE}_old")));
    let run = async |sql: String| {
        client
            .query(&sql)
            .await
            .map_err(|e| e.into_sink_error("cannot set the ledger up"))
    };
    let exists = async |table: &str| -> Result<bool, SinkError> {
        Ok(run(format!("EXISTS TABLE {table} FORMAT TabSeparated"))
            .await?
            .trim()
            == "1")
    };
    // A compaction stopped between its two renames: the compacted ledger is whole.
    if !exists(&ledger).await? && exists(&fresh).await? {
        run(format!("RENAME TABLE {fresh} TO {ledger}")).await?;
    }
    run(format!(
        "CREATE TABLE IF NOT EXISTS {ledger} (table_name String, partition String, \
         last_seq UInt64, landed_at DateTime('UTC')) ENGINE = Log"
    ))
    .await?;
    // Left over by a compaction that stopped half way; the ledger itself is whole.
    run(format!("DROP TABLE IF EXISTS {old}")).await?;
    run(format!("DROP TABLE IF EXISTS {fresh}")).await?;
    let rows: u64 = run(format!("SELECT count() FROM {ledger} FORMAT TabSeparated"))
        .await?
        .trim()
        .parse()
        .unwrap_or(0);
    if rows <= LEDGER_COMPACT_ROWS {
        return Ok(());
    }
    run(format!("CREATE TABLE {fresh} AS {ledger}")).await?;
    run(format!(
        "INSERT INTO {fresh} SELECT table_name, partition, max(last_seq), max(landed_at) \
         FROM {ledger} GROUP BY table_name, partition"
    ))
    .await?;
    run(format!(
        "RENAME TABLE {ledger} TO {old}, {fresh} TO {ledger}"
    ))
    .await?;
    run(format!("DROP TABLE {old}")).await?;
    tracing::info!(rows, "compacted the ClickHouse ledger");
    Ok(())
}
