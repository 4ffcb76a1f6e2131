//! The SQLite sink: flushes become transactions, on a blocking thread.

use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use sluice_core::sink::BoxFuture;
use sluice_core::{
    FlushBatch, InsertKey, KeysToKeep, Landed, PartitionKey, Sink, SinkError, TableDef, TableName,
};

use super::config::SqliteConfig;
use super::types::{BindError, Column, holds, quote, sql_type};
use crate::fit::{self, Abilities, StoreColumn};
use crate::keys::{self, KEYS_TABLE};
use crate::ledger::{LEDGER_TABLE, LedgerWriter};
use crate::values::check_decimals;

const SINK: &str = "sqlite";

/// Lands flushes in one SQLite database.
#[derive(Clone)]
pub struct SqliteSink {
    conn: Arc<Mutex<Connection>>,
    config: Arc<SqliteConfig>,
    /// Whose rows of the ledger are this sink's.
    writer: LedgerWriter,
}

impl std::fmt::Debug for SqliteSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteSink")
            .field("path", &self.config.path)
            .finish()
    }
}

impl SqliteSink {
    /// Opens (or creates) the database and its ledger.
    pub fn open(config: SqliteConfig) -> Result<Self, SinkError> {
        let conn =
            Connection::open(&config.path).map_err(|e| classify(e, "cannot open the database"))?;
        conn.execute_batch(&config.pragmas())
            .map_err(|e| classify(e, "cannot set the database up"))?;
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {} (table_name TEXT NOT NULL, partition TEXT NOT NULL, \
             last_seq INTEGER NOT NULL, PRIMARY KEY (table_name, partition))",
            quote(LEDGER_TABLE)
        ))
        .map_err(|e| classify(e, "cannot create the ledger"))?;
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {keys} (table_name TEXT NOT NULL, \
             partition TEXT NOT NULL, insert_key TEXT NOT NULL, rows_hash INTEGER NOT NULL, \
             landed_at INTEGER NOT NULL, PRIMARY KEY (table_name, partition, insert_key)); \
             CREATE INDEX IF NOT EXISTS {index} ON {keys} (table_name, landed_at)",
            keys = quote(KEYS_TABLE),
            index = quote(&format!("{KEYS_TABLE}_landed_at")),
        ))
        .map_err(|e| classify(e, "cannot create the insert keys table"))?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            config: Arc::new(config),
            writer: LedgerWriter::default(),
        })
    }

    /// The sink keeping `writer`'s rows of the ledger (see [`crate::ledger`]).
    pub fn with_writer(mut self, writer: LedgerWriter) -> Self {
        self.writer = writer;
        self
    }

    /// The sink's settings.
    pub fn config(&self) -> &SqliteConfig {
        &self.config
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, SinkError> + Send + 'static,
    ) -> Result<T, SinkError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || f(&mut lock(&conn)))
            .await
            .map_err(|e| SinkError::retriable(SINK, format!("database task failed: {e}")))?
    }
}

fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    match conn.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Sorts SQLite's errors: busy, locked, full and I/O failures pass; the rest are about the batch.
fn classify(error: rusqlite::Error, context: &str) -> SinkError {
    let message = format!("{context}: {error}");
    let retriable = match &error {
        rusqlite::Error::SqliteFailure(e, _) => matches!(
            e.code,
            ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::DiskFull
                | ErrorCode::SystemIoFailure
                | ErrorCode::CannotOpen
                | ErrorCode::OutOfMemory
                | ErrorCode::FileLockingProtocolFailed
        ),
        _ => false,
    };
    let error_kind = if retriable {
        SinkError::retriable(SINK, message)
    } else {
        SinkError::permanent(SINK, message)
    };
    error_kind.with_source(error)
}

/// Creates the table, or fits the one that exists to the layout ([`fit`]): both in one
/// transaction, so two processes opening one database add a column once.
fn create_table(conn: &mut Connection, table: &TableDef) -> Result<(), SinkError> {
    let name = table.name().as_str();
    let cannot = |e| classify(e, &format!("cannot create table {name}"));
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(cannot)?;
    let existing = store_columns(&tx, name).map_err(cannot)?;
    let fitted = if existing.is_empty() {
        let mut columns = Vec::new();
        for field in table.schema().arrow().fields() {
            let ty = sql_type(field.data_type()).map_err(|e| SinkError::permanent(SINK, e))?;
            let not_null = if field.is_nullable() { "" } else { " NOT NULL" };
            columns.push(format!("{} {ty}{not_null}", quote(field.name())));
        }
        let sql = format!("CREATE TABLE {} ({})", quote(name), columns.join(", "));
        tx.execute_batch(&sql).map_err(cannot)?;
        None
    } else {
        let can = Abilities {
            any_case: true,
            adds_required: false,
            holds: &holds,
        };
        let fit = fit::plan(SINK, table, &existing, can)?;
        for field in &fit.add {
            let ty = sql_type(field.data_type()).map_err(|e| SinkError::permanent(SINK, e))?;
            let sql = format!(
                "ALTER TABLE {} ADD COLUMN {} {ty}",
                quote(name),
                quote(field.name())
            );
            tx.execute_batch(&sql).map_err(|e| {
                classify(e, &format!("cannot add column {} to {name}", field.name()))
            })?;
        }
        Some(fit)
    };
    tx.commit().map_err(cannot)?;
    if let Some(fit) = fitted {
        fit.log(name, "a flush with a row without a value for it is refused");
    }
    Ok(())
}

