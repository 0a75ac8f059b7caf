//! A small file system of its own for a store's data: a size-limited tmpfs
//! mounted by the test (as root), which the test fills up and empties again.
//!
//! ```no_run
//! use workerid_testkit::{small_disk::SmallDisk, StoreKind};
//!
//! let disk = SmallDisk::mount(256);
//! let store = disk.start(StoreKind::Postgres); // its data on the small disk
//! disk.fill(); // writes now fail with "no space left on device"
//! disk.free();
//! ```

use std::cell::RefCell;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{RunningStore, StoreKind};

thread_local! {
    /// Where this thread's servers make their directories, if not in the
    /// system's temporary directory.
    static PARENT: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
}

/// A temporary directory for a server or a store file: under the small disk
/// a [`SmallDisk::start`] on this thread is starting, else the system's.
pub(crate) fn temp_dir(prefix: &str) -> tempfile::TempDir {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    let made = match PARENT.with(|p| p.borrow().clone()) {
        Some(parent) => builder.tempdir_in(parent),
        None => builder.tempdir(),
    };
    made.unwrap_or_else(|e| panic!("cannot make a temporary directory: {e}"))
}

/// Starts a store of `kind` whose servers (or file) keep their data under
/// `parent`.
pub(crate) fn start_under(parent: &Path, kind: StoreKind) -> RunningStore {
    PARENT.with(|p| *p.borrow_mut() = Some(parent.to_path_buf()));
    let store = std::panic::catch_unwind(|| kind.start());
    PARENT.with(|p| *p.borrow_mut() = None);
    store.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// A size-limited tmpfs, unmounted when dropped.
#[derive(Debug)]
pub struct SmallDisk {
    mount_point: tempfile::TempDir,
}

const FILLER: &str = "filler";

impl SmallDisk {
    /// Mounts a tmpfs of `mib` MiB on a fresh directory.
    ///
    /// Panics, saying why, when it cannot (the test needs root).
    pub fn mount(mib: u64) -> SmallDisk {
        let mount_point = tempfile::Builder::new()
            .prefix("workerid-small-disk-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot make a temporary directory: {e}"));
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={mib}m,mode=1777"),
                "tmpfs",
            ])
            .arg(mount_point.path())
            .output()
            .unwrap_or_else(|e| panic!("cannot run mount: {e}"));
        assert!(
            out.status.success(),
            "cannot mount a tmpfs of {mib} MiB (the disk tests need root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk { mount_point }
    }

    /// Mounts a disk that holds a fresh store of `kind` with room for a
    /// short run: 16 MiB for a SQLite file, 32 for Redis's AOF, 128 for
    /// PostgreSQL, 160 for etcd (its WAL preallocates 64 MiB), 256 for
    /// MariaDB (its system tables and InnoDB's files), 512 for an etcd
    /// cluster's three members.
    ///
    /// Panics as [`mount`](Self::mount) does.
    pub fn for_store(kind: StoreKind) -> SmallDisk {
        let mib = match kind {
            StoreKind::Sqlite => 16,
            StoreKind::Postgres => 128,
            StoreKind::MariaDb => 256,
            StoreKind::Etcd => 160,
            StoreKind::EtcdCluster => 512,
            _ => 32,
        };
        SmallDisk::mount(mib)
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.mount_point.path()
    }

    /// Starts a store of `kind` whose servers (or file) keep their data on
    /// this disk.
    pub fn start(&self, kind: StoreKind) -> RunningStore {
        start_under(self.path(), kind)
    }

    /// Bytes still free for writing.
    pub fn available(&self) -> u64 {
        let path = std::ffi::CString::new(self.path().as_os_str().as_encoded_bytes())
            .expect("a path without NUL");
        // SAFETY: statvfs writes into the zeroed struct we own.
        let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::statvfs(path.as_ptr(), &mut stat) } == 0;
        assert!(ok, "statvfs {}", self.path().display());
        stat.f_bavail as u64 * stat.f_frsize as u64
    }

    /// Fills the disk: writes a filler file until the file system says it
    /// has no space left. Returns the bytes written.
    pub fn fill(&self) -> u64 {
        let mut file = File::options()
            .create(true)
            .append(true)
            .open(self.path().join(FILLER))
            .unwrap_or_else(|e| panic!("cannot open the filler file: {e}"));
        let block = vec![0u8; 1 << 16];
        let mut written = 0u64;
        loop {
            match file.write(&block) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("writing the filler file: {e}"),
            }
        }
        // What is left is less than a block: take that too.
        let mut byte = [0u8; 1];
        while let Ok(1) = file.write(&byte[..]) {
            written += 1;
            byte[0] = 0;
        }
        written
    }

    /// Empties what [`fill`](Self::fill) wrote.
    pub fn free(&self) {
        let _ = std::fs::remove_file(self.path().join(FILLER));
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: a server killed moments ago may still hold a file open.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.mount_point.path())
            .output();
    }
}
