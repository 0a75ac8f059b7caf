//! A give-back rolls a tag back, so it is taken only for a range the
//! client reserved: the server signs each range, and refuses a forged one
//! (guessed from `ListTags` and a version count), one altered, and a
//! `new_max` below the range's floor, changing nothing. Servers sharing a
//! `give_back_key` take each other's ranges back; others refuse them.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tonic::transport::Channel;
use tonic::Code;
use workerid::segment::{self, SegmentStore, Tag};
use workerid_client::ServerStore;
use workerid_proto::v1::segments_client::SegmentsClient;
use workerid_proto::v1::{
    CreateTagRequest, GiveBackRequest, ListTagsRequest, ReserveRequest, SegmentRange,
};

use super::common::Server;
use super::{channel, refused, start_on};
use workerid_testkit::relay::Relay;

const KEY: &str = "give_back_key = \"fleet-secret-0123456789\"\n";

/// A server on the SQLite file in `store_dir` (see [`start_on`]), and a
/// client of its segments.
async fn server(dir: &Path, store_dir: &Path, top: &str) -> (Server, SegmentsClient<Channel>, u16) {
    let (server, grpc) = start_on(dir, store_dir, top);
    (server, SegmentsClient::new(channel(grpc).await), grpc)
}

/// The tag `shared`, from 1 in steps of 10.
async fn create_shared(client: &mut SegmentsClient<Channel>) {
    client
        .create_tag(CreateTagRequest {
            tag: "shared".into(),
            first_id: 1,
            step: 10,
        })
        .await
        .unwrap();
}

fn reserve(previous: Option<&SegmentRange>) -> ReserveRequest {
    ReserveRequest {
        tag: "shared".into(),
        step: 0,
        previous: previous.cloned(),
    }
}

