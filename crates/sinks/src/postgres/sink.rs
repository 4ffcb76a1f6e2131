//! The PostgreSQL sink: a flush is one transaction (ledger row locked, binary COPY, ledger moved).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use futures_util::pin_mut;
use sluice_core::sink::BoxFuture;
use sluice_core::{
    FlushBatch, InsertKey, KeysToKeep, Landed, PartitionKey, Sink, SinkError, TableDef, TableName,
};
use tokio_postgres::NoTls;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

use super::config::PostgresConfig;
use super::types::{Column, Form, Value, pg_type, quote};
use crate::fit::{self, Abilities, StoreColumn};
use crate::keys::{self, KEYS_TABLE};
use crate::ledger::{LEDGER_TABLE, LedgerWriter};
use crate::values::check_decimals;

const SINK: &str = "postgres";

/// How each column of a table's layout goes over COPY, in layout order.
type Forms = Arc<[Form]>;

/// Lands flushes in one PostgreSQL database.
#[derive(Clone)]
pub struct PostgresSink {
    pool: Pool,
    config: Arc<PostgresConfig>,
    /// Set once the ledger table exists.
    ledger: Arc<tokio::sync::OnceCell<()>>,
    /// Whose rows of the ledger are this sink's.
    writer: LedgerWriter,
    /// Each table's forms, by name, as found when it was last created or fitted.
    forms: Arc<Mutex<HashMap<String, Forms>>>,
}

impl std::fmt::Debug for PostgresSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSink").finish_non_exhaustive()
    }
}

/// Sorts PostgreSQL's errors: connection trouble, serialization failures, deadlocks, lock
/// timeouts, resource and shutdown states pass; the rest (syntax, undefined column, bad data,
/// constraints) are about the batch.
fn classify(error: &tokio_postgres::Error, context: &str) -> SinkError {
    let message = match error.as_db_error() {
        Some(db) if *db.code() == SqlState::LOCK_NOT_AVAILABLE => format!(
            "{context}: {} ({}): another session holds a lock this flush needs (a LOCK TABLE, \
             an ALTER TABLE, a long transaction); retried",
            db.message(),
            db.code().code()
        ),
        Some(db) => format!("{context}: {} ({})", db.message(), db.code().code()),
        None => format!("{context}: {error}"),
    };
    let retriable = match error.code() {
        None => true,
        Some(code) => {
            let class = &code.code()[..2];
            matches!(class, "08" | "53" | "57" | "58")
                || *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::LOCK_NOT_AVAILABLE
        }
    };
    if retriable {
        SinkError::retriable(SINK, message)
    } else {
        SinkError::permanent(SINK, message)
    }
}

/// The error of an exchange that got no answer within `timeout`: retried, on a fresh connection.
fn no_answer(timeout: Duration, what: &str) -> SinkError {
    SinkError::retriable(
        SINK,
        format!(
            "no answer within {timeout:?} while {what} (the server or the network to it is \
             stuck); the connection was closed"
        ),
    )
}

/// The columns of the table `name` resolves to on the search path, as the catalog declares
/// them; none when there is no such table. A column is required when it is `NOT NULL` and
/// nothing fills it: no default, not an identity, not generated. A primary key's column and an
/// identity keep their `NOT NULL` (PostgreSQL refuses to drop it).
async fn store_columns(
    client: &tokio_postgres::Client,
    name: &str,
) -> Result<Vec<StoreColumn>, SinkError> {
    let rows = client
        .query(
            "SELECT a.attname::text, a.attnotnull, \
                    a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '', \
                    a.attidentity <> '' OR EXISTS (SELECT 1 FROM pg_index i \
                        WHERE i.indrelid = a.attrelid AND i.indisprimary \
                          AND a.attnum = ANY (i.indkey)), \
                    format_type(a.atttypid, a.atttypmod) \
             FROM pg_attribute a \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
            &[&quote(name)],
        )
        .await
        .map_err(|e| classify(&e, &format!("cannot read the columns of {name}")))?;
    Ok(rows
        .iter()
        .map(|row| {
            let (not_null, filled, fixed): (bool, bool, bool) =
                (row.get(1), row.get(2), row.get(3));
            StoreColumn {
                name: row.get(0),
                required: not_null && !filled,
                not_null,
                keeps_not_null: fixed,
                ty: row.get(4),
            }
        })
        .collect())
}

