//! The conformance suite on a real PostgreSQL server (started once for this
//! test binary, or the one `WORKERID_POSTGRES_URL` names).

mod support;

workerid_conformance::lease_store_tests!(support::Database {
    url: workerid_servers::postgres::shared_url()
});

workerid_conformance::segment_store_tests!(support::Database {
    url: workerid_servers::postgres::shared_url()
});
