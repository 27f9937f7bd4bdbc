//! The daemon's connections: how long a peer may take, how many may be open, and what
//! happens when the process runs out of descriptors.
//!
//! - **Timeouts.** A request's header must arrive within [`Limits::header`] of the first
//!   byte the connection waits for; its body within [`Limits::body`] (then `408`, in
//!   `dispatch`); a connection with no request in flight is closed after
//!   [`Limits::idle`]. A header over [`MAX_HEADER_BYTES`] gets `431`.
//! - **A cap.** At most [`Limits::max_connections`] are open (by default half the
//!   descriptor limit, at most 4,096). A new connection over the cap sheds the connection
//!   idle for longest (one with no request in flight), else the oldest, so a fresh
//!   `health` is always answered however many idle peers there are.
//! - **Descriptors.** [`raise_nofile_limit`] lifts the soft limit to the hard one at start.
//!   When `accept` fails anyway (out of descriptors), the oldest idle connection is shed
//!   and `accept` retried; the failure is logged at most once per [`ERROR_LOG_EVERY`],
//!   with how many were not logged.
//! - **Peers.** A peer whose uid differs from the daemon's is dropped without a reply
//!   (and logged, as rarely).

use axum::Router;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// The longest request header accepted (larger gets `431`).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// How often at most a failing `accept` (or a refused peer) is logged.
pub const ERROR_LOG_EVERY: Duration = Duration::from_secs(10);

/// How long a request's body may take, carried to the handler in the request's
/// extensions.
#[derive(Debug, Clone, Copy)]
pub struct BodyTimeout(pub Duration);

/// The bounds of the daemon's connections.
#[derive(Debug, Clone)]
pub struct Limits {
    /// How long a request's header may take to arrive.
    pub header: Duration,
    /// How long a request's body may take to arrive.
    pub body: Duration,
    /// How long a connection with no request in flight stays open.
    pub idle: Duration,
    /// How many connections may be open at once.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            header: Duration::from_secs(10),
            body: Duration::from_secs(10),
            idle: Duration::from_secs(30),
            max_connections: connections_for(nofile_limit()),
        }
    }
}

/// The connection cap for a descriptor limit: half of it (the rest is for the journal,
/// the stores, advisors' processes and connections), between 8 and 4,096.
pub fn connections_for(nofile: u64) -> usize {
    usize::try_from(nofile / 2)
        .unwrap_or(usize::MAX)
        .clamp(8, 4096)
}

/// The soft limit on open descriptors.
pub fn nofile_limit() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft)
}

/// Raise the soft limit on open descriptors to the hard limit; the soft limit after.
pub fn raise_nofile_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::warn!(soft, hard, error = %e, "cannot raise the descriptor limit");
            }
        }
    }
    nofile_limit()
}

