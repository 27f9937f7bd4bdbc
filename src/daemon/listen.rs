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

use crate::daemon::http::error::ApiError;
pub use crate::protocol::token::{token_path, Token, TOKEN_FILE};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cookie::{Cookie, SameSite};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tower_http::set_header::SetResponseHeaderLayer;

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
    fn carried(&self, headers: &HeaderMap) -> Option<String> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if let Some(bearer) = bearer {
            return Some(bearer.to_string());
        }
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(Cookie::split_parse)
            .filter_map(Result::ok)
            .find(|cookie| cookie.name() == COOKIE)
            .map(|cookie| cookie.value().to_string())
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
        Some(given) if guard.token.matches(&given) => {
            let mut request = request;
            // What a token holder may name is narrower than what the socket's peer may.
            request.extensions_mut().insert(OverTcp);
            next.run(request).await
        }
        _ => unauthorized(),
    }
}

/// The `token` query parameter, if any.
fn query_token(uri: &axum::http::Uri) -> Option<String> {
    let query = uri.query()?;
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
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
    let cookie = Cookie::build((COOKIE, token.expose()))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/")
        .build()
        .to_string();
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    if let (Ok(location), Ok(cookie)) = (
        HeaderValue::from_str(&location),
        HeaderValue::from_str(&cookie),
    ) {
        headers.insert(header::LOCATION, location);
        headers.insert(header::SET_COOKIE, cookie);
    }
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
    response
}

/// The router as the TCP listener serves it: [`authorize`] in front, and on every reply
/// (a refusal included) the headers that keep it from being framed, sniffed, referred
/// elsewhere or cached.
pub fn guarded(app: axum::Router, guard: Guard) -> axum::Router {
    let header =
        |name, value| SetResponseHeaderLayer::overriding(name, HeaderValue::from_static(value));
    app.layer(axum::middleware::from_fn_with_state(
        Arc::new(guard),
        authorize,
    ))
    .layer(header(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
    .layer(header(header::X_FRAME_OPTIONS, "DENY"))
    .layer(header(header::REFERRER_POLICY, "no-referrer"))
    .layer(header(header::CACHE_CONTROL, "no-store"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(addr: &str) -> Guard {
        Guard::new(
            Token::parse(&"ab".repeat(32)).unwrap(),
            addr.parse().unwrap(),
        )
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
    fn only_loopback_without_the_flag() {
        assert!(check_address("127.0.0.1:1".parse().unwrap(), false).is_ok());
        assert!(check_address("[::1]:1".parse().unwrap(), false).is_ok());
        let refused = check_address("0.0.0.0:1".parse().unwrap(), false).unwrap_err();
        assert!(refused.contains("--listen-public"), "{refused}");
        assert!(check_address("0.0.0.0:1".parse().unwrap(), true).is_ok());
    }

    #[test]
    fn the_trade_keeps_everything_but_the_token() {
        let token = Token::parse(&"ab".repeat(32)).unwrap();
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