impl PostgresSink {
    /// Builds the pool, without asking the server anything yet: the first connection creates
    /// the ledger, so a server that is down when sluice starts is an error of the first table's
    /// opening, which sluice retries. Fails only for settings no server could take (a bad URL).
    pub fn new(config: PostgresConfig) -> Result<Self, SinkError> {
        let pg: tokio_postgres::Config = config
            .url
            .parse()
            .map_err(|e| SinkError::permanent(SINK, format!("bad url: {e}")))?;
        let manager = Manager::from_config(
            pg,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_size.max(1))
            .build()
            .map_err(|e| SinkError::permanent(SINK, format!("cannot build the pool: {e}")))?;
        Ok(Self {
            pool,
            config: Arc::new(config),
            ledger: Arc::default(),
            writer: LedgerWriter::default(),
            forms: Arc::default(),
        })
    }

    /// The sink keeping `writer`'s rows of the ledger (see [`crate::ledger`]).
    pub fn with_writer(mut self, writer: LedgerWriter) -> Self {
        self.writer = writer;
        self
    }

    /// The sink's settings.
    pub fn config(&self) -> &PostgresConfig {
        &self.config
    }

    /// A connection from the pool, once the ledger exists (created by the first one). Connecting
    /// and creating the ledger each get the timeout.
    async fn client(&self) -> Result<Object, SinkError> {
        let timeout = self.config.timeout();
        let client = match tokio::time::timeout(timeout, self.pool.get()).await {
            Ok(client) => {
                client.map_err(|e| SinkError::retriable(SINK, format!("cannot connect: {e}")))?
            }
            Err(_) => return Err(no_answer(timeout, "connecting")),
        };
        let ledger = self.ledger.get_or_try_init(|| async {
            client
                .batch_execute(&format!(
                    "CREATE TABLE IF NOT EXISTS {} (table_name text NOT NULL, \
                     partition text NOT NULL, last_seq bigint NOT NULL, \
                     PRIMARY KEY (table_name, partition)); \
                     CREATE TABLE IF NOT EXISTS {keys} (table_name text NOT NULL, \
                     partition text NOT NULL, insert_key text NOT NULL, \
                     rows_hash bigint NOT NULL, landed_at bigint NOT NULL, \
                     PRIMARY KEY (table_name, partition, insert_key)); \
                     CREATE INDEX IF NOT EXISTS {index} ON {keys} (table_name, landed_at)",
                    quote(LEDGER_TABLE),
                    keys = quote(KEYS_TABLE),
                    index = quote(&format!("{KEYS_TABLE}_landed_at")),
                ))
                .await
                .map_err(|e| classify(&e, "cannot create the ledger"))
        });
        let ledger = tokio::time::timeout(timeout, ledger).await;
        Self::answered(client, ledger, timeout, "creating the ledger").map(|((), client)| client)
    }

    /// What `outcome`, an exchange on `client` run under `timeout`, came to, with the client
    /// when it answered. A connection that did not answer in time is closed rather than given
    /// back to the pool: it may be stuck mid-transaction, or talking to a server that hung, and
    /// the retry gets a fresh one. What the exchange did is left to the server: a transaction
    /// it never saw committed is rolled back when the connection closes, and one that did
    /// commit is in the ledger, so its retry is skipped.
    fn answered<T>(
        client: Object,
        outcome: Result<Result<T, SinkError>, tokio::time::error::Elapsed>,
        timeout: Duration,
        what: &str,
    ) -> Result<(T, Object), SinkError> {
        match outcome {
            Ok(result) => result.map(|value| (value, client)),
            Err(_) => {
                drop(Object::take(client));
                Err(no_answer(timeout, what))
            }
        }
    }

    /// Creates the table, or fits the one that exists to the layout ([`fit`]) in one
    /// `ALTER TABLE` (columns added `IF NOT EXISTS`, so two processes opening one table at once
    /// both succeed).
    async fn create_table(&self, table: &TableDef) -> Result<(), SinkError> {
        let timeout = self.config.timeout();
        let client = self.client().await?;
        let created = tokio::time::timeout(timeout, Self::create_table_on(&client, table)).await;
        let (forms, _) = Self::answered(client, created, timeout, "creating a table")?;
        self.forms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(table.name().to_string(), forms);
        Ok(())
    }

