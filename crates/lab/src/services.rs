//! Real PostgreSQL, ClickHouse, S3-compatible and Azure Blob servers for tests and labs, started
//! by the project's own scripts (`scripts/services/`) on free ports of 127.0.0.1 and stopped
//! when dropped.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::load::http_post;

/// The project's service scripts.
fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts/services")
        .join(name)
}

/// `N` different ports nothing listens on right now. Each is held until all are picked: a
/// port picked and let go at once can be picked again by the next call (a ClickHouse server
/// once got the same port for HTTP and TCP, and could not start).
pub fn free_ports<const N: usize>() -> std::io::Result<[u16; N]> {
    let held = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&held) {
        *port = listener.local_addr()?.port();
    }
    Ok(ports)
}

/// Runs `start` on `N` free ports, again on other ones (twice at most) when a port was taken
/// between being picked and being bound, by another test's server say.
fn on_free_ports<const N: usize, T>(
    start: impl Fn([u16; N]) -> Result<T, String>,
) -> Result<T, String> {
    let mut attempts = 0;
    loop {
        let ports = free_ports::<N>().map_err(|e| e.to_string())?;
        match start(ports) {
            Err(e) if attempts < 2 && is_port_taken(&e) => attempts += 1,
            started => return started,
        }
    }
}

/// Whether a server failed to start because its port was taken.
fn is_port_taken(error: &str) -> bool {
    error.contains("Address already in use") || error.contains("EADDRINUSE")
}

fn run(script_name: &str, args: &[&str]) -> Result<String, String> {
    let mut command = Command::new("bash");
    command.arg(script(script_name)).args(args);
    output_of(script_name, args, command)
}

