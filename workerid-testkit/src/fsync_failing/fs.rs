//! The FUSE file system: the backing directory passed through, file data
//! through each file's page cache ([`super::cache`]), and an `fsync` that
//! fails while the disk does. Directory operations and other metadata
//! reach the backing directory at once: the file system keeps its own
//! metadata, whatever happens to file data.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::DirEntryExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use super::answer::{errno, Answer};
use super::nodes::{c_name, c_path, check, time_spec, Handle, Nodes};

/// Nothing is cached by the kernel beyond a call: sizes and names always
/// come from here, which a remount changes under it.
pub(crate) const TTL: Duration = Duration::ZERO;

/// The file system, sharing its state with the disk that controls it.
pub(crate) struct FailingFs {
    pub nodes: Arc<Mutex<Nodes>>,
}

fn lock(nodes: &Mutex<Nodes>) -> MutexGuard<'_, Nodes> {
    nodes
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl FailingFs {
    fn entry(&self, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        reply.answer(lock(&self.nodes).lookup(parent.0, name));
    }

    /// Makes `name` in `parent` with `syscall` (given the directory and
    /// the name), gives it to the caller with exactly `mode` (the daemon's
    /// own umask left out), and looks it up; all under the lock, so that
    /// no descriptor is closed under a call.
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: Option<u32>,
        syscall: impl FnOnce(i32, &std::ffi::CStr) -> i32,
    ) -> io::Result<(u64, FileAttr)> {
        let mut nodes = lock(&self.nodes);
        let dir = nodes.get(parent.0)?.path.as_raw_fd();
        let c = c_name(name)?;
        check(syscall(dir, &c))?;
        // SAFETY: plain syscalls on a descriptor we hold and a C string
        // we own.
        check(unsafe {
            libc::fchownat(
                dir,
                c.as_ptr(),
                req.uid(),
                req.gid(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })?;
        if let Some(mode) = mode {
            // SAFETY: as above.
            check(unsafe { libc::fchmodat(dir, c.as_ptr(), mode & 0o7777, 0) })?;
        }
        nodes.lookup(parent.0, name)
    }

    /// Runs `f` with the descriptor of the directory `ino`, under the lock.
    fn in_dir<T>(&self, ino: INodeNo, f: impl FnOnce(i32) -> io::Result<T>) -> io::Result<T> {
        let mut nodes = lock(&self.nodes);
        f(nodes.get(ino.0)?.path.as_raw_fd())
    }
}

impl Filesystem for FailingFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.entry(parent, name, reply);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        lock(&self.nodes).forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match lock(&self.nodes)
            .get(ino.0)
            .and_then(|node| node.attr(ino.0))
        {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut nodes = lock(&self.nodes);
        let done = (|| {
            let node = nodes.get(ino.0)?;
            let path = c_path(&node.proc_path())?;
            let fd = node.path.as_raw_fd();
            if let Some(mode) = mode {
                // SAFETY: plain syscalls on a descriptor we hold and C
                // strings we own, here and below.
                check(unsafe { libc::chmod(path.as_ptr(), mode & 0o7777) })?;
            }
            if uid.is_some() || gid.is_some() {
                check(unsafe {
                    libc::fchownat(
                        fd,
                        c"".as_ptr(),
                        uid.unwrap_or(u32::MAX),
                        gid.unwrap_or(u32::MAX),
                        libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
                    )
                })?;
            }
            if let Some(size) = size {
                node.with_cache(|cache, data| cache.truncate(data, size))?;
            }
            if atime.is_some() || mtime.is_some() {
                let times = [time_spec(atime), time_spec(mtime)];
                check(unsafe {
                    libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0)
                })?;
            }
            node.attr(ino.0)
        })();
        reply.answer(done);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let done = self.in_dir(ino, |fd| {
            let mut buffer = vec![0u8; libc::PATH_MAX as usize];
            // SAFETY: the kernel writes at most `buffer.len()` bytes.
            let n = unsafe {
                libc::readlinkat(fd, c"".as_ptr(), buffer.as_mut_ptr().cast(), buffer.len())
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            buffer.truncate(n as usize);
            Ok(buffer)
        });
        reply.answer(done);
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let mode = mode & !umask;
        // SAFETY: a plain syscall on a descriptor we hold.
        let done = self.make(req, parent, name, Some(mode), |dir, c| unsafe {
            libc::mknodat(dir, c.as_ptr(), mode, rdev as _)
        });
        reply.answer(done);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mode = mode & !umask;
        // SAFETY: a plain syscall on a descriptor we hold.
        let done = self.make(req, parent, name, Some(mode), |dir, c| unsafe {
            libc::mkdirat(dir, c.as_ptr(), mode)
        });
        reply.answer(done);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        remove(self, parent, name, 0, reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        remove(self, parent, name, libc::AT_REMOVEDIR, reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let done = c_path(target).and_then(|target| {
            // SAFETY: a plain syscall on a descriptor we hold.
            self.make(req, parent, link_name, None, |dir, c| unsafe {
                libc::symlinkat(target.as_ptr(), dir, c.as_ptr())
            })
        });
        reply.answer(done);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let done = (|| {
            let mut nodes = lock(&self.nodes);
            let from = nodes.get(parent.0)?.path.as_raw_fd();
            let to = nodes.get(newparent.0)?.path.as_raw_fd();
            let (old, new) = (c_name(name)?, c_name(newname)?);
            // SAFETY: a plain syscall on descriptors we hold.
            check(unsafe { libc::renameat2(from, old.as_ptr(), to, new.as_ptr(), flags.bits()) })
        })();
        reply.answer(done);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let done = (|| {
            let mut nodes = lock(&self.nodes);
            let from = c_path(&nodes.get(ino.0)?.proc_path())?;
            let dir = nodes.get(newparent.0)?.path.as_raw_fd();
            let c = c_name(newname)?;
            // SAFETY: a plain syscall on a descriptor we hold.
            check(unsafe {
                libc::linkat(
                    libc::AT_FDCWD,
                    from.as_ptr(),
                    dir,
                    c.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
            })?;
            nodes.lookup(newparent.0, newname)
        })();
        reply.answer(done);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut nodes = lock(&self.nodes);
        let done = nodes.open_file(ino.0, flags.0 & libc::O_TRUNC != 0);
        reply.answer(done);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let done = (|| {
            let mut nodes = lock(&self.nodes);
            let dir = nodes.get(parent.0)?.path.as_raw_fd();
            let c = c_name(name)?;
            let mode = mode & !umask;
            let open = |flags: i32| {
                // SAFETY: a plain syscall on a descriptor we hold; the
                // descriptor it returns is owned below.
                let fd = unsafe { libc::openat(dir, c.as_ptr(), flags, mode) };
                if fd < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    // SAFETY: `fd` was just opened and is owned by nothing else.
                    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
                }
            };
            // Made here, it is the caller's; a file that was there already
            // (without O_EXCL asked) keeps its owner and mode.
            match open(libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC) {
                Ok(made) => {
                    // SAFETY: plain syscalls on a descriptor we own.
                    check(unsafe { libc::fchown(made.as_raw_fd(), req.uid(), req.gid()) })?;
                    check(unsafe { libc::fchmod(made.as_raw_fd(), mode & 0o7777) })?;
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) && flags & libc::O_EXCL == 0 => {
                    drop(open(libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW)?);
                }
                Err(e) => return Err(e),
            }
            let (ino, attr) = nodes.lookup(parent.0, name)?;
            let fh = nodes.open_file(ino, flags & libc::O_TRUNC != 0)?;
            Ok((attr, fh))
        })();
        match done {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(fh),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut nodes = lock(&self.nodes);
        let done = nodes.get(ino.0).and_then(|node| {
            node.with_cache(|cache, data| cache.read(data, offset, u64::from(size)))
        });
        reply.answer(done);
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut nodes = lock(&self.nodes);
        let done = nodes
            .get(ino.0)
            .and_then(|node| node.with_cache(|cache, backing| cache.write(backing, offset, data)));
        match done {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        lock(&self.nodes).release(fh.0);
        reply.ok();
    }

    /// Writes the file's pages back; fails with `EIO` while the disk
    /// fails (the pages lost), and once more through every file opened
    /// before a write-back of it failed.
    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut nodes = lock(&self.nodes);
        let done = (|| {
            nodes.write_back(ino.0)?;
            let failing = nodes.failing;
            let mut seen = match nodes.handles.get(&fh.0) {
                Some(Handle::File { seen, .. }) => *seen,
                _ => nodes.get(ino.0)?.cache.sample(),
            };
            let reported = nodes.get(ino.0)?.cache.take_error(&mut seen);
            if let Some(Handle::File { seen: kept, .. }) = nodes.handles.get_mut(&fh.0) {
                *kept = seen;
            }
            Ok(failing || reported)
        })();
        match done {
            Ok(false) => reply.ok(),
            Ok(true) => {
                nodes.fsyncs_failed += 1;
                reply.error(Errno::EIO);
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut nodes = lock(&self.nodes);
        let done = (|| {
            let node = nodes.get(ino.0)?;
            let mut entries = vec![
                (ino.0, FileType::Directory, ".".into()),
                (ino.0, FileType::Directory, "..".into()),
            ];
            for entry in std::fs::read_dir(node.proc_path())? {
                let entry = entry?;
                // The backing file's inode number: readdir's are only
                // informational, the kernel looks every name up.
                let kind = FileType::from_std(entry.file_type()?).unwrap_or(FileType::RegularFile);
                entries.push((entry.ino(), kind, entry.file_name()));
            }
            Ok(nodes.open(Handle::Dir(entries)))
        })();
        reply.answer(done);
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let nodes = lock(&self.nodes);
        let Some(Handle::Dir(entries)) = nodes.handles.get(&fh.0) else {
            reply.error(Errno::EBADF);
            return;
        };
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), i as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        lock(&self.nodes).release(fh.0);
        reply.ok();
    }

    /// Directories are metadata, kept at once: their `fsync` fails only
    /// while the disk does.
    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut nodes = lock(&self.nodes);
        if nodes.failing {
            nodes.fsyncs_failed += 1;
            reply.error(Errno::EIO);
        } else {
            reply.ok();
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let done = (|| {
            let mut nodes = lock(&self.nodes);
            let root = c_path(&nodes.get(INodeNo::ROOT.0)?.proc_path())?;
            // SAFETY: plain data the kernel fills.
            let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
            // SAFETY: a plain syscall on a C string we own.
            check(unsafe { libc::statvfs(root.as_ptr(), &mut stat) })?;
            Ok(stat)
        })();
        match done {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // `default_permissions`: the kernel checks.
        reply.ok();
    }

    /// Space is allocated at once (metadata); other modes are refused.
    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            reply.error(Errno::EOPNOTSUPP);
            return;
        }
        let mut nodes = lock(&self.nodes);
        let done = nodes.get(ino.0).and_then(|node| {
            node.with_cache(|cache, data| {
                // SAFETY: a plain syscall on a file we hold open.
                check(unsafe {
                    libc::fallocate(data.as_raw_fd(), mode, offset as i64, length as i64)
                })?;
                if mode == 0 {
                    cache.grow_to(offset + length);
                }
                Ok(())
            })
        });
        reply.answer(done);
    }
}

fn remove(fs: &FailingFs, parent: INodeNo, name: &OsStr, flags: i32, reply: ReplyEmpty) {
    let done = fs.in_dir(parent, |dir| {
        let c = c_name(name)?;
        // SAFETY: a plain syscall on a descriptor we hold.
        check(unsafe { libc::unlinkat(dir, c.as_ptr(), flags) })
    });
    reply.answer(done);
}
