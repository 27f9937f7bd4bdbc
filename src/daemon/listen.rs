//! The TCP listener (`advisord --listen ADDR:PORT`): the same router as the unix socket,
//! behind one layer that authenticates every request, as the peer check guards the socket.
//!
//! - **Where.** A loopback address unless `--listen-public` says otherwise
//!   ([`check_address`]).
//! - **A token.** Generated once (32 random bytes, hex), kept in the data directory as
//!   [`TOKEN_FILE`] with mode `0600`, and never logged ([`Token`]'s `Debug` hides it). Every
//!   request carries it as `Authorization: Bearer TOKEN` or the cookie [`COOKIE`]; `GET
//!   /cockpit?token=TOKEN` trades it for that cookie (`HttpOnly; SameSite=Strict`) and
//!   redirects to the same page without it. No token, or a wrong one: `401`, and nothing
//!   else is said.
//! - **DNS rebinding.** A request whose `Host` is not the listener's own (its address, or
//!   `localhost` on loopback; on an unspecified address any IP literal, since a rebinding
//!   page always names a domain), or whose `Origin` is not `http://` that host, is refused
//!   with `403` before anything else. No CORS header is ever sent, so no other origin can
//!   read a reply.

use crate::daemon::http::ApiError;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::fmt;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The token's file in the data directory (mode `0600`).
pub const TOKEN_FILE: &str = "cockpit.token";

/// The cookie the page's token is kept in.
pub const COOKIE: &str = "advisord_token";

/// The page that trades a `?token=` for the cookie.
pub const COCKPIT_PATH: &str = "/cockpit";

/// The TCP listener a daemon serves beside its socket.
pub struct TcpConfig {
    /// The bound listener (non-blocking).
    pub listener: std::net::TcpListener,
}

impl TcpConfig {
    /// Bind `addr`; a non-loopback one only when `public` (`--listen-public`).
    pub fn bind(addr: SocketAddr, public: bool) -> Result<TcpConfig, String> {
        check_address(addr, public)?;
        let listener = std::net::TcpListener::bind(addr).map_err(|e| {
            format!("cannot listen on `{addr}`: {e}; pick a free port (or `127.0.0.1:0`)")
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cannot use the listener on `{addr}`: {e}"))?;
        Ok(TcpConfig { listener })
    }
}

/// Whether the daemon may listen on `addr`: loopback always, anything else only when
/// `public` was asked for.
pub fn check_address(addr: SocketAddr, public: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || public {
        return Ok(());
    }
    Err(format!(
        "`{addr}` is not a loopback address: anyone who can reach it could try the token; \
         listen on `127.0.0.1:{}`, or pass `--listen-public` as well to mean it",
        addr.port()
    ))
}

/// The listener's secret. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// The token kept in `data_dir`, generated (and saved `0600`) the first time.
    pub fn load_or_create(data_dir: &Path) -> io::Result<Token> {
        let path = token_path(data_dir);
        match std::fs::read_to_string(&path) {
            Ok(text) if is_token(text.trim()) => {
                // Ours, in our private directory: keep it private whatever happened to it.
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
                return Ok(Token(text.trim().to_string()));
            }
            Ok(_) => std::fs::remove_file(&path)?, // not a token: made again
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        file.write_all(token.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        Ok(Token(token))
    }

    /// The token read from `path` (the client side: `advisor-consult cockpit`).
    pub fn read(path: &Path) -> io::Result<Token> {
        let text = std::fs::read_to_string(path)?;
        Token::parse(&text).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "the file does not hold a token")
        })
    }

    /// A token written as text (64 hex digits, surrounding whitespace ignored).
    pub fn parse(text: &str) -> Option<Token> {
        let text = text.trim();
        is_token(text).then(|| Token(text.to_string()))
    }

