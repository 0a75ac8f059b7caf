//! A disk whose `fsync` fails for a while under a file system that stays
//! writable and keeps its own metadata: PostgreSQL's "fsyncgate" on
//! demand, for every store, made by a FUSE file system of the test's own
//! (the kernel has no device mapper here, so no `dm-error` or
//! `dm-flakey`).
//!
//! The file system passes a backing directory through and keeps file data
//! in a page cache of its own, as Linux does for a disk: a write lands in
//! dirty pages, which reach the backing directory (the disk) when written
//! back, by an `fsync` of the file or a [`sync`](FsyncFailingDisk::sync).
//! A file's size on the disk grows only with data that reached it. While
//! the disk [fails](FsyncFailingDisk::fail):
//!
//! - every `fsync` and `fdatasync` (of a file or a directory) answers
//!   `EIO`, and the file's dirty pages are lost: they stay readable, as
//!   Linux leaves them in its page cache, but never reach the disk, not
//!   even through a later `fsync` that succeeds (unless written again);
//! - the error is reported once more, also after the disk is
//!   [healed](FsyncFailingDisk::heal), to every file open when it happened
//!   and not yet told, and to a file opened later while no `fsync` has
//!   reported it yet (Linux's `errseq`);
//! - writes, reads, and every directory operation succeed, and metadata
//!   (names, sizes set by `truncate`, modes, owners) is kept.
//!
//! [`drop_lost_pages`](FsyncFailingDisk::drop_lost_pages) drops the lost
//! pages as `drop_caches` would, so that a store started again reads what
//! the disk holds rather than what it was told it could not store.
//! [`remount`](FsyncFailingDisk::remount) is the disk mounted again once
//! nothing holds a file on it, as after a crash: what only the page cache
//! held is gone, and a lost page inside a file's size reads as zeros.
//!
//! ```no_run
//! use workerid_testkit::fsync_failing::FsyncFailingDisk;
//!
//! let disk = FsyncFailingDisk::mount();
//! std::fs::write(disk.path().join("a"), b"kept").unwrap();
//! disk.sync();
//! disk.fail(); // from now on every fsync answers EIO
//! disk.heal();
//! disk.remount();
//! ```

mod answer;
mod cache;
mod fs;
mod nodes;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fuser::{Config, MountOption, SessionACL};

use crate::cleanup;
use fs::FailingFs;
use nodes::Nodes;

/// A FUSE file system over a temporary directory, whose `fsync` fails on
/// demand (see the module's doc). Unmounted when dropped.
#[derive(Debug)]
pub struct FsyncFailingDisk {
    nodes: Arc<Mutex<Nodes>>,
    mount_point: tempfile::TempDir,
    session: Option<fuser::BackgroundSession>,
    _backing: tempfile::TempDir,
}

/// What the disk has done so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FsyncFailures {
    /// `fsync`s (and `fdatasync`s) answered with `EIO`.
    pub fsyncs_failed: u64,
    /// Pages whose write-back failed: never on the disk unless written
    /// again.
    pub pages_lost: u64,
}