fn give_back(reserved: &SegmentRange, new_max: u64) -> GiveBackRequest {
    GiveBackRequest {
        tag: "shared".into(),
        reserved: Some(reserved.clone()),
        new_max,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_give_back_is_taken_only_for_the_clients_own_range() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, mut client, _) = server(dir.path(), dir.path(), KEY).await;
    create_shared(&mut client).await;
    // The victim's range, then what an attacker knows of it.
    let victims = client.reserve(reserve(None)).await.unwrap().into_inner();
    assert_eq!((victims.first, victims.last, victims.floor), (1, 10, 1));
    assert_eq!(victims.receipt.len(), 32);
    let listed = client
        .list_tags(ListTagsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let shared = listed.tags.iter().find(|t| t.tag == "shared").unwrap();
    let guessed = SegmentRange {
        first: shared.max_id - shared.step,
        last: shared.max_id - 1,
        version: victims.version,
        floor: shared.max_id - shared.step,
        receipt: Vec::new(),
    };
    refused(
        client.give_back(give_back(&guessed, 1)).await,
        Code::PermissionDenied,
        "unknown_range",
    );
    let mut altered = victims.clone();
    altered.version += 1;
    refused(
        client.give_back(give_back(&altered, 1)).await,
        Code::PermissionDenied,
        "unknown_range",
    );

    // The attacker's own range, signed, given back below its floor into
    // the victim's: refused.
    let own = client.reserve(reserve(None)).await.unwrap().into_inner();
    assert_eq!((own.first, own.floor), (11, 11));
    refused(
        client.give_back(give_back(&own, 1)).await,
        Code::InvalidArgument,
        "invalid_range",
    );
    let mut lowered = own.clone();
    lowered.floor = 1;
    refused(
        client.give_back(give_back(&lowered, 1)).await,
        Code::PermissionDenied,
        "unknown_range",
    );
    // Naming the victim's range as its previous one, without its receipt,
    // moves no floor either.
    let mut unsigned = victims.clone();
    unsigned.receipt.clear();
    let next = client
        .reserve(reserve(Some(&unsigned)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((next.first, next.floor), (21, 21));
    let after = client.reserve(reserve(None)).await.unwrap().into_inner();
    assert_eq!(after.first, 31, "no refused give-back moved the tag back");

    // The client's own two adjacent ranges go back in one give-back.
    let first = after;
    let second = client
        .reserve(reserve(Some(&first)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((second.first, second.floor), (41, 31));
    assert!(
        client
            .give_back(give_back(&second, 35))
            .await
            .unwrap()
            .into_inner()
            .taken
    );
    let again = client.reserve(reserve(None)).await.unwrap().into_inner();
    assert_eq!(again.first, 35, "the tails of both ranges came back");

    // A range given back and handed to another client extends no floor,
    // though the receipt is good and the next range follows it: the server
    // finds it is no longer the tag's last reservation.
    let mine = client.reserve(reserve(None)).await.unwrap().into_inner();
    let back = client.give_back(give_back(&mine, mine.first)).await;
    assert!(back.unwrap().into_inner().taken);
    let theirs = client.reserve(reserve(None)).await.unwrap().into_inner();
    assert_eq!((theirs.first, theirs.last), (mine.first, mine.last));
    let next = client
        .reserve(reserve(Some(&mine)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((next.first, next.floor), (mine.last + 1, mine.last + 1));
    refused(
        client.give_back(give_back(&next, mine.first)).await,
        Code::InvalidArgument,
        "invalid_range",
    );
    let after = client.reserve(reserve(None)).await.unwrap().into_inner();
    assert_eq!(
        after.first,
        next.last + 1,
        "the IDs given to another stay theirs"
    );

    // An unknown tag is reported as such, receipt or none.
    let mut unknown = give_back(&guessed, 1);
    unknown.tag = "never-made".into();
    refused(
        client.give_back(unknown).await,
        Code::NotFound,
        "unknown_tag",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_sharing_a_give_back_key_take_each_others_ranges() {
    let (store, one, two, other) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let (_one, mut first, one_port) = server(one.path(), store.path(), KEY).await;
    let (_two, mut second, two_port) = server(two.path(), store.path(), KEY).await;
    let (_other, mut third, other_port) = server(other.path(), store.path(), "").await;
    create_shared(&mut first).await;
    let a = first.reserve(reserve(None)).await.unwrap().into_inner();
    refused(
        third.give_back(give_back(&a, a.first + 5)).await,
        Code::PermissionDenied,
        "unknown_range",
    );
    let taken = second
        .give_back(give_back(&a, a.first + 5))
        .await
        .unwrap()
        .into_inner();
    assert!(
        taken.taken,
        "a server with the same key takes the range back"
    );
    let b = third.reserve(reserve(None)).await.unwrap().into_inner();
    assert_eq!(b.first, a.first + 5);

    // workerid-client behind a balancer that moves it between servers: the
    // key a server does not share is an error that says so, not a silent
    // loss; a server with the key takes the range back.
    let (relay, url) = Relay::in_front_of(&format!("http://127.0.0.1:{one_port}"));
    let client = ServerStore::builder(url).connect().await.unwrap();
    let tag = Tag::new("shared").unwrap();
    let range = client.reserve(&tag, None).await.unwrap();
    let move_to = |port: u16| {
        let listening = SocketAddr::from(([127, 0, 0, 1], relay.ports()[0]));
        relay.redirect(listening, SocketAddr::from(([127, 0, 0, 1], port)));
        relay.reset_connections("balancer");
    };
    move_to(other_port);
    let refused = loop {
        // The first call after the reset may meet the old connection.
        match client.give_back(&tag, range, range.first).await {
            Err(e) if e.to_string().contains("give_back_key") => break e,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            Ok(taken) => panic!("a server with another key answered {taken}"),
        }
    };
    assert!(
        matches!(refused, segment::Error::Unavailable { .. }),
        "{refused:?}"
    );
    move_to(two_port);
    let taken = loop {
        match client.give_back(&tag, range, range.first).await {
            Ok(taken) => break taken,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    assert!(
        taken,
        "a server with the same key takes the client's range back"
    );
    let next = client.reserve(&tag, None).await.unwrap();
    assert_eq!(next.first, range.first);
}

/// workerid-client asked to give back below what the server confirmed as
/// its own (a previous range given back and taken again by another client
/// in between, so the ranges are adjacent without being the client's
/// alone) gives back this range's tail at least, not nothing.
#[tokio::test(flavor = "multi_thread")]
async fn the_client_gives_back_what_its_floor_allows() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, mut other, port) = server(dir.path(), dir.path(), KEY).await;
    create_shared(&mut other).await;
    let client = ServerStore::builder(format!("http://127.0.0.1:{port}"))
        .connect()
        .await
        .unwrap();
    let tag = Tag::new("shared").unwrap();
    let a = client.reserve(&tag, None).await.unwrap();
    let theirs = other.reserve(reserve(None)).await.unwrap().into_inner();
    assert_eq!(theirs.first, a.end());
    let back = other.give_back(give_back(&theirs, theirs.first)).await;
    assert!(back.unwrap().into_inner().taken);
    let b = client.reserve(&tag, None).await.unwrap();
    assert_eq!(
        b.first,
        a.end(),
        "adjacent, though not confirmed as the client's"
    );
    assert!(client.give_back(&tag, b, a.first + 3).await.unwrap());
    let next = client.reserve(&tag, None).await.unwrap();
    assert_eq!(next.first, b.first, "b's IDs came back, a's stayed out");
}
