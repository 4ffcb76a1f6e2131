//! A fleet an operator can run: three sluice instances, each with its own data directory and
//! write-ahead log, behind HAProxy, which health-checks `/health` and neither retries nor
//! redispatches a request, as a Kubernetes Service does not. They share one Delta table in S3
//! (moto's server, handed one request at a time so that its conditional writes are atomic), or
//! one PostgreSQL table.
//!
//! 64 producers send single-row `durable` inserts through HAProxy while the instances are
//! restarted one after another by SIGTERM, each back in HAProxy's rotation before the next
//! goes: not one request fails. Then one is killed with SIGKILL and restarted: the requests it
//! held may fail, since none of them was acknowledged. Every acknowledged row of both phases is
//! in the table exactly once.

mod rig;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sluice_lab::events::COLUMNS_TOML;
use sluice_lab::load::{Endpoint, LoadReport, Progress, Stop};
use sluice_lab::services::Postgres;
use tokio::task::JoinHandle;

use self::rig::{Balancer, BalancerPorts, CHECK_INTERVAL, FALL, Instance, quiet_ports};
use crate::common::{
    assert_exactly_once, delta_read_at, load_config_for, read_id_counts, wait_for_acks,
};
use sluice_lab::services::Moto;

/// How long a SIGTERMed instance keeps taking inserts while `/health` says `stopping`. HAProxy
/// takes an instance out at most [`CHECK_INTERVAL`] times [`FALL`] after its checks start
/// failing; the rest is margin for a busy machine.
const DRAIN_DELAY: Duration = Duration::from_secs(3);

/// Producers, each on its own kept-alive connection to HAProxy.
const PRODUCERS: usize = 64;

/// Rows per second over all producers: enough to keep every instance busy, little enough that
/// two cores still answer health checks on time.
const RATE: f64 = 2_000.0;

/// Acknowledged rows to wait for before and after each phase.
const ROWS_AROUND: u64 = 2_000;

/// The instances, and HAProxy in front of them.
struct Fleet {
    instances: Vec<Instance>,
    balancer: Balancer,
    _dir: tempfile::TempDir,
}

impl Fleet {
    /// Starts three instances on `config` one after another (the first creates the table),
    /// then HAProxy, and waits until HAProxy counts all three up.
    async fn start(config: &str) -> Fleet {
        assert!(DRAIN_DELAY > CHECK_INTERVAL * FALL);
        let dir = tempfile::Builder::new()
            .prefix("sluice-fleet-")
            .tempdir()
            .unwrap();
        let [front, stats, a, b, c] = quiet_ports::<5>();
        let mut instances: Vec<Instance> = [("s1", a), ("s2", b), ("s3", c)]
            .into_iter()
            .map(|(name, port)| Instance::new(dir.path(), name, port, config))
            .collect();
        for instance in &mut instances {
            instance.start();
        }
        let ports = BalancerPorts {
            front,
            stats,
            servers: instances.iter().map(|i| (i.name.clone(), i.port)).collect(),
        };
        let balancer = Balancer::start(dir.path(), &ports);
        for instance in &instances {
            balancer
                .wait_for(&instance.name, "UP", Duration::from_secs(30))
                .await;
        }
        Fleet {
            instances,
            balancer,
            _dir: dir,
        }
    }

    /// Restarts each instance by SIGTERM, waiting until HAProxy counts it up again before the
    /// next; checks that the load went on through each restart.
    async fn rolling_restart(&mut self, load: &Load) {
        for i in 0..self.instances.len() {
            let acked = load.acked();
            let instance = &mut self.instances[i];
            let name = instance.name.clone();
            let started = Instant::now();
            instance.terminate();
            let out = self.balancer.wait_for(&name, "DOWN", DRAIN_DELAY).await;
            let status = instance.exited(Duration::from_secs(60)).await;
            assert!(
                status.success(),
                "{name}: {status}\n{}",
                instance.log_tail()
            );
            let stopped = started.elapsed();
            instance.start();
            let back = self
                .balancer
                .wait_for(&name, "UP", Duration::from_secs(60))
                .await;
            eprintln!(
                "{name}: out of rotation {out:?} after SIGTERM, exited after {stopped:?}, back \
                 {back:?} after its start; {} rows acknowledged meanwhile",
                load.acked() - acked
            );
            load.wait_for_more(ROWS_AROUND / 4).await;
        }
    }

    /// Kills instance `i` with SIGKILL and starts it again at once; waits until HAProxy counts
    /// it up.
    async fn kill_and_restart(&mut self, i: usize) {
        let instance = &mut self.instances[i];
        instance.kill();
        instance.start();
        self.balancer
            .wait_for(&instance.name, "UP", Duration::from_secs(60))
            .await;
    }

    /// Stops every instance by SIGTERM (a second one, so no drain delay is waited), and
    /// checks each lands what it holds and exits 0.
    async fn stop(&mut self) {
        for instance in &self.instances {
            instance.terminate();
            tokio::time::sleep(Duration::from_millis(100)).await;
            instance.terminate();
        }
        for instance in &mut self.instances {
            let status = instance.exited(Duration::from_secs(60)).await;
            assert!(status.success(), "{status}\n{}", instance.log_tail());
        }
    }
}