    /// The secret itself, for the URL the user opens. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this token (in time independent of where they differ).
    fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

fn is_token(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Where the token of a daemon using `data_dir` lives.
pub fn token_path(data_dir: &Path) -> PathBuf {
    data_dir.join(TOKEN_FILE)
}

/// The mark of a request that came through the TCP listener (set by [`authorize`]): the
/// HTTP mapping then lets it name only what the daemon already trusts
/// (`crate::daemon::http::reach`).
#[derive(Debug, Clone, Copy)]
pub struct OverTcp;

/// What the layer checks every TCP request against.
#[derive(Debug)]
pub struct Guard {
    token: Token,
    addr: SocketAddr,
}

impl Guard {
    /// The guard of a listener bound to `addr` with `token`.
    pub fn new(token: Token, addr: SocketAddr) -> Guard {
        Guard { token, addr }
    }

    /// Whether `host` (a `Host` header's value) names this listener.
    fn host_ok(&self, host: &str) -> bool {
        let Ok(authority) = host.parse::<axum::http::uri::Authority>() else {
            return false;
        };
        // A browser leaves out the default port.
        if authority.port_u16().unwrap_or(80) != self.addr.port() {
            return false;
        }
        let name = authority.host();
        let name = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(name);
        match name.parse::<IpAddr>() {
            Ok(ip) => ip == self.addr.ip() || self.addr.ip().is_unspecified(),
            Err(_) => name.eq_ignore_ascii_case("localhost") && self.addr.ip().is_loopback(),
        }
    }

    /// Why the request's `Host` or `Origin` is refused, if it is.
    fn foreign(&self, headers: &HeaderMap) -> Option<&'static str> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let Some(host) = host.filter(|h| self.host_ok(h)) else {
            return Some("the `Host` header does not name this listener");
        };
        if let Some(origin) = headers.get(header::ORIGIN) {
            let own = format!("http://{host}");
            if origin.to_str().ok() != Some(own.as_str()) {
                return Some("the `Origin` header is not this listener's own");
            }
        }
        None
    }

    /// The token the request carries (bearer first, then the cookie).
    fn carried<'r>(&self, headers: &'r HeaderMap) -> Option<&'r str> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        bearer.or_else(|| {
            headers
                .get_all(header::COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(';'))
                .filter_map(|pair| pair.trim().split_once('='))
                .find(|(name, _)| *name == COOKIE)
                .map(|(_, value)| value)
        })
    }
}

/// The layer in front of the router on the TCP listener (see the module's comment).
pub async fn authorize(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    if let Some(why) = guard.foreign(request.headers()) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            crate::protocol::codes::FORBIDDEN,
            format!("{why}; open the cockpit at the address `advisor-consult cockpit` prints"),
        )
        .into_response();
    }
    let uri = request.uri().clone();
    if uri.path() == COCKPIT_PATH {
        if let Some(given) = query_token(&uri) {
            if !guard.token.matches(&given) {
                return unauthorized();
            }
            return trade_for_cookie(&guard.token, &uri);
        }
    }
    match guard.carried(request.headers()) {
        Some(given) if guard.token.matches(given) => {
            let mut request = request;
            // What a token holder may name is narrower than what the socket's peer may.
            request.extensions_mut().insert(OverTcp);
            let mut response = next.run(request).await;
            harden(response.headers_mut());
            response
        }
        _ => unauthorized(),
    }
}

/// The `token` query parameter, if any.
fn query_token(uri: &axum::http::Uri) -> Option<String> {
    let query = uri.query()?;
    form_pairs(query)
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
}

/// The pairs of a query string, decoded.
fn form_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        Some((decode(k)?, decode(v)?))
    })
}

/// `%XX` and `+` decoded (`None` when malformed).
fn decode(text: &str) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = (bytes.next()? as char).to_digit(16)?;
                let lo = (bytes.next()? as char).to_digit(16)?;
                out.push(u8::try_from(hi * 16 + lo).ok()?);
            }
            other => out.push(other),
        }
    }
    String::from_utf8(out).ok()
}

