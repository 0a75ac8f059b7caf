//! The faults the nemesis injects: on clients, on the store's servers, on
//! the network between them.

/// A fault the nemesis can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Fault {
    /// SIGKILL a client (it releases nothing); a new one takes its place.
    KillClient,
    /// SIGSTOP a client for 1.5 to 2.5 ttls, then SIGCONT. An unsafe client
    /// that holds a worker ID is paused first.
    PauseClient,
    /// Step a client's wall clock forwards or backwards (SIGUSR1 / SIGUSR2).
    StepClock,
    /// SIGKILL the store server and start it again on the same data.
    RestartStore,
    /// Freeze the store server (every process of it; on an etcd cluster,
    /// a follower) with SIGSTOP for 1.5 to 2.5 ttls, then SIGCONT: a
    /// network partition as its clients see it.
    PauseStore,
    /// Freeze the etcd leader for 1.5 to 2.5 ttls, then SIGCONT: the others
    /// elect a new leader while the old one still believes it leads (the
    /// fault the etcd store's quarantine answers: see docs/guarantees.md).
    PauseEtcdLeader,
    /// SIGKILL the etcd leader and start it again a few seconds later.
    KillEtcdLeader,
    /// SIGKILL an etcd follower and start it again a few seconds later.
    KillEtcdFollower,
    /// Cut the etcd leader from the other two members, both ways, for 1.5
    /// to 3 ttls, while every client still reaches it: the two elect a new
    /// leader, the old one leads a minority of one until it steps down (an
    /// etcd cluster whose members run apart:
    /// [`Target::start_etcd_cluster_apart`](crate::targets::Target::start_etcd_cluster_apart)).
    IsolateEtcdLeader,
    /// As [`IsolateEtcdLeader`](Fault::IsolateEtcdLeader), and every lab cut
    /// from the other two members as well: the clients reach only the old
    /// leader, on the minority side (a network run on an etcd cluster whose
    /// members run apart).
    IsolateEtcdLeaderWithClients,
    /// Cut one lab of clients from the store, both ways, for 0.5 to 3 ttls
    /// (a network run: see [`network`](crate::network)).
    PartitionClients,
    /// Drop the store's replies to one lab for 0.5 to 3 ttls: requests
    /// arrive and are applied, their answers are lost.
    DropReplies,
    /// Drop one lab's requests to the store for 0.5 to 3 ttls.
    DropRequests,
    /// Lose 5 to 30 % of one lab's packets, both ways, for 1 to 3 ttls.
    LossyLink,
    /// Cut one lab, make the store's end forget its connections, heal 0.5
    /// to 1 ttl later: the clients hold half-open connections.
    HalfOpen,
    /// One lab's relay accepts connections and moves nothing for 0.5 to 2
    /// ttls, then delivers what it held.
    StallLink,
    /// Slow one lab's link for 1 to 3 ttls: every byte each way arrives
    /// late, so that a round trip takes from a third of the ttl (a renewal
    /// period) to 1.25 ttls (past the clients' request timeout, the ttl),
    /// and renewals are answered near their deadline or after it.
    SlowLink,
    /// Cut the store from every lab at once, both ways, for 0.5 to 3 ttls:
    /// the store keeps running, and no client reaches it.
    PartitionStore,
    /// Fill the store's disk for 1 to 3 ttls, then free it; a server that
    /// exited for want of space is started again (a store started on a
    /// small disk: [`Target::start_on_small_disk`](crate::targets::Target::start_on_small_disk)).
    FillStoreDisk,
    /// Make the store's disk fail (`EIO` on every write, fsync and read,
    /// what was not fsynced lost) for 1 to 3 ttls, then stop its servers,
    /// mount it again and start them (a store started on a failing disk:
    /// [`Target::start_on_failing_disk`](crate::targets::Target::start_on_failing_disk)).
    FailStoreDisk,
    /// Make every `fsync` on the store's disk fail (`EIO`, what each covered
    /// lost though reads still show it) for 1 to 3 ttls, under a file
    /// system that stays writable; then stop its servers, end the errors,
    /// drop the lost pages from the page cache and start the servers again,
    /// on the same mount (a store started on a disk whose `fsync` fails:
    /// [`Target::start_on_fsync_failing_disk`](crate::targets::Target::start_on_fsync_failing_disk)).
    FailStoreFsync,
}

impl Fault {
    /// The faults on clients, which every store can take.
    pub const CLIENT: [Fault; 3] = [Fault::KillClient, Fault::PauseClient, Fault::StepClock];
    /// The faults on the network between clients and the store, for a
    /// network run ([`RunConfig::network`](crate::nemesis::RunConfig::network)).
    pub const NETWORK: [Fault; 8] = [
        Fault::PartitionClients,
        Fault::DropReplies,
        Fault::DropRequests,
        Fault::LossyLink,
        Fault::HalfOpen,
        Fault::StallLink,
        Fault::SlowLink,
        Fault::PartitionStore,
    ];
}
