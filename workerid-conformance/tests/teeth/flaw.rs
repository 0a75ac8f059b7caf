//! The ways the reference store can be broken, one rule each.

/// One way to break the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// Renew extends whatever token is given.
    RenewIgnoresToken,
    /// Release frees the ID whatever token is given.
    ReleaseIgnoresToken,
    /// Acquire reads a free ID, awaits, then writes: racers share IDs.
    RacyAcquire,
    /// Every grant gets fence 1.
    FenceNeverRises,
    /// Renew overwrites the watermark instead of keeping the maximum.
    WatermarkOverwritten,
    /// Release keeps the maximum instead of setting its holder's final word.
    ReleaseRaisesOnly,
    /// A release of watermark 0 sets it to 0 instead of keeping it.
    ReleaseOfZeroClearsWatermark,
    /// Acquire always reports a previous watermark of 0.
    WatermarkNotHandedOver,
    /// The watermark is kept as an f64 (as a naive Lua script would).
    WatermarkAsFloat,
    /// Leases never expire.
    NeverExpires,
    /// A lease ends 1 ms before its ttl is over.
    ExpiresEarly,
    /// A lease is still live at its end (`now <= end` for `now < end`).
    LiveAtItsEnd,
    /// Renew revives an expired lease.
    RenewRevivesExpired,
    /// An expired lease answers `TokenExpired` to any token, not
    /// `TokenMismatch` to another's.
    ExpiredIsExpiredForAnyToken,
    /// Lease lengths are rounded up to whole seconds.
    TtlRoundedUpToSeconds,
    /// All namespaces share one pool.
    NamespacesShared,
    /// A namespace does not remember its pool size.
    PoolSizeForgotten,
    /// Release answers Ok but leaves the ID held.
    ReleaseKeepsTheId,
    /// Release of an expired lease answers Ok instead of TokenExpired.
    ExpiredReleaseIsOk,
    /// A released ID still accepts its old token.
    ReleasedStillRenewable,
    /// Namespaces that differ only in case share a pool (a case-insensitive collation).
    NamespacesIgnoreCase,
    /// Tokens are compared without regard to case.
    TokensIgnoreCase,
    /// A released ID answers TokenMismatch to a token other than its last holder's.
    ReleasedIdIsMismatch,
    /// Acquire grants an ID one past the end of the pool.
    GrantsOutsideThePool,
    /// A listing shows an expired lease as live (a stale entry).
    ListsExpiredAsLive,
    /// A listing leaves released IDs out.
    ListOmitsReleased,
    /// An ID keeps the holder label of its first grant.
    HolderLabelNeverReplaced,
    /// Holder labels are cut to 64 bytes (a column too narrow).
    HolderLabelTruncated,
    /// A forced release resets the watermark to 0.
    ForceReleaseLowersWatermark,
    /// A forced release answers true but leaves the holder's lease in place.
    ForceReleaseKeepsTheHolder,
    /// A forced release of an expired ID marks it released and answers true.
    ForceReleaseTakesExpired,
    /// Removes a namespace even while a lease in it is live.
    RemoveIgnoresLiveLeases,
    /// Removing a namespace forgets its pool size but keeps its IDs' state.
    RemoveKeepsTheIds,
    /// Counts released IDs as live when listing namespaces.
    NamespacesCountReleased,
    /// Declares a quarantine of expired IDs but grants them at once.
    QuarantineNotKept,
    /// An acquire sent again with its token makes a second grant.
    ResentAcquireGrantsAgain,
    /// An acquire sent again answers its grant without extending the lease.
    ResentAcquireNotExtended,
    /// An acquire sent again answers its token's expired lease as its grant.
    ResentAcquireFindsExpired,
    /// A renew refused for another token still raises the watermark.
    MismatchedRenewRaisesWatermark,
    /// A renew refused for another token still extends the lease.
    MismatchedRenewExtends,
    /// A release refused for another token still sets the watermark.
    MismatchedReleaseSetsWatermark,
    /// A renew answered `TokenExpired` still raises the watermark.
    ExpiredRenewRaisesWatermark,
    /// A release answered `TokenExpired` still sets the watermark.
    ExpiredReleaseSetsWatermark,
    /// A renew of a released ID, answered `NotAssigned`, still raises the watermark.
    ReleasedRenewRaisesWatermark,
    /// Namespaces with no live lease are left out of the namespace list.
    NamespacesWithoutLiveLeasesUnlisted,
    /// The namespace list counts expired leases as live.
    NamespacesCountExpired,
    /// Cut off from its server, acquire answers `NoAvailableId` (a failed
    /// script read as a full pool).
    CutAcquireIsNoAvailableId,
    /// Cut off from its server, renew answers Ok (the error swallowed).
    CutRenewIsOk,
    /// Cut off from its server, a listing answers "never used".
    CutListIsEmpty,
    /// Renew answers Ok without extending the lease.
    RenewDoesNotExtend,
    /// Declares itself durable, and forgets everything on a restart.
    ForgetsOnRestart,
    /// Renewals of one lease conflict (an optimistic transaction that
    /// fails when another renewal committed meanwhile, as MySQL's
    /// REPEATABLE READ deadlocks did): the loser answers `Unavailable`.
    RenewalsConflict,
    /// The state lives in a file that each process reads and writes under a
    /// lock of its own process only (an in-process mutex where a file lock
    /// or a transaction was needed): processes overwrite each other's grants.
    LocksInProcessOnly,
    /// Each handle keeps the leases it acquired or renewed, with the expiry
    /// it counts on, and renews them from that record without asking the
    /// shared state (a keep-alive on an etcd lease of its own): what
    /// another handle did to the lease meanwhile goes unseen.
    RenewsByItsOwnRecord,
}
