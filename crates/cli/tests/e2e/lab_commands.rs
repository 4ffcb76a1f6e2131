//! Each lab command's JSON has every field docs/lab.md promises, and its plot is an SVG with
//! labelled axes. Small sizes: this checks the commands, not the machine.

use std::path::Path;
use std::process::Command;

use crate::common::sluice;

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn has(value: &serde_json::Value, fields: &[&str]) {
    for field in fields {
        assert!(!value[field].is_null(), "missing {field} in {value}");
    }
}

fn svg_with(path: &Path, labels: &[&str]) {
    let svg = std::fs::read_to_string(path).unwrap();
    assert!(svg.starts_with("<svg"));
    for label in labels {
        assert!(svg.contains(label), "{} lacks {label}", path.display());
    }
}

#[test]
fn layouts_reports_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let (json_path, plot) = (dir.path().join("l.json"), dir.path().join("l.svg"));
    let out = sluice(&[
        "lab",
        "layouts",
        "--rows",
        "20000",
        "--layouts",
        "100,1000,10000",
        "--reps",
        "1",
        "--json",
        json_path.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert!(out.contains("tiny vs big"), "{out}");
    let report = json(&json_path);
    has(
        &report,
        &[
            "rows",
            "raw_bytes",
            "threads",
            "reps",
            "layouts",
            "compaction",
            "merge",
            "ratios",
        ],
    );
    for layout in report["layouts"].as_array().unwrap() {
        has(
            layout,
            &[
                "rows_per_file",
                "files",
                "bytes",
                "footer_bytes",
                "footer_share",
                "write_s",
                "meta_open_s",
                "scan_1_thread_s",
                "scan_threads_s",
                "query_s",
                "query_rows",
                "row_groups_pruned",
            ],
        );
    }
    has(
        &report["compaction"],
        &[
            "files_in",
            "bytes_in",
            "files_out",
            "bytes_out",
            "rows",
            "seconds",
        ],
    );
    has(&report["merge"], &["points", "fixed_s", "per_row_s"]);
    has(
        &report["ratios"],
        &[
            "bytes",
            "scan",
            "scan_1_thread",
            "query",
            "write",
            "meta_open",
        ],
    );
    svg_with(
        &plot,
        &[
            "rows per file (log)",
            "megabytes",
            "milliseconds (log)",
            "selective query",
        ],
    );
    // The temporary data is gone afterwards.
    assert!(out.lines().count() > 3);
}

#[test]
fn merge_sim_reports_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let (json_path, plot) = (dir.path().join("m.json"), dir.path().join("m.svg"));
    sluice(&[
        "lab",
        "merge-sim",
        "--json",
        json_path.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    let runs = json(&json_path);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for run in runs {
        has(
            run,
            &[
                "config",
                "parts_per_s",
                "rows_ingested",
                "merges",
                "rows_merged",
                "write_amplification",
                "merger_busy",
                "parts_at_end",
                "parts_max",
                "parts_over_time",
            ],
        );
    }
    assert_eq!(runs[0]["merges"], 13_328);
    svg_with(&plot, &["seconds of ingest", "active parts (log)"]);
}

#[test]
fn merge_sim_takes_the_cost_measured_by_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let layouts = dir.path().join("layouts.json");
    std::fs::write(
        &layouts,
        r#"{"merge":{"fixed_s":0.019,"per_row_s":4.34e-7}}"#,
    )
    .unwrap();
    let out = sluice(&[
        "lab",
        "merge-sim",
        "--rate",
        "20000",
        "--insert-rows",
        "100",
        "--merge-cost-from-layouts",
        layouts.to_str().unwrap(),
    ]);
    assert!(out.contains("19.0 ms + 0.4340 us/row"), "{out}");
}

#[test]
fn knee_reports_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let (json_path, plot) = (dir.path().join("k.json"), dir.path().join("k.svg"));
    sluice(&[
        "lab",
        "knee",
        "--rows",
        "2000",
        "--rows-for-one",
        "200",
        "--sizes",
        "1,10,100",
        "--reps",
        "1",
        "--producers",
        "8",
        "--max-age",
        "50ms",
        "--json",
        json_path.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    let report = json(&json_path);
    has(
        &report,
        &["sqlite", "knee_ratio", "trickle", "sluice", "sluice_ratio"],
    );
    for row in report["sqlite"].as_array().unwrap() {
        has(row, &["batch", "rows", "rows_per_s"]);
    }
    has(
        &report["trickle"],
        &[
            "rate",
            "batch",
            "max_age_ms",
            "size_only_worst_wait_s",
            "size_or_age_worst_wait_ms",
        ],
    );
    has(
        &report["sluice"],
        &[
            "producers",
            "rows",
            "rows_per_s",
            "commits",
            "rows_per_commit",
        ],
    );
    svg_with(
        &plot,
        &[
            "rows per commit (log)",
            "rows per second (log)",
            "sluice into SQLite, 8 single-row producers",
        ],
    );
}

#[test]
fn estimate_answers_instantly() {
    let out = sluice(&[
        "estimate",
        "--rate",
        "20000",
        "--insert-rows",
        "100",
        "--json",
    ]);
    let e: serde_json::Value = serde_json::from_str(&out).unwrap();
    has(
        &e,
        &[
            "input",
            "direct",
            "sluice",
            "flush_trigger",
            "flush_interval_s",
            "parts_ratio",
        ],
    );
    for side in ["direct", "sluice"] {
        has(
            &e[side],
            &[
                "parts_per_s",
                "parts_per_hour",
                "parts_per_day",
                "rows_per_part",
                "merges_per_hour",
                "write_amplification",
                "merger_busy",
                "delay_after_s_without_merges",
                "refuse_after_s_without_merges",
                "simulated_s",
            ],
        );
    }
    assert_eq!(e["direct"]["parts_per_hour"], 720_000.0);
    let bad = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["estimate", "--rate", "0", "--insert-rows", "100"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
}

#[test]
fn knee_runs_against_postgres_too() {
    let pg = sluice_lab::services::Postgres::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (json_path, plot) = (dir.path().join("k.json"), dir.path().join("k.svg"));
    let args = [
        "lab",
        "knee",
        "--rows",
        "1000",
        "--rows-for-one",
        "100",
        "--sizes",
        "1,100",
        "--reps",
        "1",
        "--producers",
        "8",
        "--max-age",
        "50ms",
        "--postgres",
        &pg.url,
        "--json",
    ];
    let run = |json: &Path| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend([json.to_str().unwrap(), "--plot", plot.to_str().unwrap()]);
        sluice(&all)
    };
    let out = run(&json_path);
    assert!(out.contains("PostgreSQL: batch"), "{out}");
    let report = json(&json_path);
    let pg_report = &report["postgres"];
    has(
        pg_report,
        &["sweep", "knee_ratio", "sluice", "sluice_ratio"],
    );
    assert_eq!(pg_report["sweep"].as_array().unwrap().len(), 2);
    assert_eq!(pg_report["sluice"]["rows"], 1000);
    assert!(pg_report["sluice"]["commits"].as_u64().unwrap() < 1000);
    svg_with(
        &plot,
        &["PostgreSQL, one commit per batch", "sluice into PostgreSQL"],
    );
    // A second run starts afresh: the tables and the ledger row of the first do not get in the way.
    let again = dir.path().join("k2.json");
    run(&again);
    assert_eq!(json(&again)["postgres"]["sluice"]["rows"], 1000);
}

#[test]
fn clickhouse_compares_direct_and_through_sluice() {
    compare_direct_and_through_sluice("http");
}

#[test]
fn clickhouse_compares_direct_and_through_sluice_over_the_native_protocol() {
    compare_direct_and_through_sluice("native");
}

/// `sluice lab clickhouse` with its clients on `protocol`, both sides.
fn compare_direct_and_through_sluice(protocol: &str) {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("c.json");
    let out = sluice(&[
        "lab",
        "clickhouse",
        "--inserts",
        "300",
        "--clients",
        "4",
        "--max-age",
        "200ms",
        "--protocol",
        protocol,
        "--json",
        json_path.to_str().unwrap(),
    ]);
    assert!(out.contains("fewer parts"), "{out}");
    let report = json(&json_path);
    assert_eq!(report["protocol"], protocol);
    has(
        &report,
        &[
            "inserts",
            "clients",
            "clickhouse_version",
            "direct",
            "sluice",
        ],
    );
    for side in ["direct", "sluice"] {
        let side = &report[side];
        has(
            side,
            &[
                "rows_acked",
                "rows_landed",
                "rows_per_s",
                "latency",
                "parts_active",
                "parts_all",
                "merged_rows",
                "rewrite_ratio",
                "errors",
            ],
        );
        assert_eq!(side["rows_landed"], 300, "{side}");
        assert_eq!(side["errors"], 0, "{side}");
    }
    // Every direct insert is a part; through sluice, 300 rows in a fraction of a second are a few.
    let parts = |side: &str| report[side]["parts_all"].as_u64().unwrap();
    assert!(parts("direct") >= 300, "{report}");
    assert!(parts("sluice") < 30, "{report}");
}

#[test]
fn overload_keeps_memory_bounded_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("o.json");
    let out = sluice(&[
        "lab",
        "overload",
        "--buffer",
        "4MiB",
        "--factor",
        "4",
        "--producers",
        "8",
        "--rows-per-insert",
        "50",
        "--max-outage",
        "30s",
        "--json",
        json_path.to_str().unwrap(),
    ]);
    assert!(out.contains("PASSED"), "{out}");
    let report = json(&json_path);
    has(
        &report,
        &[
            "buffer_bytes",
            "offered_bytes",
            "offered_factor",
            "rss_at_start_bytes",
            "peak_rss_bytes",
            "growth_over_buffer",
            "outage_s",
            "drain_s",
            "refused_inserts",
            "audit",
        ],
    );
    assert!(
        report["offered_factor"].as_f64().unwrap() >= 4.0,
        "{report}"
    );
    assert!(report["refused_inserts"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["audit"]["lost"], 0);
    assert_eq!(report["audit"]["duplicated"], 0);
}

#[test]
fn formats_lands_every_format_and_reports_each_against_json() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("f.json");
    let out = sluice(&[
        "lab",
        "formats",
        "--producers",
        "2",
        "--rows-per-insert",
        "100",
        "--duration",
        "300ms",
        "--rounds",
        "1",
        "--json",
        json_path.to_str().unwrap(),
    ]);
    assert!(out.contains("PASSED"), "{out}");
    let report = json(&json_path);
    let formats = report["formats"].as_array().unwrap();
    let names: Vec<&str> = formats
        .iter()
        .map(|f| f["format"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "JSONEachRow",
            "JSONCompactEachRow",
            "TabSeparated",
            "CSV",
            "Values",
            "RowBinaryWithNamesAndTypes",
            "Native",
            "Native (TCP)"
        ]
    );
    for format in formats {
        assert!(
            format["median_rows_per_s"].as_f64().unwrap() > 0.0,
            "{format}"
        );
        assert_eq!(format["failed_inserts"], 0, "{format}");
    }
    assert_eq!(formats[0]["ratio_to_json"], 1.0);
    assert!(report["audit"]["acked"].as_u64().unwrap() > 0);
    assert_eq!(report["audit"]["lost"], 0);
    assert_eq!(report["audit"]["duplicated"], 0);
}

#[test]
fn compaction_compares_sluice_with_pyarrow_on_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("c.json");
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/pyreader/bin/python");
    let python = std::env::var("SLUICE_PYTHON").unwrap_or_else(|_| python.display().to_string());
    let out = sluice(&[
        "lab",
        "compaction",
        "--rows",
        "20000",
        "--rows-per-file",
        "100",
        "--runs",
        "2",
        "--python",
        &python,
        "--dir",
        dir.path().join("lab").to_str().unwrap(),
        "--json",
        json_path.to_str().unwrap(),
    ]);
    assert!(out.contains("faster on the same files"), "{out}");
    let report = json(&json_path);
    has(
        &report,
        &[
            "rows", "files_in", "bytes_in", "sluice", "pyarrow", "speedup",
        ],
    );
    has(
        &report["sluice"],
        &["seconds", "runs", "files_out", "bytes_out"],
    );
    has(
        &report["pyarrow"],
        &["seconds", "runs", "files_out", "bytes_out"],
    );
    // Two runs of each, alternated; each side's time is one of its runs.
    for side in ["sluice", "pyarrow"] {
        let runs = report[side]["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{report}");
        assert!(runs.contains(&report[side]["seconds"]), "{report}");
    }
    assert_eq!(report["files_in"], 200);
    assert_eq!(report["sluice"]["files_out"], 1);
    assert!(report["sluice"]["bytes_out"].as_u64() < report["bytes_in"].as_u64());
}