/// `303` to the page without the token, setting the cookie.
fn trade_for_cookie(token: &Token, uri: &axum::http::Uri) -> Response {
    let rest: Vec<&str> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty() && !pair.starts_with("token=") && *pair != "token")
        .collect();
    let location = if rest.is_empty() {
        COCKPIT_PATH.to_string()
    } else {
        format!("{COCKPIT_PATH}?{}", rest.join("&"))
    };
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
        token.expose()
    );
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    if let (Ok(location), Ok(cookie)) = (
        HeaderValue::from_str(&location),
        HeaderValue::from_str(&cookie),
    ) {
        headers.insert(header::LOCATION, location);
        headers.insert(header::SET_COOKIE, cookie);
    }
    harden(headers);
    response
}

/// `401`, saying only what to send.
fn unauthorized() -> Response {
    let mut response = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "this listener needs its token: open the URL `advisor-consult cockpit` prints, or \
         send `Authorization: Bearer TOKEN` (the token is in the daemon's data directory)",
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    harden(response.headers_mut());
    response
}

/// Headers every TCP reply carries: nothing is framed, sniffed or referred elsewhere.
fn harden(headers: &mut HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(addr: &str) -> Guard {
        Guard::new(Token("ab".repeat(32)), addr.parse().unwrap())
    }

    #[test]
    fn hosts_are_the_listeners_own() {
        let g = guard("127.0.0.1:7433");
        for (host, ok) in [
            ("127.0.0.1:7433", true),
            ("localhost:7433", true),
            ("LOCALHOST:7433", true),
            ("127.0.0.1:7434", false),
            ("127.0.0.1", false),
            ("evil.example:7433", false),
            ("127.0.0.2:7433", false),
            ("", false),
        ] {
            assert_eq!(g.host_ok(host), ok, "{host}");
        }
        let g = guard("[::1]:80");
        assert!(g.host_ok("[::1]:80"));
        assert!(g.host_ok("localhost:80"));
        let g = guard("0.0.0.0:80");
        assert!(g.host_ok("192.168.1.5:80"));
        assert!(g.host_ok("192.168.1.5"), "port 80 is implied");
        assert!(
            !g.host_ok("localhost:80"),
            "not loopback: names are refused"
        );
        assert!(!g.host_ok("rebind.example:80"));
    }

    #[test]
    fn tokens_compare_whole_and_never_show() {
        let token = Token("ab".repeat(32));
        assert!(token.matches(&"ab".repeat(32)));
        assert!(!token.matches(&"ab".repeat(31)));
        assert!(!token.matches(&format!("{}ac", "ab".repeat(31))));
        assert_eq!(format!("{token:?}"), "Token(…)");
    }

    #[test]
    fn only_loopback_without_the_flag() {
        assert!(check_address("127.0.0.1:1".parse().unwrap(), false).is_ok());
        assert!(check_address("[::1]:1".parse().unwrap(), false).is_ok());
        let refused = check_address("0.0.0.0:1".parse().unwrap(), false).unwrap_err();
        assert!(refused.contains("--listen-public"), "{refused}");
        assert!(check_address("0.0.0.0:1".parse().unwrap(), true).is_ok());
    }

    #[test]
    fn a_token_is_made_once_and_kept_private() {
        let dir = tempfile::tempdir().unwrap();
        let first = Token::load_or_create(dir.path()).unwrap();
        let again = Token::load_or_create(dir.path()).unwrap();
        assert_eq!(first, again);
        let mode = std::fs::metadata(token_path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Token::read(&token_path(dir.path())).unwrap(), first);
    }

    #[test]
    fn the_trade_keeps_everything_but_the_token() {
        let token = Token("ab".repeat(32));
        let uri: axum::http::Uri = format!("/cockpit?root=%2Fr&token={}&task=t", "ab".repeat(32))
            .parse()
            .unwrap();
        assert_eq!(query_token(&uri).as_deref(), Some("ab".repeat(32).as_str()));
        let response = trade_for_cookie(&token, &uri);
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        assert_eq!(
            response.headers()[header::LOCATION],
            "/cockpit?root=%2Fr&task=t"
        );
        let cookie = response.headers()[header::SET_COOKIE].to_str().unwrap();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    }
}
