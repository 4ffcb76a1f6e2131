//! `sluice compact`: one compaction pass over the lake's tables, in the foreground.
//!
//! Safe while `sluice serve` runs on the same tables: each merge is one Delta commit guarded
//! against other compactors, and appends keep going meanwhile.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use sluice_core::compaction::CompactionPolicy;
use sluice_core::{ByteSize, Catalog, FlushPolicy, TableDef};
use sluice_sinks::lake::CompactionReport;
use sluice_sinks::{FileCatalog, LakeSink};

use crate::config::{LAKE_SINK, Settings, load_settings};

/// `sluice compact` flags.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// TOML config file, as given to `sluice serve` (for declared tables and `[lake]`).
    #[arg(long, short, env = "SLUICE_CONFIG")]
    config: Option<PathBuf>,
    /// The data directory [default: ./sluice-data].
    #[arg(long, env = "SLUICE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Compact only this table.
    #[arg(long)]
    table: Option<String>,
    /// The size merges aim for [default: `[lake.compaction] target_size`, else 128MiB].
    #[arg(long)]
    target_size: Option<ByteSize>,
    /// Merge as soon as two parts of a size tier exist, not `fanin`: fewest parts now, at the
    /// price of rewriting rows more often.
    #[arg(long)]
    eager: bool,
    /// Print the figures as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: CompactArgs) -> Result<ExitCode> {
    crate::serve::init_tracing();
    let settings = load_settings(args.config.as_deref(), args.data_dir)?;
    let mut policy: CompactionPolicy = settings.compaction.policy;
    if let Some(ByteSize(bytes)) = args.target_size {
        policy.target_bytes = bytes;
    }
    if args.eager {
        policy = policy.eager();
    }

    let mut tables = lake_tables(&settings)?;
    if let Some(only) = &args.table {
        tables.retain(|def| def.name().as_str() == only);
        if tables.is_empty() {
            // Not declared: a Delta table in its folder is another config's.
            let found = delta_table_folders(&settings)
                .iter()
                .find(|name| name.as_str() == only)
                .map(|_| format!(": {}", undeclared_hint(&settings, only)))
                .unwrap_or_default();
            bail!(
                "there is no lake table '{only}' in {}{found}",
                settings.data_dir.display()
            );
        }
    }
    if tables.is_empty() {
        tell_of_undeclared_tables(&settings);
    }

    let lake = LakeSink::new(settings.lake.clone())?;
    let started = Instant::now();
    let mut reports = Vec::new();
    for table in &tables {
        let bar = Arc::new(bar(table.name().as_str(), args.json));
        let progress = {
            let bar = bar.clone();
            move |done: u64, total: u64| {
                bar.set_length(total);
                bar.set_position(done);
            }
        };
        let report = lake
            .compact(table, policy, &progress)
            .await
            .with_context(|| format!("cannot compact table {}", table.name()))?;
        bar.finish_and_clear();
        reports.push((table.name().to_string(), report));
    }
    if args.json {
        let figures: serde_json::Map<String, serde_json::Value> = reports
            .iter()
            .map(|(name, report)| Ok((name.clone(), serde_json::to_value(report)?)))
            .collect::<Result<_>>()?;
        println!("{}", serde_json::to_string_pretty(&figures)?);
    } else if reports.is_empty() {
        println!("(no lake tables)");
    } else {
        print_table(&reports);
        println!("{:.2} s in all", started.elapsed().as_secs_f64());
    }
    Ok(ExitCode::SUCCESS)
}

/// The lake's tables: those declared for it, and the auto-created ones its catalog keeps. A
/// data directory that does not exist is an error (a mistyped path), unless the config declares
/// lake tables in a lake that exists elsewhere (an object store, or a `[lake] root` folder);
/// then the sink makes only its state folder there, as `sluice serve` would.
pub(crate) fn lake_tables(settings: &Settings) -> Result<Vec<TableDef>> {
    let mut tables: Vec<TableDef> = settings
        .tables
        .iter()
        .filter(|(_, sink)| sink == LAKE_SINK)
        .map(|(def, _)| def.clone())
        .collect();
    if !settings.data_dir.is_dir() {
        let lake_missing = settings
            .lake
            .root
            .folder()
            .is_some_and(|root| !root.is_dir());
        if tables.is_empty() || lake_missing {
            bail!(
                "there is no data directory {}: give the one `sluice serve` uses (--data-dir, \
                 SLUICE_DATA_DIR or data_dir in --config)",
                settings.data_dir.display()
            );
        }
        return Ok(tables);
    }
    let catalog = FileCatalog::open(&settings.data_dir)?;
    for (name, layout) in catalog.load()? {
        let declared = settings.tables.iter().any(|(def, _)| def.name() == &name);
        if !declared && settings.default_sink == LAKE_SINK {
            tables.push(
                TableDef::new(name.clone(), layout, FlushPolicy::default())
                    .with_context(|| format!("stored table {name}"))?
                    .with_throttle(settings.pipeline.default_throttle),
            );
        }
    }
    Ok(tables)
}

/// The folders of the lake that hold a Delta table, by name. Looked through only once the
/// tables asked for turn out undeclared, each of these is a table neither the config given nor
/// the data directory's catalog declares (another config's, or written by another tool), which
/// `sluice compact` and `sluice parts` leave alone. Only a lake in a folder is looked through.
fn delta_table_folders(settings: &Settings) -> Vec<String> {
    let Some(Ok(entries)) = settings.lake.root.folder().map(std::fs::read_dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|entry| entry.path().join("_delta_log").is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// What to do about the undeclared table `name`.
fn undeclared_hint(settings: &Settings, name: &str) -> String {
    let folder = settings.lake.root.folder().map_or_else(
        || name.to_owned(),
        |root| root.join(name).display().to_string(),
    );
    format!(
        "{folder} holds a Delta table that neither the config given nor the data directory's \
         catalog declares; give the config that declares it (--config)"
    )
}

/// Says on stderr, for a lake with no tables to work on, which of its folders hold Delta tables
/// nothing declares: a missing `--config` is the likely mistake.
pub(crate) fn tell_of_undeclared_tables(settings: &Settings) {
    for name in delta_table_folders(settings) {
        eprintln!("note: {}", undeclared_hint(settings, &name));
    }
}

fn bar(table: &str, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    if let Ok(style) =
        ProgressStyle::with_template("{msg:<24} {bar:30} {pos}/{len} files {elapsed}")
    {
        bar.set_style(style);
    }
    bar.set_message(table.to_owned());
    bar
}

fn print_table(reports: &[(String, CompactionReport)]) {
    println!(
        "{:<24} {:>7} {:>9} {:>9} {:>11} {:>11} {:>11} {:>8} {:>8}",
        "table",
        "merges",
        "files in",
        "files out",
        "bytes in",
        "bytes out",
        "rows",
        "deleted",
        "seconds"
    );
    for (name, r) in reports {
        println!(
            "{:<24} {:>7} {:>9} {:>9} {:>11} {:>11} {:>11} {:>8} {:>8.2}",
            name,
            r.merges,
            r.files_in,
            r.files_out,
            human_bytes(r.bytes_in),
            human_bytes(r.bytes_out),
            r.rows,
            r.files_deleted,
            r.elapsed_s
        );
    }
}

/// A byte count for people: `1.5 MiB`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
