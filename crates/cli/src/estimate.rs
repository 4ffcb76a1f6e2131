//! `sluice estimate`: seed 000's insert batching estimator, with sluice's policy in front.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use sluice_core::ByteSize;
use sluice_core::estimate::{self, EstimateInput, Field, Landing};
use sluice_core::policy::{DEFAULT_MAX_BYTES, DEFAULT_MAX_ROWS};

/// `sluice estimate` flags.
#[derive(Debug, Args)]
pub struct EstimateArgs {
    /// Rows per second.
    #[arg(long)]
    rate: f64,
    /// Rows per insert as producers send them.
    #[arg(long)]
    insert_rows: u64,
    /// Partitions the rows spread over.
    #[arg(long, default_value_t = 1)]
    partitions: u64,
    /// sluice's age limit.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    max_age: Duration,
    /// sluice's row limit.
    #[arg(long, default_value_t = DEFAULT_MAX_ROWS)]
    max_rows: u64,
    /// sluice's byte limit.
    #[arg(long, default_value_t = ByteSize(DEFAULT_MAX_BYTES))]
    max_bytes: ByteSize,
    /// Bytes a row takes in sluice's buffer.
    #[arg(long, default_value_t = 100.0)]
    row_bytes: f64,
    /// Print the estimate as JSON.
    #[arg(long)]
    json: bool,
}

/// The flag that sets each input, for errors.
fn flag(field: Field) -> &'static str {
    match field {
        Field::Rate => "--rate",
        Field::InsertRows => "--insert-rows",
        Field::Partitions => "--partitions",
        Field::MaxAge => "--max-age",
        Field::MaxRows => "--max-rows",
        Field::MaxBytes => "--max-bytes",
        Field::RowBytes => "--row-bytes",
    }
}

pub fn run(args: EstimateArgs) -> Result<ExitCode> {
    let input = EstimateInput {
        rate: args.rate,
        insert_rows: args.insert_rows,
        partitions: args.partitions,
        max_age_s: args.max_age.as_secs_f64(),
        max_rows: args.max_rows,
        max_bytes: args.max_bytes.0,
        row_bytes: args.row_bytes,
    };
    if let Err(e) = input.check() {
        bail!("{} {e}", flag(e.field));
    }
    let e = estimate::estimate(&input);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&e)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} rows/s in {}-row inserts over {} partition(s)",
        args.rate, args.insert_rows, args.partitions
    );
    println!("{:<34} {:>16} {:>16}", "", "as inserted", "through sluice");
    let row = |name: &str, f: &dyn Fn(&Landing) -> String| {
        println!("{name:<34} {:>16} {:>16}", f(&e.direct), f(&e.sluice));
    };
    row("parts per second", &|l| format!("{:.2}", l.parts_per_s));
    row("parts per hour", &|l| format!("{:.0}", l.parts_per_hour));
    row("parts per day", &|l| format!("{:.0}", l.parts_per_day));
    row("rows per part", &|l| format!("{:.0}", l.rows_per_part));
    row("merges per hour (model)", &|l| {
        format!("{:.0}", l.merges_per_hour)
    });
    row("write amplification (model)", &|l| {
        format!("{:.2}x", l.write_amplification)
    });
    row("merge thread busy, per partition", &|l| {
        format!("{:.1}%", l.merger_busy * 100.0)
    });
    let time = |s: f64| {
        if s < 120.0 {
            format!("{s:.1} s")
        } else if s < 7_200.0 {
            format!("{:.1} min", s / 60.0)
        } else if s < 172_800.0 {
            format!("{:.1} h", s / 3_600.0)
        } else {
            format!("{:.1} days", s / 86_400.0)
        }
    };
    row("1,000 parts if merges stop", &|l| {
        time(l.delay_after_s_without_merges)
    });
    row("3,000 parts if merges stop", &|l| {
        time(l.refuse_after_s_without_merges)
    });
    let model = |t: Option<f64>| t.map_or_else(|| "merges keep up".to_owned(), time);
    row("1,000 parts (model)", &|l| model(l.delay_after_s));
    row("3,000 parts (model)", &|l| model(l.refuse_after_s));
    println!(
        "sluice flushes each partition every {:.2} s (its {} limit) and lands {:.0}x fewer parts",
        e.flush_interval_s, e.flush_trigger, e.parts_ratio
    );
    Ok(ExitCode::SUCCESS)
}
