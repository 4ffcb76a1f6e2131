//! What stops sluice at once, with a message saying why: a bad config file (naming the setting),
//! a declared table its store cannot hold, logged inserts into a table that was deleted, a data
//! directory another server is using, a data directory that is not there. And one change that
//! must not stop it: a column dropped from a table while inserts into it are still logged. The
//! maintenance commands, given no config, name the Delta tables in the lake that nothing
//! declares.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{id_counts, serve_until_exit, serve_with, sluice};
use sluice_lab::process::ServerProcess;

#[test]
fn bad_settings_are_refused_with_their_name() {
    let cases = [
        ("[flush]\nmax_rows = 0\n", "flush.max_rows"),
        ("[flush]\nmax_age = \"0s\"\n", "flush.max_age"),
        (
            "[flush]\nmax_rows = 10\nmax_inserts = 100\n",
            "flush.max_inserts",
        ),
        ("max_buffer_bytes = \"1MiB\"\n", "flush.max_bytes"),
        (
            "ack_timeout = \"1s\"\n[flush]\nmax_age = \"2s\"\n",
            "flush.max_age",
        ),
        (
            "[tables.t]\ncolumns = [{ name = \"a\", type = \"int64\" }]\npartition_by = \"day(a)\"\n",
            "tables.t.partition_by",
        ),
        ("[tables.t]\ncolumns = []\n", "tables.t.columns"),
        (
            "[tables.t]\ncolumns = [{ name = \"id\", type = \"int64\" }, { name = \"ID\", type = \"int64\" }]\n",
            "table t: columns 'id' and 'ID' differ only in case, and a Delta table takes them for one column: rename one",
        ),
        ("lisen = \"x\"\n", "unknown field `lisen`"),
        ("max_tables = 0\n", "max_tables"),
        ("[lake]\nroot = \"ftp://host/lake\"\n", "lake.root"),
        ("[lake]\nroot = \"s3:///no-bucket\"\n", "names no bucket"),
        (
            "[lake.storage]\naws_region = \"us-east-1\"\n",
            "object-store options need an object-store root",
        ),
    ];
    for (config, says) in cases {
        let (ok, stderr) = serve_with(config);
        assert!(!ok, "{config} was accepted");
        assert!(stderr.contains(says), "{config}: {stderr}");
        assert_eq!(stderr.matches(says).count(), 1, "{config}: {stderr}");
    }
}

#[test]
fn a_declared_table_its_store_refuses_is_not_remembered() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        "[tables.t]\ncolumns = [{ name = \"id\", type = \"int64\" }, { name = \"ID\", type = \"int64\" }]\n",
    )
    .unwrap();
    let (ok, stderr) = serve_until_exit(&config, &data);
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("differ only in case"), "{stderr}");
    // With the table gone from the config, nothing of it is left to stop the next start.
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let mut next = ServerProcess::spawn(binary, &data, None).unwrap();
    next.kill().unwrap();
    assert!(!data.join("t").exists(), "the refused table was remembered");
}

/// Flush settings under which nothing flushes while a test's server runs.
const NO_FLUSH: &str = "ack_timeout = \"2h\"\n[flush]\nmax_age = \"1h\"\n";

/// Starts sluice on `data` with `config` (whose flushes must wait, [`NO_FLUSH`]), inserts
/// `rows` into `table` acknowledged `durable`, and kills it: the rows are only in its log.
async fn logged_then_killed(data: &Path, config: &Path, table: &str, rows: &str) {
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let mut server = ServerProcess::spawn(binary, data, Some(config)).unwrap();
    let sent = reqwest::Client::new()
        .post(format!(
            "http://{}/v1/tables/{table}/rows?ack=durable",
            server.addr
        ))
        .body(rows.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200, "{:?}", sent.text().await);
    server.kill().unwrap();
}

