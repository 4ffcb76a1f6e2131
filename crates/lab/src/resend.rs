//! `sluice lab resend`: producers that send an insert again until it is answered, against a
//! server killed with SIGKILL again and again, and what lands in the store.
//!
//! A producer over plain HTTP cannot tell an insert the server never took from one it took and
//! could not answer: the connection drops the same way. Sending it again is the only way not to
//! lose it, and then an insert that had landed lands twice, unless it carries a key the server
//! still knows after the crash. So a producer that resends gets exactly once only with a key;
//! this experiment shows both sides on one set of kills.
//!
//! N producers run through the whole experiment. Each sends inserts of R rows with ids of its
//! own (producer `p` from `p * IDS_PER_PRODUCER`) and, with keys on, the key `p<producer>-<n>`
//! in `Idempotency-Key`. An insert goes out until it is answered 200: after no answer, a
//! timeout, a 5xx or a 429 the same body goes again with the same key, to whichever server is
//! up. Any other 4xx ends the insert, given up, and the report shows it.
//!
//! The controller starts `sluice serve` on one data directory, leaves it to the producers for a
//! random while, kills it and starts it again, C times. A last server answers every insert
//! still pending and stops cleanly. Then the store (the lake, SQLite or PostgreSQL) is read
//! back: with keys every id must be there exactly once; without, the resends of inserts that had
//! landed before a kill show up as duplicates.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response, StatusCode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::events::{COLUMNS_TOML, EventGen, RowFormat, write_insert};
use crate::load;
use crate::process::ServerProcess;
use crate::verify::{self, Audit};

/// The table the experiment writes.
pub const TABLE: &str = "resend";

/// Ids each producer has to itself: producer `p` sends ids from `p * IDS_PER_PRODUCER` on.
pub const IDS_PER_PRODUCER: u64 = 1_000_000_000;

/// How long a producer waits for an answer before it takes the insert as unanswered, so that a
/// request to a server that died does not hang.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The pause before a resend, when the server named none.
pub const RESEND_PAUSE: Duration = Duration::from_millis(20);

/// The longest pause a `Retry-After` gets: it counts whole seconds, longer than many cycles.
pub const MAX_RETRY_AFTER: Duration = Duration::from_millis(100);

/// How long the last server has to answer every pending insert.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the last server has to stop once asked.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the rows land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    /// The Parquet lake in the data directory.
    Lake,
    /// A SQLite database in the data directory, `resend.sqlite`.
    Sqlite,
    /// The PostgreSQL server at this URL, whose table `resend` must hold no rows yet.
    Postgres(String),
}

