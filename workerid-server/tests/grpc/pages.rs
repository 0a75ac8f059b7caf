//! The List calls answer a page at a time: every entry once, in order,
//! whatever changes between pages; a token from elsewhere is refused; and
//! workerid-client reads every page.

use tonic::Code;
use workerid::segment::{SegmentStore, Tag};
use workerid::{LeaseStore, Namespace, Token};
use workerid_client::ServerStore;
use workerid_proto::v1::leases_client::LeasesClient;
use workerid_proto::v1::segments_client::SegmentsClient;
use workerid_proto::v1::{
    AcquireRequest, CreateTagRequest, ListNamespacesRequest, ListRequest, ListTagsRequest,
    ReleaseRequest,
};

use super::{channel, refused, start};

/// Every entry of pages of `size` at most, `call` asking for the one after
/// a token and answering its entries and the next token.
async fn every_page<Fut>(size: usize, mut call: impl FnMut(String) -> Fut) -> Vec<String>
where
    Fut: std::future::Future<Output = (Vec<String>, String)>,
{
    let (mut all, mut token) = (Vec::new(), String::new());
    loop {
        let (page, next) = call(token).await;
        assert!(!page.is_empty() && page.len() <= size, "{page:?}");
        all.extend(page);
        if next.is_empty() {
            return all;
        }
        token = next;
    }
}

/// The server's page size when a request leaves it to the server.
const DEFAULT_PAGE_SIZE: usize = 1000;

fn acquire(namespace: &str, token: &Token) -> AcquireRequest {
    AcquireRequest {
        namespace: namespace.into(),
        max_worker_id: 4095,
        token: token.to_string(),
        ttl_ms: 60_000,
        holder: "pages".into(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn lists_answer_a_page_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = start(dir.path(), "");
    let mut leases = LeasesClient::new(channel(port).await);
    let mut tokens = Vec::new();
    for _ in 0..25 {
        let token = Token::generate();
        leases.acquire(acquire("paged", &token)).await.unwrap();
        tokens.push(token);
    }
    let list = |page_size, page_token: &str| ListRequest {
        namespace: "paged".into(),
        page_size,
        page_token: page_token.into(),
    };
    let whole = leases.list(list(0, "")).await.unwrap().into_inner();
    assert_eq!(whole.leases.len(), 25);
    assert!(whole.next_page_token.is_empty());

    // Pages of 10, with a lease ended and one granted between them: every
    // ID there throughout comes once, in order.
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = leases.list(list(10, &token)).await.unwrap().into_inner();
        assert!(page.known && page.leases.len() <= 10, "{page:?}");
        seen.extend(page.leases.iter().map(|l| l.worker_id));
        pages += 1;
        if pages == 1 {
            leases
                .release(ReleaseRequest {
                    namespace: "paged".into(),
                    worker_id: 3,
                    token: tokens[3].to_string(),
                    watermark: 0,
                })
                .await
                .unwrap();
            leases
                .acquire(acquire("paged", &Token::generate()))
                .await
                .unwrap();
        }
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    // ID 3 stays listed (free), and the new lease is at 3 or 25.
    let now = leases.list(list(0, "")).await.unwrap().into_inner();
    let now: Vec<u32> = now.leases.iter().map(|l| l.worker_id).collect();
    assert_eq!(seen, now);
    assert!(now.starts_with(&(0..25).collect::<Vec<u32>>()), "{now:?}");
    assert_eq!(pages, 3);

    for bad in ["seven", "-1", "99999999999"] {
        refused(
            leases.list(list(10, bad)).await,
            Code::InvalidArgument,
            "invalid_page_token",
        );
    }

    // Namespaces and tags page the same way.
    for n in 0..4 {
        leases
            .acquire(acquire(&format!("paged-{n}"), &Token::generate()))
            .await
            .unwrap();
    }
    let names = every_page(2, |page_token| {
        let mut leases = leases.clone();
        async move {
            let page = leases
                .list_namespaces(ListNamespacesRequest {
                    page_size: 2,
                    page_token,
                })
                .await
                .unwrap()
                .into_inner();
            let names = page.namespaces.into_iter().map(|n| n.namespace);
            (names.collect(), page.next_page_token)
        }
    })
    .await;
    let mut expected: Vec<String> = ["paged", "paged-0", "paged-1", "paged-2", "paged-3"]
        .map(String::from)
        .into();
    expected.insert(0, "workerid-server".into());
    expected.sort();
    assert_eq!(names, expected);

    let mut segments = SegmentsClient::new(channel(port).await);
    for t in ["t-c", "t-a", "t-b"] {
        segments
            .create_tag(CreateTagRequest {
                tag: t.into(),
                first_id: 1,
                step: 10,
            })
            .await
            .unwrap();
    }
    let tags = every_page(1, |page_token| {
        let mut segments = segments.clone();
        async move {
            let page = segments
                .list_tags(ListTagsRequest {
                    page_size: 1,
                    page_token,
                })
                .await
                .unwrap()
                .into_inner();
            let tags = page.tags.into_iter().map(|t| t.tag);
            (tags.collect(), page.next_page_token)
        }
    })
    .await;
    let whole = segments
        .list_tags(ListTagsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(whole.tags.len() > 3 && whole.next_page_token.is_empty());
    let whole: Vec<String> = whole.tags.into_iter().map(|t| t.tag).collect();
    assert_eq!(tags, whole);
    assert!(whole.windows(2).all(|w| w[0] < w[1]), "{whole:?}");
}

/// More leases than the server's page: workerid-client's `list` reads every
/// page, and so does its `list_tags`.
#[tokio::test(flavor = "multi_thread")]
async fn the_client_reads_every_page() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = start(dir.path(), "");
    let store = ServerStore::builder(format!("http://127.0.0.1:{port}"))
        .connect()
        .await
        .unwrap();
    let namespace = Namespace::new("many").unwrap();
    let count = DEFAULT_PAGE_SIZE * 2 + 3;
    let racers: Vec<_> = (0..4)
        .map(|racer| {
            let store = store.clone();
            let namespace = namespace.clone();
            tokio::spawn(async move {
                for _ in (racer..count).step_by(4) {
                    store
                        .acquire(
                            &namespace,
                            4095,
                            &Token::generate(),
                            std::time::Duration::from_secs(60),
                            &workerid::Holder::new("pages").unwrap(),
                        )
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for racer in racers {
        racer.await.unwrap();
    }
    let listing = store.list(&namespace).await.unwrap();
    assert_eq!(listing.max_worker_id, Some(4095));
    let ids: Vec<u32> = listing.leases.iter().map(|l| l.id.get()).collect();
    assert_eq!(ids, (0..count as u32).collect::<Vec<_>>());

    let before = store.list_tags().await.unwrap().len();
    for n in 0..DEFAULT_PAGE_SIZE + 1 {
        let tag = Tag::new(format!("tag-{n:04}")).unwrap();
        store.create_tag(&tag, 1, 10).await.unwrap();
    }
    let tags = store.list_tags().await.unwrap();
    assert_eq!(tags.len(), before + DEFAULT_PAGE_SIZE + 1);
}
