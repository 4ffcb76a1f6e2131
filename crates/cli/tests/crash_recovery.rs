//! `sluice lab crash`, recorded in CI with a few kills: every row acknowledged `durable` is in the
//! lake exactly once after SIGKILLs under load and restarts. (Run it with `--cycles 20` or more by
//! hand: `sluice lab crash --help`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

#[test]
fn durable_rows_survive_sigkill_exactly_once() {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "lab",
            "crash",
            "--cycles",
            "3",
            "--producers",
            "16",
            "--min-run",
            "300ms",
            "--max-run",
            "1200ms",
            "--json",
        ])
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&output.stderr)));
    assert!(output.status.success(), "{report}");
    let audit = &report["audit"];
    assert_eq!(report["cycles"].as_array().unwrap().len(), 3);
    assert!(audit["acked"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(audit["lost"], 0, "{report}");
    assert_eq!(audit["duplicated"], 0, "{report}");
}

#[test]
fn acks_lab_measures_all_three_modes() {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "lab",
            "acks",
            "--duration",
            "1s",
            "--producers",
            "8",
            "--max-age",
            "100ms",
            "--json",
        ])
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let modes = report["modes"].as_array().unwrap();
    let names: Vec<&str> = modes.iter().map(|m| m["ack"].as_str().unwrap()).collect();
    assert_eq!(names, ["async", "durable", "committed"]);
    for mode in modes {
        assert!(mode["rows_per_s"].as_f64().unwrap() > 0.0, "{mode}");
        assert_eq!(mode["errors"], 0, "{mode}");
    }
    // Async is never logged; durable is, in groups.
    assert_eq!(modes[0]["fsyncs_per_s"], 0.0);
    assert!(modes[1]["fsyncs_per_s"].as_f64().unwrap() > 0.0);
}