#[test]
fn http_reports_pings_inserts_and_their_ratios() {
    let (ok, report) = crate::common::run_json(&[
        "lab",
        "http",
        "--duration",
        "1s",
        "--connections",
        "8",
        "--rounds",
        "2",
    ]);
    assert!(ok, "{report}");
    let figure = |field: &str| {
        report[field]
            .as_f64()
            .unwrap_or_else(|| panic!("missing {field} in {report}"))
    };
    for rate in [
        "ping_per_s",
        "async_inserts_per_s",
        "durable_inserts_per_s",
        "rows_1000_durable_per_s",
    ] {
        assert!(figure(rate) > 0.0, "{rate} in {report}");
    }
    // Each round's ratios are of its own rates, and the report's are their median: of two
    // rounds, their mean.
    let close = |ratio: f64, expected: f64| (ratio - expected).abs() <= 1e-9 * expected.abs();
    let rounds = report["per_round"].as_array().expect("per_round");
    assert_eq!(rounds.len(), 2, "{report}");
    assert_eq!(report["rounds"], 2);
    let of = |round: &serde_json::Value, field: &str| round[field].as_f64().expect(field);
    for round in rounds {
        let async_vs_ping = of(round, "async_inserts_per_s") / of(round, "ping_per_s");
        assert!(close(of(round, "async_vs_ping"), async_vs_ping), "{report}");
        let durable_vs_async =
            of(round, "durable_inserts_per_s") / of(round, "async_inserts_per_s");
        assert!(
            close(of(round, "durable_vs_async"), durable_vs_async),
            "{report}"
        );
    }
    let mean = |field: &str| (of(&rounds[0], field) + of(&rounds[1], field)) / 2.0;
    assert!(
        close(figure("async_vs_ping"), mean("async_vs_ping")),
        "{report}"
    );
    assert!(
        close(figure("durable_vs_async"), mean("durable_vs_async")),
        "{report}"
    );
    assert!(close(figure("ping_per_s"), mean("ping_per_s")), "{report}");
    for errors in [
        "ping_errors",
        "async_errors",
        "durable_errors",
        "rows_1000_durable_errors",
    ] {
        assert_eq!(report[errors], 0, "{errors} in {report}");
    }
    // Linux shows every process's CPU time in /proc, so each phase has a cost per request, on
    // the server and in the load generator.
    for cpu in [
        "ping_server_cpu_us",
        "async_server_cpu_us",
        "durable_server_cpu_us",
        "rows_1000_durable_server_cpu_us",
        "ping_client_cpu_us",
        "async_client_cpu_us",
        "durable_client_cpu_us",
        "rows_1000_durable_client_cpu_us",
    ] {
        assert!(figure(cpu) > 0.0, "{cpu} in {report}");
    }
    assert_eq!(report["connections"], 8);
    assert_eq!(report["duration_s"], 1.0);
}

