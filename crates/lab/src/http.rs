//! `sluice lab http`: what a 1-row insert costs next to the HTTP exchange around it.
//!
//! A 1-row insert is mostly HTTP: a connection's request is parsed, routed and answered whatever
//! it carries. The row itself (decoding it, appending it to the table's buffer and, for `durable`
//! acks, to the write-ahead log) should cost little more than that. So this lab measures the
//! ceiling first: `GET /ping` as fast as answers come, which is the HTTP stack's own rate on
//! this machine, with nothing behind it. Then, on the same server and the same number of
//! keep-alive connections, 1-row inserts with `async` acks, the same with `durable` acks, and
//! 1,000-row `durable` inserts for the rows/s that batching reaches.
//!
//! Each phase also reads the server's CPU time before and after, so it reports what one request
//! costs the server in CPU microseconds. That figure holds still on a busy machine, where the
//! rates move with whatever else runs: the client shares the machine, so the rates measure both.
//! It reads its own CPU time the same way, so the report also says what each request cost the
//! load generator, which takes its share of the same cores.
//!
//! The machine's speed drifts from one minute to the next, so the phases run in `rounds`, each on
//! a fresh server: a round's ratios compare phases that ran side by side, and the report gives
//! the median of each figure over the rounds, with every round's rates and ratios beside them.
//!
//! The two ratios are read against the project's goals: 1-row async inserts at
//! [`ASYNC_VS_PING_GOAL`] of the ping rate or more, durable at [`DURABLE_VS_ASYNC_GOAL`] of
//! async or more. The lab reports whether each was met; it does not fail on them, since they
//! describe the server, not whether the measurement worked. It fails only when a phase had
//! errors or measured nothing.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, StatusCode};
use serde::Serialize;

use crate::events::COLUMNS_TOML;
use crate::load::{self, LoadConfig, Progress, Stop};
use crate::process::{self, ServerProcess};

/// The goal for 1-row async inserts per second over `GET /ping` answers per second.
pub const ASYNC_VS_PING_GOAL: f64 = 0.75;

/// The goal for 1-row durable inserts per second over 1-row async ones.
pub const DURABLE_VS_ASYNC_GOAL: f64 = 0.9;

/// The longest warm-up of pings before the first measured phase, so the first phase does not
/// pay for connections being opened and the server's threads waking up.
pub const MAX_WARM_UP: Duration = Duration::from_secs(1);

/// The table every insert phase writes to.
const TABLE: &str = "http";

/// Rows in each insert of the last phase.
const BATCH_ROWS: usize = 1000;

/// The distance between the first ids of two insert phases, so no two rows share an id.
const ID_SPACING: u64 = 1 << 40;

/// What to run.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The `sluice` binary to start.
    pub binary: PathBuf,
    /// The server's data directory.
    pub data_dir: PathBuf,
    /// Keep-alive connections, each with one request in flight at a time.
    pub connections: usize,
    /// How long each phase runs.
    pub duration: Duration,
    /// How many times the four phases run, each time on a fresh server.
    pub rounds: usize,
}

/// One phase's figure, as it ends.
#[derive(Debug, Clone, Copy)]
pub struct Phase {
    /// What was sent, e.g. `1-row async inserts`.
    pub name: &'static str,
    /// What `per_s` counts: `requests`, `inserts` or `rows`.
    pub unit: &'static str,
    /// Answered requests, acknowledged inserts or acknowledged rows per second.
    pub per_s: f64,
    /// Requests that failed.
    pub errors: u64,
    /// Requests answered (pings or inserts, whatever their rows).
    pub answered: u64,
    /// The server's CPU time per answered request, in microseconds; 0 when it cannot be read.
    pub server_cpu_us: f64,
    /// This process's CPU time per answered request, in microseconds: what the load generator
    /// spent on each, since the lab does nothing else while a phase runs; 0 when it cannot be
    /// read.
    pub client_cpu_us: f64,
}

