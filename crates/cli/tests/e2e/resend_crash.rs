//! `sluice lab resend`: producers that send each insert again until it is answered, through ten
//! SIGKILLs and restarts. With insert keys every acknowledged row is in the store exactly once,
//! in the lake, SQLite and PostgreSQL; without keys the run reports the rows resends landed
//! twice.

use std::process::Command;

use sluice_lab::services::Postgres;

/// Runs `sluice lab resend ARGS --json FILE` with ten short cycles and 16 producers: whether it
/// succeeded, and the report. Fails the test, with the output, when no report was written.
fn resend(args: &[&str]) -> (bool, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["lab", "resend", "--cycles", "10", "--producers", "16"])
        .args(["--min-run", "300ms", "--max-run", "1200ms"])
        .args(args)
        .arg("--json")
        .arg(&path)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (
        output.status.success(),
        serde_json::from_str(&text).unwrap(),
    )
}

/// Checks a keyed run passed: ten kills, rows acknowledged, none lost, none twice, no insert
/// given up.
fn assert_exactly_once(ok: bool, report: &serde_json::Value) {
    assert!(ok, "{report}");
    assert_eq!(report["keys"], true, "{report}");
    assert_eq!(report["cycles"].as_array().unwrap().len(), 10, "{report}");
    let audit = &report["audit"];
    assert!(audit["acked"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(audit["lost"], 0, "{report}");
    assert_eq!(audit["duplicated"], 0, "{report}");
    assert_eq!(report["given_up"], 0, "{report}");
}

#[test]
fn keyed_resends_land_once_in_the_lake_across_sigkills() {
    let (ok, report) = resend(&["--store", "lake"]);
    assert_exactly_once(ok, &report);
    // The kills cut inserts off: the producers had to send some again.
    assert!(report["resends"].as_u64().unwrap() > 0, "{report}");
}

#[test]
fn resends_without_keys_are_counted_and_lose_nothing() {
    let (ok, report) = resend(&["--store", "lake", "--no-keys"]);
    assert!(ok, "{report}");
    assert_eq!(report["keys"], false, "{report}");
    let audit = &report["audit"];
    assert!(audit["acked"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(audit["lost"], 0, "{report}");
    assert_eq!(report["given_up"], 0, "{report}");
    // How many a kill catches between "logged" and "answered" depends on timing: counted, not
    // bounded.
    let duplicated = audit["duplicated"].as_u64().unwrap();
    println!(
        "without keys: {duplicated} ids landed twice after {} resends",
        report["resends"]
    );
}

#[test]
fn keyed_resends_land_once_in_sqlite_across_sigkills() {
    let (ok, report) = resend(&["--store", "sqlite"]);
    assert_exactly_once(ok, &report);
    assert_eq!(report["store"], "sqlite");
}

#[test]
fn keyed_resends_land_once_in_postgres_across_sigkills() {
    let pg = Postgres::start().unwrap();
    let (ok, report) = resend(&["--store", "postgres", "--postgres-url", &pg.url]);
    assert_exactly_once(ok, &report);
    assert_eq!(report["store"], "postgres");
}