    /// How `table`'s columns go over COPY: as its creation or fit found them, or, for a table
    /// this sink has not opened, as its columns in the database say.
    async fn forms(&self, client: &Object, table: &TableDef) -> Result<Forms, SinkError> {
        let name = table.name().as_str();
        let known = self
            .forms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned();
        match known {
            Some(forms) => Ok(forms),
            None => forms_in(table, &store_columns(client, name).await?),
        }
    }

    /// [`PostgresSink::create_table`] on `client`; how the table's columns go over COPY.
    async fn create_table_on(client: &Object, table: &TableDef) -> Result<Forms, SinkError> {
        let name = table.name().as_str();
        let existing = store_columns(client, name).await?;
        if !existing.is_empty() {
            let can = Abilities {
                any_case: false,
                adds_required: false,
                holds: &|ty, store| Form::existing(ty, store).map(|_| ()),
            };
            let fit = fit::plan(SINK, table, &existing, can)?;
            let forms = forms_in(table, &existing)?;
            let without_value = "a flush with a row without a value for it is refused";
            if fit.is_empty() {
                fit.log(name, without_value);
                return Ok(forms);
            }
            let mut changes = Vec::new();
            for field in &fit.add {
                let (ty, _) = pg_type(field).map_err(|e| SinkError::permanent(SINK, e))?;
                changes.push(format!(
                    "ADD COLUMN IF NOT EXISTS {} {ty}",
                    quote(field.name())
                ));
            }
            for field in &fit.relax {
                changes.push(format!(
                    "ALTER COLUMN {} DROP NOT NULL",
                    quote(field.name())
                ));
            }
            let sql = format!("ALTER TABLE {} {}", quote(name), changes.join(", "));
            client
                .batch_execute(&sql)
                .await
                .map_err(|e| classify(&e, &format!("cannot change table {name} to fit")))?;
            fit.log(name, without_value);
            return Ok(forms);
        }
        let mut columns = Vec::new();
        for field in table.schema().arrow().fields() {
            let (ty, _) = pg_type(field).map_err(|e| SinkError::permanent(SINK, e))?;
            let not_null = if field.is_nullable() { "" } else { " NOT NULL" };
            columns.push(format!("{} {ty}{not_null}", quote(field.name())));
        }
        let sql = format!(
            "CREATE TABLE IF NOT EXISTS {} ({})",
            quote(name),
            columns.join(", ")
        );
        match client.batch_execute(&sql).await {
            Ok(()) => {}
            // Two processes creating one table at once: the loser's CREATE hits the catalog's
            // unique index. The table exists, which is all that was asked.
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {}
            Err(e) => return Err(classify(&e, &format!("cannot create table {name}"))),
        }
        let columns = table.schema().columns();
        columns
            .iter()
            .map(|c| Form::created(&c.ty).map_err(|e| SinkError::permanent(SINK, e)))
            .collect()
    }

    async fn write(&self, flush: FlushBatch<'_>) -> Result<Landed, SinkError> {
        for batch in &flush.batches {
            check_decimals(batch).map_err(|e| SinkError::permanent(SINK, e))?;
        }
        let timeout = self.config.timeout();
        let mut client = self.client().await?;
        let landed = async {
            let forms = self.forms(&client, flush.table).await?;
            self.write_on(&mut client, flush, &forms).await
        };
        let landed = tokio::time::timeout(timeout, landed).await;
        Self::answered(client, landed, timeout, "landing a flush").map(|(landed, _)| landed)
    }