/// Every figure of one run: each rate, CPU time and ratio is the median over the rounds, and
/// each error count their sum.
#[derive(Debug, Clone, Serialize)]
pub struct HttpReport {
    /// Keep-alive connections in every phase.
    pub connections: usize,
    /// Seconds per phase.
    pub duration_s: f64,
    /// Seconds of pings before each round's first phase, not counted.
    pub warm_up_s: f64,
    /// Rounds of the four phases, each on a fresh server.
    pub rounds: usize,
    /// `GET /ping` answered 200, per second.
    pub ping_per_s: f64,
    /// Pings that failed.
    pub ping_errors: u64,
    /// The server's CPU microseconds per ping.
    pub ping_server_cpu_us: f64,
    /// The load generator's CPU microseconds per ping.
    pub ping_client_cpu_us: f64,
    /// 1-row inserts with `ack=async` acknowledged, per second.
    pub async_inserts_per_s: f64,
    /// 1-row async inserts that failed.
    pub async_errors: u64,
    /// The server's CPU microseconds per 1-row async insert.
    pub async_server_cpu_us: f64,
    /// The load generator's CPU microseconds per 1-row async insert.
    pub async_client_cpu_us: f64,
    /// 1-row inserts with `ack=durable` acknowledged, per second.
    pub durable_inserts_per_s: f64,
    /// 1-row durable inserts that failed.
    pub durable_errors: u64,
    /// The server's CPU microseconds per 1-row durable insert.
    pub durable_server_cpu_us: f64,
    /// The load generator's CPU microseconds per 1-row durable insert.
    pub durable_client_cpu_us: f64,
    /// Rows acknowledged per second in 1,000-row inserts with `ack=durable`.
    pub rows_1000_durable_per_s: f64,
    /// 1,000-row durable inserts that failed.
    pub rows_1000_durable_errors: u64,
    /// The server's CPU microseconds per 1,000-row durable insert.
    pub rows_1000_durable_server_cpu_us: f64,
    /// The load generator's CPU microseconds per 1,000-row durable insert.
    pub rows_1000_durable_client_cpu_us: f64,
    /// `async_inserts_per_s / ping_per_s` in each round, the median over the rounds.
    pub async_vs_ping: f64,
    /// [`ASYNC_VS_PING_GOAL`].
    pub async_vs_ping_goal: f64,
    /// Whether `async_vs_ping` reached its goal.
    pub async_vs_ping_met: bool,
    /// `durable_inserts_per_s / async_inserts_per_s` in each round, the median over the rounds.
    pub durable_vs_async: f64,
    /// [`DURABLE_VS_ASYNC_GOAL`].
    pub durable_vs_async_goal: f64,
    /// Whether `durable_vs_async` reached its goal.
    pub durable_vs_async_met: bool,
    /// Each round's rates and ratios, in the order they ran.
    pub per_round: Vec<RoundFigures>,
    /// The four phases with the medians above, for a table.
    #[serde(skip)]
    pub median_phases: RoundPhases,
}

/// One round's rates and ratios.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RoundFigures {
    /// `GET /ping` answered 200, per second.
    pub ping_per_s: f64,
    /// 1-row async inserts acknowledged, per second.
    pub async_inserts_per_s: f64,
    /// 1-row durable inserts acknowledged, per second.
    pub durable_inserts_per_s: f64,
    /// Rows acknowledged per second in 1,000-row durable inserts.
    pub rows_1000_durable_per_s: f64,
    /// `async_inserts_per_s / ping_per_s`.
    pub async_vs_ping: f64,
    /// `durable_inserts_per_s / async_inserts_per_s`.
    pub durable_vs_async: f64,
}

impl RoundFigures {
    fn of(phases: &RoundPhases) -> Self {
        let [ping, async_one, durable_one, durable_batch] = phases;
        Self {
            ping_per_s: ping.per_s,
            async_inserts_per_s: async_one.per_s,
            durable_inserts_per_s: durable_one.per_s,
            rows_1000_durable_per_s: durable_batch.per_s,
            async_vs_ping: ratio(async_one.per_s, ping.per_s),
            durable_vs_async: ratio(durable_one.per_s, async_one.per_s),
        }
    }
}

/// One round's phases, in the order they ran: pings, 1-row async, 1-row durable, 1,000-row
/// durable.
pub type RoundPhases = [Phase; 4];

impl HttpReport {
    /// Whether the run can be trusted: every phase measured something and none had errors.
    /// The goals play no part.
    pub fn measured_cleanly(&self) -> bool {
        let rates = [
            self.ping_per_s,
            self.async_inserts_per_s,
            self.durable_inserts_per_s,
            self.rows_1000_durable_per_s,
        ];
        let errors = [
            self.ping_errors,
            self.async_errors,
            self.durable_errors,
            self.rows_1000_durable_errors,
        ];
        rates.iter().all(|&rate| rate > 0.0) && errors.iter().all(|&n| n == 0)
    }
}

