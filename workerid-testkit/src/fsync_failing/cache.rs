//! One file's page cache over its backing file, as Linux keeps it for a
//! disk: writes land in dirty pages, which reach the backing file only
//! when written back (an `fsync`, a `syncfs`). A write-back while the disk
//! fails loses the pages: they stay readable (clean, as Linux leaves them)
//! but never reach the backing file, and the error is reported once to
//! every open file, as Linux's `errseq` does.
//!
//! The backing file grows only with data that reaches it, as XFS updates
//! a file's size on disk only once the write it covers completed: a lost
//! write at the end of a file leaves it shorter on the disk, one in the
//! middle leaves a hole.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The page size the cache works in.
pub(crate) const PAGE: u64 = 4096;

#[derive(Debug)]
struct Page {
    data: Box<[u8]>,
    /// Its write-back failed: readable until the cache is dropped, never
    /// written to the backing file unless written again.
    lost: bool,
    /// How far into the page the file reaches (written, or read from the
    /// disk).
    len: usize,
}

/// The cached pages of one file, their size as readers see it, and the
/// write-back errors opened files have to be told of.
#[derive(Debug, Default)]
pub(crate) struct FileCache {
    pages: BTreeMap<u64, Page>,
    /// The size readers see, while pages are cached; else the backing
    /// file's own.
    size: Option<u64>,
    /// How many write-backs failed (Linux's `errseq` counter).
    errors: u64,
    /// Whether an `fsync` has reported the latest error.
    seen: bool,
}

/// What a write-back did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WrittenBack {
    /// Pages written to the backing file.
    pub stored: u64,
    /// Pages lost (the disk was failing).
    pub lost: u64,
}

impl FileCache {
    /// The size readers see.
    pub fn size(&self, backing: &File) -> io::Result<u64> {
        match self.size {
            Some(size) => Ok(size),
            None => Ok(backing.metadata()?.len()),
        }
    }

    /// Whether any page is cached (dirty or lost).
    pub fn holds_pages(&self) -> bool {
        !self.pages.is_empty()
    }