/// The table's columns as SQLite declares them; none when there is no such table.
fn store_columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<StoreColumn>> {
    let mut stmt = conn.prepare(
        "SELECT name, \"notnull\", dflt_value IS NOT NULL, pk, type FROM pragma_table_info(?1)",
    )?;
    let rows = stmt.query_map(params![table], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, bool>(1)?,
            row.get::<_, bool>(2)?,
            row.get::<_, i64>(3)?,
            row.get::<_, String>(4)?,
        ))
    })?;
    let rows = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    let keys = rows.iter().filter(|r| r.3 > 0).count();
    Ok(rows
        .into_iter()
        .map(|(name, not_null, default, pk, ty)| {
            // A lone `INTEGER PRIMARY KEY` is the rowid: SQLite fills it.
            let rowid = pk > 0 && keys == 1 && ty.eq_ignore_ascii_case("INTEGER");
            StoreColumn {
                name,
                required: not_null && !default && !rowid,
                not_null,
                keeps_not_null: true,
                ty,
            }
        })
        .collect())
}

fn write(
    conn: &mut Connection,
    writer: &LedgerWriter,
    flush: &FlushBatch<'_>,
) -> Result<Landed, SinkError> {
    let table = flush.table.name().as_str();
    let key = writer.key(&flush.id.partition);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| classify(e, "cannot begin"))?;
    let landed: Option<i64> = tx
        .query_row(
            &format!(
                "SELECT last_seq FROM {} WHERE table_name = ?1 AND partition = ?2",
                quote(LEDGER_TABLE)
            ),
            params![table, key],
            |row| row.get(0),
        )
        .optional()
        .map_err(|e| classify(e, "cannot read the ledger"))?;
    let last_seq = i64::try_from(flush.id.last_seq).unwrap_or(i64::MAX);
    if landed.is_some_and(|l| l >= last_seq) {
        // A replay of a flush this database already holds.
        return Ok(Landed::default());
    }
    let schema = flush.table.schema().arrow().clone();
    let names: Vec<String> = schema.fields().iter().map(|f| quote(f.name())).collect();
    let placeholders: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        quote(table),
        names.join(", "),
        placeholders.join(", ")
    );
    {
        let mut stmt = tx
            .prepare(&sql)
            .map_err(|e| classify(e, &format!("cannot insert into {table}")))?;
        for batch in &flush.batches {
            check_decimals(batch).map_err(|e| SinkError::permanent(SINK, e))?;
            let columns = schema
                .fields()
                .iter()
                .zip(batch.columns())
                .map(|(field, c)| {
                    Column::new(field, c.as_ref())
                        .map_err(|e| format!("column '{}': {e}", field.name()))
                })
                .collect::<Result<Vec<_>, String>>()
                .map_err(|e| SinkError::permanent(SINK, e))?;
            for row in 0..batch.num_rows() {
                for (i, column) in columns.iter().enumerate() {
                    column.bind(&mut stmt, i + 1, row).map_err(|e| match e {
                        BindError::Sqlite(e) => classify(e, "cannot bind a value"),
                        BindError::Value(message) => SinkError::permanent(
                            SINK,
                            format!("column '{}': {message}", schema.field(i).name()),
                        ),
                    })?;
                }
                stmt.raw_execute()
                    .map_err(|e| classify(e, &format!("cannot insert into {table}")))?;
            }
        }
    }
    keep_keys(&tx, table, &flush.id.partition, &flush.keys)?;
    tx.execute(
        &format!(
            "INSERT INTO {} (table_name, partition, last_seq) VALUES (?1, ?2, ?3) \
             ON CONFLICT (table_name, partition) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq)",
            quote(LEDGER_TABLE)
        ),
        params![table, key, last_seq],
    )
    .map_err(|e| classify(e, "cannot update the ledger"))?;
    tx.commit().map_err(|e| classify(e, "cannot commit"))?;
    Ok(Landed {
        parts: 1,
        ..Landed::default()
    })
}

