//! `sluice lab formats`: the same rows through the ClickHouse door in each input format.
//!
//! One server lands table `formats` in the lake, with the write-ahead log. Producers send the
//! same generated events, `rows_per_insert` to an insert, as `JSONEachRow`,
//! `JSONCompactEachRow`, `TabSeparated`, `CSV`, `Values`, `RowBinaryWithNamesAndTypes` and
//! `Native` over HTTP, and as `Native` blocks over the native protocol, one way at a time for `duration`, over `rounds` rounds whose order rotates, so no format always
//! runs first or last. Each format's figure is its median round. Then the server stops and every
//! acknowledged row is audited in the lake: lost and duplicated must be 0.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::events::{COLUMNS_TOML, RowFormat};
use crate::load::{self, Endpoint, LoadConfig, Progress, Stop};
use crate::process::ServerProcess;
use crate::verify::{self, Audit};

/// The table the lab writes.
pub const TABLE: &str = "formats";

/// How the rows travel: a format over HTTP, or `Native` blocks over the native protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Http(RowFormat),
    Tcp,
}

impl Way {
    /// Every format over HTTP, `JSONEachRow` first, then the native protocol.
    fn all() -> Vec<Way> {
        let mut ways: Vec<Way> = RowFormat::ALL.into_iter().map(Way::Http).collect();
        ways.push(Way::Tcp);
        ways
    }