/// A warning logged at most once per period, saying how many were not.
struct Throttled {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttled {
    fn new(every: Duration) -> Throttled {
        Throttled {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// Whether to log now, and how many were held back since the last line.
    fn due(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < self.every)
        {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// One open connection, as the cap sees it.
struct Conn {
    opened: Instant,
    /// Milliseconds since `opened` of the last request's end (or of the opening).
    quiet_since_ms: AtomicU64,
    /// Requests in flight (a response body still being sent counts).
    busy: AtomicUsize,
    shed: CancellationToken,
}

impl Conn {
    fn idle_for(&self, now: Instant) -> Option<Duration> {
        if self.busy.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let quiet = self.opened + Duration::from_millis(self.quiet_since_ms.load(Ordering::SeqCst));
        Some(now.saturating_duration_since(quiet))
    }
}

/// The open connections.
#[derive(Default)]
struct Conns {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Conns {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn add(&self) -> (u64, Arc<Conn>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            opened: Instant::now(),
            quiet_since_ms: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
            shed: CancellationToken::new(),
        });
        self.lock().insert(id, conn.clone());
        (id, conn)
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    /// Close the connection idle for longest, else (all busy) the oldest; whether one was.
    fn shed_one(&self) -> bool {
        let now = Instant::now();
        let mut open = self.lock();
        let victim = open
            .iter()
            .filter_map(|(&id, c)| c.idle_for(now).map(|idle| (id, idle)))
            .max_by_key(|&(_, idle)| idle)
            .map(|(id, _)| id)
            .or_else(|| open.iter().min_by_key(|(_, c)| c.opened).map(|(&id, _)| id));
        match victim.and_then(|id| open.remove(&id)) {
            Some(conn) => {
                conn.shed.cancel();
                true
            }
            None => false,
        }
    }

    /// Close every connection idle for `idle` or longer.
    fn close_idle(&self, idle: Duration) {
        let now = Instant::now();
        self.lock().retain(|_, c| {
            let stale = c.idle_for(now).is_some_and(|d| d >= idle);
            if stale {
                c.shed.cancel();
            }
            !stale
        });
    }
}

/// Counts a request in flight until its response body is sent (or dropped).
struct Busy(Arc<Conn>);

impl Busy {
    fn new(conn: Arc<Conn>) -> Busy {
        conn.busy.fetch_add(1, Ordering::SeqCst);
        Busy(conn)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let since = u64::try_from(self.0.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.quiet_since_ms.store(since, Ordering::SeqCst);
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request counted as in flight until it ends.
struct Tracked {
    inner: axum::body::Body,
    _busy: Busy,
}

impl HttpBody for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Where connections come from: the unix socket (peers of one uid only) or the TCP
/// listener (whose requests its own layer authenticates: `super::listen`).
pub enum Listener {
    /// The unix socket, and the only uid whose peers are served.
    Unix {
        /// The bound socket.
        listener: UnixListener,
        /// The daemon's uid.
        uid: u32,
    },
    /// The TCP listener (`advisord --listen`).
    Tcp(TcpListener),
}

/// An accepted connection of either kind.
enum Accepted {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// A connection as a request sees it, in its extensions: closing it drops the peer at
/// once (a server-sent-events subscriber that fell behind).
#[derive(Debug, Clone)]
pub struct ConnHandle(pub CancellationToken);

/// Serve `app` on `listener` until `stop` is cancelled, under `limits` (on the unix
/// socket, to peers of its uid only). Connections open at `stop` finish their request in
/// flight, then close.
pub async fn serve(
    listener: Listener,
    app: Router,
    limits: Limits,
    stop: CancellationToken,
) -> io::Result<()> {
    let conns = Arc::new(Conns::default());
    let tasks = TaskTracker::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header)
        .max_buf_size(MAX_HEADER_BYTES.max(8192))
        .keep_alive(true);
    let builder = Arc::new(builder);
    let reaper = {
        let (conns, stop, idle) = (conns.clone(), stop.clone(), limits.idle);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval((idle / 4).max(Duration::from_millis(50)));
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = tick.tick() => conns.close_idle(idle),
                }
            }
        })
    };
    let mut accept_errors = Throttled::new(ERROR_LOG_EVERY);
    let mut refused = Throttled::new(ERROR_LOG_EVERY);
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = accept(&listener) => accepted,
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                if let Some(suppressed) = accept_errors.due() {
                    tracing::warn!(error = %e, not_logged_since = suppressed, open = conns.len(), "accept failed; shedding the oldest idle connection");
                }
                // Out of descriptors, most likely: free one and retry at once.
                if !conns.shed_one() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                } else {
                    tokio::task::yield_now().await;
                }
                continue;
            }
        };
        let peer = match (&stream, &listener) {
            (Accepted::Unix(stream), Listener::Unix { uid, .. }) => {
                Some((stream.peer_cred(), *uid))
            }
            _ => None, // TCP: authenticated per request by the listener's layer
        };
        match peer {
            None => {}
            Some((Ok(cred), uid)) if cred.uid() == uid => {}
            Some((other, _)) => {
                if let Some(suppressed) = refused.due() {
                    match other {
                        Ok(cred) => tracing::warn!(
                            peer_uid = cred.uid(),
                            peer_pid = cred.pid(),
                            not_logged_since = suppressed,
                            "refused a connection from another uid"
                        ),
                        Err(e) => {
                            tracing::warn!(error = %e, not_logged_since = suppressed, "refused a connection whose peer is unknown")
                        }
                    }
                }
                continue;
            }
        }
        while conns.len() >= limits.max_connections && conns.shed_one() {}
        let (id, conn) = conns.add();
        let (app, conns, builder, stop) =
            (app.clone(), conns.clone(), builder.clone(), stop.clone());
        let body_timeout = limits.body;
        tasks.spawn(async move {
            match stream {
                Accepted::Unix(stream) => {
                    serve_connection(stream, app, conn.clone(), builder, body_timeout, stop).await
                }
                Accepted::Tcp(stream) => {
                    serve_connection(stream, app, conn.clone(), builder, body_timeout, stop).await
                }
            }
            conns.remove(id);
        });
    }
    reaper.abort();
    tasks.close();
    tasks.wait().await;
    Ok(())
}

/// The next connection of `listener`.
async fn accept(listener: &Listener) -> io::Result<Accepted> {
    match listener {
        Listener::Unix { listener, .. } => listener.accept().await.map(|(s, _)| Accepted::Unix(s)),
        Listener::Tcp(listener) => {
            let (stream, _) = listener.accept().await?;
            // Small request/response exchanges and event streams: send at once.
            let _ = stream.set_nodelay(true);
            Ok(Accepted::Tcp(stream))
        }
    }
}

/// Serve one connection's requests until it closes, is shed, or the daemon stops.
async fn serve_connection<S>(
    stream: S,
    app: Router,
    conn: Arc<Conn>,
    builder: Arc<hyper::server::conn::http1::Builder>,
    body_timeout: Duration,
    stop: CancellationToken,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = tower::service_fn({
        let conn = conn.clone();
        move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(BodyTimeout(body_timeout));
            request
                .extensions_mut()
                .insert(ConnHandle(conn.shed.clone()));
            let busy = Busy::new(conn.clone());
            let app = app.clone();
            async move {
                let response = app
                    .oneshot(request.map(axum::body::Body::new))
                    .await
                    .unwrap_or_else(|never: Infallible| match never {});
                Ok::<_, Infallible>(
                    response.map(|inner| axum::body::Body::new(Tracked { inner, _busy: busy })),
                )
            }
        }
    });
    let connection =
        builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        () = conn.shed.cancelled() => {} // dropped: closed at once
        () = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.as_mut().await;
        }
    }
}
