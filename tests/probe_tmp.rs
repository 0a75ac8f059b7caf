use std::time::Duration;
use workerid::OpenOptions;
use workerid_testkit::{etcd, mariadb, postgres, redis};

#[tokio::test(flavor = "multi_thread")]
async fn probe() {
    let (r, e, p, m, rplain, pplain, eauth) = tokio::task::spawn_blocking(|| {
        (redis::shared_password_server().url(), etcd::shared_endpoints()[0].clone(), postgres::shared_secure_server(), mariadb::shared_secure_server(), redis::shared_url(), postgres::shared_url(), etcd::shared_auth_endpoint())
    }).await.unwrap();
    let rport = rplain.trim_start_matches("redis://127.0.0.1:").trim_end_matches('/').to_string();
    let pport = p.port();
    let eport = e.trim_start_matches("http://127.0.0.1:").to_string();
    let urls = vec![
        r.replace("redis://", "redis://:wrong@"),
        r.clone(),
        format!("{rplain}99"),
        p.url_with_password("wrong"),
        p.url_with_password(workerid_testkit::PASSWORD).replace("/workerid", "/typo_db"),
        m.url_with_password("wrong"),
        m.url_with_password(workerid_testkit::PASSWORD).replace("/workerid", "/typo_db"),
        format!("etcd://root:wrong@{}", eauth.trim_start_matches("http://")),
        format!("etcd://{}", eauth.trim_start_matches("http://")),
        format!("redis://127.0.0.1:{pport}/"),
        format!("redis://127.0.0.1:{eport}/"),
        format!("postgres://u:p@127.0.0.1:{rport}/db"),
        format!("mysql://u:p@127.0.0.1:{rport}/db"),
        format!("etcd://127.0.0.1:{rport}"),
        format!("postgres://u:p@127.0.0.1:{eport}/db"),
        pplain.replace("postgres://", "mysql://"),
    ];
    for url in urls {
        let res = OpenOptions::new().connect_timeout(Duration::from_secs(2)).request_timeout(Duration::from_secs(2)).open(&url).await;
        match res { Ok(_) => println!("OK {url}"), Err(e) => println!("ERR {url}\n   {e:?}") }
    }
}
