//! The operating system's monotonic clocks, in nanoseconds.
//!
//! Through libc's `clock_gettime` (the vDSO, no system call): about 3 ns
//! less per reading than the same call through rustix on this project's
//! test machine, and the coarse reading is on the path of every ID.

use std::time::Duration;

#[inline]
fn read(
    clock: libc::clockid_t,
    f: unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> libc::c_int,
) -> u64 {
    read_keeping(clock, f, ()).0
}

/// The timespec a reading is written to, and a value kept in the same
/// memory across the call.
#[repr(C)]
struct Kept<T> {
    t: std::mem::MaybeUninit<libc::timespec>,
    keep: T,
}

/// `f`'s reading of `clock` in nanoseconds, and `keep` back. The call
/// is given the address of memory that holds `keep` as well as the
/// timespec, so the caller must read `keep` back from it afterwards
/// rather than keep it in a register across the call: a caller that
/// inlines this then saves no register on the stack on entry, whatever
/// path it takes.
#[inline(always)]
fn read_keeping<T: Copy>(
    clock: libc::clockid_t,
    f: unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> libc::c_int,
    keep: T,
) -> (u64, T) {
    let mut kept = Kept {
        t: std::mem::MaybeUninit::uninit(),
        keep,
    };
    let at: *mut Kept<T> = &mut kept;
    // SAFETY: `t` is the first field of the `repr(C)` struct `at`
    // points to, so `at` is writable timespec memory for the call's
    // duration; the call writes nothing else.
    let answer = unsafe { f(clock, at.cast::<libc::timespec>()) };
    // Never on a Linux this builds for (MONOTONIC_COARSE exists since
    // 2.6.32). No value would be safe to go on with (a made-up reading
    // is a made-up time for deadlines, the offset and IDs alike), so
    // it panics, as `std::time::Instant::now` does. (The message names
    // no clock: an argument would be stored on every call.)
    assert!(answer == 0, "reading the monotonic clock failed");
    // SAFETY: a call that returns 0 has written the whole timespec.
    let t = unsafe { kept.t.assume_init() };
    let ns = (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64);
    (ns, kept.keep)
}

#[inline]
pub(crate) fn precise() -> u64 {
    read(libc::CLOCK_MONOTONIC, libc::clock_gettime)
}

/// Which clock a reading is of: the coarse or the precise one.
pub(crate) type Source = libc::clockid_t;

/// The coarse clock, or the precise one.
pub(crate) fn source(coarse: bool) -> Source {
    if coarse {
        libc::CLOCK_MONOTONIC_COARSE
    } else {
        libc::CLOCK_MONOTONIC
    }
}

/// A reading of `clock` ([`precise`]'s or [`coarse`]'s), and `keep`
/// back, read from the memory the call is given (see [`read_keeping`]).
#[inline(always)]
pub(crate) fn reading_keeping<T: Copy>(clock: Source, keep: T) -> (u64, T) {
    read_keeping(clock, libc::clock_gettime, keep)
}

#[inline]
pub(crate) fn coarse() -> u64 {
    read(libc::CLOCK_MONOTONIC_COARSE, libc::clock_gettime)
}

/// How far behind the coarse clock may be: two of its ticks (one, plus
/// one for a tick the kernel handles late), if that is fine enough to be
/// worth it.
pub(crate) fn coarse_lag() -> Duration {
    lag_of_resolution(Duration::from_nanos(read(
        libc::CLOCK_MONOTONIC_COARSE,
        libc::clock_getres,
    )))
}

/// The lag of a coarse clock of `resolution` (its tick), or zero when
/// it is too coarse to be worth it (ticks over 10 ms) or reports none.
pub(crate) fn lag_of_resolution(resolution: Duration) -> Duration {
    let lag = 2 * resolution;
    if !lag.is_zero() && lag <= Duration::from_millis(20) {
        lag
    } else {
        Duration::ZERO
    }
}
