//! The lake in Azure Blob Storage (Azurite, Microsoft's emulator, started by
//! scripts/services/azurite.sh), shared by two writers. Two sluice processes append to one
//! `az://` table at once while both compact it in the background; every Delta commit is a
//! conditional put that Azurite decides atomically, so of two writers racing for a version one
//! wins and the other retries, and of two compactors racing for the same files one commits and
//! the other gives up. An independent reader (the Python `deltalake` package, over Azure) sees
//! every acknowledged row exactly once, during the load and after it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{self, Server, assert_exactly_once, delta_read_at, sample};
use sluice_lab::events::COLUMNS_TOML;
use sluice_lab::load::{Endpoint, Progress, http_get};
use sluice_lab::services::Azurite;

/// Table `load` under `az://CONTAINER/lake`, flushing often (so the writers' commits race) and
/// compacting every 200 ms (so their compactors race too).
fn config(azurite: &Azurite) -> String {
    let storage = common::storage_toml(&azurite.storage_options());
    format!(
        "[lake]\nroot = \"az://{}/lake\"\n[lake.storage]\n{storage}\
         [lake.compaction]\ninterval = \"200ms\"\n\
         [tables.load]\ncolumns = {COLUMNS_TOML}\npartition_by = \"service\"\n\
         [tables.load.flush]\nmax_rows = 300\nmax_age = \"50ms\"\n",
        azurite.container
    )
}

/// The Python reader's view of the table: rows, version, and how often each id appears.
fn read(azurite: &Azurite) -> (u64, u64, HashMap<i64, usize>) {
    let location = format!("az://{}/lake/load", azurite.container);
    let read = delta_read_at(&location, &azurite.storage_options(), &azurite.env(), "id");
    (
        read["rows"].as_u64().unwrap(),
        read["version"].as_u64().unwrap(),
        crate::common::read_id_counts(&read),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_and_their_compactors_share_a_table_in_azure_exactly_once() {
    let azurite = Azurite::start("lake").unwrap();
    let config = config(&azurite);
    let azurite_env = azurite.env();
    let env: Vec<(&str, &str)> = azurite_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut first = Server::start_with_env(&config, &env);
    let mut second = Server::start_with_env(&config, &env);

    let rows = 12_000;
    let mut a = common::load_config(&first, Endpoint::Native, 8, rows, 0, "durable");
    let mut b = common::load_config(&second, Endpoint::Native, 8, rows, 1_000_000, "durable");
    a.rows_per_insert = 10;
    b.rows_per_insert = 10;
    // Midway, the reader reads the table under the two writers and their compactors.
    let reader = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let azurite = &azurite;
        tokio::task::block_in_place(|| read(azurite))
    };
    let (a, b, during) = tokio::join!(
        sluice_lab::load::run(a, Arc::new(Progress::default()), true),
        sluice_lab::load::run(b, Arc::new(Progress::default()), true),
        reader,
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.rows_acked, rows, "{:?}", a.errors);
    assert_eq!(b.rows_acked, rows, "{:?}", b.errors);
    let (rows_during, version_during, counts_during) = during;
    eprintln!("mid-load: {rows_during} rows at version {version_during}");
    assert!(rows_during <= 2 * rows, "{rows_during} rows read mid-load");
    assert_eq!(
        counts_during.values().sum::<usize>() as u64,
        rows_during,
        "the reader's counts disagree with its rows"
    );
    assert!(
        counts_during.values().all(|&n| n == 1),
        "a row was read twice mid-load"
    );

    // Let the compactors take rounds until one has merged (a busy machine slows them), then
    // read what they did off /metrics.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut merges = 0.0;
    while merges < 1.0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        merges = 0.0;
        for server in [&first, &second] {
            let page = http_get(server.addr, "/metrics").await.unwrap();
            merges += sample(&page, "sluice_compaction_merges_total", &[]);
        }
    }
    let mut files_in = 0.0;
    for server in [&first, &second] {
        let page = http_get(server.addr, "/metrics").await.unwrap();
        let merged = sample(&page, "sluice_compaction_merges_total", &[]);
        let read_in = sample(
            &page,
            "sluice_compaction_files_total",
            &["direction=\"in\""],
        );
        let written = sample(
            &page,
            "sluice_compaction_files_total",
            &["direction=\"out\""],
        );
        assert_eq!(written, merged, "one file per merge:\n{page}");
        common::compaction_rounds(&page);
        assert!(read_in >= 2.0 * merged, "a merge takes two files or more");
        eprintln!(
            "{merged} merges of {read_in} files, {} lost races",
            sample(&page, "sluice_compaction_lost_races_total", &[])
        );
        files_in += read_in;
    }
    assert!(merges >= 1.0, "the compactors merged nothing");

    first.sigterm();
    second.sigterm();
    assert!(first.wait(Duration::from_secs(60)).success());
    assert!(second.wait(Duration::from_secs(60)).success());

    let mut acked = a.acked_ids.unwrap();
    acked.extend(b.acked_ids.unwrap());
    let (read_rows, version, counts) = read(&azurite);
    assert_eq!(read_rows, 2 * rows);
    assert_exactly_once(&counts, &acked);
    assert!(version >= 4, "too few commits to have raced: {version}");
    eprintln!("{read_rows} rows at version {version}; compaction merged {files_in} files");
}
