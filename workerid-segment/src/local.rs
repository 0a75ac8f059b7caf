//! A per-task batcher over one tag's buffers.

use crate::{Result, TagHandle};

/// A batcher made by [`TagHandle::local`]: owned by one task, `&mut self`.
#[derive(Debug)]
pub struct LocalIds {
    handle: TagHandle,
    next: u64,
    end: u64,
    batch: u64,
}

impl LocalIds {
    pub(crate) fn new(handle: TagHandle, batch: u64) -> LocalIds {
        LocalIds {
            handle,
            next: 0,
            end: 0,
            batch,
        }
    }

    /// The next ID: from the local batch, else a new batch from the tag's
    /// current segment, else as [`TagHandle::next_id`].
    ///
    /// # Errors
    /// As [`TagHandle::next_id`].
    pub async fn next_id(&mut self) -> Result<u64> {
        if self.next < self.end {
            let id = self.next;
            self.next += 1;
            return Ok(id);
        }
        if let Some((first, end)) = self.handle.claim(self.batch) {
            self.next = first + 1;
            self.end = end;
            return Ok(first);
        }
        Box::pin(self.handle.switch_and_take()).await
    }
}