#[test]
fn age_runs_every_load_on_the_fixed_and_the_adaptive_table() {
    let (ok, report) = crate::common::run_json(&[
        "lab",
        "age",
        "--trickle-duration",
        "2s",
        "--duration",
        "1s",
        "--producers",
        "8",
        "--trickle-producers",
        "10",
        "--max-age",
        "400ms",
    ]);
    assert!(ok, "{report}");
    assert_eq!(report["min_age_s"], 0.1);
    assert_eq!(report["max_age_s"], 0.4);
    assert_eq!(report["trickle_p99_goal_ms"], 150.0);
    let policies = report["policies"].as_array().expect("policies");
    let names: Vec<&str> = policies
        .iter()
        .filter_map(|p| p["policy"].as_str())
        .collect();
    assert_eq!(names, ["fixed", "adaptive"], "{report}");
    for policy in policies {
        for load in ["trickle", "busy_durable", "busy_committed"] {
            let figures = &policy[load];
            assert_eq!(figures["errors"], 0, "{load} in {report}");
            for field in ["rows_per_s", "parts_per_s", "rows_per_part", "p99_ms"] {
                let value = figures[field].as_f64().unwrap_or(0.0);
                assert!(value > 0.0, "{load}.{field} in {report}");
            }
        }
    }
}