impl Store {
    /// The store's name in the report.
    pub fn name(&self) -> &'static str {
        match self {
            Store::Lake => "lake",
            Store::Sqlite => "sqlite",
            Store::Postgres(_) => "postgres",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ResendConfig {
    /// The `sluice` binary to start.
    pub binary: PathBuf,
    /// The data directory every server of the run shares.
    pub data_dir: PathBuf,
    /// Where the rows land.
    pub store: Store,
    /// Whether each insert carries a key.
    pub keys: bool,
    /// How many times to kill the server.
    pub cycles: usize,
    /// Concurrent producers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// Shortest life of a server before the kill.
    pub min_run: Duration,
    /// Longest life of a server before the kill.
    pub max_run: Duration,
    /// The ack mode asked for: `async`, `durable` or `committed`.
    pub ack: String,
    /// Seed of the kill times and the events.
    pub seed: u64,
}

/// One server's life: a cycle ended by SIGKILL, or the drain ended by a clean stop.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Phase {
    /// Milliseconds from the server's address being handed out to the kill (or, for the
    /// drain, to the last pending insert's answer).
    pub ran_ms: u64,
    /// Inserts answered 200 in this phase.
    pub answered: u64,
    /// Resends in this phase.
    pub resends: u64,
}

/// What the run found.
#[derive(Debug, Clone, Serialize)]
pub struct ResendReport {
    /// `lake`, `sqlite` or `postgres`.
    pub store: &'static str,
    /// Whether inserts carried keys.
    pub keys: bool,
    /// The ack mode asked for.
    pub ack: String,
    /// Producers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// The killed servers.
    pub cycles: Vec<Phase>,
    /// The last server, until every pending insert was answered.
    pub drain: Phase,
    /// Inserts answered 200.
    pub inserts: u64,
    /// Rows of those inserts.
    pub rows: u64,
    /// Sends after the first, of every insert.
    pub resends: u64,
    /// Answers marked `X-Sluice-Duplicate`: resends the server knew by their key.
    pub duplicate_answers: u64,
    /// Inserts given up after a 4xx other than 429.
    pub given_up: u64,
    /// The given-up inserts by HTTP status.
    pub given_up_by_status: BTreeMap<String, u64>,
    /// Every acknowledged row against the store.
    pub audit: Audit,
    /// Wall time, seconds.
    pub elapsed_s: f64,
}

impl ResendReport {
    /// Whether the run found what it should: every acknowledged row there, no insert given up,
    /// and, with keys, no row twice. Without keys duplicates are the finding, not a failure.
    pub fn passed(&self) -> bool {
        let complete = self.audit.acked > 0 && self.audit.lost == 0 && self.given_up == 0;
        complete && (!self.keys || self.audit.duplicated == 0)
    }
}

/// Runs the cycles, the drain and the audit; `on_cycle` sees each cycle as it ends.
pub async fn run(
    config: ResendConfig,
    mut on_cycle: impl FnMut(usize, &Phase),
) -> Result<ResendReport, String> {
    validate(&config)?;
    let started = Instant::now();
    std::fs::create_dir_all(&config.data_dir).map_err(|e| e.to_string())?;
    if let Store::Postgres(url) = &config.store {
        refuse_rows_left(url).await?;
    }
    let config_file = write_config(&config).map_err(|e| e.to_string())?;
    let (publish, server) = watch::channel(None);
    let shared = Arc::new(Shared::default());
    // Dropped on an early return, the set aborts every producer.
    let producers = spawn_producers(&config, &server, &shared);
    let cycles = run_cycles(&config, &config_file, &publish, &shared, &mut on_cycle).await?;
    let (drain, tallies) = drain(&config, &config_file, &publish, &shared, producers).await?;
    let counts = landed_ids(&config).await?;
    let mut total = Tally::default();
    for tally in tallies {
        total.absorb(tally);
    }
    total.acked.sort_unstable();
    Ok(ResendReport {
        store: config.store.name(),
        keys: config.keys,
        ack: config.ack,
        producers: config.producers,
        rows_per_insert: config.rows_per_insert,
        cycles,
        drain,
        inserts: total.inserts,
        rows: total.rows,
        resends: total.resends,
        duplicate_answers: total.duplicate_answers,
        given_up: total.given_up.values().sum(),
        given_up_by_status: total.given_up,
        audit: verify::audit(&counts, &total.acked),
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

fn validate(config: &ResendConfig) -> Result<(), String> {
    if config.producers == 0 || config.rows_per_insert == 0 {
        return Err("producers and rows per insert must be at least 1".into());
    }
    if config.min_run > config.max_run {
        return Err("the shortest run must not be longer than the longest".into());
    }
    if !["async", "durable", "committed"].contains(&config.ack.as_str()) {
        return Err(format!(
            "unknown ack mode '{}': async, durable or committed",
            config.ack
        ));
    }
    Ok(())
}

/// A PostgreSQL table outlives the data directory: rows of an earlier run would read as
/// duplicates of this one's.
async fn refuse_rows_left(url: &str) -> Result<(), String> {
    let left = verify::postgres_id_counts(url, TABLE).await?;
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "table {TABLE} in PostgreSQL already holds {} ids: drop it, or use another database",
            left.len()
        ))
    }
}

fn sqlite_path(data_dir: &Path) -> PathBuf {
    data_dir.join("resend.sqlite")
}

fn write_config(config: &ResendConfig) -> std::io::Result<PathBuf> {
    let (sink, table_sink) = match &config.store {
        Store::Lake => (String::new(), ""),
        Store::Sqlite => (
            format!(
                "[sinks.db]\ntype = \"sqlite\"\npath = {:?}\n\n",
                sqlite_path(&config.data_dir).display().to_string()
            ),
            "sink = \"db\"\n",
        ),
        Store::Postgres(url) => (
            format!("[sinks.pg]\ntype = \"postgres\"\nurl = {url:?}\n\n"),
            "sink = \"pg\"\n",
        ),
    };
    // A short age limit lands rows during every cycle, so kills also fall between "landed" and
    // "log released", where a replay must not land them twice.
    let text = format!(
        "[flush]\nmax_age = \"300ms\"\n\n{sink}[tables.{TABLE}]\n{table_sink}columns = \
         {COLUMNS_TOML}\n"
    );
    let path = config.data_dir.join("resend.toml");
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Where the rows of the run are, as `id` counts.
async fn landed_ids(config: &ResendConfig) -> Result<HashMap<i64, usize>, String> {
    match &config.store {
        Store::Lake => verify::id_counts(&config.data_dir, TABLE),
        Store::Sqlite => verify::sqlite_id_counts(&sqlite_path(&config.data_dir), TABLE),
        Store::Postgres(url) => verify::postgres_id_counts(url, TABLE).await,
    }
}

/// What the producers and the controller share, besides the server's address.
#[derive(Debug, Default)]
struct Shared {
    /// Set when producers should start no new insert.
    stop: AtomicBool,
    /// Inserts answered 200 since the controller last took the phase's figures.
    answered: AtomicU64,
    /// Resends since the controller last took the phase's figures.
    resends: AtomicU64,
}

impl Shared {
    /// The figures of the phase that ran for `ran`; the next phase counts from zero.
    fn take_phase(&self, ran: Duration) -> Phase {
        Phase {
            ran_ms: ran.as_millis() as u64,
            answered: self.answered.swap(0, Ordering::Relaxed),
            resends: self.resends.swap(0, Ordering::Relaxed),
        }
    }
}

/// Starts a server on the shared data directory. The start reads the child's first line, which
/// blocks: it runs off the runtime's threads, where the producers are.
async fn start_server(config: &ResendConfig, config_file: &Path) -> Result<ServerProcess, String> {
    let (binary, data_dir) = (config.binary.clone(), config.data_dir.clone());
    let config_file = config_file.to_owned();
    tokio::task::spawn_blocking(move || {
        ServerProcess::spawn(&binary, &data_dir, Some(&config_file))
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())
}

/// Starts, feeds and kills a server per cycle.
async fn run_cycles(
    config: &ResendConfig,
    config_file: &Path,
    publish: &watch::Sender<Option<SocketAddr>>,
    shared: &Shared,
    on_cycle: &mut impl FnMut(usize, &Phase),
) -> Result<Vec<Phase>, String> {
    let mut rng = SmallRng::seed_from_u64(config.seed);
    let min = config.min_run.as_millis() as u64;
    let max = config.max_run.as_millis() as u64;
    let mut cycles = Vec::with_capacity(config.cycles);
    for cycle in 0..config.cycles {
        let mut server = start_server(config, config_file)
            .await
            .map_err(|e| format!("cycle {}: {e}", cycle + 1))?;
        publish.send_replace(Some(server.addr));
        let ran = Duration::from_millis(rng.random_range(min..=max));
        tokio::time::sleep(ran).await;
        server
            .kill()
            .map_err(|e| format!("cycle {}: cannot kill the server: {e}", cycle + 1))?;
        publish.send_replace(None);
        let phase = shared.take_phase(ran);
        on_cycle(cycle, &phase);
        cycles.push(phase);
    }
    Ok(cycles)
}

/// Starts the last server, lets every producer get its pending insert answered, and stops the
/// server cleanly.
async fn drain(
    config: &ResendConfig,
    config_file: &Path,
    publish: &watch::Sender<Option<SocketAddr>>,
    shared: &Shared,
    mut producers: JoinSet<Tally>,
) -> Result<(Phase, Vec<Tally>), String> {
    let mut server = start_server(config, config_file)
        .await
        .map_err(|e| format!("final start: {e}"))?;
    let started = Instant::now();
    publish.send_replace(Some(server.addr));
    shared.stop.store(true, Ordering::Relaxed);
    let tallies = tokio::time::timeout(DRAIN_TIMEOUT, collect(&mut producers))
        .await
        .map_err(|_| {
            format!("inserts still unanswered {DRAIN_TIMEOUT:?} after the last server started")
        })??;
    let phase = shared.take_phase(started.elapsed());
    server
        .terminate()
        .map_err(|e| format!("cannot stop the last server: {e}"))?;
    let status = tokio::task::spawn_blocking(move || server.wait(STOP_TIMEOUT))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("the last server exited with {status}"));
    }
    Ok((phase, tallies))
}

async fn collect(producers: &mut JoinSet<Tally>) -> Result<Vec<Tally>, String> {
    let mut tallies = Vec::new();
    while let Some(done) = producers.join_next().await {
        tallies.push(done.map_err(|e| format!("a producer failed: {e}"))?);
    }
    Ok(tallies)
}

/// What every producer sends alike.
struct Plan {
    path: String,
    keys: bool,
    rows_per_insert: u64,
    seed: u64,
}

fn spawn_producers(
    config: &ResendConfig,
    server: &watch::Receiver<Option<SocketAddr>>,
    shared: &Arc<Shared>,
) -> JoinSet<Tally> {
    let plan = Arc::new(Plan {
        path: format!("/v1/tables/{TABLE}/rows?ack={}", config.ack),
        keys: config.keys,
        rows_per_insert: config.rows_per_insert as u64,
        seed: config.seed,
    });
    let mut producers = JoinSet::new();
    for producer in 0..config.producers as u64 {
        let (plan, server, shared) = (plan.clone(), server.clone(), shared.clone());
        producers.spawn(produce(plan, producer, server, shared));
    }
    producers
}

/// One producer's counts.
#[derive(Debug, Default)]
struct Tally {
    inserts: u64,
    rows: u64,
    resends: u64,
    duplicate_answers: u64,
    given_up: BTreeMap<String, u64>,
    /// Ids of answered inserts, as ranges `[start, end)`.
    acked: Vec<(u64, u64)>,
}

impl Tally {
    fn answered(&mut self, ids: (u64, u64), duplicate: bool) {
        self.inserts += 1;
        self.rows += ids.1 - ids.0;
        self.duplicate_answers += u64::from(duplicate);
        // A producer's ids follow each other: one range while every insert is answered.
        match self.acked.last_mut() {
            Some(last) if last.1 == ids.0 => last.1 = ids.1,
            _ => self.acked.push(ids),
        }
    }

