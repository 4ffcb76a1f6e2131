//! `sluice`: an ingest gateway that turns many tiny inserts into few large parts.
//!
//! # Layout
//!
//! - `config.rs`: the TOML config file and flag overrides, validated.
//! - `serve.rs`: `sluice serve`, wiring config, sinks, pipeline, server and the lake's
//!   compactor; signals.
//! - `lock.rs`: one server per data directory (`DATA_DIR/_sluice/lock`).
//! - `compact.rs`: `sluice compact`, one compaction pass in the foreground.
//! - `parts.rs`: `sluice parts`, the lake's active parts per table and partition.
//! - `load.rs`: `sluice load`, the load generator's command line and output.
//! - `lab.rs`: `sluice lab ...`, the seeds' experiments and sluice's own.
//! - `estimate.rs`: `sluice estimate`, the batching estimator.
//!
//! This binary is the only place that uses `anyhow`; the libraries return typed errors.

mod compact;
mod config;
mod estimate;
mod lab;
mod load;
mod lock;
mod parts;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: a single-row insert makes dozens of small Arrow
/// allocations on one thread and frees them on another, which glibc's arenas serve poorly.
/// Built without transparent huge pages (the workspace's `no_thp`): with them, memory that
/// mimalloc purges and reuses is faulted back in and zeroed 2 MiB at a time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// sluice: many tiny inserts in, few large parts out.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Take inserts over HTTP and land them in large parts (the lake in ./sluice-data by default).
    Serve(serve::ServeArgs),
    /// Merge the lake's small files into large ones now, in the foreground (safe while serving).
    Compact(compact::CompactArgs),
    /// The lake's active parts per table and partition, and whether compaction would pay.
    Parts(parts::PartsArgs),
    /// Run N concurrent producers against a sluice server and report rows/s and latency.
    Load(load::LoadArgs),
    /// The seeds' experiments and sluice's own: layouts, merge-sim, knee, crash, resend, acks, http.
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// How many parts a write pattern makes, with and without sluice in front. Instant, no I/O.
    Estimate(estimate::EstimateArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let serving = matches!(cli.command, Command::Serve(_));
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Compact(args) => compact::run(args).await,
            Command::Load(args) => load::run(args).await,
            Command::Parts(args) => parts::run(args).await,
            Command::Lab(command) => lab::run(command).await,
            Command::Estimate(args) => estimate::run(args),
        }
    });
    if serving {
        // Everything `serve` waits for is done: its shutdown landed the rows or left them in the
        // log. What may still run is a flush it gave up on, a blocking upload to a store that
        // hangs; dropping the runtime would wait for that upload, and stop the timers under it
        // (a panic in its thread). The process ends here instead, and the upload with it.
        std::mem::forget(runtime);
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", describe(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, each said once. Most of sluice's messages quote their cause, to
/// read whole in a log line or an HTTP answer, and keep it as their source as well; printing
/// the chain as it is would repeat each cause (three times for a Delta log that cannot be read).
fn describe(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain().map(ToString::to_string) {
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose message may quote its source, as sluice's do.
    #[derive(Debug)]
    struct Quoting {
        message: String,
        source: Option<Box<Quoting>>,
    }

    impl std::fmt::Display for Quoting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.message)
        }
    }

    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.source.as_deref().map(|s| s as _)
        }
    }

    fn quoting(message: &str, source: Option<Quoting>) -> Quoting {
        Quoting {
            message: message.to_owned(),
            source: source.map(Box::new),
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        let json = quoting("Json error: unexpected 'g'", None);
        let kernel = quoting("Kernel error: Json error: unexpected 'g'", Some(json));
        let sink = quoting(
            "cannot load the Delta log of t: Kernel error: Json error: unexpected 'g'",
            Some(kernel),
        );
        let e = anyhow::Error::new(sink).context("cannot start the pipeline");
        assert_eq!(
            describe(&e),
            "cannot start the pipeline: cannot load the Delta log of t: Kernel error: Json \
             error: unexpected 'g'"
        );
        // Causes a message does not quote are kept.
        let e = anyhow::Error::new(quoting(
            "cannot bind",
            Some(quoting("address in use", None)),
        ));
        assert_eq!(describe(&e), "cannot bind: address in use");
    }
}
