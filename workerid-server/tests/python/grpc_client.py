"""A client of workerid-server's gRPC API in Python, with stubs generated
from workerid-proto/proto/workerid/v1/workerid.proto by grpc_tools: takes
IDs, a batch, a stream and a worker-ID lease from a running server, keeps
a segment buffer of its own (reserve, give back with the range's receipt),
lists tags a page at a time, and prints what it got as one JSON object.

    python3 -m grpc_tools.protoc -I workerid-proto/proto --python_out=OUT \
        --grpc_python_out=OUT workerid/v1/workerid.proto
    python3 grpc_client.py OUT 127.0.0.1:PORT
"""

import base64
import json
import secrets
import sys

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from workerid.v1 import workerid_pb2 as pb  # noqa: E402
from workerid.v1 import workerid_pb2_grpc as rpc  # noqa: E402


def ids_of(batch):
    return [i for r in batch.ranges for i in range(r.first, r.last + 1)]


def token():
    """16 random bytes, URL-safe base64 without padding: 22 characters."""
    return base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()


def refusal(call):
    try:
        call()
    except grpc.RpcError as e:
        codes = [v for k, v in e.trailing_metadata() if k == "workerid-code"]
        return {"status": e.code().name, "code": codes[0] if codes else None}
    return None


def main():
    channel = grpc.insecure_channel(sys.argv[2])
    ids = rpc.IdsStub(channel)
    leases = rpc.LeasesStub(channel)
    got = {}
    got["one"] = ids_of(ids.NextIds(pb.NextIdsRequest(tag="test", count=1)))
    got["batch"] = ids_of(ids.NextIds(pb.NextIdsRequest(tag="test", count=100)))
    got["snowflakes"] = ids_of(ids.NextSnowflakes(pb.NextSnowflakesRequest(count=5)))
    stream = ids.StreamIds(pb.StreamIdsRequest(tag="orders", count=10, batches=3))
    got["stream"] = [ids_of(batch) for batch in stream]
    decoded = ids.Decode(pb.DecodeRequest(id=got["snowflakes"][0]))
    got["decoded_unix_ms"] = decoded.unix_ms
    layout = ids.Layout(pb.LayoutRequest())
    # The time of an ID from the layout alone, as a client making its own reads it.
    shift = layout.worker_bits + layout.sequence_bits
    got["layout_unix_ms"] = (got["snowflakes"][0] >> shift) * layout.unit_ms + layout.epoch_unix_ms
    got["bad_count"] = refusal(lambda: ids.NextIds(pb.NextIdsRequest(tag="test", count=0)))

    mine = token()
    grant = leases.Acquire(
        pb.AcquireRequest(
            namespace="python", max_worker_id=3, token=mine, ttl_ms=5000, holder="python-client"
        )
    )
    leases.Renew(
        pb.RenewRequest(
            namespace="python", worker_id=grant.worker_id, token=mine, ttl_ms=5000, watermark=7
        )
    )
    got["stolen_renew"] = refusal(
        lambda: leases.Renew(
            pb.RenewRequest(
                namespace="python", worker_id=grant.worker_id, token=token(), ttl_ms=5000
            )
        )
    )
    listing = leases.List(pb.ListRequest(namespace="python"))
    got["listed"] = [(l.worker_id, l.state, l.holder) for l in listing.leases]
    leases.Release(
        pb.ReleaseRequest(namespace="python", worker_id=grant.worker_id, token=mine, watermark=9)
    )
    got["lease"] = {"worker_id": grant.worker_id, "fence": grant.fence}
    got["after_release"] = [
        (l.worker_id, l.state, l.watermark)
        for l in leases.List(pb.ListRequest(namespace="python")).leases
    ]

    segments = rpc.SegmentsStub(channel)
    segments.CreateTag(pb.CreateTagRequest(tag="py", first_id=1, step=10))
    first = segments.Reserve(pb.ReserveRequest(tag="py"))
    second = segments.Reserve(pb.ReserveRequest(tag="py", previous=first))
    forged = pb.SegmentRange(
        first=second.first, last=second.last, version=second.version, floor=first.first
    )
    got["forged_give_back"] = refusal(
        lambda: segments.GiveBack(
            pb.GiveBackRequest(tag="py", reserved=forged, new_max=first.first)
        )
    )
    got["given_back"] = segments.GiveBack(
        pb.GiveBackRequest(tag="py", reserved=second, new_max=first.first + 3)
    ).taken
    got["after_give_back"] = segments.Reserve(pb.ReserveRequest(tag="py")).first

    paged, page_token = [], ""
    while True:
        page = segments.ListTags(pb.ListTagsRequest(page_size=1, page_token=page_token))
        paged.append([t.tag for t in page.tags])
        page_token = page.next_page_token
        if not page_token:
            break
    got["tag_pages"] = paged
    got["tags"] = [t.tag for t in segments.ListTags(pb.ListTagsRequest()).tags]
    print(json.dumps(got))


if __name__ == "__main__":
    main()