/// Runs `command`, a service script, and returns what it printed, or why it failed.
fn output_of(script_name: &str, args: &[&str], mut command: Command) -> Result<String, String> {
    let output = command
        .output()
        .map_err(|e| format!("cannot run {script_name}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{script_name} {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// A fresh folder for a server's files, named with `prefix`, and its path as text for the
/// service scripts.
fn scratch(prefix: &str) -> Result<(tempfile::TempDir, String), String> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| e.to_string())?;
    let path = dir.path().to_string_lossy().into_owned();
    Ok((dir, path))
}

/// `script_name ACTION DIR`: an action (stop, freeze, thaw) on the server kept in `dir`.
fn on_dir(script_name: &str, action: &str, dir: &tempfile::TempDir) -> Result<(), String> {
    run(script_name, &[action, &dir.path().to_string_lossy()]).map(|_| ())
}

/// A throwaway PostgreSQL 15 server.
pub struct Postgres {
    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub url: String,
    /// Its port.
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Postgres {
    /// Starts a fresh cluster.
    pub fn start() -> Result<Self, String> {
        let (dir, path) = scratch("sluice-pg-")?;
        let (url, port) = on_free_ports(|[port]| {
            run("postgres.sh", &["start", &path, &port.to_string()]).map(|url| (url, port))
        })?;
        Ok(Self { url, port, dir })
    }

    /// Stops the server (fast shutdown: in-flight transactions are rolled back).
    pub fn stop(&self) -> Result<(), String> {
        on_dir("postgres.sh", "stop", &self.dir)
    }

    /// Stops the server's processes where they are (SIGSTOP): its port still takes
    /// connections and open ones stay open, but nothing answers, as when a server hangs or the
    /// network to it drops every packet. [`Postgres::thaw`] lets them go on.
    pub fn freeze(&self) -> Result<(), String> {
        on_dir("postgres.sh", "freeze", &self.dir)
    }

    /// Lets the processes [`Postgres::freeze`] stopped run again.
    pub fn thaw(&self) -> Result<(), String> {
        on_dir("postgres.sh", "thaw", &self.dir)
    }

    /// Starts the same cluster again after [`Postgres::stop`].
    pub fn restart(&self) -> Result<(), String> {
        run(
            "postgres.sh",
            &[
                "start",
                &self.dir.path().to_string_lossy(),
                &self.port.to_string(),
            ],
        )
        .map(|_| ())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// A throwaway ClickHouse server (Debian's 18.16).
pub struct ClickHouse {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its HTTP interface.
    pub addr: SocketAddr,
    tcp_port: u16,
    /// The native ports of the cluster `sluice_shards` it knows, comma-separated; empty: none.
    shards: String,
    dir: tempfile::TempDir,
}

impl ClickHouse {
    /// Starts a fresh server.
    pub fn start() -> Result<Self, String> {
        on_free_ports(|[http, tcp]| Self::start_on(http, tcp, ""))
    }

    /// Starts two fresh servers, the two shards of a cluster `sluice_shards` that both know,
    /// so either can hold a `Distributed` table over it.
    pub fn two_shards() -> Result<[Self; 2], String> {
        on_free_ports(|[http_a, tcp_a, http_b, tcp_b]| {
            let shards = format!("{tcp_a},{tcp_b}");
            let a = Self::start_on(http_a, tcp_a, &shards)?;
            let b = Self::start_on(http_b, tcp_b, &shards)?;
            Ok([a, b])
        })
    }

    fn start_on(http: u16, tcp: u16, shards: &str) -> Result<Self, String> {
        let (dir, path) = scratch("sluice-ch-")?;
        let url = run(
            "clickhouse.sh",
            &["start", &path, &http.to_string(), &tcp.to_string(), shards],
        )?;
        Ok(Self {
            url,
            addr: SocketAddr::from(([127, 0, 0, 1], http)),
            tcp_port: tcp,
            shards: shards.to_owned(),
            dir,
        })
    }

    /// Its native protocol (TCP) interface.
    pub fn tcp_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.tcp_port))
    }

    /// Stops the server (SIGTERM, then SIGKILL after 10 s).
    pub fn stop(&self) -> Result<(), String> {
        on_dir("clickhouse.sh", "stop", &self.dir)
    }

    /// Stops the server's process where it is (SIGSTOP): its port still takes connections,
    /// nothing answers. [`ClickHouse::thaw`] lets it go on.
    pub fn freeze(&self) -> Result<(), String> {
        on_dir("clickhouse.sh", "freeze", &self.dir)
    }

    /// Lets the process [`ClickHouse::freeze`] stopped run again.
    pub fn thaw(&self) -> Result<(), String> {
        on_dir("clickhouse.sh", "thaw", &self.dir)
    }

    /// Starts the same server, with its data, again after [`ClickHouse::stop`].
    pub fn restart(&self) -> Result<(), String> {
        run(
            "clickhouse.sh",
            &[
                "start",
                &self.dir.path().to_string_lossy(),
                &self.addr.port().to_string(),
                &self.tcp_port.to_string(),
                &self.shards,
            ],
        )
        .map(|_| ())
    }

    /// Runs one statement over HTTP; the answer's text, or ClickHouse's error.
    pub async fn query(&self, sql: &str) -> Result<String, String> {
        let (status, body) = http_post(self.addr, "/", sql.to_owned()).await?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(format!("{sql}: {}", body.trim()))
        }
    }

    /// A query answering one number (`SELECT count() ...`).
    pub async fn number(&self, sql: &str) -> Result<u64, String> {
        let text = self.query(&format!("{sql} FORMAT TabSeparated")).await?;
        text.trim()
            .parse()
            .map_err(|e| format!("{sql}: not a number: {text:?} ({e})"))
    }
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// A throwaway S3-compatible server (s3s-fs, an S3 server over a folder) with one bucket.
pub struct S3 {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The bucket made for the caller.
    pub bucket: String,
    dir: tempfile::TempDir,
}

impl S3 {
    /// The access key the server accepts.
    pub const ACCESS_KEY: &'static str = "sluice";
    /// Its secret.
    pub const SECRET_KEY: &'static str = "sluice-secret";

    /// Starts a fresh server with an empty bucket `bucket`.
    pub fn start(bucket: &str) -> Result<Self, String> {
        let (dir, path) = scratch("sluice-s3-")?;
        let endpoint = on_free_ports(|[port]| run("s3.sh", &["start", &path, &port.to_string()]))?;
        // A bucket of s3s-fs is a folder of its data folder.
        std::fs::create_dir_all(dir.path().join("data").join(bucket)).map_err(|e| e.to_string())?;
        Ok(Self {
            endpoint,
            bucket: bucket.to_owned(),
            dir,
        })
    }

    /// The `[lake.storage]` options (object_store's names) that reach this server.
    pub fn storage_options(&self) -> Vec<(&'static str, String)> {
        s3_storage_options(&self.endpoint)
    }

    /// Stops the server's process where it is (SIGSTOP): its port still takes connections,
    /// nothing answers. [`S3::thaw`] lets it go on.
    pub fn freeze(&self) -> Result<(), String> {
        on_dir("s3.sh", "freeze", &self.dir)
    }

    /// Lets the process [`S3::freeze`] stopped run again.
    pub fn thaw(&self) -> Result<(), String> {
        on_dir("s3.sh", "thaw", &self.dir)
    }

    /// Stops the server.
    pub fn stop(&self) -> Result<(), String> {
        on_dir("s3.sh", "stop", &self.dir)
    }

    /// Starts the same server again after [`S3::stop`], on its port, with what it held.
    pub fn restart(&self) -> Result<(), String> {
        let port = self
            .endpoint
            .rsplit(':')
            .next()
            .ok_or_else(|| format!("no port in {}", self.endpoint))?;
        run(
            "s3.sh",
            &["start", &self.dir.path().to_string_lossy(), port],
        )
        .map(|_| ())
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The `[lake.storage]` options (object_store's names) that reach an S3 server of the scripts
/// at `endpoint`, with the credentials they start it with.
fn s3_storage_options(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("aws_endpoint", endpoint.to_owned()),
        ("aws_access_key_id", S3::ACCESS_KEY.to_owned()),
        ("aws_secret_access_key", S3::SECRET_KEY.to_owned()),
        ("aws_region", "us-east-1".to_owned()),
        ("aws_allow_http", "true".to_owned()),
    ]
}

/// A throwaway S3 server whose conditional writes are atomic (moto's server, handed one request
/// at a time, in the Python reader's virtualenv), with one bucket: several sluice processes can
/// commit to one Delta table in it. Its objects live in its memory.
pub struct Moto {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The bucket made for the caller.
    pub bucket: String,
    dir: tempfile::TempDir,
}

impl Moto {
    /// Starts a fresh server with an empty bucket `bucket`, from the virtualenv around
    /// `$SLUICE_PYTHON` (the script's own default without it).
    pub fn start(bucket: &str) -> Result<Self, String> {
        let (dir, path) = scratch("sluice-moto-")?;
        let endpoint =
            on_free_ports(|[port]| run_moto(&["start", &path, &port.to_string(), bucket]))?;
        Ok(Self {
            endpoint,
            bucket: bucket.to_owned(),
            dir,
        })
    }

    /// The `[lake.storage]` options (object_store's names) that reach this server.
    pub fn storage_options(&self) -> Vec<(&'static str, String)> {
        s3_storage_options(&self.endpoint)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = run_moto(&["stop", &self.dir.path().to_string_lossy()]);
    }
}

/// Runs `moto.sh` with the virtualenv around `$SLUICE_PYTHON`, when it is set.
fn run_moto(args: &[&str]) -> Result<String, String> {
    let venv = std::env::var_os("SLUICE_PYTHON").and_then(|python| {
        Path::new(&python)
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
    });
    let mut command = Command::new("bash");
    command.arg(script("moto.sh")).args(args);
    if let Some(venv) = venv {
        command.env("SLUICE_PYTHON_VENV", venv);
    }
    output_of("moto.sh", args, command)
}

/// A throwaway Azure Blob Storage server (Azurite, Microsoft's emulator) with one container, on
/// Azurite's development account.
pub struct Azurite {
    /// `http://127.0.0.1:PORT`: what `AZURITE_BLOB_STORAGE_URL` must say for object_store (in
    /// sluice or in Python) to reach it.
    pub endpoint: String,
    /// The container made for the caller.
    pub container: String,
    dir: tempfile::TempDir,
}

impl Azurite {
    /// Starts a fresh server with an empty container `container`.
    pub fn start(container: &str) -> Result<Self, String> {
        let (dir, path) = scratch("sluice-azurite-")?;
        let endpoint = on_free_ports(|[port]| {
            run(
                "azurite.sh",
                &["start", &path, &port.to_string(), container],
            )
        })?;
        Ok(Self {
            endpoint,
            container: container.to_owned(),
            dir,
        })
    }

    /// The `[lake.storage]` options (object_store's names) that reach this server, together
    /// with [`Azurite::env`].
    pub fn storage_options(&self) -> Vec<(&'static str, String)> {
        vec![("azure_storage_use_emulator", "true".to_owned())]
    }

    /// The environment a process reaching this server needs: object_store reads the emulator's
    /// address from `AZURITE_BLOB_STORAGE_URL` only.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![("AZURITE_BLOB_STORAGE_URL", self.endpoint.clone())]
    }

    /// Stops the server.
    pub fn stop(&self) -> Result<(), String> {
        on_dir("azurite.sh", "stop", &self.dir)
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_and_a_taken_port_is_retried() {
        for _ in 0..100 {
            let ports = free_ports::<4>().unwrap();
            let distinct: std::collections::HashSet<u16> = ports.into_iter().collect();
            assert_eq!(distinct.len(), 4, "{ports:?}");
        }
        // A taken port is tried again on new ones, three attempts in all; any other failure
        // is not.
        assert_eq!(start_failing("Address already in use", Some(3)), (true, 3));
        assert_eq!(start_failing("EADDRINUSE", None), (false, 3));
        assert_eq!(start_failing("no such binary", None), (false, 1));
    }

    /// Starts a pretend server that fails with `error` until attempt `succeeds_at` (never with
    /// `None`): whether it started, and after how many attempts.
    fn start_failing(error: &str, succeeds_at: Option<u32>) -> (bool, u32) {
        let attempts = std::cell::Cell::new(0);
        let started = on_free_ports(|[port]| {
            attempts.set(attempts.get() + 1);
            if Some(attempts.get()) == succeeds_at {
                Ok(port)
            } else {
                Err(format!("bind 127.0.0.1:{port}: {error}"))
            }
        });
        (started.is_ok(), attempts.get())
    }
}
