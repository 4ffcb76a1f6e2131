//! A bad config file stops `sluice serve` at once with a message naming the setting.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::serve_with;

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
    }
}