/// Adds a flush's keys in its transaction, and deletes the table's keys past their window. A
/// key another process added since it was asked about fails the flush, retriably.
fn keep_keys(
    tx: &rusqlite::Transaction<'_>,
    table: &str,
    partition: &PartitionKey,
    keep: &KeysToKeep,
) -> Result<(), SinkError> {
    if keep.keys.is_empty() {
        return Ok(());
    }
    let partition = keys::partition_text(partition);
    let mut add = tx
        .prepare_cached(&format!(
            "INSERT INTO {} (table_name, partition, insert_key, rows_hash, landed_at) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (table_name, partition, insert_key) \
             DO UPDATE SET rows_hash = excluded.rows_hash, landed_at = excluded.landed_at \
             WHERE landed_at < ?6",
            quote(KEYS_TABLE)
        ))
        .map_err(|e| classify(e, "cannot add insert keys"))?;
    for key in &keep.keys {
        let hash = keys::stored_hash(key.rows_hash);
        let added = add
            .execute(params![
                table,
                partition,
                key.key,
                hash,
                keep.now_ms,
                keep.expired_before_ms
            ])
            .map_err(|e| classify(e, "cannot add an insert key"))?;
        if added == 0 {
            return Err(keys::taken_meanwhile(SINK, &key.key));
        }
    }
    tx.execute(
        &format!(
            "DELETE FROM {} WHERE table_name = ?1 AND landed_at < ?2",
            quote(KEYS_TABLE)
        ),
        params![table, keep.expired_before_ms],
    )
    .map_err(|e| classify(e, "cannot delete old insert keys"))?;
    Ok(())
}

/// Which of `keys` the database holds for `table`'s `partition`, landed at or after `since_ms`.
fn held_keys(
    conn: &Connection,
    table: &str,
    partition: &PartitionKey,
    keys: &[InsertKey],
    since_ms: i64,
) -> Result<Vec<InsertKey>, SinkError> {
    let partition = keys::partition_text(partition);
    let mut find = conn
        .prepare_cached(&format!(
            "SELECT rows_hash FROM {} WHERE table_name = ?1 AND partition = ?2 \
             AND insert_key = ?3 AND landed_at >= ?4",
            quote(KEYS_TABLE)
        ))
        .map_err(|e| classify(e, "cannot read insert keys"))?;
    let mut held = Vec::new();
    for key in keys {
        let hash: Option<i64> = find
            .query_row(params![table, partition, key.key, since_ms], |row| {
                row.get(0)
            })
            .optional()
            .map_err(|e| classify(e, "cannot read insert keys"))?;
        if let Some(hash) = hash {
            held.push(InsertKey {
                key: key.key.clone(),
                rows_hash: keys::loaded_hash(hash),
            });
        }
    }
    Ok(held)
}

impl Sink for SqliteSink {
    fn name(&self) -> &'static str {
        SINK
    }

    fn create_table<'a>(&'a self, table: &'a TableDef) -> BoxFuture<'a, Result<(), SinkError>> {
        let table = table.clone();
        Box::pin(self.blocking(move |conn| create_table(conn, &table)))
    }

    fn write<'a>(&'a self, flush: FlushBatch<'a>) -> BoxFuture<'a, Result<Landed, SinkError>> {
        let table = flush.table.clone();
        let (id, batches, keys) = (flush.id, flush.batches, flush.keys);
        let writer = self.writer.clone();
        Box::pin(self.blocking(move |conn| {
            write(
                conn,
                &writer,
                &FlushBatch {
                    table: &table,
                    id,
                    batches,
                    keys,
                },
            )
        }))
    }

    fn keeps_keys(&self) -> bool {
        true
    }

    fn held_keys<'a>(
        &'a self,
        table: &'a TableName,
        partition: &'a PartitionKey,
        keys: &'a [InsertKey],
        since_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<InsertKey>, SinkError>> {
        let (table, partition, keys) = (table.to_string(), partition.clone(), keys.to_vec());
        Box::pin(self.blocking(move |conn| held_keys(conn, &table, &partition, &keys, since_ms)))
    }

    fn committed<'a>(
        &'a self,
        table: &'a TableDef,
    ) -> BoxFuture<'a, Result<Vec<(PartitionKey, u64)>, SinkError>> {
        let name = table.name().to_string();
        let writer = self.writer.clone();
        Box::pin(self.blocking(move |conn| {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT partition, last_seq FROM {} WHERE table_name = ?1",
                    quote(LEDGER_TABLE)
                ))
                .map_err(|e| classify(e, "cannot read the ledger"))?;
            let rows = stmt
                .query_map(params![name], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
                })
                .map_err(|e| classify(e, "cannot read the ledger"))?;
            let rows = rows
                .map(|row| {
                    row.map(|(key, last)| (key, u64::try_from(last).unwrap_or(0)))
                        .map_err(|e| classify(e, "cannot read the ledger"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(writer.watermarks(rows.iter().map(|(k, s)| (k.as_str(), *s))))
        }))
    }
}
