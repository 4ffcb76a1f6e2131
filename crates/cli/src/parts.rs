//! `sluice parts`: the lake's active parts per table and partition, read from the tables' Delta
//! logs, with what their footers cost and whether compaction would pay.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use sluice_sinks::lake::{LakeTable, LiveFile};

use crate::compact::{human_bytes, lake_tables, tell_of_undeclared_tables};
use crate::config::load_settings;

/// `sluice parts` flags.
#[derive(Debug, Args)]
pub struct PartsArgs {
    /// TOML config file, as given to `sluice serve` (for declared tables and `[lake]`).
    #[arg(long, short, env = "SLUICE_CONFIG")]
    config: Option<PathBuf>,
    /// The data directory [default: ./sluice-data].
    #[arg(long, env = "SLUICE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Print JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

/// One partition's parts; for a table without parts, one row with no partition and zeros.
#[derive(Debug, Clone, Serialize)]
struct PartitionRow {
    table: String,
    /// `None` (JSON `null`) for a table without parts.
    partition: Option<String>,
    parts: u64,
    rows: u64,
    bytes: u64,
    avg_part_bytes: u64,
    footer_bytes: u64,
    footer_share: f64,
    /// Parts compaction would merge now, and into how many.
    mergeable: u64,
    merged_into: u64,
}

pub async fn run(args: PartsArgs) -> Result<ExitCode> {
    let settings = load_settings(args.config.as_deref(), args.data_dir)?;
    let policy = settings.compaction.policy;
    let mut rows = Vec::new();
    let tables = lake_tables(&settings)?;
    if tables.is_empty() {
        tell_of_undeclared_tables(&settings);
    }
    for table in &tables {
        // A table declared (or in the catalog) that no flush has landed in yet.
        let Some(lake_table) = LakeTable::open(&settings.lake, table.name().as_str())
            .await
            .with_context(|| format!("cannot read table {}", table.name()))?
        else {
            rows.push(PartitionRow::without_parts(table.name().to_string()));
            continue;
        };
        if lake_table.live_files().is_empty() {
            rows.push(PartitionRow::without_parts(table.name().to_string()));
        }
        let mut by_partition: BTreeMap<String, Vec<LiveFile>> = BTreeMap::new();
        for file in lake_table.live_files().iter().cloned() {
            by_partition
                .entry(partition_label(&file))
                .or_default()
                .push(file);
        }
        for (partition, files) in by_partition {
            let merges = tokio::task::block_in_place(|| lake_table.plan(table, &policy, &files));
            let footers: u64 = tokio::task::block_in_place(|| lake_table.footer_bytes(&files))
                .with_context(|| format!("cannot read the footers of table {}", table.name()))?
                .iter()
                .sum();
            let bytes: u64 = files.iter().map(|f| f.bytes).sum();
            rows.push(PartitionRow {
                table: table.name().to_string(),
                partition: Some(partition),
                parts: files.len() as u64,
                rows: files.iter().map(|f| f.rows.unwrap_or(0)).sum(),
                bytes,
                avg_part_bytes: bytes / (files.len() as u64).max(1),
                footer_bytes: footers,
                footer_share: footers as f64 / bytes.max(1) as f64,
                mergeable: merges.iter().map(|m| m.inputs.len() as u64).sum(),
                merged_into: merges.len() as u64,
            });
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows);
    }
    Ok(ExitCode::SUCCESS)
}

impl PartitionRow {
    fn without_parts(table: String) -> Self {
        Self {
            table,
            partition: None,
            parts: 0,
            rows: 0,
            bytes: 0,
            avg_part_bytes: 0,
            footer_bytes: 0,
            footer_share: 0.0,
            mergeable: 0,
            merged_into: 0,
        }
    }
}

/// `column=value` for each partition column, `(all)` for an unpartitioned table.
fn partition_label(file: &LiveFile) -> String {
    if file.partition_values.is_empty() {
        return "(all)".to_owned();
    }
    let mut values: Vec<String> = file
        .partition_values
        .iter()
        .map(|(column, value)| match value {
            Some(value) => format!("{column}={value}"),
            None => format!("{column}=(null)"),
        })
        .collect();
    values.sort();
    values.join(",")
}

fn print_table(rows: &[PartitionRow]) {
    println!(
        "{:<20} {:<24} {:>7} {:>11} {:>10} {:>10} {:>7}  hint",
        "table", "partition", "parts", "rows", "bytes", "avg part", "footer"
    );
    for r in rows {
        let Some(partition) = &r.partition else {
            println!(
                "{:<20} {:<24} {:>7} {:>11} {:>10} {:>10} {:>7}  no parts yet: nothing flushed to it",
                r.table,
                "-",
                0,
                0,
                human_bytes(0),
                "-",
                "-"
            );
            continue;
        };
        let hint = if r.mergeable > 0 {
            format!(
                "compaction would merge {} parts into {} (sluice compact)",
                r.mergeable, r.merged_into
            )
        } else {
            String::new()
        };
        println!(
            "{:<20} {:<24} {:>7} {:>11} {:>10} {:>10} {:>6.1}%  {hint}",
            r.table,
            partition,
            r.parts,
            r.rows,
            human_bytes(r.bytes),
            human_bytes(r.avg_part_bytes),
            r.footer_share * 100.0
        );
    }
    if rows.is_empty() {
        println!("(no lake tables)");
    }
}