    /// Writes `data` at `offset` into the cache (the pages it touches are
    /// read from the backing file first).
    pub fn write(&mut self, backing: &File, offset: u64, data: &[u8]) -> io::Result<()> {
        let size = self.size(backing)?;
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let index = at / PAGE;
            let within = (at % PAGE) as usize;
            let n = (PAGE as usize - within).min(data.len() - done);
            let page = match self.pages.entry(index) {
                std::collections::btree_map::Entry::Occupied(page) => page.into_mut(),
                std::collections::btree_map::Entry::Vacant(vacant) => {
                    let mut buffer = vec![0u8; PAGE as usize].into_boxed_slice();
                    read_backing(backing, index * PAGE, size, &mut buffer)?;
                    let len = size.saturating_sub(index * PAGE).min(PAGE) as usize;
                    vacant.insert(Page {
                        data: buffer,
                        lost: false,
                        len,
                    })
                }
            };
            page.data[within..within + n].copy_from_slice(&data[done..done + n]);
            page.lost = false;
            page.len = page.len.max(within + n);
            done += n;
        }
        self.size = Some(size.max(offset + data.len() as u64));
        Ok(())
    }

    /// Reads up to `len` bytes at `offset`: cached pages where there are
    /// any, the backing file elsewhere, zeros past its end.
    pub fn read(&self, backing: &File, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let size = self.size(backing)?;
        let end = size.min(offset.saturating_add(len));
        if end <= offset {
            return Ok(Vec::new());
        }
        let backing_len = backing.metadata()?.len().min(size);
        let mut out = vec![0u8; (end - offset) as usize];
        let mut at = offset;
        while at < end {
            let index = at / PAGE;
            let within = (at % PAGE) as usize;
            let n = ((PAGE as usize) - within).min((end - at) as usize);
            let into = &mut out[(at - offset) as usize..(at - offset) as usize + n];
            match self.pages.get(&index) {
                Some(page) => into.copy_from_slice(&page.data[within..within + n]),
                None => read_backing(backing, at, backing_len, into)?,
            }
            at += n as u64;
        }
        Ok(out)
    }

    /// Sets the size (a metadata change: the backing file's size changes
    /// at once). Cached bytes past it are dropped.
    pub fn truncate(&mut self, backing: &File, size: u64) -> io::Result<()> {
        backing.set_len(size)?;
        let first_gone = size.div_ceil(PAGE);
        self.pages.split_off(&first_gone);
        if let Some(page) = self.pages.get_mut(&(size / PAGE)) {
            page.data[(size % PAGE) as usize..].fill(0);
            page.len = page.len.min((size % PAGE) as usize);
        }
        self.size = if self.pages.is_empty() {
            None
        } else {
            Some(size)
        };
        Ok(())
    }

    /// Grows the size to at least `size` (`fallocate` without
    /// `FALLOC_FL_KEEP_SIZE`, which grew the backing file itself).
    pub fn grow_to(&mut self, size: u64) {
        if let Some(current) = self.size.as_mut() {
            *current = (*current).max(size);
        }
    }

    /// Writes the dirty pages back. On a `failing` disk they are lost
    /// instead and the error counted; else each reaches the backing file,
    /// as far into the page as the file reaches.
    pub fn write_back(&mut self, backing: &File, failing: bool) -> io::Result<WrittenBack> {
        let mut done = WrittenBack::default();
        let dirty = self.pages.values().filter(|page| !page.lost).count() as u64;
        if failing {
            if dirty == 0 {
                return Ok(done);
            }
            for page in self.pages.values_mut() {
                page.lost = true;
            }
            done.lost = dirty;
            self.errors += 1;
            self.seen = false;
            return Ok(done);
        }
        for (index, page) in &self.pages {
            if page.lost {
                continue;
            }
            backing.write_all_at(&page.data[..page.len], index * PAGE)?;
            done.stored += 1;
        }
        self.pages.retain(|_, page| page.lost);
        if self.pages.is_empty() {
            self.size = None;
        }
        Ok(done)
    }

    /// What an opened file samples: an error no `fsync` reported yet is
    /// reported to it too.
    pub fn sample(&self) -> u64 {
        if self.errors > 0 && !self.seen {
            self.errors - 1
        } else {
            self.errors
        }
    }

    /// Whether an `fsync` through a file that sampled `seen` must report an
    /// error; marks it reported.
    pub fn take_error(&mut self, seen: &mut u64) -> bool {
        if self.errors > *seen {
            *seen = self.errors;
            self.seen = true;
            true
        } else {
            false
        }
    }

    /// Drops the pages whose write-back failed, as if never written: reads
    /// then show what the backing file holds there, and the size is what
    /// the backing file and the dirty pages reach. Dirty pages stay.
    /// Returns how many were dropped.
    pub fn drop_lost(&mut self, backing: &File) -> io::Result<u64> {
        let before = self.pages.len();
        self.pages.retain(|_, page| !page.lost);
        self.size = if self.pages.is_empty() {
            None
        } else {
            let written = self
                .pages
                .iter()
                .map(|(index, page)| index * PAGE + page.len as u64)
                .max()
                .unwrap_or(0);
            Some(written.max(backing.metadata()?.len()))
        };
        Ok((before - self.pages.len()) as u64)
    }

    /// The disk mounted again after it was cut off: every page the cache
    /// held, dirty or lost, is gone, and no error is left to report.
    /// Returns how many pages were dropped.
    pub fn remount(&mut self) -> u64 {
        let dropped = self.pages.len() as u64;
        *self = FileCache::default();
        dropped
    }
}

/// Reads the backing file at `offset` into `into`, zeros at and past
/// `len` (its end).
fn read_backing(backing: &File, offset: u64, len: u64, into: &mut [u8]) -> io::Result<()> {
    into.fill(0);
    if offset >= len {
        return Ok(());
    }
    let n = ((len - offset) as usize).min(into.len());
    let mut done = 0;
    while done < n {
        match backing.read_at(&mut into[done..n], offset + done as u64)? {
            0 => break,
            read => done += read,
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
