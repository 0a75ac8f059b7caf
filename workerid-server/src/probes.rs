//! The probes: `/livez` and `/readyz`, which need no token.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::routes::App;

/// `GET /livez`: the process is up and serving HTTP.
pub async fn livez() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: 200 when, with snowflake enabled, the worker can issue
/// IDs; 503 and the reasons otherwise. `?exclude=snowflake` (Kubernetes'
/// own probes' form) leaves the worker out, for a balancer in front of
/// segment requests only; any other `exclude` is a 400.
pub async fn readyz(State(app): State<Arc<App>>, uri: axum::http::Uri) -> Response {
    let mut exclude_snowflake = false;
    for (key, value) in form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
        match (key.as_ref(), value.as_ref()) {
            ("exclude", "snowflake") => exclude_snowflake = true,
            ("exclude", _) => {
                let body = "exclude names a check: snowflake\n";
                return (StatusCode::BAD_REQUEST, body).into_response();
            }
            _ => {}
        }
    }
    let not_ready = if exclude_snowflake {
        Vec::new()
    } else {
        app.not_ready()
    };
    if not_ready.is_empty() {
        "ready\n".into_response()
    } else {
        let body = format!("not ready: {}\n", not_ready.join("; "));
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}
