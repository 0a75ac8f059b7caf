//! A disk that fails while it still has room: an ext4 file system on a
//! loop device (an image file made by the test, mounted as root), which the
//! test makes fail in one of two ways ([`Failure`]):
//!
//! - [`Failure::Shutdown`]: the kernel's own `EXT4_IOC_SHUTDOWN` (`xfs_io
//!   -c shutdown`, which xfstests uses to make a disk go away), without
//!   flushing the journal: from then on every `write`, `fsync`, `open` and
//!   `read` fails with `EIO`, and whatever had not reached the disk by an
//!   `fsync` (or a journal commit) is lost, as on a disk that dies or a
//!   network volume that is lost. It lands between the system calls of the
//!   test's processes with files on the disk (see [`FailingDisk::fail`]),
//!   so that every `fsync` of theirs that succeeded is kept.
//! - [`Failure::ThinPoolFull`]: the image is sparse on a tmpfs of its own,
//!   which the failure fills, as thin-provisioned storage runs out: `write`
//!   still succeeds into the page cache, the `fsync` that must store a new
//!   block fails (once: the next one succeeds, the kernel having dropped
//!   what it could not write), and ext4 then aborts its journal and turns
//!   read-only.
//! - [`Failure::Intermittent`]: every `fsync` fails for a while under a
//!   file system that stays writable and keeps its own metadata
//!   ([`FsyncFailingDisk`], a FUSE file system of the test's own):
//!   [`FailingDisk::heal`] ends it under the same mount, while what a
//!   failed `fsync` covered never reaches the disk (PostgreSQL's
//!   "fsyncgate").
//!
//! [`FailingDisk::recover`] mounts it again (a copy of the image, the
//! journal replayed; or the FUSE disk's page cache dropped), once nothing
//! holds a file on it any more: the store's servers must be stopped first,
//! as an operator would after a volume came back.
//!
//! This machine's kernel has no device mapper (no `dm-error` or
//! `dm-flakey`): these are the failures it can make.
//!
//! ```no_run
//! use workerid_testkit::{failing_disk::FailingDisk, StoreKind};
//!
//! let disk = FailingDisk::mount(64);
//! let store = disk.start(StoreKind::RedisDurable); // its data on the disk
//! disk.fail(); // every write and fsync now fails with EIO
//! for (_, process) in store.processes() {
//!     process.kill();
//! }
//! disk.recover();
//! for (_, process) in store.processes() {
//!     process.start();
//! }
//! ```

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::fsync_failing::{FsyncFailingDisk, FsyncFailures};
use crate::holders::Frozen;
use crate::small_disk::SmallDisk;
use crate::{cleanup, RunningStore, StoreKind};

/// `EXT4_IOC_SHUTDOWN`, `_IOR('X', 125, __u32)` (the same number as XFS's
/// `XFS_IOC_GOINGDOWN`).
const EXT4_IOC_SHUTDOWN: libc::c_ulong = 0x8004_587D;
/// `EXT4_GOING_FLAGS_NOLOGFLUSH`: shut down without flushing the journal.
const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 0x2;

/// How a [`FailingDisk`] fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The file system is shut down (`EXT4_IOC_SHUTDOWN`, no journal
    /// flush): every `write`, `fsync`, `open` and `read` fails with `EIO`
    /// at once, as when a disk dies or a network volume is lost.
    Shutdown,
    /// The image lives, sparse, on a tmpfs of its own (a thin pool), which
    /// the failure fills: the file system still shows room and `write`
    /// succeeds into the page cache, but the device cannot store a block
    /// it has not stored before, so the `fsync` that has to write it
    /// fails with `EIO` (reported once: the next `fsync` succeeds), and
    /// ext4 aborts its journal at its next commit and turns read-only, as
    /// on thin-provisioned storage that ran out of space.
    ThinPoolFull,
    /// Every `fsync` answers `EIO` and loses what it covered, under a file
    /// system that stays writable and keeps its own metadata (see
    /// [`FsyncFailingDisk`]): after [`FailingDisk::heal`], `fsync`s succeed
    /// again without a remount (each file opened before is told of the
    /// error once), and what a failed one covered is gone from the disk
    /// while reads still show it (PostgreSQL's "fsyncgate"), until the
    /// disk is mounted again.
    Intermittent,
}