#[test]
fn writers_lands_one_table_from_one_then_two_sluice_processes() {
    let (ok, report) = crate::common::run_json(&[
        "lab",
        "writers",
        "--writers",
        "2",
        "--producers",
        "8",
        "--duration",
        "2s",
        "--max-age",
        "200ms",
    ]);
    assert!(ok, "{report}");
    let results = report["results"].as_array().expect("results");
    let writers: Vec<u64> = results
        .iter()
        .filter_map(|r| r["writers"].as_u64())
        .collect();
    assert_eq!(writers, [1, 2], "{report}");
    for result in results {
        assert_eq!(result["errors"], 0, "{report}");
        for field in [
            "rows_per_s",
            "commits_per_s",
            "flush_p50_ms",
            "flush_p99_ms",
        ] {
            let value = result[field].as_f64().unwrap_or(0.0);
            assert!(value > 0.0, "{field} in {result}");
        }
        let p50 = result["flush_p50_ms"].as_f64().unwrap_or(0.0);
        let p99 = result["flush_p99_ms"].as_f64().unwrap_or(0.0);
        assert!(p50 <= p99, "{result}");
    }
    // One writer has no one to race.
    assert_eq!(results[0]["commit_retries_per_min"], 0.0, "{report}");
}

#[test]
fn shards_lands_every_way_and_in_turn_makes_a_part_per_flush_on_one_shard() {
    let (ok, report) = crate::common::run_json(&[
        "lab",
        "shards",
        "--producers",
        "4",
        "--rate",
        "2000",
        "--duration",
        "3s",
        "--max-age",
        "500ms",
    ]);
    assert!(ok, "{report}");
    let results = report["results"].as_array().expect("results");
    let ways: Vec<&str> = results.iter().filter_map(|r| r["way"].as_str()).collect();
    assert_eq!(
        ways,
        ["distributed", "distributed-sync", "by-key", "in-turn"],
        "{report}"
    );
    let parts = |result: &serde_json::Value| -> u64 {
        result["parts"]
            .as_array()
            .map_or(0, |p| p.iter().filter_map(|n| n.as_u64()).sum())
    };
    for result in results {
        assert_eq!(result["errors"], 0, "{report}");
        let rows: u64 = result["rows"]
            .as_array()
            .map_or(0, |r| r.iter().filter_map(|n| n.as_u64()).sum());
        assert_eq!(Some(rows), result["rows_acked"].as_u64(), "{result}");
        // Both shards get rows every way.
        let on_each = result["rows"].as_array().expect("rows per shard");
        assert!(on_each.iter().all(|n| n.as_u64() > Some(0)), "{result}");
    }
    // By key, every flush reaches both shards; in turn, one: fewer parts for the same rows.
    assert!(parts(&results[3]) < parts(&results[2]), "{report}");
}

#[test]
fn decode_measures_nested_and_flat_rows() {
    let (ok, report) = crate::common::run_json(&["lab", "decode", "--rows", "5000", "--runs", "1"]);
    assert!(ok, "{report}");
    for shape in ["flat", "nested"] {
        assert_eq!(report[shape]["rows"], 5000, "{report}");
        let rows_per_s = report[shape]["rows_per_s"].as_f64().unwrap_or(0.0);
        assert!(rows_per_s > 0.0, "{report}");
    }
    let ratio = report["bytes_ratio"].as_f64().unwrap_or(0.0);
    assert!(ratio > 0.0, "{report}");
}
