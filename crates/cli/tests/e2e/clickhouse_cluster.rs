//! Into a ClickHouse cluster of two real servers (Debian's 18.16, two shards of the cluster
//! `sluice_shards`, started by `scripts/services/clickhouse.sh`): straight into each shard's
//! table by a shard key, where ClickHouse's own `sipHash64` agrees on every row's shard; whole
//! flushes in turn, passing over a shard that is down; a shard that fails mid-flush gets its
//! rows on the retry while the other shard's are not sent again; and through a `Distributed`
//! table with `insert_distributed_sync`.

use std::collections::HashMap;
use std::time::Duration;

use crate::common::Server;
use sluice_lab::load::http_post;
use sluice_lab::services::ClickHouse;

/// The table on both shards: `user` picks the shard.
const COLUMNS: &str = "[{name = \"id\", type = \"int64\", nullable = false}, \
     {name = \"user\", type = \"string\", nullable = false}, {name = \"n\", type = \"int64\"}]";

fn config(shards: &[ClickHouse; 2], sink_extra: &str) -> String {
    format!(
        "shutdown_timeout = \"20s\"\nack_timeout = \"60s\"\n\n[flush]\nmax_age = \"100ms\"\n\n\
         [sinks.cluster]\ntype = \"clickhouse\"\nurl = {:?}\nshards = [{:?}, {:?}]\n{sink_extra}\n\
         [tables.events]\nsink = \"cluster\"\ncolumns = {COLUMNS}\n",
        shards[0].url, shards[0].url, shards[1].url
    )
}

/// `count` rows from `first` on, ten users between them, as NDJSON.
fn rows(first: i64, count: i64) -> String {
    (first..first + count)
        .map(|id| format!("{{\"id\":{id},\"user\":\"user-{}\",\"n\":{id}}}\n", id % 10))
        .collect()
}

/// Sends `body` with `committed` acks: when this returns, the rows are in ClickHouse.
async fn insert_committed(server: &Server, body: String) {
    let (status, answer) = http_post(server.addr, "/v1/tables/events/rows?ack=committed", body)
        .await
        .unwrap();
    assert_eq!(status, 200, "{answer}");
}

/// How many times each id is in `shard`'s table.
async fn ids(shard: &ClickHouse) -> HashMap<i64, u64> {
    shard
        .query("SELECT id, count() FROM events GROUP BY id FORMAT TabSeparated")
        .await
        .unwrap()
        .lines()
        .map(|line| {
            let (id, n) = line.split_once('\t').unwrap();
            (id.parse().unwrap(), n.parse().unwrap())
        })
        .collect()
}

/// Every id of `0..count` once over both shards, and on one shard only.
async fn assert_each_id_once(shards: &[ClickHouse; 2], count: i64) -> [usize; 2] {
    let (a, b) = (ids(&shards[0]).await, ids(&shards[1]).await);
    for id in 0..count {
        let found = (
            a.get(&id).copied().unwrap_or(0),
            b.get(&id).copied().unwrap_or(0),
        );
        assert!(
            found == (1, 0) || found == (0, 1),
            "id {id} is on the shards {found:?} times"
        );
    }
    assert_eq!(
        a.len() + b.len(),
        count as usize,
        "no id outside 0..{count}"
    );
    [a.len(), b.len()]
}

