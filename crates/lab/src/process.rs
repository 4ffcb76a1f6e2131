//! A `sluice serve` child process on 127.0.0.1:0, for the lab's experiments and for tests.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running server. Killed (SIGKILL) when dropped.
pub struct ServerProcess {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Where ClickHouse's native protocol listens, when it is on.
    pub native_addr: Option<SocketAddr>,
}

impl ServerProcess {
    /// Starts `binary serve --listen 127.0.0.1:0 --data-dir DATA [--config CONFIG]` and waits for
    /// the line that says where it listens.
    pub fn spawn(binary: &Path, data_dir: &Path, config: Option<&Path>) -> std::io::Result<Self> {
        Self::spawn_with_env(binary, data_dir, config, &[])
    }

    /// Writes `config_text` to `data_dir/file_name` (making the folder) and starts a server on
    /// the folder with that config: how a lab that needs one server sets it up.
    pub fn spawn_configured(
        binary: &Path,
        data_dir: &Path,
        file_name: &str,
        config_text: &str,
    ) -> Result<Self, String> {
        std::fs::create_dir_all(data_dir).map_err(|e| e.to_string())?;
        let config_file = data_dir.join(file_name);
        std::fs::write(&config_file, config_text).map_err(|e| e.to_string())?;
        Self::spawn(binary, data_dir, Some(&config_file)).map_err(|e| e.to_string())
    }

    /// [`ServerProcess::spawn`] with extra environment variables.
    pub fn spawn_with_env(
        binary: &Path,
        data_dir: &Path,
        config: Option<&Path>,
        env: &[(&str, &str)],
    ) -> std::io::Result<Self> {
        Self::spawn_with(binary, data_dir, config, env, Stdio::inherit())
    }

    /// [`ServerProcess::spawn_with_env`] with the server's stderr (its log) going to `stderr`
    /// (a file, say) instead of this process's.
    pub fn spawn_with(
        binary: &Path,
        data_dir: &Path,
        config: Option<&Path>,
        env: &[(&str, &str)],
        stderr: Stdio,
    ) -> std::io::Result<Self> {
        let mut command = Command::new(binary);
        command.envs(env.iter().copied());
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .env(
                "RUST_LOG",
                // A commit retried after another writer's is routine with several writers on
                // one table, as `sluice serve`'s own default filter knows.
                std::env::var("RUST_LOG")
                    .unwrap_or_else(|_| "warn,deltalake_core::kernel::transaction=error".into()),
            )
            .stdout(Stdio::piped())
            .stderr(stderr);
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        let mut child = command.spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let addr = line
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|addr| addr.parse().ok());
        let native_addr = line
            .split("tcp://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|addr| addr.parse().ok());
        match addr {
            Some(addr) => Ok(Self {
                child,
                addr,
                native_addr,
            }),
            None => {
                let _ = child.kill();
                let status = child.wait()?;
                Err(std::io::Error::other(format!(
                    "sluice serve did not start ({status}): {line:?}"
                )))
            }
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time the server has used so far, user and system, all its threads: `None` where
    /// `/proc/<pid>/stat` cannot be read (not Linux). `/proc` counts in ticks of `USER_HZ`,
    /// which Linux fixes at 100 per second for what it shows there.
    pub fn cpu_time(&self) -> Option<Duration> {
        cpu_time_in(&format!("/proc/{}/stat", self.child.id()))
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) -> std::io::Result<()> {
        self.child.kill()?;
        self.child.wait().map(|_| ())
    }

    /// SIGTERM (a graceful stop).
    pub fn terminate(&self) -> std::io::Result<()> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other("kill -TERM failed"))
        }
    }

    /// Stops the server cleanly: SIGTERM, then at most `limit` for it to land what it holds and
    /// exit. An exit other than success is an error.
    pub fn stop(&mut self, limit: Duration) -> Result<(), String> {
        self.terminate().map_err(|e| e.to_string())?;
        let status = self.wait(limit).map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("sluice exited with {status}"))
        }
    }

    /// Waits for the process to exit, at most `limit`.
    pub fn wait(&mut self, limit: Duration) -> std::io::Result<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                return Err(std::io::Error::other(format!(
                    "sluice did not exit within {limit:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `sluice` binary this process runs as, for commands that start servers of their own.
pub fn current_binary() -> std::io::Result<PathBuf> {
    std::env::current_exe()
}

/// CPU time this process has used so far, user and system, all its threads, read as
/// [`ServerProcess::cpu_time`] reads the server's: a lab's own share of the machine.
pub fn own_cpu_time() -> Option<Duration> {
    cpu_time_in("/proc/self/stat")
}

/// The user and system time in a `/proc/<pid>/stat` file.
fn cpu_time_in(path: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name, in parentheses, may hold spaces: the fields that follow are counted
    // from its closing parenthesis. utime and stime are the 14th and 15th fields.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    let total = ticks(11)? + ticks(12)?;
    Some(Duration::from_millis(total * 10))
}