/// What the disk is.
#[derive(Debug)]
enum Medium {
    /// An ext4 file system on a loop device.
    Ext4 {
        mount_point: tempfile::TempDir,
        image_dir: ImageDir,
        /// How many times the disk was mounted again: the image's
        /// generation.
        generation: AtomicU32,
    },
    /// The FUSE file system whose `fsync` fails on demand.
    Fuse(FsyncFailingDisk),
}

/// Where the image file is (never on the disk itself).
#[derive(Debug)]
enum ImageDir {
    /// A temporary directory of the machine's.
    Temp(tempfile::TempDir),
    /// A tmpfs of its own, which [`Failure::ThinPoolFull`] fills.
    Pool(SmallDisk),
}

impl ImageDir {
    fn path(&self) -> &Path {
        match self {
            ImageDir::Temp(dir) => dir.path(),
            ImageDir::Pool(pool) => pool.path(),
        }
    }
}

/// A disk that fails as its [`Failure`] says: an ext4 file system on a
/// loop device, detached when dropped, or a [`FsyncFailingDisk`].
#[derive(Debug)]
pub struct FailingDisk {
    medium: Medium,
    failure: Failure,
    failed: AtomicBool,
}

impl FailingDisk {
    /// Makes an image file of `mib` MiB, an ext4 file system on it, and
    /// mounts it on a fresh directory through a loop device (freed when
    /// the file system is unmounted).
    ///
    /// Panics, saying what is missing, when it cannot: `mkfs.ext4`
    /// (package e2fsprogs), root, or a loop device.
    pub fn mount(mib: u64) -> FailingDisk {
        FailingDisk::make(mib, Failure::Shutdown)
    }

    /// As [`mount`](Self::mount), for a disk that fails as `failure` says.
    pub fn mount_failing_as(mib: u64, failure: Failure) -> FailingDisk {
        FailingDisk::make(mib, failure)
    }