/// Parts inserted into `shard`'s table: level 0, merged away or not (inactive parts stay on
/// disk for eight minutes).
async fn inserted_parts(shard: &ClickHouse) -> u64 {
    shard
        .number("SELECT count() FROM system.parts WHERE table = 'events' AND level = 0")
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_land_on_the_shard_clickhouse_would_pick_for_their_key() {
    let shards = ClickHouse::two_shards().unwrap();
    let mut server = Server::start(&config(&shards, "shard_key = \"user\""));
    for first in (0..2_000).step_by(200) {
        insert_committed(&server, rows(first, 200)).await;
    }
    let per_shard = assert_each_id_once(&shards, 2_000).await;
    assert!(per_shard.iter().all(|&n| n > 0), "{per_shard:?}");
    // ClickHouse's own hash puts every row where sluice did.
    for (index, shard) in shards.iter().enumerate() {
        let elsewhere = shard
            .number(&format!(
                "SELECT count() FROM events WHERE sipHash64(user) % 2 != {index}"
            ))
            .await
            .unwrap();
        assert_eq!(
            elsewhere, 0,
            "shard {index} holds rows of the other's users"
        );
    }
    // A Distributed table with the same key reads the whole table.
    shards[0]
        .query(
            "CREATE TABLE events_all AS events \
             ENGINE = Distributed(sluice_shards, default, events, sipHash64(user))",
        )
        .await
        .unwrap();
    let total = shards[0]
        .number("SELECT count() FROM events_all")
        .await
        .unwrap();
    assert_eq!(total, 2_000);
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_flushes_take_turns_and_pass_over_a_shard_that_is_down() {
    let shards = ClickHouse::two_shards().unwrap();
    let mut server = Server::start(&config(&shards, ""));
    for first in (0..1_000).step_by(100) {
        insert_committed(&server, rows(first, 100)).await;
    }
    // Each flush is one part on one shard: ten flushes, ten parts, five on each.
    let parts = [
        inserted_parts(&shards[0]).await,
        inserted_parts(&shards[1]).await,
    ];
    assert_eq!(parts, [5, 5], "inserted parts per shard");
    assert_eq!(assert_each_id_once(&shards, 1_000).await, [500, 500]);

    // One shard down: the flushes that would go there land on the other.
    shards[1].stop().unwrap();
    for first in (1_000..1_400).step_by(100) {
        insert_committed(&server, rows(first, 100)).await;
    }
    shards[1].restart().unwrap();
    let per_shard = assert_each_id_once(&shards, 1_400).await;
    assert_eq!(per_shard, [900, 500]);
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_that_fails_mid_flush_gets_its_rows_and_the_other_none_twice() {
    let shards = ClickHouse::two_shards().unwrap();
    let mut server = Server::start(&config(&shards, "shard_key = \"user\""));
    insert_committed(&server, rows(0, 100)).await;
    // The second shard is down (refused at once: a server that hangs instead might still run
    // an insert it was sent after sluice stopped waiting, a duplicate no sink can prevent).
    // Each try of the flush lands on the first shard or finds its rows there already.
    shards[1].stop().unwrap();
    // One flush fails, then more rows arrive while it waits to be tried again: without care
    // they would be folded into its retry, and the first shard's share sent twice.
    let mut pending = Vec::new();
    for i in 1..6 {
        pending.push(tokio::spawn(http_post(
            server.addr,
            "/v1/tables/events/rows?ack=committed",
            rows(i * 100, 100),
        )));
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    shards[1].restart().unwrap();
    for insert in pending {
        let (status, answer) = insert.await.unwrap().unwrap();
        assert_eq!(status, 200, "{answer}");
    }
    assert_each_id_once(&shards, 600).await;
    let page = reqwest::get(server.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let retried = crate::common::table_sample(
        &page,
        "events",
        "sluice_flush_errors_total",
        &["kind=\"retriable\""],
    );
    assert!(retried >= 2.0, "the flush was retried: {retried}");
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_distributed_table_with_synchronous_inserts() {
    let shards = ClickHouse::two_shards().unwrap();
    for shard in &shards {
        shard
            .query(
                "CREATE TABLE events (id Int64, user String, n Nullable(Int64)) \
                 ENGINE = MergeTree() ORDER BY id",
            )
            .await
            .unwrap();
    }
    shards[0]
        .query(
            "CREATE TABLE events_all AS events \
             ENGINE = Distributed(sluice_shards, default, events, sipHash64(user))",
        )
        .await
        .unwrap();
    let config = format!(
        "[flush]\nmax_age = \"100ms\"\n\n[sinks.ch]\ntype = \"clickhouse\"\nurl = {:?}\n\
         [sinks.ch.settings]\ninsert_distributed_sync = 1\n\n\
         [tables.events_all]\nsink = \"ch\"\ncolumns = {COLUMNS}\n",
        shards[0].url
    );
    let mut server = Server::start(&config);
    for first in (0..1_000).step_by(100) {
        let (status, answer) = http_post(
            server.addr,
            "/v1/tables/events_all/rows?ack=committed",
            rows(first, 100),
        )
        .await
        .unwrap();
        assert_eq!(status, 200, "{answer}");
    }
    // Synchronous: both shards hold their rows when the insert is answered.
    let per_shard = assert_each_id_once(&shards, 1_000).await;
    assert!(per_shard.iter().all(|&n| n > 0), "{per_shard:?}");
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
}
