use super::*;
use crate::auth::BearerTokens;

#[test]
fn debug_hides_the_password_and_the_token() {
    let config = Config {
        store: "postgres://ops:s3cret@db/ids".into(),
        auth_token: BearerTokens::new(vec!["t0ken".into(), "older-t0ken".into()]),
        otlp_endpoint: Some("http://u:hunter22@c:4317".into()),
        give_back_key: Some("fleet-secret-0123456789".into()),
        ..Config::default()
    };
    let shown = format!("{config:?}");
    for secret in ["s3cret", "t0ken", "hunter22", "fleet-secret"] {
        assert!(!shown.contains(secret), "{secret}: {shown}");
    }
    assert!(shown.contains("http://u:***@c:4317"), "{shown}");
}

/// The documented example sets every setting and passes validation.
#[test]
fn the_example_config_loads() {
    let text = include_str!("../../../docs/server.example.toml");
    let config: Config = toml::from_str(text).expect("the example parses");
    config.validate().expect("the example is valid");
    assert_eq!(config.tags.len(), 2);
    assert_eq!(
        config.snowflake.renew_timeout(),
        Duration::from_millis(1666)
    );
    assert!(config.auth_token.is_required() && config.workers == Some(4));
}

#[test]
fn volatile_segments_need_the_setting() {
    let mut config = Config {
        store: "redis://127.0.0.1:6379".into(),
        ..Config::default()
    };
    use workerid::StoreKind;
    assert_eq!(
        config.check_segments_durable(StoreKind::Redis, true),
        Ok(true)
    );
    let refused = config
        .check_segments_durable(StoreKind::Redis, false)
        .unwrap_err();
    assert!(refused.contains("durable=true"), "{refused}");
    assert!(
        refused.contains("allow_volatile_segments = true"),
        "{refused}"
    );
    assert!(
        refused.contains("WORKERID_ALLOW_VOLATILE_SEGMENTS"),
        "{refused}"
    );
    config.store = "sqlite::memory:".into();
    let refused = config
        .check_segments_durable(StoreKind::Sqlite, false)
        .unwrap_err();
    assert!(refused.contains("SQLite file"), "{refused}");
    config.allow_volatile_segments = true;
    assert_eq!(
        config.check_segments_durable(StoreKind::Sqlite, false),
        Ok(false)
    );
}

#[test]
fn the_ttl_is_one_second_to_one_day() {
    let with_ttl = |ttl_secs| Config {
        snowflake: SnowflakeConfig {
            ttl_secs,
            ..SnowflakeConfig::default()
        },
        ..Config::default()
    };
    for ttl_secs in [1, 10, MAX_TTL_SECS] {
        assert_eq!(with_ttl(ttl_secs).validate(), Ok(()), "{ttl_secs}");
    }
    for ttl_secs in [0, MAX_TTL_SECS + 1, u64::MAX] {
        assert_eq!(
            with_ttl(ttl_secs).validate(),
            Err(ConfigError::TtlOutOfRange { ttl_secs }),
            "{ttl_secs}"
        );
    }
}

#[test]
fn an_auth_token_must_be_sendable_and_is_never_shown() {
    let with_token = |token: &str| Config {
        auth_token: BearerTokens::new(vec!["a-good-one".into(), token.into()]),
        ..Config::default()
    };
    let every_visible: String = ('!'..='~').collect();
    for good in ["s3cret", "Az09-._~+/=", every_visible.as_str()] {
        assert_eq!(with_token(good).validate(), Ok(()), "{good:?}");
    }
    assert_eq!(
        with_token("").validate(),
        Err(ConfigError::AuthTokenEmpty {
            setting: "auth_token"
        })
    );
    for bad in [
        "s3cret\u{0}",
        "s3cret\u{1}",
        "s3cret\n",
        "s3cret\t",
        "s3cret\u{7f}",
        "s3cret ",
        " s3cret",
        "s3 cret",
        "s3cr\u{e9}t",
        "s3cr\u{85}t",
    ] {
        let refused = with_token(bad).validate();
        assert_eq!(
            refused,
            Err(ConfigError::AuthTokenNotSendable {
                setting: "auth_token"
            }),
            "{bad:?}"
        );
        let shown = refused.unwrap_err().to_string();
        assert!(
            shown.contains("auth_token") && !shown.contains("s3"),
            "{shown}"
        );
    }
}

#[test]
fn durations_of_zero_are_refused_by_name() {
    type Set = fn(&mut Config);
    let zero: [(&str, Set); 4] = [
        ("grpc_keepalive_ms", |c| c.grpc_keepalive_ms = 0),
        ("idle_timeout_ms", |c| c.idle_timeout_ms = 0),
        ("store_timeout_ms", |c| c.store_timeout_ms = 0),
        ("tags_refresh_ms", |c| c.tags_refresh_ms = 0),
    ];
    for (name, set) in zero {
        let mut config = Config::default();
        set(&mut config);
        let refused = config.validate().unwrap_err().to_string();
        assert!(refused.starts_with(name), "{name}: {refused}");
    }
}

#[test]
fn a_give_back_key_is_at_least_16_bytes() {
    let with_key = |key: &str| Config {
        give_back_key: Some(key.into()),
        ..Config::default()
    };
    assert_eq!(with_key("0123456789abcdef").validate(), Ok(()));
    let refused = with_key("short-secret").validate().unwrap_err().to_string();
    assert!(
        refused.contains("give_back_key") && !refused.contains("short"),
        "{refused}"
    );
}

#[test]
fn a_tag_whose_first_range_would_not_fit_is_refused() {
    use workerid::segment::MAX_SEGMENT_ID;
    let with_tag = |first_id: u64, step: u64| Config {
        tags: vec![TagConfig {
            name: "edge".into(),
            first_id,
            step,
        }],
        ..Config::default()
    };
    assert_eq!(with_tag(MAX_SEGMENT_ID - 1000, 1000).validate(), Ok(()));
    assert_eq!(with_tag(MAX_SEGMENT_ID - 1, 1).validate(), Ok(()));
    for (first_id, step) in [(MAX_SEGMENT_ID - 999, 1000), (MAX_SEGMENT_ID, 1)] {
        let refused = with_tag(first_id, step).validate().unwrap_err().to_string();
        assert!(refused.contains("would not fit"), "{refused}");
    }
}
