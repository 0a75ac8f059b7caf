//! The file system's state: the backing directory's files it has handed
//! to the kernel (each held by an `O_PATH` descriptor, so renames and
//! unlinks under it never confuse them), their page caches, and the open
//! files and directories.

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use fuser::{FileAttr, FileType, INodeNo, TimeOrNow};

use super::cache::{FileCache, WrittenBack};

/// One file or directory of the backing directory.
#[derive(Debug)]
pub(crate) struct Node {
    /// An `O_PATH` descriptor of it.
    pub path: OwnedFd,
    /// It opened for reading and writing (regular files, once opened).
    pub data: Option<File>,
    pub cache: FileCache,
    /// The kernel's lookups not yet forgotten.
    pub lookups: u64,
    /// Open files of it.
    pub opened: u64,
    key: (u64, u64),
}

impl Node {
    /// `/proc/self/fd/N` for it: opening that reopens the file itself.
    pub fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.path.as_raw_fd()))
    }

    /// Runs `f` on its page cache and its backing file, opened for
    /// reading and writing once.
    pub fn with_cache<T>(
        &mut self,
        f: impl FnOnce(&mut FileCache, &File) -> io::Result<T>,
    ) -> io::Result<T> {
        let path = self.proc_path();
        let Node { data, cache, .. } = self;
        let file = match data {
            Some(file) => file,
            slot => slot.insert(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)?,
            ),
        };
        f(cache, file)
    }

    /// Its attributes, the size as the page cache shows it.
    pub fn attr(&mut self, ino: u64) -> io::Result<FileAttr> {
        let stat = fstat(&self.path)?;
        let kind = file_type(stat.st_mode);
        let mut size = stat.st_size as u64;
        if kind == FileType::RegularFile && self.cache.holds_pages() {
            size = self.with_cache(|cache, data| cache.size(data))?;
        }
        let time = |secs: i64, nsecs: i64| {
            SystemTime::UNIX_EPOCH + Duration::new(secs.max(0) as u64, nsecs as u32)
        };
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: (stat.st_blocks as u64).max(size.div_ceil(512)),
            atime: time(stat.st_atime, stat.st_atime_nsec),
            mtime: time(stat.st_mtime, stat.st_mtime_nsec),
            ctime: time(stat.st_ctime, stat.st_ctime_nsec),
            crtime: time(stat.st_ctime, stat.st_ctime_nsec),
            kind,
            perm: (stat.st_mode & 0o7777) as u16,
            nlink: stat.st_nlink as u32,
            uid: stat.st_uid,
            gid: stat.st_gid,
            rdev: stat.st_rdev as u32,
            blksize: 4096,
            flags: 0,
        })
    }
}

/// An open file or directory.
#[derive(Debug)]
pub(crate) enum Handle {
    /// A file, and the write-back errors it has been told of.
    File { ino: u64, seen: u64 },
    /// A directory's entries as they were when it was opened.
    Dir(Vec<(u64, FileType, OsString)>),
}

/// Everything the file system keeps, behind one lock.
#[derive(Debug)]
pub(crate) struct Nodes {
    nodes: HashMap<u64, Node>,
    by_key: HashMap<(u64, u64), u64>,
    next_ino: u64,
    pub handles: HashMap<u64, Handle>,
    next_handle: u64,
    /// Whether every `fsync` fails (and every write-back loses its pages).
    pub failing: bool,
    /// `fsync`s answered with `EIO`.
    pub fsyncs_failed: u64,
    /// Pages whose write-back failed.
    pub pages_lost: u64,
}

impl Nodes {
    /// The state of a file system over the directory `root`.
    pub fn new(root: &std::path::Path) -> io::Result<Nodes> {
        let path = open_path(libc::AT_FDCWD, root.as_os_str())?;
        let mut nodes = Nodes {
            nodes: HashMap::new(),
            by_key: HashMap::new(),
            next_ino: 2,
            handles: HashMap::new(),
            next_handle: 1,
            failing: false,
            fsyncs_failed: 0,
            pages_lost: 0,
        };
        let key = key_of(&fstat(&path)?);
        nodes.by_key.insert(key, INodeNo::ROOT.0);
        nodes.nodes.insert(
            INodeNo::ROOT.0,
            Node {
                path,
                data: None,
                cache: FileCache::default(),
                lookups: 1,
                opened: 0,
                key,
            },
        );
        Ok(nodes)
    }

    /// The node `ino`, or `ENOENT`.
    pub fn get(&mut self, ino: u64) -> io::Result<&mut Node> {
        self.nodes
            .get_mut(&ino)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
    }

    /// Looks `name` up in the directory `parent`, counting a lookup of it.
    pub fn lookup(&mut self, parent: u64, name: &OsStr) -> io::Result<(u64, FileAttr)> {
        let dir = self.get(parent)?.path.as_raw_fd();
        let path = open_path(dir, name)?;
        let key = key_of(&fstat(&path)?);
        let ino = match self.by_key.get(&key) {
            Some(&ino) => ino,
            None => {
                let ino = self.next_ino;
                self.next_ino += 1;
                self.by_key.insert(key, ino);
                self.nodes.insert(
                    ino,
                    Node {
                        path,
                        data: None,
                        cache: FileCache::default(),
                        lookups: 0,
                        opened: 0,
                        key,
                    },
                );
                ino
            }
        };
        let node = self.get(ino)?;
        match node.attr(ino) {
            Ok(attr) => {
                node.lookups += 1;
                Ok((ino, attr))
            }
            Err(e) => {
                self.let_go(ino);
                Err(e)
            }
        }
    }

