//! `sluice lab resend`: producers that send each insert again until it is answered, through ten
//! SIGKILLs and restarts. With insert keys every acknowledged row is in the store exactly once,
//! in the lake, SQLite and PostgreSQL; without keys the run reports the rows resends landed
//! twice.

use sluice_lab::services::Postgres;

use crate::common;

/// Runs `sluice lab resend ARGS --json FILE` with ten short cycles and 16 producers: whether it
/// succeeded, and the report.
fn resend(args: &[&str]) -> (bool, serde_json::Value) {
    let mut all = vec!["lab", "resend", "--cycles", "10", "--producers", "16"];
    all.extend(["--min-run", "300ms", "--max-run", "1200ms"]);
    all.extend(args);
    common::run_json(&all)
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