    fn gave_up(&mut self, status: StatusCode) {
        let status = status.as_u16().to_string();
        *self.given_up.entry(status).or_default() += 1;
    }

    fn absorb(&mut self, other: Tally) {
        self.inserts += other.inserts;
        self.rows += other.rows;
        self.resends += other.resends;
        self.duplicate_answers += other.duplicate_answers;
        for (status, n) in other.given_up {
            *self.given_up.entry(status).or_default() += n;
        }
        self.acked.extend(other.acked);
    }
}

/// One insert, sent the same way every time.
struct Insert {
    body: Bytes,
    key: Option<String>,
}

/// How an insert ended.
enum Outcome {
    /// Answered 200, marked as a duplicate or not.
    Answered { duplicate: bool },
    /// Refused for good with this status.
    GivenUp(StatusCode),
    /// The run is over: no server will come.
    NoServer,
}

/// One producer: inserts one after the other, each until it is answered, until told to stop.
async fn produce(
    plan: Arc<Plan>,
    producer: u64,
    mut server: watch::Receiver<Option<SocketAddr>>,
    shared: Arc<Shared>,
) -> Tally {
    let mut tally = Tally::default();
    let mut events = EventGen::new(plan.seed.wrapping_add(producer));
    let mut connection = Connection::default();
    let rows = plan.rows_per_insert;
    for n in 0..IDS_PER_PRODUCER / rows {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let first = producer * IDS_PER_PRODUCER + n * rows;
        let batch: Vec<_> = (first..first + rows)
            .map(|id| (id, events.next_event()))
            .collect();
        let mut body = Vec::with_capacity(batch.len() * 256);
        write_insert(RowFormat::JsonEachRow, &batch, &mut body);
        let insert = Insert {
            body: body.into(),
            key: plan.keys.then(|| format!("p{producer}-{n}")),
        };
        let outcome = deliver(
            &plan.path,
            &insert,
            &mut connection,
            &mut server,
            &shared,
            &mut tally,
        )
        .await;
        match outcome {
            Outcome::Answered { duplicate } => {
                tally.answered((first, first + rows), duplicate);
                shared.answered.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::GivenUp(status) => tally.gave_up(status),
            Outcome::NoServer => break,
        }
    }
    tally
}

/// Sends `insert` to whichever server is up until one answers it 200 or refuses it for good,
/// counting each resend.
async fn deliver(
    path: &str,
    insert: &Insert,
    connection: &mut Connection,
    server: &mut watch::Receiver<Option<SocketAddr>>,
    shared: &Shared,
    tally: &mut Tally,
) -> Outcome {
    loop {
        let Some(addr) = server_up(server).await else {
            return Outcome::NoServer;
        };
        let pause = match connection.post(addr, path, insert).await {
            Some(answer) if answer.status == StatusCode::OK => {
                return Outcome::Answered {
                    duplicate: answer.duplicate,
                };
            }
            Some(answer) if answer.is_final_refusal() => return Outcome::GivenUp(answer.status),
            Some(answer) => answer
                .retry_after
                .map_or(RESEND_PAUSE, |asked| asked.min(MAX_RETRY_AFTER)),
            None => RESEND_PAUSE,
        };
        tally.resends += 1;
        shared.resends.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(pause).await;
    }
}

/// The address of the server that is up, waiting while none is; `None` once the run is over.
async fn server_up(server: &mut watch::Receiver<Option<SocketAddr>>) -> Option<SocketAddr> {
    server
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|addr| *addr)
}

/// What a server answered to an insert.
struct Answer {
    status: StatusCode,
    duplicate: bool,
    retry_after: Option<Duration>,
}

impl Answer {
    fn from_response<B>(response: &Response<B>) -> Self {
        let headers = response.headers();
        Self {
            status: response.status(),
            duplicate: headers.contains_key("x-sluice-duplicate"),
            retry_after: headers
                .get(hyper::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse().ok())
                .map(Duration::from_secs),
        }
    }

