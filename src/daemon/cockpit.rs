//! The cockpit page (`GET /cockpit`): static HTML, CSS and JavaScript embedded in the
//! binary (`share/cockpit/`), no build step, no third-party origin; it works offline. It
//! reads through the same routes as every client and writes only by starting a
//! consultation (`POST /api/v1/consultations`) or cancelling a job (`DELETE`).

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

/// The page.
const INDEX: &str = include_str!("../../share/cockpit/index.html");

/// The page's other files: name, content type, content.
const FILES: &[(&str, &str, &str)] = &[
    (
        "cockpit.js",
        "text/javascript; charset=utf-8",
        include_str!("../../share/cockpit/cockpit.js"),
    ),
    (
        "cockpit.css",
        "text/css; charset=utf-8",
        include_str!("../../share/cockpit/cockpit.css"),
    ),
];

/// What the page may load and run: its own files and the same origin's API only.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                      form-action 'self'; frame-ancestors 'none'";

fn with_type(content_type: &'static str, body: &'static str) -> Response {
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    response
}

/// `GET /cockpit`.
pub fn page() -> Response {
    with_type("text/html; charset=utf-8", INDEX)
}

/// `GET /cockpit/{name}`, if the page has a file of that name.
pub fn file(name: &str) -> Option<Response> {
    FILES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, content_type, body)| with_type(content_type, body))
}
