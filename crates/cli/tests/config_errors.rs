//! A bad config file stops `sluice serve` at once with a message naming the setting.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn serve_with(config: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.toml");
    std::fs::write(&path, config).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

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
        ("lisen = \"x\"\n", "unknown field `lisen`"),
    ];
    for (config, says) in cases {
        let (ok, stderr) = serve_with(config);
        assert!(!ok, "{config} was accepted");
        assert!(stderr.contains(says), "{config}: {stderr}");
    }
}