    /// A flush's transaction on `client`.
    // Long because: one transaction, in order: lock timeout, ledger check, COPY, ledger
    // update, commit, each failure classified where it happens.
    async fn write_on(
        &self,
        client: &mut Object,
        flush: FlushBatch<'_>,
        forms: &[Form],
    ) -> Result<Landed, SinkError> {
        let table = flush.table.name().as_str();
        let key = self.writer.key(&flush.id.partition);
        let last_seq = i64::try_from(flush.id.last_seq).unwrap_or(i64::MAX);
        let tx = client
            .transaction()
            .await
            .map_err(|e| classify(&e, "cannot begin"))?;
        // A lock another session holds (on the table or the ledger row) is waited for half the
        // timeout at most, so the flush fails saying so, not as a server that gave no answer.
        let lock_wait = (self.config.timeout() / 2).as_millis().max(1);
        tx.batch_execute(&format!("SET LOCAL lock_timeout = {lock_wait}"))
            .await
            .map_err(|e| classify(&e, "cannot set the lock timeout"))?;
        let ledger = quote(LEDGER_TABLE);
        tx.execute(
            &format!("INSERT INTO {ledger} VALUES ($1, $2, 0) ON CONFLICT DO NOTHING"),
            &[&table, &key],
        )
        .await
        .map_err(|e| classify(&e, "cannot write the ledger"))?;
        let landed: i64 = tx
            .query_one(
                &format!("SELECT last_seq FROM {ledger} WHERE table_name = $1 AND partition = $2 FOR UPDATE"),
                &[&table, &key],
            )
            .await
            .map_err(|e| classify(&e, "cannot read the ledger"))?
            .get(0);
        if landed >= last_seq {
            // A replay of a flush this database already holds.
            return Ok(Landed::default());
        }
        let schema = flush.table.schema().arrow().clone();
        let mut names = Vec::new();
        let mut types: Vec<Type> = Vec::new();
        for (field, form) in schema.fields().iter().zip(forms) {
            let ty = form
                .wire_type(field)
                .map_err(|e| SinkError::permanent(SINK, e))?;
            names.push(quote(field.name()));
            types.push(ty);
        }
        let copy = format!(
            "COPY {} ({}) FROM STDIN BINARY",
            quote(table),
            names.join(", ")
        );
        let sink = tx
            .copy_in(&copy)
            .await
            .map_err(|e| classify(&e, &format!("cannot copy into {table}")))?;
        let writer = BinaryCopyInWriter::new(sink, &types);
        pin_mut!(writer);
        let mut values: Vec<Value<'_>> = Vec::with_capacity(schema.fields().len());
        let refuse = |i: usize, e: String| {
            SinkError::permanent(SINK, format!("column '{}': {e}", schema.field(i).name()))
        };
        for batch in &flush.batches {
            let columns = schema
                .fields()
                .iter()
                .zip(batch.columns())
                .zip(forms)
                .enumerate()
                .map(|(i, ((field, array), form))| {
                    Column::new(field, array.as_ref(), form).map_err(|e| refuse(i, e))
                })
                .collect::<Result<Vec<_>, _>>()?;
            for row in 0..batch.num_rows() {
                values.clear();
                for (i, column) in columns.iter().enumerate() {
                    values.push(column.value(row).map_err(|e| refuse(i, e))?);
                }
                let refs: Vec<&(dyn ToSql + Sync)> =
                    values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
                writer
                    .as_mut()
                    .write(&refs)
                    .await
                    .map_err(|e| classify(&e, &format!("cannot copy into {table}")))?;
            }
        }
        writer
            .finish()
            .await
            .map_err(|e| classify(&e, &format!("cannot copy into {table}")))?;
        keep_keys(&tx, table, &flush.id.partition, &flush.keys).await?;
        tx.execute(
            &format!("UPDATE {ledger} SET last_seq = $3 WHERE table_name = $1 AND partition = $2"),
            &[&table, &key, &last_seq],
        )
        .await
        .map_err(|e| classify(&e, "cannot update the ledger"))?;
        tx.commit()
            .await
            .map_err(|e| classify(&e, "cannot commit"))?;
        Ok(Landed {
            parts: 1,
            ..Landed::default()
        })
    }

    /// Which of `keys` the database holds for `table`'s `partition`, landed at or after
    /// `since_ms`.
    async fn held_keys(
        &self,
        table: &TableName,
        partition: &PartitionKey,
        keys: &[InsertKey],
        since_ms: i64,
    ) -> Result<Vec<InsertKey>, SinkError> {
        let timeout = self.config.timeout();
        let client = self.client().await?;
        let query = format!(
            "SELECT insert_key, rows_hash FROM {} WHERE table_name = $1 AND partition = $2 \
             AND insert_key = ANY($3) AND landed_at >= $4",
            quote(KEYS_TABLE)
        );
        let names: Vec<&str> = keys.iter().map(|k| k.key.as_str()).collect();
        let partition = keys::partition_text(partition);
        let rows = async {
            client
                .query(&query, &[&table.as_str(), &partition, &names, &since_ms])
                .await
                .map_err(|e| classify(&e, "cannot read insert keys"))
        };
        let rows = tokio::time::timeout(timeout, rows).await;
        let (rows, _) = Self::answered(client, rows, timeout, "reading insert keys")?;
        Ok(rows
            .iter()
            .map(|row| InsertKey {
                key: row.get(0),
                rows_hash: keys::loaded_hash(row.get(1)),
            })
            .collect())
    }

