//! The console in a real browser: Debian's Chromium, headless, opens `/dashboard` of a server
//! that producers feed through all three doors, and the tables, partitions and part counts in
//! its DOM are checked against `GET /v1/tables`. The estimator, given 20,000 rows/s in 100-row
//! inserts, shows 200 parts/s and 720,000 parts/hour without sluice, and `GET /v1/estimate`
//! answers exactly as `sluice estimate --json`. Both pages are saved as the screenshots in
//! `docs/`. The console's JSON needs a credential once access rules are set; its pages do not.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use sluice_lab::events::{COLUMNS_TOML, RowFormat};
use sluice_lab::load::{Endpoint, LoadConfig, Progress, Stop};

use crate::common::{Server, sluice};

/// Three tables partitioned by service (eight values), with throttle lines low enough to see
/// on the page, and no compaction, so that part counts hold still once the producers stop.
fn config() -> String {
    let mut config = String::from(
        "[flush]\nmax_age = \"250ms\"\n\n[lake.compaction]\nenabled = false\n\n\
         [clickhouse]\ntcp_listen = \"127.0.0.1:0\"\n\n\
         [throttle]\nparts_to_delay_insert = 150\nparts_to_throw_insert = 400\n",
    );
    for table in TABLES {
        config.push_str(&format!(
            "\n[tables.{table}]\ncolumns = {COLUMNS_TOML}\npartition_by = \"service\"\n"
        ));
    }
    config
}

const TABLES: [&str; 3] = ["events", "clicks", "orders"];

/// Chromium: `SLUICE_CHROMIUM`, or the first of Debian's and others' names on the PATH. Fails
/// the test, saying how to get one, when there is none: the test never passes without a browser.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("SLUICE_CHROMIUM") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "SLUICE_CHROMIUM={} is no file",
            path.display()
        );
        return path;
    }
    let names = [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ];
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "no Chromium on the PATH (looked for {names:?}): scripts/services/install.sh installs \
         Debian's `chromium` (scripts/test.sh runs it), or set SLUICE_CHROMIUM to a browser"
    );
}

/// Runs headless Chromium on `url` with `args` added, within a minute; its stdout. The page's
/// timers run on virtual time, so the budget is how much page time passes, not wall time.
fn browse(url: &str, args: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--virtual-time-budget=6000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut out).map(|_| out)
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish with {url} within a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap().unwrap_or_default()
}

/// The page's DOM once its scripts have run.
fn dump_dom(url: &str) -> String {
    browse(url, &["--dump-dom"])
}

/// A screenshot of the page, `width` by `height`, into `docs/NAME`.
fn screenshot(url: &str, name: &str, size: (u32, u32)) {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let path = docs.join(name);
    let _ = std::fs::remove_file(&path);
    browse(
        url,
        &[
            &format!("--window-size={},{}", size.0, size.1),
            &format!("--screenshot={}", path.display()),
        ],
    );
    let written = std::fs::metadata(&path).map_or(0, |m| m.len());
    assert!(
        written > 10_000,
        "no screenshot of {url} in {}",
        path.display()
    );
}