    fn make(mib: u64, failure: Failure) -> FailingDisk {
        if failure == Failure::Intermittent {
            return FailingDisk {
                medium: Medium::Fuse(FsyncFailingDisk::mount()),
                failure,
                failed: AtomicBool::new(false),
            };
        }
        let image_dir = if failure == Failure::ThinPoolFull {
            // Room for the image and for the copy a recovery makes.
            ImageDir::Pool(SmallDisk::mount(2 * mib + 16))
        } else {
            ImageDir::Temp(
                tempfile::Builder::new()
                    .prefix("workerid-failing-disk-image-")
                    .tempdir()
                    .unwrap_or_else(|e| panic!("cannot make a temporary directory: {e}")),
            )
        };
        let image = image_at(image_dir.path(), 0);
        File::create(&image)
            .and_then(|f| f.set_len(mib << 20))
            .unwrap_or_else(|e| panic!("cannot make the disk image {}: {e}", image.display()));
        run(
            Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image),
            "mkfs.ext4 (package e2fsprogs)",
        );
        let mount_point = tempfile::Builder::new()
            .prefix("workerid-failing-disk-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot make a temporary directory: {e}"));
        let disk = FailingDisk {
            medium: Medium::Ext4 {
                mount_point,
                image_dir,
                generation: AtomicU32::new(0),
            },
            failure,
            failed: AtomicBool::new(false),
        };
        disk.mount_image();
        cleanup::register_mount(disk.path().to_path_buf());
        // Every server user (PostgreSQL's, MariaDB's) may make its
        // directory here, as on a tmpfs mounted with mode=1777.
        std::fs::set_permissions(disk.path(), std::fs::Permissions::from_mode(0o1777))
            .unwrap_or_else(|e| panic!("cannot open up {}: {e}", disk.path().display()));
        disk
    }

    /// Mounts a disk with room for a short run of a store of `kind` (as
    /// much as [`SmallDisk::for_store`](crate::small_disk::SmallDisk::for_store)
    /// gives it, and more than an ext4 file system's own metadata needs).
    pub fn for_store(kind: StoreKind) -> FailingDisk {
        FailingDisk::for_store_failing_as(kind, Failure::Shutdown)
    }

    /// As [`for_store`](Self::for_store), for a disk that fails as
    /// `failure` says.
    pub fn for_store_failing_as(kind: StoreKind, failure: Failure) -> FailingDisk {
        let mib = match kind {
            StoreKind::Sqlite => 32,
            StoreKind::Postgres => 160,
            StoreKind::MariaDb => 320,
            StoreKind::Etcd => 200,
            StoreKind::EtcdCluster => 600,
            _ => 64,
        };
        FailingDisk::make(mib, failure)
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        match &self.medium {
            Medium::Ext4 { mount_point, .. } => mount_point.path(),
            Medium::Fuse(disk) => disk.path(),
        }
    }

    /// The image file of an ext4 disk, and that disk's image directory.
    fn image(&self) -> Option<(PathBuf, &ImageDir, &AtomicU32)> {
        match &self.medium {
            Medium::Ext4 {
                image_dir,
                generation,
                ..
            } => Some((
                image_at(image_dir.path(), generation.load(Ordering::SeqCst)),
                image_dir,
                generation,
            )),
            Medium::Fuse(_) => None,
        }
    }

    fn mount_image(&self) {
        let Some((image, _, _)) = self.image() else {
            return;
        };
        run(
            Command::new("mount")
                .args(["-t", "ext4", "-o", "loop"])
                .arg(image)
                .arg(self.path()),
            "mount -o loop (root, and a free loop device)",
        );
    }

    /// Starts a store of `kind` whose servers (or file) keep their data on
    /// this disk, then syncs the disk: what the store was set up with is on
    /// it before any fault (the test kit runs `initdb --no-sync` for speed,
    /// where a real deployment's `initdb` syncs).
    pub fn start(&self, kind: StoreKind) -> RunningStore {
        let store = crate::small_disk::start_under(self.path(), kind);
        self.sync();
        store
    }

    /// Writes everything on the disk to it (`syncfs`).
    pub fn sync(&self) {
        if let Medium::Fuse(disk) = &self.medium {
            disk.sync();
            return;
        }
        let root = File::open(self.path())
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.path().display()));
        // SAFETY: a plain syscall on a file we hold open.
        let done = unsafe { libc::syncfs(root.as_raw_fd()) };
        assert!(
            done == 0,
            "cannot sync {}: {}",
            self.path().display(),
            std::io::Error::last_os_error()
        );
    }

    /// How the disk fails.
    pub fn failure(&self) -> Failure {
        self.failure
    }

    /// Makes the disk fail now, as its [`Failure`] says, while it still
    /// has room.
    ///
    /// A [`Shutdown`](Failure::Shutdown) lands between the system calls of
    /// every process descended from this one with a file on the disk: they
    /// are stopped (SIGSTOP) until none is inside a call, the file system
    /// is shut down, and they go on (SIGCONT). One stopped already stays
    /// stopped, so this must not run while such a process is being paused
    /// or resumed elsewhere. The shutdown is not atomic to an `fsync` in
    /// flight: it ends the journal's running transaction without a commit
    /// record, and an `fdatasync` that reaches that transaction afterwards
    /// is told it committed (`jbd2_complete_transaction` takes a
    /// transaction no longer running or committing as done), so its write
    /// is lost after a success. The calling process is not stopped: an
    /// `fsync` of its own in flight across this call may be lost that way.
    ///
    /// # Panics
    /// When the file system cannot be shut down, or a process with a file
    /// on it cannot be stopped or has not stopped within 10 s.
    pub fn fail(&self) {
        match &self.medium {
            Medium::Fuse(disk) => {
                disk.fail();
                self.failed.store(true, Ordering::SeqCst);
                return;
            }
            Medium::Ext4 {
                image_dir: ImageDir::Pool(pool),
                ..
            } => {
                pool.fill();
                self.failed.store(true, Ordering::SeqCst);
                return;
            }
            Medium::Ext4 { .. } => {}
        }
        let root = File::open(self.path())
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.path().display()));
        let flags = EXT4_GOING_FLAGS_NOLOGFLUSH;
        let holders = Frozen::holders_of(self.path());
        // SAFETY: the ioctl reads one u32 we own from a file we hold open.
        let done = unsafe { libc::ioctl(root.as_raw_fd(), EXT4_IOC_SHUTDOWN as _, &flags) };
        drop(holders);
        assert!(
            done == 0,
            "cannot shut down the ext4 file system on {} (EXT4_IOC_SHUTDOWN): {}",
            self.path().display(),
            std::io::Error::last_os_error()
        );
        self.failed.store(true, Ordering::SeqCst);
    }

    /// Ends the failure without a remount. An
    /// [`Intermittent`](Failure::Intermittent) disk's `fsync`s succeed
    /// again, and the file system goes on. A thin pool is emptied and the
    /// device stores every block again, but ext4 has turned read-only and
    /// needs [`recover`](Self::recover). Does nothing to a shut-down disk.
    pub fn heal(&self) {
        match &self.medium {
            Medium::Fuse(disk) => disk.heal(),
            Medium::Ext4 {
                image_dir: ImageDir::Pool(pool),
                ..
            } => pool.free(),
            Medium::Ext4 { .. } => return,
        }
        self.failed.store(false, Ordering::SeqCst);
    }

    /// Drops the clean pages of the page cache, as `echo 1 >
    /// /proc/sys/vm/drop_caches` does: on an
    /// [`Intermittent`](Failure::Intermittent) disk, the pages a failed
    /// `fsync` lost, so that reads show what the disk holds. A server
    /// started again after an `fsync` error must not recover from pages the
    /// disk never stored: a store's recovery trusts what it reads.
    ///
    /// # Panics
    /// When the cache cannot be dropped (root is needed).
    pub fn drop_page_cache(&self) {
        match &self.medium {
            Medium::Fuse(disk) => {
                disk.drop_lost_pages();
            }
            Medium::Ext4 { .. } => {
                self.sync();
                std::fs::write("/proc/sys/vm/drop_caches", "1")
                    .unwrap_or_else(|e| panic!("cannot drop the page cache: {e}"));
            }
        }
    }

    /// What an [`Intermittent`](Failure::Intermittent) disk's failures did
    /// so far (`fsync`s answered `EIO`, pages lost); `None` for the other
    /// failures.
    pub fn fsync_failures(&self) -> Option<FsyncFailures> {
        match &self.medium {
            Medium::Fuse(disk) => Some(disk.failures()),
            Medium::Ext4 { .. } => None,
        }
    }

    /// Whether [`fail`](Self::fail) was called since the disk was last
    /// mounted or healed.
    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Mounts the failed disk again (a copy of its image, taken once it is
    /// unmounted here): its journal is replayed, and what had reached the
    /// disk before it failed is there again.
    ///
    /// Panics, saying so, while something still holds a file on it: stop
    /// the store's servers, and drop the clients that opened its file,
    /// first.
    pub fn recover(&self) {
        if let Medium::Fuse(disk) = &self.medium {
            disk.remount();
            self.failed.store(false, Ordering::SeqCst);
            return;
        }
        // A file closed a moment ago may still be held by a thread that
        // is closing it (SQLite's): busy is retried for a few seconds.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let out = loop {
            let out = Command::new("umount")
                .arg(self.path())
                .output()
                .unwrap_or_else(|e| panic!("cannot run umount: {e}"));
            if out.status.success() || std::time::Instant::now() > deadline {
                break out;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert!(
            out.status.success(),
            "cannot unmount the failed disk {} (stop every process with a file on it \
             first): {}",
            self.path().display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        // A copy of the image is mounted, through a loop device of its own:
        // a mount namespace made while the disk was mounted (`ip netns
        // exec` makes one) keeps the failed file system alive after this
        // unmount, and mounting its loop device again would hand back that
        // same failed file system.
        let Some((failed, image_dir, generation)) = self.image() else {
            return;
        };
        if let ImageDir::Pool(pool) = image_dir {
            pool.free();
        }
        let generation = generation.fetch_add(1, Ordering::SeqCst) + 1;
        let copy = image_at(image_dir.path(), generation);
        run(
            Command::new("cp")
                .arg("--sparse=always")
                .arg(&failed)
                .arg(&copy),
            "cp (copying the failed disk's image)",
        );
        let _ = std::fs::remove_file(&failed);
        self.mount_image();
        self.failed.store(false, Ordering::SeqCst);
    }
}

impl Drop for FailingDisk {
    fn drop(&mut self) {
        // Lazily: a server killed moments ago may still hold a file open;
        // the loop device goes once the file system is released. The FUSE
        // disk unmounts itself.
        if let Medium::Ext4 { mount_point, .. } = &self.medium {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(mount_point.path())
                .output();
            cleanup::unregister_mount(mount_point.path());
        }
    }
}

/// The image file of generation `generation` in `dir`.
fn image_at(dir: &Path, generation: u32) -> PathBuf {
    dir.join(format!("disk-{generation}.img"))
}

/// Runs `command`, panicking with its error output (naming `what` is
/// needed) when it cannot be run or fails.
fn run(command: &mut Command, what: &str) {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
}
