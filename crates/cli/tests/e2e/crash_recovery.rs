//! `sluice lab crash`, recorded in CI with a few kills: every row acknowledged `durable` is in the
//! lake exactly once after SIGKILLs under load and restarts. (Run it with `--cycles 20` or more by
//! hand: `sluice lab crash --help`.) And `sluice lab acks`, the ack-mode benchmark, on a small load.

use crate::common::run_json;

#[test]
fn durable_rows_survive_sigkill_exactly_once() {
    let (ok, report) = run_json(&[
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
    ]);
    assert!(ok, "{report}");
    let audit = &report["audit"];
    assert_eq!(report["cycles"].as_array().unwrap().len(), 3);
    assert!(audit["acked"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(audit["lost"], 0, "{report}");
    assert_eq!(audit["duplicated"], 0, "{report}");
}

#[test]
fn acks_lab_measures_all_three_modes() {
    let (ok, report) = run_json(&[
        "lab",
        "acks",
        "--duration",
        "1s",
        "--producers",
        "8",
        "--max-age",
        "100ms",
    ]);
    assert!(ok, "{report}");
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
