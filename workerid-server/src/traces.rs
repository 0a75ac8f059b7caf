//! Traces over OTLP/gRPC (the `otlp` feature, on by default; off unless
//! `otlp_endpoint` is set): the spans of the libraries and the server,
//! batched and sent to a collector with OpenTelemetry's exporter.

/// Checks an `otlp_endpoint` setting.
///
/// # Errors
/// A message naming what is wrong: not `http://host:port`, or a build
/// without the `otlp` feature.
pub fn check_endpoint(endpoint: &str) -> Result<(), String> {
    if !cfg!(feature = "otlp") {
        return Err("otlp_endpoint: this build has no `otlp` feature".into());
    }
    match endpoint.strip_prefix("http://") {
        Some(rest) if !rest.is_empty() && !rest.contains(char::is_whitespace) => Ok(()),
        _ => Err(format!(
            "otlp_endpoint must be http://host:port (OTLP over gRPC, without TLS), not {:?}",
            workerid::redact_url(endpoint)
        )),
    }
}

#[cfg(feature = "otlp")]
mod export {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};
    use opentelemetry_sdk::Resource;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    use tracing_subscriber::registry::LookupSpan;
    use tracing_subscriber::Layer;

    /// The exporter, flushed by [`Traces::shutdown`].
    pub struct Traces {
        provider: SdkTracerProvider,
    }

    impl Traces {
        /// Sends what is still batched; blocks until it is sent or fails.
        pub fn shutdown(self) {
            if let Err(e) = self.provider.shutdown() {
                tracing::warn!("traces: {e}");
            }
        }
    }

    /// A subscriber layer that exports every span to `endpoint`, and the
    /// handle that flushes it. Call it inside the runtime (the gRPC channel
    /// runs on it).
    ///
    /// # Errors
    /// When the exporter cannot be built.
    pub fn layer<S>(endpoint: &str) -> Result<(Traces, Box<dyn Layer<S> + Send + Sync>), String>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| {
                // The exporter's messages quote the endpoint as given.
                let redacted = workerid::redact_url(endpoint);
                let reason = e.to_string().replace(endpoint, &redacted);
                format!("otlp_endpoint {redacted}: {reason}")
            })?;
        let exporter = Reported {
            inner: exporter,
            failing: AtomicBool::new(false),
            endpoint: endpoint.to_string(),
        };
        let resource = Resource::builder()
            .with_service_name("workerid-server")
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("workerid-server");
        let layer = tracing_opentelemetry::layer().with_tracer(tracer).boxed();
        Ok((Traces { provider }, layer))
    }
    /// The exporter with its failures logged, which the SDK keeps to
    /// itself: one warning when the collector stops taking spans, and a
    /// line when it takes them again, however long it is down.
    #[derive(Debug)]
    struct Reported<E> {
        inner: E,
        failing: AtomicBool,
        /// As configured: taken out of the exporter's messages.
        endpoint: String,
    }

    impl<E: SpanExporter> SpanExporter for Reported<E> {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            let spans = batch.len();
            let result = self.inner.export(batch).await;
            match &result {
                Err(e) if !self.failing.swap(true, Ordering::Relaxed) => {
                    let redacted = workerid::redact_url(&self.endpoint);
                    let reason = e.to_string().replace(&self.endpoint, &redacted);
                    tracing::warn!(
                        spans,
                        "traces: the collector at {redacted} did not take them (no more is \
                         logged until it does): {reason}"
                    );
                }
                Ok(()) if self.failing.swap(false, Ordering::Relaxed) => {
                    tracing::info!("traces: the collector takes spans again");
                }
                _ => {}
            }
            result
        }

        fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
            self.inner.shutdown_with_timeout(timeout)
        }

        fn force_flush(&self) -> OTelSdkResult {
            self.inner.force_flush()
        }

        fn set_resource(&mut self, resource: &Resource) {
            self.inner.set_resource(resource);
        }
    }
}

#[cfg(feature = "otlp")]
pub use export::{layer, Traces};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_endpoint_is_shown_without_its_password() {
        for endpoint in ["https://u:hunter22@c:4317", "http://u:hunter22@c 4317"] {
            let refused = check_endpoint(endpoint).unwrap_err();
            assert!(!refused.contains("hunter22"), "{refused}");
        }
    }

    #[cfg(feature = "otlp")]
    #[tokio::test]
    async fn an_endpoint_the_exporter_refuses_is_shown_without_its_password() {
        let endpoint = "http://u:hunter22@[c:4317";
        assert_eq!(check_endpoint(endpoint), Ok(()));
        let refused = layer::<tracing_subscriber::Registry>(endpoint)
            .err()
            .expect("the exporter refuses a broken address");
        assert!(!refused.contains("hunter22"), "{refused}");
        assert!(refused.contains("otlp_endpoint http://u:***@"), "{refused}");
    }
}
