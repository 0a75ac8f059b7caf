//! The parameters of a request to go-id-alloc's and Leaf's endpoints: the
//! URL's query, and an HTML form's body before it, as go-id-alloc's Go
//! server reads them (`FormValue`): its clients may POST `biz_tag=...`.

use axum::body::to_bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};

/// The largest form body read: a few parameters, never IDs' worth of data.
const MAX_FORM: usize = 16 * 1024;

/// A request's parameters as one query string: for a POST, PUT or PATCH
/// of `application/x-www-form-urlencoded`, the body's, then the URL's (the
/// first value of a name wins, so the body's); otherwise the URL's.
pub struct Params(pub Option<String>);

impl<S: Send + Sync> FromRequest<S> for Params {
    type Rejection = Response;

    async fn from_request(request: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let query = request.uri().query().map(str::to_owned);
        if !is_form(&request) {
            return Ok(Params(query));
        }
        let body = to_bytes(request.into_body(), MAX_FORM).await.map_err(|_| {
            let msg = format!("form_too_large: a form body of at most {MAX_FORM} bytes");
            (StatusCode::PAYLOAD_TOO_LARGE, msg).into_response()
        })?;
        // Go's FormValue takes any bytes: a name that is not UTF-8 is then
        // an unknown tag, answered in the endpoint's own format.
        let body = String::from_utf8_lossy(&body).into_owned();
        Ok(Params(Some(match query {
            Some(query) if !body.is_empty() => format!("{body}&{query}"),
            Some(query) => query,
            None => body,
        })))
    }
}

/// Whether `request` sends an HTML form in its body.
fn is_form(request: &Request) -> bool {
    let sends_body = matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH
    );
    let form = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|kind| {
            kind.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    sends_body && form
}
