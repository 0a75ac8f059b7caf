//! Each FUSE reply answered from what an operation did, or the error it
//! met, in one place.

use std::io;

use fuser::{
    Errno, FileAttr, FileHandle, FopenFlags, Generation, ReplyAttr, ReplyData, ReplyEmpty,
    ReplyEntry, ReplyOpen,
};

use super::fs::TTL;

/// The errno of an I/O error.
pub(crate) fn errno(e: io::Error) -> Errno {
    Errno::from(e)
}

/// A reply answered with what an operation did, or the error it met.
pub(crate) trait Answer<T> {
    fn answer(self, done: io::Result<T>);
}

macro_rules! answer {
    ($reply:ty, $done:ty, |$this:ident, $value:ident| $ok:expr) => {
        impl Answer<$done> for $reply {
            fn answer(self, done: io::Result<$done>) {
                let $this = self;
                match done {
                    Ok($value) => $ok,
                    Err(e) => $this.error(errno(e)),
                }
            }
        }
    };
}

answer!(ReplyEntry, (u64, FileAttr), |reply, entry| reply.entry(
    &TTL,
    &entry.1,
    Generation(0)
));
answer!(ReplyAttr, FileAttr, |reply, attr| reply.attr(&TTL, &attr));
answer!(ReplyEmpty, (), |reply, _done| reply.ok());
answer!(ReplyData, Vec<u8>, |reply, bytes| reply.data(&bytes));
answer!(ReplyOpen, u64, |reply, fh| reply
    .opened(FileHandle(fh), FopenFlags::empty()));