/// Runs `rounds` rounds of the four phases, each against a fresh server, calling `on_phase`
/// with the round's index as each phase ends.
pub async fn run(
    config: HttpConfig,
    mut on_phase: impl FnMut(usize, &Phase),
) -> Result<HttpReport, String> {
    if config.connections == 0 || config.duration.is_zero() || config.rounds == 0 {
        return Err("connections, the duration and the rounds must be more than zero".into());
    }
    let mut rounds = Vec::with_capacity(config.rounds);
    for round in 0..config.rounds {
        let data_dir = config.data_dir.join(format!("round-{}", round + 1));
        let phases = run_round(&config, &data_dir, |phase| on_phase(round, phase)).await?;
        rounds.push(phases);
    }
    Ok(report(&config, &rounds))
}

/// Runs the four phases against a server started on `data_dir`, in the order ping, async,
/// durable, 1,000-row durable, calling `on_phase` as each ends.
async fn run_round(
    config: &HttpConfig,
    data_dir: &Path,
    mut on_phase: impl FnMut(&Phase),
) -> Result<RoundPhases, String> {
    let mut server = start_server(&config.binary, data_dir)?;
    // The warm-up's figures are not kept: the measured pings show the same failures.
    ping_for(server.addr, config.connections, warm_up(config)).await?;
    let before = CpuTimes::read(&server);
    let mut ping = ping_for(server.addr, config.connections, config.duration).await?;
    CpuTimes::read(&server).charge(&before, &mut ping);
    on_phase(&ping);
    let mut inserts = Vec::with_capacity(INSERT_PHASES.len());
    for (i, spec) in INSERT_PHASES.iter().enumerate() {
        let id_offset = ID_SPACING * (i as u64 + 1);
        let before = CpuTimes::read(&server);
        let mut phase = insert_phase(config, server.addr, spec, id_offset).await?;
        CpuTimes::read(&server).charge(&before, &mut phase);
        on_phase(&phase);
        inserts.push(phase);
    }
    server.terminate().map_err(|e| e.to_string())?;
    server
        .wait(Duration::from_secs(60))
        .map_err(|e| e.to_string())?;
    let [async_one, durable_one, durable_batch]: [Phase; 3] = inserts
        .try_into()
        .map_err(|_| "an insert phase is missing".to_owned())?;
    Ok([ping, async_one, durable_one, durable_batch])
}

/// The pings before a round's first measured phase.
fn warm_up(config: &HttpConfig) -> Duration {
    config.duration.min(MAX_WARM_UP)
}

/// One insert phase: what it is called, its ack mode and its rows per insert.
struct InsertPhase {
    name: &'static str,
    ack: &'static str,
    rows_per_insert: usize,
}

/// The insert phases, in the order they run and [`report`] reads them.
const INSERT_PHASES: [InsertPhase; 3] = [
    InsertPhase {
        name: "1-row async inserts",
        ack: "async",
        rows_per_insert: 1,
    },
    InsertPhase {
        name: "1-row durable inserts",
        ack: "durable",
        rows_per_insert: 1,
    },
    InsertPhase {
        name: "1,000-row durable inserts",
        ack: "durable",
        rows_per_insert: BATCH_ROWS,
    },
];

/// Runs one insert phase: native API, as fast as answers come, for the phase's duration, with
/// ids from `id_offset`. Its figure is inserts per second for 1-row inserts, else rows per
/// second.
async fn insert_phase(
    config: &HttpConfig,
    addr: SocketAddr,
    spec: &InsertPhase,
    id_offset: u64,
) -> Result<Phase, String> {
    let load = LoadConfig {
        seed: id_offset,
        id_offset,
        ..LoadConfig::native(
            addr,
            TABLE,
            config.connections,
            spec.rows_per_insert,
            spec.ack,
            Stop::After(config.duration),
        )
    };
    let report = load::run(load, Arc::new(Progress::default()), false)
        .await
        .map_err(|e| e.to_string())?;
    let (unit, per_s) = if spec.rows_per_insert == 1 {
        ("inserts", report.inserts_per_s)
    } else {
        ("rows", report.rows_per_s)
    };
    Ok(Phase {
        name: spec.name,
        unit,
        per_s,
        errors: report.errors.values().sum(),
        answered: report.inserts_acked,
        server_cpu_us: 0.0,
        client_cpu_us: 0.0,
    })
}

/// Writes a config declaring the table and starts `sluice serve` on `data_dir`.
fn start_server(binary: &Path, data_dir: &Path) -> Result<ServerProcess, String> {
    let text = format!("[tables.{TABLE}]\ncolumns = {COLUMNS_TOML}\n");
    ServerProcess::spawn_configured(binary, data_dir, "http.toml", &text)
}

