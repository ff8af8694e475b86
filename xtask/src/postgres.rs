//! A private PostgreSQL cluster (Debian's `postgresql` package) for the store's tests (D2),
//! the instance benches and `cargo xtask cluster`.

use crate::{is_root, run};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::Command;

/// A private PostgreSQL cluster for the test run (D2: the store's tests run on SQLite and
/// Postgres). Found through `PG_BIN` or `/usr/lib/postgresql/<version>/bin` (Debian's
/// `postgresql` package); run as the `postgres` user when this process is root, since
/// PostgreSQL refuses to run as root. Stopped when dropped.
pub(crate) struct Postgres {
    bin: PathBuf,
    dir: PathBuf,
    as_user: Option<&'static str>,
    pub(crate) url: String,
}

impl Postgres {
    fn command(&self, tool: &str) -> Command {
        match self.as_user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(self.bin.join(tool));
                c
            }
            None => Command::new(self.bin.join(tool)),
        }
    }

    pub(crate) fn start() -> Result<Self> {
        let bin = match std::env::var_os("PG_BIN") {
            Some(b) => PathBuf::from(b),
            None => {
                let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
                    .map(|d| {
                        d.filter_map(|e| e.ok())
                            .map(|e| e.path().join("bin"))
                            .filter(|p| p.join("initdb").exists())
                            .collect()
                    })
                    .unwrap_or_default();
                found.sort();
                found.pop().context(
                    "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): `apt-get install postgresql`, \
                     set PG_BIN, or set TINY_HARNESS_TEST_POSTGRES to a database URL",
                )?
            }
        };
        let root = is_root();
        let as_user = root.then_some("postgres");
        let dir = std::env::temp_dir().join(format!("tiny-harness-pg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        if root {
            run({
                let mut c = Command::new("chown");
                c.args(["-R", "postgres:postgres"]).arg(&dir);
                c
            })?;
        }
        let port = tiny_harness::temporal_dev::free_port();
        let pg = Self { bin, dir: dir.clone(), as_user, url: format!("postgres://postgres@127.0.0.1:{port}/postgres") };
        run({
            let mut c = pg.command("initdb");
            c.args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "-D"]).arg(dir.join("data"));
            c.stdout(std::process::Stdio::null());
            c
        })?;
        run({
            let mut c = pg.command("pg_ctl");
            c.arg("-D").arg(dir.join("data")).args(["-w", "-l"]).arg(dir.join("pg.log")).args([
                "-o",
                &format!("-p {port} -h 127.0.0.1 -k {} -c fsync=off -c max_connections=300", dir.display()),
                "start",
            ]);
            c
        })?;
        Ok(pg)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.command("pg_ctl").arg("-D").arg(self.dir.join("data")).args(["-m", "fast", "stop"]).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
