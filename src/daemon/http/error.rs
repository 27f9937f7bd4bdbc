//! A failed request as the HTTP layers answer it: the status, the JSON error body and, for
//! a 405, the methods allowed. Shared by the router and the TCP listener's guard, so
//! neither imports the other.

use crate::error::Error;
use crate::protocol::{codes, ErrorBody};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

/// A failed request: the status and the body to answer with.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body.
    pub body: ErrorBody,
    /// The methods a 405 reply lists in `Allow`.
    pub allow: Option<String>,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                error: code.to_string(),
                message: message.into(),
                reason: None,
            },
            allow: None,
        }
    }

    /// 400 with `code`.
    pub fn bad_request(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 500 `internal`.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, codes::INTERNAL, message)
    }

    /// 405 listing the methods `allow`ed.
    pub fn method_not_allowed(method: &str, path: &str, allow: String) -> ApiError {
        let mut e = ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            codes::METHOD_NOT_ALLOWED,
            format!("`{method} {path}` is not a route; `{path}` accepts {allow}"),
        );
        e.allow = Some(allow);
        e
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        let status =
            StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if let Some((reason, message)) = e.refusal() {
            return ApiError {
                status: StatusCode::UNPROCESSABLE_ENTITY,
                body: ErrorBody {
                    error: codes::REFUSED.to_string(),
                    message: message.to_string(),
                    reason: Some(reason.to_string()),
                },
                allow: None,
            };
        }
        ApiError::new(status, e.code(), e.message())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(code = %self.body.error, message = %self.body.message, "request failed");
        } else {
            tracing::debug!(code = %self.body.error, message = %self.body.message, "request refused");
        }
        let mut response = (self.status, Json(self.body)).into_response();
        if let Some(allow) = self.allow.and_then(|a| HeaderValue::from_str(&a).ok()) {
            response.headers_mut().insert(header::ALLOW, allow);
        }
        response
    }
}