    /// A 4xx but 429 says the insert itself is wrong: sending it again cannot help.
    fn is_final_refusal(&self) -> bool {
        self.status.is_client_error() && self.status != StatusCode::TOO_MANY_REQUESTS
    }
}

/// A producer's connection, kept open from insert to insert while its server lives.
#[derive(Default)]
struct Connection {
    open: Option<(SocketAddr, SendRequest<Full<Bytes>>)>,
}

impl Connection {
    /// POSTs `insert` to `addr`: the answer, or `None` when none came within
    /// [`REQUEST_TIMEOUT`] (the connection is dropped then, and the next post opens another).
    async fn post(&mut self, addr: SocketAddr, path: &str, insert: &Insert) -> Option<Answer> {
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(addr, path, insert))
            .await
            .ok()
            .flatten();
        if answer.is_none() {
            self.open = None;
        }
        answer
    }

    async fn exchange(&mut self, addr: SocketAddr, path: &str, insert: &Insert) -> Option<Answer> {
        let sender = self.ready_sender(addr).await?;
        let mut request = Request::post(path)
            .header(hyper::header::HOST, addr.to_string())
            .header(hyper::header::CONTENT_TYPE, "application/x-ndjson");
        if let Some(key) = &insert.key {
            request = request.header("Idempotency-Key", key);
        }
        let request = request.body(Full::new(insert.body.clone())).ok()?;
        let response = sender.send_request(request).await.ok()?;
        let answer = Answer::from_response(&response);
        // Read the body so the connection can carry the next request.
        response.into_body().collect().await.ok()?;
        Some(answer)
    }

    /// The open connection to `addr`, or a new one when there is none or it is to an earlier
    /// server.
    async fn ready_sender(&mut self, addr: SocketAddr) -> Option<&mut SendRequest<Full<Bytes>>> {
        let reusable = self
            .open
            .as_ref()
            .is_some_and(|(to, sender)| *to == addr && !sender.is_closed());
        if !reusable {
            self.open = Some((addr, load::connect(addr).await.ok()?));
        }
        let (_, sender) = self.open.as_mut()?;
        sender.ready().await.ok()?;
        Some(sender)
    }
}
