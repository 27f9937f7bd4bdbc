//! Whether a local HTTP advisor's server is there: one short, bounded request to its
//! endpoint, remembered briefly. Availability is judged on the answer (a fact the edge
//! hands to the pure availability function), so an advisor whose executable is on `PATH`
//! but whose server is not running is `unavailable` before a consultation fails on it.
//!
//! Any HTTP response counts as an answer (a 404 is a server that is up); a refused
//! connection, no response within the bound, or bytes that are not HTTP do not. The probe
//! is synchronous, for the context resolution that runs on a blocking thread.

use reqwest::Url;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The longest a probe may take, connection and answer together.
pub const PROBE_BOUND: Duration = Duration::from_millis(300);

/// How long a probe's result is reused before the endpoint is asked again.
pub const PROBE_TTL: Duration = Duration::from_secs(5);

/// A probe's result and when it was taken.
type Remembered = (Instant, Result<(), String>);

/// `Ok(())` when `endpoint` answers within [`PROBE_BOUND`], else why not; a result less
/// than [`PROBE_TTL`] old is reused.
pub fn endpoint_answers(endpoint: &str) -> Result<(), String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Remembered>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Ok(cache) = cache.lock() {
        if let Some((at, result)) = cache.get(endpoint) {
            if at.elapsed() < PROBE_TTL {
                return result.clone();
            }
        }
    }
    let result = probe(endpoint, PROBE_BOUND);
    if let Ok(mut cache) = cache.lock() {
        // Endpoints come from catalogues; drop stale ones so the map stays small.
        cache.retain(|_, (at, _)| at.elapsed() < PROBE_TTL);
        cache.insert(endpoint.to_string(), (Instant::now(), result.clone()));
    }
    result
}

/// Ask `endpoint` once, within `bound`, without the cache.
pub fn probe(endpoint: &str, bound: Duration) -> Result<(), String> {
    let started = Instant::now();
    let url = Url::parse(endpoint).map_err(|e| format!("`{endpoint}` is not a URL: {e}"))?;
    let host = url
        .host_str()
        .ok_or_else(|| format!("`{endpoint}` names no host"))?
        .to_string();
    let port = url
        .port_or_known_default()
        .ok_or_else(|| format!("`{endpoint}` names no port"))?;
    let address = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("`{host}` does not resolve: {e}"))?
        .next()
        .ok_or_else(|| format!("`{host}` does not resolve"))?;
    let left = |started: Instant| {
        bound
            .checked_sub(started.elapsed())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("no answer within {} ms", bound.as_millis()))
    };
    let mut stream =
        TcpStream::connect_timeout(&address, left(started)?).map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                format!("no answer within {} ms", bound.as_millis())
            }
            _ => e.to_string(),
        })?;
    if url.scheme() == "https" {
        // A TLS server that accepts the connection is there; its answer needs TLS.
        return Ok(());
    }
    let path = url.path();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: advisord-probe\r\n\
         Connection: close\r\n\r\n"
    );
    stream
        .set_write_timeout(Some(left(started)?))
        .and_then(|()| stream.write_all(request.as_bytes()))
        .map_err(|e| format!("the request could not be sent: {e}"))?;
    let mut head = [0u8; 5];
    let mut read = 0;
    while read < head.len() {
        stream
            .set_read_timeout(Some(left(started)?))
            .map_err(|e| e.to_string())?;
        match stream.read(&mut head[read..]) {
            Ok(0) => return Err("the connection closed without an answer".to_string()),
            Ok(n) => read += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!("no answer within {} ms", bound.as_millis()))
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    if &head != b"HTTP/" {
        return Err("what answers there does not speak HTTP".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_server_that_answers_http_is_there() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut buf = [0u8; 512];
            let _ = socket.read(&mut buf);
            socket
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .unwrap();
        });
        let endpoint = format!("http://127.0.0.1:{port}/v1");
        assert_eq!(probe(&endpoint, PROBE_BOUND), Ok(()));
        server.join().unwrap();
    }

    #[test]
    fn a_closed_port_a_silent_server_and_a_stranger_are_not() {
        let closed = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let why = probe(&format!("http://127.0.0.1:{port}"), PROBE_BOUND).unwrap_err();
        assert_eq!(why, "connection refused");

        // Accepts, never answers: the bound holds.
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let started = Instant::now();
        let why = probe(&format!("http://127.0.0.1:{port}"), PROBE_BOUND).unwrap_err();
        assert!(why.contains("no answer within 300 ms"), "{why}");
        assert!(started.elapsed() < PROBE_BOUND + Duration::from_millis(200));
        drop(silent);

        let stranger = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = stranger.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut socket, _) = stranger.accept().unwrap();
            socket.write_all(b"SSH-2.0-OpenSSH\r\n").unwrap();
        });
        let why = probe(&format!("http://127.0.0.1:{port}"), PROBE_BOUND).unwrap_err();
        assert!(why.contains("does not speak HTTP"), "{why}");
        server.join().unwrap();

        assert!(probe("not a url", PROBE_BOUND)
            .unwrap_err()
            .contains("not a URL"));
    }

    #[test]
    fn a_result_is_reused_for_a_while() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut buf = [0u8; 512];
            let _ = socket.read(&mut buf);
            socket.write_all(b"HTTP/1.1 200 OK\r\n\r\n").unwrap();
            // The listener closes here: a second probe would be refused.
        });
        let endpoint = format!("http://127.0.0.1:{port}");
        assert_eq!(endpoint_answers(&endpoint), Ok(()));
        server.join().unwrap();
        assert_eq!(endpoint_answers(&endpoint), Ok(()), "cached");
        assert!(probe(&endpoint, PROBE_BOUND).is_err(), "the server is gone");
    }
}