impl FsyncFailingDisk {
    /// Mounts the file system on a fresh directory, over a fresh backing
    /// directory, open to every user (`allow_other`, the kernel checking
    /// permissions), as a tmpfs mounted with mode 1777 would be.
    ///
    /// Panics, saying why, when it cannot (the test needs root and
    /// `/dev/fuse`).
    pub fn mount() -> FsyncFailingDisk {
        let dir = |prefix: &str| {
            tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .unwrap_or_else(|e| panic!("cannot make a temporary directory: {e}"))
        };
        let backing = dir("workerid-fsync-failing-backing-");
        let mount_point = dir("workerid-fsync-failing-");
        let nodes = Nodes::new(backing.path())
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", backing.path().display()));
        let nodes = Arc::new(Mutex::new(nodes));
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("workerid-fsync-failing".into()),
            MountOption::DefaultPermissions,
            MountOption::Dev,
            MountOption::Suid,
        ];
        config.acl = SessionACL::All;
        config.n_threads = Some(4);
        let filesystem = FailingFs {
            nodes: Arc::clone(&nodes),
        };
        let session =
            fuser::spawn_mount(filesystem, mount_point.path(), &config).unwrap_or_else(|e| {
                panic!(
                    "cannot mount a FUSE file system on {} (the test needs root and \
                     /dev/fuse): {e}",
                    mount_point.path().display()
                )
            });
        cleanup::register_mount(mount_point.path().to_path_buf());
        std::fs::set_permissions(
            mount_point.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o1777),
        )
        .unwrap_or_else(|e| panic!("cannot open up {}: {e}", mount_point.path().display()));
        FsyncFailingDisk {
            nodes,
            mount_point,
            session: Some(session),
            _backing: backing,
        }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.mount_point.path()
    }

    fn nodes(&self) -> MutexGuard<'_, Nodes> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes every `fsync` fail from now on (see the module's doc).
    pub fn fail(&self) {
        self.nodes().failing = true;
    }

    /// Ends the failure, under the same mount: `fsync`s succeed again
    /// (but for the one error every file opened before it is owed), and
    /// what the failed ones lost stays lost.
    pub fn heal(&self) {
        self.nodes().failing = false;
    }

    /// Drops the pages whose write-back failed, as if never written (as
    /// `echo 1 > /proc/sys/vm/drop_caches` drops such clean pages from
    /// Linux's page cache; here the size falls back too): reads then show
    /// what the disk holds there, in files open or not; the kernel's own
    /// cache of those files is invalidated. Returns how many pages were
    /// dropped.
    ///
    /// # Panics
    /// When the backing directory cannot be read, or the kernel refuses
    /// the invalidation.
    pub fn drop_lost_pages(&self) -> u64 {
        let (dropped, changed) = self
            .nodes()
            .drop_lost()
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", self.path().display()));
        // Outside the lock: invalidating may have the kernel write mapped
        // pages back through the file system.
        if let Some(session) = &self.session {
            let notifier = session.notifier();
            for ino in changed {
                match notifier.inval_inode(fuser::INodeNo(ino), 0, 0) {
                    // The kernel forgot the file already: nothing cached.
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    done => done.unwrap_or_else(|e| {
                        panic!("cannot invalidate a file of {}: {e}", self.path().display())
                    }),
                }
            }
        }
        dropped
    }

    /// Whether the disk fails now.
    pub fn is_failed(&self) -> bool {
        self.nodes().failing
    }

    /// What the disk has done so far.
    pub fn failures(&self) -> FsyncFailures {
        let nodes = self.nodes();
        FsyncFailures {
            fsyncs_failed: nodes.fsyncs_failed,
            pages_lost: nodes.pages_lost,
        }
    }

    /// Writes every file's dirty pages to the disk (`syncfs`), or loses
    /// them while the disk fails.
    ///
    /// # Panics
    /// When the backing directory cannot be written.
    pub fn sync(&self) {
        self.nodes()
            .write_back_all()
            .unwrap_or_else(|e| panic!("cannot write back {}: {e}", self.path().display()));
    }

    /// The disk mounted again after it was cut off: every page the cache
    /// held is gone, dirty or lost, as after a crash, and no error is left
    /// to report. Files then read what reached the disk.
    ///
    /// # Panics
    /// While something still holds a file open on it after 10 s (stop the
    /// store's servers, and drop the clients that opened its files,
    /// first).
    pub fn remount(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let open = self.nodes().open_files();
            if open == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "cannot mount {} again: {open} files are still open on it (stop every \
                 process with a file on it first)",
                self.path().display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.nodes().remount();
    }
}

impl Drop for FsyncFailingDisk {
    fn drop(&mut self) {
        // Dropping the session unmounts lazily, as a server killed moments
        // ago may still hold a file; its thread ends with the connection.
        drop(self.session.take());
        cleanup::unregister_mount(self.path());
    }
}