    /// The kernel forgot `n` lookups of `ino`: a node no longer looked up,
    /// opened or holding cached pages is let go.
    pub fn forget(&mut self, ino: u64, n: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.lookups = node.lookups.saturating_sub(n);
        }
        self.let_go(ino);
    }

    fn let_go(&mut self, ino: u64) {
        let idle = self.nodes.get(&ino).is_some_and(|node| {
            ino != INodeNo::ROOT.0
                && node.lookups == 0
                && node.opened == 0
                && !node.cache.holds_pages()
        });
        if idle {
            if let Some(node) = self.nodes.remove(&ino) {
                self.by_key.remove(&node.key);
            }
        }
    }

    /// Opens a handle.
    pub fn open(&mut self, handle: Handle) -> u64 {
        if let Handle::File { ino, .. } = handle {
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.opened += 1;
            }
        }
        let fh = self.next_handle;
        self.next_handle += 1;
        self.handles.insert(fh, handle);
        fh
    }

    /// Opens the file `ino` (emptied first when `truncate`, as `O_TRUNC`
    /// asks), sampling the write-back errors it will be told of.
    pub fn open_file(&mut self, ino: u64, truncate: bool) -> io::Result<u64> {
        let node = self.get(ino)?;
        if truncate {
            node.with_cache(|cache, data| cache.truncate(data, 0))?;
        } else {
            node.with_cache(|_, _| Ok(()))?;
        }
        let seen = node.cache.sample();
        Ok(self.open(Handle::File { ino, seen }))
    }

    /// Closes a handle.
    pub fn release(&mut self, fh: u64) {
        if let Some(Handle::File { ino, .. }) = self.handles.remove(&fh) {
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.opened = node.opened.saturating_sub(1);
            }
            self.let_go(ino);
        }
    }

    /// Writes back the pages of `ino` (as an `fsync` would), counting what
    /// was lost.
    pub fn write_back(&mut self, ino: u64) -> io::Result<WrittenBack> {
        let failing = self.failing;
        let node = self.get(ino)?;
        if !node.cache.holds_pages() {
            return Ok(WrittenBack::default());
        }
        let done = node.with_cache(|cache, data| cache.write_back(data, failing))?;
        self.pages_lost += done.lost;
        Ok(done)
    }

    /// Writes back every file's pages (a `syncfs`).
    pub fn write_back_all(&mut self) -> io::Result<WrittenBack> {
        let failing = self.failing;
        let mut all = WrittenBack::default();
        for ino in self.cached() {
            let done = self
                .get(ino)?
                .with_cache(|cache, data| cache.write_back(data, failing))?;
            all.stored += done.stored;
            all.lost += done.lost;
            self.let_go(ino);
        }
        self.pages_lost += all.lost;
        Ok(all)
    }

    /// Drops every file's pages whose write-back failed (see
    /// [`FileCache::drop_lost`]); returns how many, and the files whose
    /// pages changed.
    pub fn drop_lost(&mut self) -> io::Result<(u64, Vec<u64>)> {
        let mut dropped = 0;
        let mut changed = Vec::new();
        for ino in self.cached() {
            let n = self
                .get(ino)?
                .with_cache(|cache, data| cache.drop_lost(data))?;
            if n > 0 {
                dropped += n;
                changed.push(ino);
            }
            self.let_go(ino);
        }
        Ok((dropped, changed))
    }

    /// The disk mounted again after it was cut off: every page of every
    /// file is gone (see [`FileCache::remount`]), and the backing files
    /// are closed. Returns how many pages were dropped.
    pub fn remount(&mut self) -> u64 {
        let mut dropped = 0;
        let inos: Vec<u64> = self.nodes.keys().copied().collect();
        for ino in inos {
            if let Some(node) = self.nodes.get_mut(&ino) {
                dropped += node.cache.remount();
                node.data = None;
            }
            self.let_go(ino);
        }
        dropped
    }

    /// The files holding cached pages.
    fn cached(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|(_, node)| node.cache.holds_pages())
            .map(|(&ino, _)| ino)
            .collect()
    }

    /// Files open now.
    pub fn open_files(&self) -> usize {
        self.handles
            .values()
            .filter(|handle| matches!(handle, Handle::File { .. }))
            .count()
    }
}

/// `openat(dir, name, O_PATH | O_NOFOLLOW)`.
pub(crate) fn open_path(dir: i32, name: &OsStr) -> io::Result<OwnedFd> {
    let name = c_name(name)?;
    // SAFETY: a plain syscall on a C string we own; the descriptor it
    // returns is ours.
    let fd = unsafe {
        libc::openat(
            dir,
            name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `name` as a C string (`EINVAL` on an inner NUL).
pub(crate) fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// A `-1` from a syscall as the error it set.
pub(crate) fn check(result: i32) -> io::Result<()> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: `stat` is plain data, filled by the kernel below.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the empty path with AT_EMPTY_PATH stats the descriptor itself.
    check(unsafe {
        libc::fstatat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            &mut stat,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(stat)
}

fn key_of(stat: &libc::stat) -> (u64, u64) {
    (stat.st_dev, stat.st_ino)
}

/// The FUSE file type of a `st_mode`.
pub(crate) fn file_type(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

/// A time for `utimensat`: left as it is when `None`.
pub(crate) fn time_spec(time: Option<TimeOrNow>) -> libc::timespec {
    match time {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(at)) => {
            let since = at
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            libc::timespec {
                tv_sec: since.as_secs() as libc::time_t,
                tv_nsec: since.subsec_nanos() as _,
            }
        }
    }
}

/// `path` as a C string (`EINVAL` on an inner NUL).
pub(crate) fn c_path(path: &std::path::Path) -> io::Result<std::ffi::CString> {
    c_name(path.as_os_str())
}
