//! The fleet's parts: sluice instances that keep their port across restarts, HAProxy in front
//! of them, and moto's S3 server behind them.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;

/// `N` ports nothing listens on, below the kernel's range of ephemeral ports. An instance's
/// port is free while it restarts: one in that range could be handed meanwhile to another
/// test's server on port 0, or to an outgoing connection.
pub fn quiet_ports<const N: usize>() -> [u16; N] {
    let range =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let low: u16 = range
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(32768);
    assert!(low > 12_000, "the ephemeral ports start at {low}");
    let mut ports = [0; N];
    let mut held = Vec::new();
    for port in &mut ports {
        loop {
            let candidate = rand::rng().random_range(10_000..low - 1_000);
            if let Ok(listener) = TcpListener::bind(("127.0.0.1", candidate)) {
                held.push(listener);
                *port = candidate;
                break;
            }
        }
    }
    ports
}

/// A `sluice serve` process that listens on the same port each time it starts, with its own
/// data directory and write-ahead log, its log appended to a file.
pub struct Instance {
    pub name: String,
    pub port: u16,
    data_dir: PathBuf,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Instance {
    /// An instance in `dir/name`, with `config` (TOML); not started.
    pub fn new(dir: &Path, name: &str, port: u16, config: &str) -> Instance {
        let home = dir.join(name);
        std::fs::create_dir_all(&home).unwrap();
        let path = home.join("sluice.toml");
        std::fs::write(&path, config).unwrap();
        Instance {
            name: name.to_owned(),
            port,
            data_dir: home.join("data"),
            config: path,
            log: home.join("sluice.log"),
            child: None,
        }
    }

    /// Starts it and waits for the line that says it listens.
    pub fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--listen", &format!("127.0.0.1:{}", self.port)])
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--config")
            .arg(&self.config)
            .env("RUST_LOG", "warn,sluice=info,sluice_server=info")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut line = String::new();
        let stdout = child.stdout.take().unwrap();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        self.child = Some(child);
        assert!(
            line.starts_with("sluice listening"),
            "{} did not start: {line:?}\n{}",
            self.name,
            self.log_tail()
        );
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(status.success());
    }

    /// SIGKILL, and waits for the process to be gone.
    pub fn kill(&mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Waits for the process to exit, at most `limit`, without holding up the runtime.
    pub async fn exited(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut().unwrap();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {limit:?}\n{}",
                self.name,
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The last lines of its log, for a failure's message.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What the load balancer needs to know of the fleet.
pub struct BalancerPorts {
    /// Where producers connect.
    pub front: u16,
    /// HAProxy's statistics page, which says whether it counts each instance up.
    pub stats: u16,
    /// Each instance: its name and port.
    pub servers: Vec<(String, u16)>,
}

/// How often HAProxy asks each instance's `/health`.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// Failed checks in a row that take an instance out, and passed ones that put it back.
pub const FALL: u32 = 2;

/// HAProxy's configuration for the fleet: round robin over the instances, `/health` asked every
/// [`CHECK_INTERVAL`], an instance out after [`FALL`] failed checks. No retries and no
/// redispatch: a request sent to an instance that refuses it fails, as through a Kubernetes
/// Service.
pub fn haproxy_config(ports: &BalancerPorts) -> String {
    let inter = CHECK_INTERVAL.as_millis();
    let mut text = format!(
        "global
    maxconn 4096

defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    timeout check 2s
    retries 0
    retry-on none
    no option redispatch

frontend sluice
    bind 127.0.0.1:{front}
    default_backend sluice

backend sluice
    balance roundrobin
    option httpchk GET /health
    http-check expect status 200
    default-server inter {inter}ms fall {FALL} rise {FALL}
",
        front = ports.front,
    );
    for (name, port) in &ports.servers {
        text.push_str(&format!("    server {name} 127.0.0.1:{port} check\n"));
    }
    text.push_str(&format!(
        "
listen stats
    bind 127.0.0.1:{}
    stats enable
    stats uri /stats
",
        ports.stats
    ));
    text
}

/// HAProxy from Debian, running [`haproxy_config`] in the foreground. Stopped when dropped.
pub struct Balancer {
    child: Child,
    /// Where producers connect.
    pub addr: SocketAddr,
    stats: SocketAddr,
    log: PathBuf,
}

impl Balancer {
    pub fn start(dir: &Path, ports: &BalancerPorts) -> Balancer {
        let binary = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or_else(|| {
                panic!(
                    "HAProxy is not installed: run scripts/services/install.sh (scripts/test.sh \
                     does), or apt-get install haproxy"
                )
            });
        let config = dir.join("haproxy.cfg");
        std::fs::write(&config, haproxy_config(ports)).unwrap();
        let log = dir.join("haproxy.log");
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(binary)
            .arg("-db")
            .arg("-f")
            .arg(&config)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        Balancer {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], ports.front)),
            stats: SocketAddr::from(([127, 0, 0, 1], ports.stats)),
            log,
        }
    }

    /// What HAProxy says of server `name` now: `UP`, `DOWN`, `UP 1/2` (going down), ...;
    /// empty while its statistics do not answer.
    pub async fn state(&self, name: &str) -> String {
        let Ok(csv) = sluice_lab::load::http_get(self.stats, "/stats;csv").await else {
            return String::new();
        };
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        let status = header.iter().position(|h| *h == "status").unwrap_or(17);
        lines
            .map(|line| line.split(',').collect::<Vec<_>>())
            .find(|fields| fields.first() == Some(&"sluice") && fields.get(1) == Some(&name))
            .and_then(|fields| fields.get(status).map(|s| (*s).to_owned()))
            .unwrap_or_default()
    }

    /// Waits until HAProxy says `state` of server `name`; how long that took. Fails the test
    /// after `limit`.
    pub async fn wait_for(&self, name: &str, state: &str, limit: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let now = self.state(name).await;
            if now == state {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < limit,
                "HAProxy still says {name} is {now:?}, not {state}, after {limit:?}; its log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