/// The report of the rounds: each figure's median over them, each error count's sum.
fn report(config: &HttpConfig, rounds: &[RoundPhases]) -> HttpReport {
    let per_round: Vec<RoundFigures> = rounds.iter().map(RoundFigures::of).collect();
    let medians = median_phases(rounds);
    let [ping, async_one, durable_one, durable_batch] = medians;
    let async_vs_ping = median(per_round.iter().map(|r| r.async_vs_ping).collect());
    let durable_vs_async = median(per_round.iter().map(|r| r.durable_vs_async).collect());
    HttpReport {
        connections: config.connections,
        duration_s: config.duration.as_secs_f64(),
        warm_up_s: warm_up(config).as_secs_f64(),
        rounds: rounds.len(),
        ping_per_s: ping.per_s,
        ping_errors: ping.errors,
        ping_server_cpu_us: ping.server_cpu_us,
        ping_client_cpu_us: ping.client_cpu_us,
        async_inserts_per_s: async_one.per_s,
        async_errors: async_one.errors,
        async_server_cpu_us: async_one.server_cpu_us,
        async_client_cpu_us: async_one.client_cpu_us,
        durable_inserts_per_s: durable_one.per_s,
        durable_errors: durable_one.errors,
        durable_server_cpu_us: durable_one.server_cpu_us,
        durable_client_cpu_us: durable_one.client_cpu_us,
        rows_1000_durable_per_s: durable_batch.per_s,
        rows_1000_durable_errors: durable_batch.errors,
        rows_1000_durable_server_cpu_us: durable_batch.server_cpu_us,
        rows_1000_durable_client_cpu_us: durable_batch.client_cpu_us,
        async_vs_ping,
        async_vs_ping_goal: ASYNC_VS_PING_GOAL,
        async_vs_ping_met: async_vs_ping >= ASYNC_VS_PING_GOAL,
        durable_vs_async,
        durable_vs_async_goal: DURABLE_VS_ASYNC_GOAL,
        durable_vs_async_met: durable_vs_async >= DURABLE_VS_ASYNC_GOAL,
        per_round,
        median_phases: medians,
    }
}

/// Each phase with its figures' medians over the rounds, and its errors summed. Each rate, count
/// and CPU time is its own median: they may come from different rounds.
fn median_phases(rounds: &[RoundPhases]) -> RoundPhases {
    std::array::from_fn(|i| {
        let of = |figure: fn(&Phase) -> f64| {
            median(rounds.iter().map(|phases| figure(&phases[i])).collect())
        };
        let name = rounds.first().map_or("", |phases| phases[i].name);
        let unit = rounds.first().map_or("", |phases| phases[i].unit);
        Phase {
            name,
            unit,
            per_s: of(|p| p.per_s),
            errors: rounds.iter().map(|phases| phases[i].errors).sum(),
            answered: of(|p| p.answered as f64) as u64,
            server_cpu_us: of(|p| p.server_cpu_us),
            client_cpu_us: of(|p| p.client_cpu_us),
        }
    })
}

/// The middle value, or the mean of the middle two of an even count; 0 for none.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[middle],
        _ => (values[middle - 1] + values[middle]) / 2.0,
    }
}

/// The CPU time the server and this process have used so far.
struct CpuTimes {
    server: Option<Duration>,
    client: Option<Duration>,
}

impl CpuTimes {
    fn read(server: &ServerProcess) -> Self {
        Self {
            server: server.cpu_time(),
            client: process::own_cpu_time(),
        }
    }

    /// Sets `phase`'s CPU per request from the time used since `before`.
    fn charge(&self, before: &CpuTimes, phase: &mut Phase) {
        phase.server_cpu_us = cpu_per_request(before.server, self.server, phase.answered);
        phase.client_cpu_us = cpu_per_request(before.client, self.client, phase.answered);
    }
}

/// The CPU time between two readings over `answered` requests, in microseconds; 0 when either
/// reading is missing or nothing was answered.
fn cpu_per_request(before: Option<Duration>, after: Option<Duration>, answered: u64) -> f64 {
    match (before, after) {
        (Some(before), Some(after)) if answered > 0 => {
            after.saturating_sub(before).as_secs_f64() * 1e6 / answered as f64
        }
        _ => 0.0,
    }
}