/// Starts sluice on `data` with `config` and stops it gracefully: everything it replayed lands.
fn start_and_stop(data: &Path, config: &Path) {
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let mut server = ServerProcess::spawn(binary, data, Some(config)).unwrap();
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(60)).unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserts_logged_for_a_deleted_table_stop_the_start_until_it_is_declared() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("sluice.toml");
    std::fs::write(&config, NO_FLUSH).unwrap();
    logged_then_killed(&data, &config, "gone", "{\"id\":1}\n{\"id\":2}\n{\"id\":3}").await;
    // The table is deleted, folder, layout and all, with its inserts still logged.
    std::fs::remove_dir_all(data.join("gone")).unwrap();

    let (ok, stderr) = serve_until_exit(&config, &data);
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains("table 'gone' no longer exists")
            && stderr.contains("declare it in the config ([tables.gone])"),
        "{stderr}"
    );

    // Declared again, it takes its logged rows, once each.
    let declared =
        format!("{NO_FLUSH}[tables.gone]\ncolumns = [{{ name = \"id\", type = \"int64\" }}]\n");
    std::fs::write(&config, declared).unwrap();
    start_and_stop(&data, &config);
    let counts = id_counts(&data, "gone");
    assert_eq!(counts, HashMap::from([(1, 1), (2, 1), (3, 1)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserts_logged_before_a_column_was_dropped_land_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("sluice.toml");
    let table = |columns: &str| format!("{NO_FLUSH}[tables.t]\ncolumns = [{columns}]\n");
    let id = "{ name = \"id\", type = \"int64\", nullable = false }";
    std::fs::write(
        &config,
        table(&format!("{id}, {{ name = \"x\", type = \"string\" }}")),
    )
    .unwrap();
    let rows = "{\"id\":1,\"x\":\"a\"}\n{\"id\":2,\"x\":\"b\"}\n{\"id\":3}";
    logged_then_killed(&data, &config, "t", rows).await;

    // `x` leaves the config with inserts that have it still logged: they land without it.
    std::fs::write(&config, table(id)).unwrap();
    start_and_stop(&data, &config);
    let counts = id_counts(&data, "t");
    assert_eq!(counts, HashMap::from([(1, 1), (2, 1), (3, 1)]));
}

#[test]
fn a_data_directory_in_use_is_refused_until_its_server_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let mut first = ServerProcess::spawn(binary, &data, None).unwrap();

    let mut second = Command::new(binary)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            second.kill().unwrap();
            panic!("a second server is running on the same data directory");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    second
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success(), "{stderr}");
    let says = format!("is in use by another sluice (pid {})", first.pid());
    assert!(stderr.contains(&says), "{stderr}");
    // The first one is untouched.
    let ping = std::net::TcpStream::connect(first.addr);
    assert!(ping.is_ok(), "the first server stopped listening");

    // A server killed outright takes its lock with it: the next start needs no cleanup.
    first.kill().unwrap();
    let mut next = ServerProcess::spawn(binary, &data, None).unwrap();
    next.kill().unwrap();
}