/// Every start tag of `dom` carrying attribute `attr`: its attributes, and the text right after
/// it. Chromium writes attributes as `name="value"`, with `&`, `"`, `<` and `>` escaped.
fn tags_with(dom: &str, attr: &str) -> Vec<(HashMap<String, String>, String)> {
    let needle = format!(" {attr}=\"");
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = dom[from..].find(&needle) {
        let at = from + at;
        let start = dom[..at].rfind('<').unwrap();
        let end = at + dom[at..].find('>').unwrap();
        let mut attrs = HashMap::new();
        let mut rest = &dom[start + 1..end];
        while let Some(eq) = rest.find("=\"") {
            let name = rest[..eq].rsplit(' ').next().unwrap().to_owned();
            let value_end = eq + 2 + rest[eq + 2..].find('"').unwrap();
            attrs.insert(name, unescape(&rest[eq + 2..value_end]));
            rest = &rest[value_end + 1..];
        }
        let text_end = end + dom[end..].find('<').unwrap_or(dom.len() - end);
        found.push((attrs, unescape(&dom[end + 1..text_end])));
        from = end;
    }
    found
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// 720000 -> "720,000", as the page writes counts.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Each table's partitions and their active parts: from `GET /v1/tables`.
type Parts = BTreeMap<String, BTreeMap<String, u64>>;

async fn parts_from_api(server: &Server) -> (Parts, u64) {
    let tables: serde_json::Value = reqwest::get(server.url("/v1/tables"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut parts = Parts::new();
    let mut buffered = 0;
    for table in tables["tables"].as_array().unwrap() {
        buffered += table["buffered_rows"].as_u64().unwrap();
        let partitions = (table["active_parts"].as_array().into_iter().flatten())
            .map(|p| {
                let name = p["partition"].as_str().unwrap().to_owned();
                (name, p["parts"].as_u64().unwrap())
            })
            .collect();
        parts.insert(table["name"].as_str().unwrap().to_owned(), partitions);
    }
    (parts, buffered)
}

/// The same, as the dashboard's DOM shows them; also checks that each count's text is the
/// number it stands for, written with thousands separators, and each table's total.
fn parts_from_dom(dom: &str) -> Parts {
    let mut parts = Parts::new();
    for (attrs, _) in tags_with(dom, "data-table") {
        parts.entry(attrs["data-table"].clone()).or_default();
    }
    for (attrs, text) in tags_with(dom, "data-of-table") {
        let count: u64 = attrs["data-parts"].parse().unwrap();
        assert_eq!(text.trim(), thousands(count), "{attrs:?}");
        (parts.entry(attrs["data-of-table"].clone()).or_default())
            .insert(attrs["data-partition"].clone(), count);
    }
    for (attrs, _) in tags_with(dom, "data-table") {
        let total: u64 = parts[&attrs["data-table"]].values().sum();
        assert_eq!(attrs["data-active-parts"], total.to_string(), "{attrs:?}");
    }
    parts
}

/// How long the producers run.
const LOAD_S: u64 = 24;

/// A load of `rate` rows/s in inserts of `rows` rows into `table`, through `endpoint`, for
/// [`LOAD_S`].
fn producers(
    addr: std::net::SocketAddr,
    table: &str,
    endpoint: Endpoint,
    ack: &str,
    rows: usize,
    rate: f64,
) -> LoadConfig {
    LoadConfig {
        addr,
        table: table.into(),
        endpoint,
        producers: 2,
        rows_per_insert: rows,
        rate: Some(rate),
        stop: Stop::After(Duration::from_secs(LOAD_S)),
        ack: ack.into(),
        seed: 7,
        id_offset: 0,
        format: RowFormat::JsonEachRow,
        keyed: false,
    }
}

/// Polls until nothing is buffered and the part counts read twice in a row agree; returns them.
async fn settled(server: &Server) -> Parts {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut before = parts_from_api(server).await.0;
    loop {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (now, buffered) = parts_from_api(server).await;
        if buffered == 0 && now == before && now.len() == TABLES.len() {
            return now;
        }
        assert!(Instant::now() < deadline, "parts never settled: {now:?}");
        before = now;
    }
}

/// The page's DOM, once Chromium has run its scripts, off the async workers.
async fn dom_of(url: &str) -> String {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || dump_dom(&url))
        .await
        .unwrap()
}

/// Runs producers through each door, each with its own ack mode: the native API, ClickHouse's
/// HTTP and its native protocol; and a few refused inserts. Saves the dashboard's screenshot
/// while they work, so that its charts have something to draw.
async fn feed_and_photograph(server: &Server) {
    let native = (server.native_addr).expect("the config turns the native protocol on");
    let loads = [
        (server.addr, "events", Endpoint::Native, "async", 20, 800.0),
        (
            server.addr,
            "clicks",
            Endpoint::ClickHouse,
            "durable",
            10,
            300.0,
        ),
        (
            native,
            "orders",
            Endpoint::ClickHouseTcp,
            "committed",
            25,
            200.0,
        ),
    ];
    let progress = Arc::new(Progress::default());
    let tasks: Vec<_> = (loads.into_iter())
        .map(|(addr, table, door, ack, rows, rate)| producers(addr, table, door, ack, rows, rate))
        .map(|load| tokio::spawn(sluice_lab::load::run(load, progress.clone(), false)))
        .collect();
    for _ in 0..5 {
        let bad = "{\"id\":\"x\"}";
        let path = "/v1/tables/events/rows";
        let (status, _) = (sluice_lab::load::http_post(server.addr, path, bad).await).unwrap();
        assert_eq!(status, 400);
    }
    tokio::time::sleep(Duration::from_secs(LOAD_S - 6)).await;
    let url = server.url("/dashboard");
    tokio::task::spawn_blocking(move || screenshot(&url, "dashboard.png", (1400, 2500)))
        .await
        .unwrap();
    for task in tasks {
        let report = task.await.unwrap().unwrap();
        assert!(report.rows_acked > 0, "{report:?}");
        assert!(report.errors.is_empty(), "{:?}", report.errors);
    }
    assert!(progress.rows_acked.load(Ordering::Relaxed) > 0);
}

/// Dumps the dashboard until it shows the part counts `/v1/tables` shows, once everything
/// has landed; fails after two minutes, with both.
async fn dashboard_matches_v1_tables(server: &Server) {
    let expected = settled(server).await;
    for table in TABLES {
        assert_eq!(expected[table].len(), 8, "{table}: {:?}", expected[table]);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let dom = dom_of(&server.url("/dashboard")).await;
        let shown = parts_from_dom(&dom);
        if shown == expected && dom.contains("data-ready=\"true\"") {
            assert!(
                dom.contains("data-reason=\"bad_rows\""),
                "refusals by reason"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the page never showed what /v1/tables says:\npage: {shown:?}\napi:  {expected:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The estimator's answer cells, by id: their value and their text, once it has answered.
async fn estimator_cells(url: &str) -> HashMap<String, (String, String)> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let dom = dom_of(url).await;
        let cells: HashMap<String, (String, String)> = (tags_with(&dom, "data-value").into_iter())
            .filter_map(|(a, text)| Some((a.get("id")?.clone(), (a["data-value"].clone(), text))))
            .collect();
        if cells.contains_key("direct-parts-per-hour") {
            return cells;
        }
        assert!(
            Instant::now() < deadline,
            "the estimator never answered: {dom}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// `GET /v1/estimate` and `sluice estimate --json`, on the same inputs, give the same estimate.
async fn estimate_json_is_the_commands(server: &Server) {
    let inputs = "rows_per_second=20000&rows_per_insert=100&partitions=3&max_age=2s\
                  &max_rows=50000&max_bytes=16MiB&row_bytes=120";
    let answer: serde_json::Value = reqwest::get(server.url(&format!("/v1/estimate?{inputs}")))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let flags = "--rate 20000 --insert-rows 100 --partitions 3 --max-age 2s --max-rows 50000 \
                 --max-bytes 16MiB --row-bytes 120 --json";
    let args: Vec<&str> = ["estimate"]
        .into_iter()
        .chain(flags.split_whitespace())
        .collect();
    let cli: serde_json::Value = serde_json::from_str(&sluice(&args)).unwrap();
    assert_eq!(answer["estimate"], cli, "one model, one answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_what_v1_tables_says_and_the_estimator_the_seeds_answer() {
    let server = Server::start(&config());
    feed_and_photograph(&server).await;
    dashboard_matches_v1_tables(&server).await;

    let url = server.url("/dashboard/estimate?rows_per_second=20000&rows_per_insert=100");
    let cells = estimator_cells(&url).await;
    assert_eq!(cells["direct-parts-per-s"], ("200".into(), "200".into()));
    let per_hour = ("720000".into(), "720,000".into());
    assert_eq!(cells["direct-parts-per-hour"], per_hour);
    tokio::task::spawn_blocking(move || screenshot(&url, "estimate.png", (1400, 1000)))
        .await
        .unwrap();

    estimate_json_is_the_commands(&server).await;
    let root = reqwest::get(server.url("/")).await.unwrap();
    assert_eq!(
        root.text().await.unwrap(),
        "Ok.\n",
        "ClickHouse clients' ping"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consoles_json_needs_a_credential_once_access_rules_are_set() {
    let server = Server::start(
        "[auth]\ntokens = [\"console-token-1\"]\n\n[auth.users]\nwatcher = \"pw-2\"\n\n\
         [tables.billing]\ncolumns = [{ name = \"id\", type = \"int64\" }]\n\n\
         [tables.billing.auth]\ntokens = [\"billing-token-3\"]\n",
    );
    let client = reqwest::Client::new();
    for path in ["/v1/dashboard", "/v1/estimate"] {
        let url = server.url(path);
        let refused = client.get(&url).send().await.unwrap();
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED, "{path}");
        let wrong = client.get(&url).bearer_auth("nope").send().await.unwrap();
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED, "{path}");
        for request in [
            client.get(&url).bearer_auth("console-token-1"),
            client.get(&url).bearer_auth("billing-token-3"),
            client.get(&url).basic_auth("watcher", Some("pw-2")),
        ] {
            let taken = request.send().await.unwrap();
            assert_eq!(taken.status(), StatusCode::OK, "{path}");
            let body = taken.text().await.unwrap();
            for secret in ["console-token-1", "billing-token-3", "pw-2"] {
                assert!(!body.contains(secret), "{path} shows a secret");
            }
        }
    }
    // The pages are static, and ask for the credential themselves.
    for path in [
        "/dashboard",
        "/dashboard/estimate",
        "/dashboard/assets/console.js",
    ] {
        let page = client.get(server.url(path)).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK, "{path}");
    }
    // A bad parameter is a 400 that names it.
    let bad = client
        .get(server.url("/v1/estimate?rows_per_second=fast"))
        .bearer_auth("console-token-1")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let error: serde_json::Value = bad.json().await.unwrap();
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("rows_per_second: must be a number"),
        "{error}"
    );
}