    fn name(self) -> &'static str {
        match self {
            Way::Http(format) => format.name(),
            Way::Tcp => "Native (TCP)",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct FormatsConfig {
    /// The `sluice` binary to start.
    pub binary: PathBuf,
    /// The server's data directory.
    pub data_dir: PathBuf,
    /// Concurrent producers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// How long each format runs in a round.
    pub duration: Duration,
    /// Rounds over every format.
    pub rounds: usize,
    /// The ack mode asked for.
    pub ack: String,
}

/// One format's figures.
#[derive(Debug, Clone, Serialize)]
pub struct FormatResult {
    /// The format's name.
    pub format: &'static str,
    /// Acknowledged rows per second, each round.
    pub rows_per_s: Vec<f64>,
    /// The median round.
    pub median_rows_per_s: f64,
    /// The median over `JSONEachRow`'s median.
    pub ratio_to_json: f64,
    /// Body bytes per row.
    pub bytes_per_row: f64,
    /// Inserts that failed.
    pub failed_inserts: u64,
}

/// What the run measured.
#[derive(Debug, Clone, Serialize)]
pub struct FormatsReport {
    /// Producers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// Seconds per format per round.
    pub duration_s: f64,
    /// The ack mode.
    pub ack: String,
    /// Each format, `JSONEachRow` first.
    pub formats: Vec<FormatResult>,
    /// Every acknowledged row, against the lake.
    pub audit: Audit,
}

impl FormatsReport {
    /// Whether every acknowledged row landed exactly once and no insert failed.
    pub fn passed(&self) -> bool {
        self.audit.lost == 0
            && self.audit.duplicated == 0
            && self.audit.acked > 0
            && self.formats.iter().all(|f| f.failed_inserts == 0)
    }
}

/// Runs every format `rounds` times, reporting each run as a line.
pub async fn run(
    config: &FormatsConfig,
    mut on_line: impl FnMut(&str),
) -> Result<FormatsReport, String> {
    let mut server = start(config)?;
    let ways = Way::all();
    let mut runs: Vec<Vec<load::LoadReport>> = vec![Vec::new(); ways.len()];
    let mut acked = Vec::new();
    let mut next_id = 0;
    for round in 0..config.rounds {
        for k in 0..ways.len() {
            let index = (round + k) % ways.len();
            let way = ways[index];
            let report = load::run(
                load_config(config, &server, way, next_id)?,
                Arc::new(Progress::default()),
                true,
            )
            .await
            .map_err(|e| e.to_string())?;
            on_line(&format!(
                "round {} {:<28} {:>10.0} rows/s",
                round + 1,
                way.name(),
                report.rows_per_s
            ));
            next_id += report.rows_acked + 10_000_000;
            acked.extend(report.acked_ids.clone().unwrap_or_default());
            runs[index].push(report);
        }
    }
    server.stop(Duration::from_secs(120))?;
    let counts = verify::id_counts(&config.data_dir.join("data"), TABLE)?;
    Ok(FormatsReport {
        producers: config.producers,
        rows_per_insert: config.rows_per_insert,
        duration_s: config.duration.as_secs_f64(),
        ack: config.ack.clone(),
        formats: results(&runs, config.rows_per_insert),
        audit: verify::audit(&counts, &acked),
    })
}

fn start(config: &FormatsConfig) -> Result<ServerProcess, String> {
    std::fs::create_dir_all(&config.data_dir).map_err(|e| e.to_string())?;
    let toml = config.data_dir.join("sluice.toml");
    let text = format!(
        "[clickhouse]\ntcp_listen = \"127.0.0.1:0\"\n\n[tables.{TABLE}]\ncolumns = {COLUMNS_TOML}\n"
    );
    std::fs::write(&toml, text).map_err(|e| e.to_string())?;
    ServerProcess::spawn(&config.binary, &config.data_dir.join("data"), Some(&toml))
        .map_err(|e| e.to_string())
}

fn load_config(
    config: &FormatsConfig,
    server: &ServerProcess,
    way: Way,
    id_offset: u64,
) -> Result<LoadConfig, String> {
    let (addr, endpoint, format) = match way {
        Way::Http(format) => (server.addr, Endpoint::ClickHouse, format),
        Way::Tcp => {
            let addr = server
                .native_addr
                .ok_or("sluice did not open the native protocol")?;
            (addr, Endpoint::ClickHouseTcp, RowFormat::Native)
        }
    };
    Ok(LoadConfig {
        addr,
        table: TABLE.into(),
        endpoint,
        producers: config.producers,
        rows_per_insert: config.rows_per_insert,
        rate: None,
        stop: Stop::After(config.duration),
        ack: config.ack.clone(),
        seed: 11,
        id_offset,
        format,
        keyed: false,
    })
}

/// Each format's median round, and its ratio to `JSONEachRow`'s.
fn results(runs: &[Vec<load::LoadReport>], rows_per_insert: usize) -> Vec<FormatResult> {
    let median_of = |reports: &[load::LoadReport]| {
        let mut figures: Vec<f64> = reports.iter().map(|r| r.rows_per_s).collect();
        figures.sort_by(f64::total_cmp);
        figures.get(figures.len() / 2).copied().unwrap_or_default()
    };
    let json = runs.first().map_or(0.0, |r| median_of(r));
    Way::all()
        .into_iter()
        .zip(runs)
        .map(|(way, reports)| {
            let median = median_of(reports);
            let format = match way {
                Way::Http(format) => format,
                Way::Tcp => RowFormat::Native,
            };
            FormatResult {
                format: way.name(),
                rows_per_s: reports.iter().map(|r| r.rows_per_s).collect(),
                median_rows_per_s: median,
                ratio_to_json: if json > 0.0 { median / json } else { 0.0 },
                bytes_per_row: body_bytes_per_row(format, rows_per_insert),
                failed_inserts: reports.iter().flat_map(|r| r.errors.values()).sum(),
            }
        })
        .collect()
}

/// The body bytes of one insert of `rows` generated events, per row.
fn body_bytes_per_row(format: RowFormat, rows: usize) -> f64 {
    let mut generator = crate::events::EventGen::new(11);
    let events: Vec<_> = (0..rows as u64)
        .map(|id| (id, generator.next_event()))
        .collect();
    let mut body = Vec::new();
    crate::events::write_insert(format, &events, &mut body);
    body.len() as f64 / rows.max(1) as f64
}
