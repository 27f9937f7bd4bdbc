//! The daemon's TCP listener for a test: an in-process daemon listening on a free
//! loopback port beside its socket, its token, and requests with chosen headers.

#![allow(dead_code)]

use super::daemon::{exchange, Daemon, Place, Tweak, BOUND};
use advisord::daemon::listen::{token_path, TcpConfig, Token};
use advisord_adapters::registry::Registry;
use bytes::Bytes;
use hyper::HeaderMap;
use std::net::SocketAddr;
use tokio::net::TcpStream;

/// A daemon with a TCP listener.
pub struct Listening {
    /// The daemon (its socket works as ever).
    pub daemon: Daemon,
    /// Where it listens on TCP.
    pub addr: SocketAddr,
}

/// A reply over TCP: status, headers, body.
#[derive(Debug)]
pub struct TcpReply {
    /// The HTTP status.
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl TcpReply {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON, the status checked.
    pub fn expect(&self, status: u16) -> serde_json::Value {
        assert_eq!(self.status, status, "body: {}", self.text());
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

impl Listening {
    /// Start a daemon on `place` with `registry`, listening on `127.0.0.1:0` too.
    pub async fn start(place: Place, registry: Registry) -> Listening {
        Listening::start_with(place, registry, Box::new(|_| {})).await
    }

    /// The same, with a further tweak of the configuration.
    pub async fn start_with(place: Place, registry: Registry, tweak: Tweak) -> Listening {
        let tcp = TcpConfig::bind("127.0.0.1:0".parse().expect("an address"), false)
            .expect("bind a loopback port");
        let addr = tcp.listener.local_addr().expect("its address");
        let daemon = Daemon::start_in(
            place,
            registry,
            Box::new(move |config| {
                config.listen = Some(tcp);
                tweak(config);
            }),
        )
        .await;
        // The token exists once the daemon answers.
        daemon.call("GET", "/api/v1/health", None).await.expect(200);
        Listening { daemon, addr }
    }

    /// The listener's token, as the user reads it from the data directory.
    pub fn token(&self) -> String {
        Token::read(&token_path(&self.daemon.place.data()))
            .expect("the daemon kept a token")
            .expose()
            .to_string()
    }

    /// The `Host` the listener calls its own.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// A request with the token as a bearer and the listener's own `Host`.
    pub async fn get(&self, path: &str) -> TcpReply {
        let auth = format!("Bearer {}", self.token());
        self.call("GET", path, &[("authorization", &auth)], None)
            .await
    }

    /// A request with the listener's own `Host` and `headers`.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> TcpReply {
        let host = self.host();
        let mut all = vec![("host", host.as_str())];
        all.extend_from_slice(headers);
        call(self.addr, method, path, &all, body).await
    }
}

/// One HTTP/1.1 request over TCP with exactly `headers` (no `Host` unless given).
pub async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> TcpReply {
    tokio::time::timeout(BOUND, async {
        let stream = TcpStream::connect(addr).await.expect("connect over TCP");
        let (status, headers, body) = exchange(stream, method, path, headers, body).await;
        TcpReply {
            status,
            headers,
            body,
        }
    })
    .await
    .unwrap_or_else(|_| panic!("`{method} {path}` got no reply over TCP within {BOUND:?}"))
}