    async fn committed(&self, table: &TableDef) -> Result<Vec<(PartitionKey, u64)>, SinkError> {
        let timeout = self.config.timeout();
        let client = self.client().await?;
        let query = format!(
            "SELECT partition, last_seq FROM {} WHERE table_name = $1",
            quote(LEDGER_TABLE)
        );
        let rows = async {
            client
                .query(&query, &[&table.name().as_str()])
                .await
                .map_err(|e| classify(&e, "cannot read the ledger"))
        };
        let rows = tokio::time::timeout(timeout, rows).await;
        let (rows, _) = Self::answered(client, rows, timeout, "reading the ledger")?;
        Ok(self.writer.watermarks(rows.iter().map(|row| {
            let last_seq = u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
            (row.get::<_, &str>(0), last_seq)
        })))
    }
}

/// How each column of `table`'s layout goes over COPY into the table whose columns are
/// `existing`: in the form of the store column of its name, or, for a column the fit adds, in
/// the form of the column sluice adds.
fn forms_in(table: &TableDef, existing: &[StoreColumn]) -> Result<Forms, SinkError> {
    table
        .schema()
        .columns()
        .iter()
        .map(
            |column| match existing.iter().find(|c| c.name == column.name) {
                Some(store) => Form::existing(&column.ty, &store.ty).map_err(|why| {
                    SinkError::permanent(
                        SINK,
                        format!(
                            "table {}: column '{}' is {} there: {why}",
                            table.name(),
                            column.name,
                            store.ty
                        ),
                    )
                }),
                None => Form::created(&column.ty).map_err(|e| SinkError::permanent(SINK, e)),
            },
        )
        .collect()
}

/// Adds a flush's keys in its transaction, and deletes the table's keys past their window. A
/// key another process added since it was asked about fails the flush, retriably: the other
/// transaction's row lock makes this one wait for it, then see its key.
async fn keep_keys(
    tx: &tokio_postgres::Transaction<'_>,
    table: &str,
    partition: &PartitionKey,
    keep: &KeysToKeep,
) -> Result<(), SinkError> {
    if keep.keys.is_empty() {
        return Ok(());
    }
    let partition = keys::partition_text(partition);
    let keys_table = quote(KEYS_TABLE);
    let add = tx
        .prepare(&format!(
            "INSERT INTO {keys_table} AS k (table_name, partition, insert_key, rows_hash, \
             landed_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (table_name, partition, insert_key) DO UPDATE \
             SET rows_hash = excluded.rows_hash, landed_at = excluded.landed_at \
             WHERE k.landed_at < $6"
        ))
        .await
        .map_err(|e| classify(&e, "cannot add insert keys"))?;
    for key in &keep.keys {
        let hash = keys::stored_hash(key.rows_hash);
        let added = tx
            .execute(
                &add,
                &[
                    &table,
                    &partition,
                    &key.key,
                    &hash,
                    &keep.now_ms,
                    &keep.expired_before_ms,
                ],
            )
            .await
            .map_err(|e| classify(&e, "cannot add an insert key"))?;
        if added == 0 {
            return Err(keys::taken_meanwhile(SINK, &key.key));
        }
    }
    tx.execute(
        &format!("DELETE FROM {keys_table} WHERE table_name = $1 AND landed_at < $2"),
        &[&table, &keep.expired_before_ms],
    )
    .await
    .map_err(|e| classify(&e, "cannot delete old insert keys"))?;
    Ok(())
}

impl Sink for PostgresSink {
    fn name(&self) -> &'static str {
        SINK
    }

    fn create_table<'a>(&'a self, table: &'a TableDef) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(PostgresSink::create_table(self, table))
    }

    fn write<'a>(&'a self, flush: FlushBatch<'a>) -> BoxFuture<'a, Result<Landed, SinkError>> {
        Box::pin(PostgresSink::write(self, flush))
    }

    fn committed<'a>(
        &'a self,
        table: &'a TableDef,
    ) -> BoxFuture<'a, Result<Vec<(PartitionKey, u64)>, SinkError>> {
        Box::pin(PostgresSink::committed(self, table))
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
        Box::pin(PostgresSink::held_keys(
            self, table, partition, keys, since_ms,
        ))
    }
}