#[test]
fn parts_and_compact_refuse_a_data_directory_that_is_not_there_and_make_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("mistyped");
    // Declaring a lake table does not make a missing data directory (and its lake) right.
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        "[tables.declared]\ncolumns = [{ name = \"id\", type = \"int64\" }]\n",
    )
    .unwrap();
    for declared in [false, true] {
        for command in ["parts", "compact"] {
            let mut sluice = Command::new(env!("CARGO_BIN_EXE_sluice"));
            sluice.arg(command).arg("--data-dir").arg(&missing);
            if declared {
                sluice.arg("--config").arg(&config);
            }
            let output = sluice.output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!output.status.success(), "{command}: {stderr}");
            assert!(
                stderr.contains("there is no data directory") && stderr.contains("mistyped"),
                "{command} (declared tables: {declared}): {stderr}"
            );
            assert!(!missing.exists(), "{command} made the directory");
        }
    }

    // In a data directory that exists, a declared table no flush has made yet has nothing to
    // compact, and compacting it does not create it.
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let out = sluice(&[
        "compact".as_ref(),
        "--json".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--data-dir".as_ref(),
        data.as_os_str(),
    ]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["declared"]["merges"], 0, "{out}");
    assert_eq!(report["declared"]["files_in"], 0, "{out}");
    assert!(!data.join("declared").exists(), "compact created the table");
    // `sluice parts` names it, with no parts, rather than saying the lake has no tables.
    let out = sluice(&[
        "parts".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--data-dir".as_ref(),
        data.as_os_str(),
    ]);
    let line = out.lines().find(|l| l.starts_with("declared "));
    assert!(
        line.is_some_and(|l| l.contains(" 0 ") && l.contains("no parts yet")),
        "{out}"
    );
    assert!(!out.contains("no lake tables"), "{out}");
    // And `--json` has a row for it: no partition, no parts.
    let out = sluice(&[
        "parts".as_ref(),
        "--json".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--data-dir".as_ref(),
        data.as_os_str(),
    ]);
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let declared: Vec<&serde_json::Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["table"] == "declared")
        .collect();
    assert_eq!(declared.len(), 1, "{out}");
    assert!(declared[0]["partition"].is_null(), "{out}");
    assert_eq!(
        (&declared[0]["parts"], &declared[0]["rows"]),
        (&0.into(), &0.into()),
        "{out}"
    );
    assert!(!data.join("declared").exists(), "parts created the table");
}

#[tokio::test]
async fn parts_and_compact_name_a_delta_table_nothing_declares() {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use sluice_core::{Column, ColumnType, FlushPolicy, TableDef, TableLayout, TableName};
    use sluice_sinks::{LakeConfig, LakeSink};

    // A table another config declared: its folder holds a real Delta table, and neither the
    // data directory's catalog nor the commands' missing config names it.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let layout = TableLayout {
        columns: vec![Column::new("id", ColumnType::Int64).required()],
        partition_by: String::new(),
        sort_by: Vec::new(),
    };
    let table = TableDef::new(
        TableName::new("declared").unwrap(),
        layout,
        FlushPolicy::default(),
    )
    .unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let batches = (0..4)
        .map(|i| {
            RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![i]))]).unwrap()
        })
        .collect();
    LakeSink::new(LakeConfig::new(&data))
        .unwrap()
        .bulk_append(&table, batches, false)
        .await
        .unwrap();
    assert!(data.join("declared/_delta_log").is_dir());

    let run = |args: &[&std::ffi::OsStr]| {
        let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let folder = data.join("declared").display().to_string();
    for command in ["parts", "compact"] {
        let (ok, out, err) = run(&[command.as_ref(), "--data-dir".as_ref(), data.as_os_str()]);
        assert!(ok, "{command}: {err}");
        assert!(out.contains("(no lake tables)"), "{command}: {out}");
        assert!(
            err.contains(&folder) && err.contains("declares") && err.contains("--config"),
            "{command}: {err}"
        );
    }
    // Asked for by name, it is an error that says the same.
    let (ok, _, err) = run(&[
        "compact".as_ref(),
        "--table".as_ref(),
        "declared".as_ref(),
        "--data-dir".as_ref(),
        data.as_os_str(),
    ]);
    assert!(!ok);
    assert!(
        err.contains("there is no lake table 'declared'") && err.contains(&folder),
        "{err}"
    );
    // With the config that declares it, the commands see it and have nothing to say.
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        "[tables.declared]\ncolumns = [{ name = \"id\", type = \"int64\" }]\n",
    )
    .unwrap();
    let (ok, out, err) = run(&[
        "parts".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "--data-dir".as_ref(),
        data.as_os_str(),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("declared ") && l.contains(" 4 ")),
        "{out}"
    );
    assert!(!err.contains("note:"), "{err}");
}
