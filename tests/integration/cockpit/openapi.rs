//! The OpenAPI document is generated from the protocol's types; `share/openapi.json` is
//! its checked-in copy and this test fails when they drift. Regenerate it with:
//!
//! ```sh
//! ADVISORD_BLESS=1 cargo nextest run -p advisord --test integration -E 'test(openapi)'
//! ```

use super::quiet;
use std::path::Path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checked_in_openapi_document_matches_the_types_and_the_served_one() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("share/openapi.json");
    let text = advisord::protocol::openapi::document_text();
    if std::env::var_os("ADVISORD_BLESS").is_some() {
        std::fs::write(&path, text).expect("write share/openapi.json");
    }
    let found = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        found == text,
        "`{}` does not match the protocol's types; regenerate it with `ADVISORD_BLESS=1 \
         cargo nextest run -p advisord --test integration -E 'test(openapi)'` and review the diff",
        path.display()
    );
    let doc: serde_json::Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    for route in advisord::protocol::ROUTES {
        assert!(
            doc["paths"][route.path][route.method.to_lowercase()].is_object(),
            "`{} {}` is not documented",
            route.method,
            route.path
        );
    }
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["bearer"]["scheme"], "bearer");
    assert_eq!(schemes["cookie"]["in"], "cookie");

    // The daemon serves the same document, on the socket and on TCP.
    let tcp = quiet().await;
    let served = tcp.get("/api/v1/openapi.json").await;
    assert_eq!(served.status, 200);
    assert_eq!(served.text(), text);
    let socket = tcp.daemon.call("GET", "/api/v1/openapi.json", None).await;
    assert_eq!(socket.body, text.as_bytes());
}