/// The producers, running.
struct Load {
    progress: Arc<Progress>,
    task: JoinHandle<Result<LoadReport, sluice_lab::load::LoadError>>,
}

impl Load {
    /// Starts the producers against `addr`, with ids from `id_offset`; waits until they have
    /// [`ROWS_AROUND`] rows acknowledged.
    async fn start(addr: SocketAddr, id_offset: u64) -> Load {
        let mut config =
            load_config_for(addr, Endpoint::Native, PRODUCERS, 0, id_offset, "durable");
        config.stop = Stop::After(Duration::from_secs(600));
        config.rate = Some(RATE);
        let progress = Arc::new(Progress::default());
        let task = tokio::spawn(sluice_lab::load::run(config, progress.clone(), true));
        let load = Load { progress, task };
        load.wait_for_more(ROWS_AROUND).await;
        load
    }

    fn acked(&self) -> u64 {
        self.progress.rows_acked.load(Ordering::Relaxed)
    }

    async fn wait_for_more(&self, rows: u64) {
        wait_for_acks(&self.progress, self.acked() + rows).await;
    }

    /// Waits for [`ROWS_AROUND`] more rows, stops the producers and returns their report.
    async fn finish(self, phase: &str) -> LoadReport {
        self.wait_for_more(ROWS_AROUND).await;
        self.progress.stop.store(true, Ordering::Relaxed);
        let report = self.task.await.unwrap().unwrap();
        eprintln!(
            "{phase}: {} inserts acknowledged in {:.1} s ({:.0}/s), p99 {:.1} ms, max {:.1} ms, \
             failed {:?}",
            report.inserts_acked,
            report.elapsed_s,
            report.inserts_per_s,
            report.latency.p99_ms,
            report.latency.max_ms,
            report.errors
        );
        report
    }
}

/// Runs the fleet on `config` through a rolling restart and a SIGKILL, under load; checks that
/// no request failed in the rolling restart. Returns the acknowledged id ranges of both.
async fn through_restarts(config: &str) -> Vec<(u64, u64)> {
    let started = Instant::now();
    let mut fleet = Fleet::start(config).await;

    let load = Load::start(fleet.balancer.addr, 0).await;
    fleet.rolling_restart(&load).await;
    let rolling = load.finish("rolling restart").await;
    assert!(
        rolling.errors.is_empty(),
        "failed requests in the rolling restart: {:?}",
        rolling.errors
    );

    let load = Load::start(fleet.balancer.addr, 1_000_000_000).await;
    fleet.kill_and_restart(1).await;
    let killed = load.finish("SIGKILL and restart").await;

    fleet.stop().await;
    eprintln!("the fleet's run took {:?}", started.elapsed());
    let mut acked = rolling.acked_ids.unwrap();
    acked.extend(killed.acked_ids.unwrap());
    acked
}

/// The instances' config, around the store's sections: the drain delay, and table `load`.
fn config(store: &str) -> String {
    format!(
        "drain_delay = \"{}s\"\n\n{store}\n[tables.load]\ncolumns = {COLUMNS_TOML}\n",
        DRAIN_DELAY.as_secs()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_on_one_delta_table_in_s3_restarts_with_no_failed_request_and_keeps_rows_once() {
    let moto = Moto::start("lake").unwrap();
    let storage = crate::common::storage_toml(&moto.storage_options());
    let lake = format!(
        "[lake]\nroot = \"s3://{}/fleet\"\n[lake.storage]\n{storage}",
        moto.bucket
    );
    let acked = through_restarts(&config(&lake)).await;

    let location = format!("s3://{}/fleet/load", moto.bucket);
    let read = delta_read_at(&location, &moto.storage_options(), &[], "id");
    let counts = read_id_counts(&read);
    eprintln!(
        "{} rows in the Delta table, version {}",
        read["rows"], read["version"]
    );
    assert_exactly_once(&counts, &acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_on_one_postgres_table_restarts_with_no_failed_request_and_keeps_rows_once() {
    let postgres = Postgres::start().unwrap();
    let store = format!(
        "default_sink = \"pg\"\n\n[sinks.pg]\ntype = \"postgres\"\nurl = {:?}\n",
        postgres.url
    );
    let acked = through_restarts(&config(&store)).await;

    let (client, connection) = tokio_postgres::connect(&postgres.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let counts: HashMap<i64, usize> = client
        .query("SELECT id, count(*) FROM load GROUP BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1) as usize))
        .collect();
    eprintln!(
        "{} rows in the PostgreSQL table",
        counts.values().sum::<usize>()
    );
    assert_exactly_once(&counts, &acked);
}

/// docs/deploy.md shows the HAProxy configuration these tests run, as [`rig::haproxy_config`]
/// writes it, on an example's ports.
#[test]
fn the_guide_shows_the_haproxy_configuration_the_fleet_runs() {
    let ports = BalancerPorts {
        front: 8080,
        stats: 8404,
        servers: vec![
            ("s1".to_owned(), 8124),
            ("s2".to_owned(), 8125),
            ("s3".to_owned(), 8126),
        ],
    };
    let config = rig::haproxy_config(&ports);
    let guide = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/deploy.md");
    let guide = std::fs::read_to_string(guide).unwrap();
    assert!(
        guide.contains(&config),
        "docs/deploy.md should show the fleet test's HAProxy configuration:\n{config}"
    );
}