/// `part / whole`, or 0 when `whole` measured nothing (JSON has no infinity).
fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { 0.0 }
}

/// Sends `GET /ping` on `connections` keep-alive connections, each as fast as its answers come,
/// for `duration`. Its figure is answered pings per second of wall time, until the last answer.
async fn ping_for(
    addr: SocketAddr,
    connections: usize,
    duration: Duration,
) -> Result<Phase, String> {
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..connections)
        .map(|_| tokio::spawn(ping_until(addr, deadline)))
        .collect();
    let (mut answered, mut errors) = (0u64, 0u64);
    for task in tasks {
        let count = task.await.map_err(|e| e.to_string())?;
        answered += count.answered;
        errors += count.errors;
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok(Phase {
        name: "GET /ping",
        unit: "requests",
        per_s: answered as f64 / elapsed.max(1e-9),
        errors,
        answered,
        server_cpu_us: 0.0,
        client_cpu_us: 0.0,
    })
}

/// What one connection's pings came to.
#[derive(Debug, Default)]
struct PingCount {
    answered: u64,
    errors: u64,
}

/// One connection's pings until `deadline`. A failed connection is counted as an error and
/// opened again.
async fn ping_until(addr: SocketAddr, deadline: Instant) -> PingCount {
    let mut count = PingCount::default();
    let mut conn: Option<SendRequest<Full<Bytes>>> = None;
    while Instant::now() < deadline {
        match ping(addr, &mut conn).await {
            Ok(StatusCode::OK) => count.answered += 1,
            Ok(_) => count.errors += 1,
            Err(()) => {
                conn = None;
                count.errors += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    count
}

/// One `GET /ping` on the connection, opening it first if needed; the answer's status, or `Err`
/// when the connection failed.
async fn ping(
    addr: SocketAddr,
    conn: &mut Option<SendRequest<Full<Bytes>>>,
) -> Result<StatusCode, ()> {
    if conn.as_ref().is_none_or(|c| c.is_closed()) {
        *conn = Some(load::connect(addr).await?);
    }
    let sender = conn.as_mut().ok_or(())?;
    sender.ready().await.map_err(|_| ())?;
    let request = Request::get("/ping")
        .header(hyper::header::HOST, addr.to_string())
        .body(Full::new(Bytes::new()))
        .map_err(|_| ())?;
    let response = sender.send_request(request).await.map_err(|_| ())?;
    let status = response.status();
    // Read the body so the connection can carry the next request.
    response.into_body().collect().await.map_err(|_| ())?;
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &'static str, per_s: f64, errors: u64, server_cpu_us: f64) -> Phase {
        Phase {
            name,
            unit: "inserts",
            per_s,
            errors,
            answered: per_s as u64,
            server_cpu_us,
            client_cpu_us: 1.0,
        }
    }

    fn round(ping: f64, async_one: f64, durable_one: f64, errors: u64) -> RoundPhases {
        [
            phase("ping", ping, 0, 8.0),
            phase("async", async_one, errors, 15.0),
            phase("durable", durable_one, 0, 22.0),
            phase("batch", 800_000.0, 0, 2000.0),
        ]
    }

    #[test]
    fn the_median_is_the_middle_value_or_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(vec![7.0]), 7.0);
        assert_eq!(median(Vec::new()), 0.0);
    }

    #[test]
    fn the_ratios_are_medians_of_each_rounds_own_ratio() {
        let config = HttpConfig {
            binary: PathBuf::new(),
            data_dir: PathBuf::new(),
            connections: 64,
            duration: Duration::from_secs(3),
            rounds: 3,
        };
        // A slow round halves every rate: its ratios are those of the others.
        let rounds = [
            round(100.0, 60.0, 42.0, 0),
            round(50.0, 30.0, 21.0, 2),
            round(110.0, 77.0, 38.5, 1),
        ];
        let report = report(&config, &rounds);
        assert_eq!(report.rounds, 3);
        assert_eq!(report.per_round.len(), 3);
        assert!((report.async_vs_ping - 0.6).abs() < 1e-12, "{report:?}");
        assert!((report.durable_vs_async - 0.7).abs() < 1e-12, "{report:?}");
        assert_eq!(report.ping_per_s, 100.0);
        assert_eq!(report.async_inserts_per_s, 60.0);
        assert_eq!(report.async_errors, 3);
        assert_eq!(report.async_server_cpu_us, 15.0);
        assert_eq!(report.median_phases[1].name, "async");
        assert!(!report.measured_cleanly());
    }
}
