//! Pages of the List calls: entries ordered by key, `page_size` at most,
//! and a token naming the last key served, so that the next page starts
//! after it whatever changed in the store between the two. Each page reads
//! the whole list from the store (stores list whole), which for lists of a
//! few thousand entries costs less than keeping a cursor.

use tonic::Status;

use super::status;

/// Entries in a page when the request leaves it to the server.
pub const DEFAULT_PAGE_SIZE: usize = 1000;

/// The most entries in a page: with the longest holder, namespace or tag
/// name, a page stays under 4 MB, the usual limit of a client's receive
/// buffer.
pub const MAX_PAGE_SIZE: usize = 10_000;

/// What a request asks for: where its page starts and how long it is.
pub struct PageRequest<K> {
    after: Option<K>,
    size: usize,
}

impl<K> PageRequest<K> {
    /// Reads `page_size` (0: [`DEFAULT_PAGE_SIZE`]; past
    /// [`MAX_PAGE_SIZE`]: that) and `page_token` (empty: the first page),
    /// the key `key_of` reads from it.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` (`invalid_page_token`) for a token that names no
    /// key of the call (`key_of` answers `None`).
    #[allow(clippy::result_large_err)]
    pub fn new(
        page_size: u32,
        page_token: &str,
        key_of: impl FnOnce(&str) -> Option<K>,
    ) -> Result<Self, Status> {
        let after = match page_token {
            "" => None,
            token => Some(key_of(token).ok_or_else(|| {
                status::invalid(
                    "invalid_page_token",
                    "page_token is not a next_page_token of this call",
                )
            })?),
        };
        let size = match usize::try_from(page_size).unwrap_or(usize::MAX) {
            0 => DEFAULT_PAGE_SIZE,
            n => n.min(MAX_PAGE_SIZE),
        };
        Ok(PageRequest { after, size })
    }
}

impl<K: Ord + ToString> PageRequest<K> {
    /// The page of `entries`, in the order of `key`, and the token of the
    /// next one, empty when this is the last. The entries are sorted here:
    /// a store lists them ordered, but by its own collation, which for
    /// names need not be the byte order the tokens compare in.
    pub fn take<T>(&self, mut entries: Vec<T>, key: impl Fn(&T) -> K) -> (Vec<T>, String) {
        entries.sort_by_cached_key(|entry| key(entry));
        let start = match &self.after {
            Some(after) => entries.partition_point(|entry| key(entry) <= *after),
            None => 0,
        };
        let end = start.saturating_add(self.size).min(entries.len());
        let next = if end < entries.len() {
            key(&entries[end - 1]).to_string()
        } else {
            String::new()
        };
        entries.truncate(end);
        entries.drain(..start);
        (entries, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(token: &str) -> Option<u32> {
        token.parse().ok()
    }

    fn pages(entries: &[u32], size: u32) -> Vec<Vec<u32>> {
        let mut token = String::new();
        let mut pages = Vec::new();
        loop {
            let request = PageRequest::new(size, &token, number).unwrap();
            let (page, next) = request.take(entries.to_vec(), |&e| e);
            pages.push(page);
            if next.is_empty() {
                return pages;
            }
            token = next;
        }
    }

    #[test]
    fn every_entry_once_in_order() {
        let entries: Vec<u32> = (0..25).map(|i| i * 3).collect();
        for size in [1, 2, 7, 24, 25, 26, 1000] {
            let pages = pages(&entries, size);
            assert!(pages
                .iter()
                .all(|p| !p.is_empty() && p.len() <= size as usize));
            assert_eq!(pages.concat(), entries, "{size}");
        }
        assert_eq!(pages(&[], 5), vec![Vec::<u32>::new()]);
    }

    #[test]
    fn the_size_defaults_and_is_capped() {
        let entries: Vec<u32> = (0..30_000).collect();
        let first = |size| {
            PageRequest::new(size, "", number)
                .unwrap()
                .take(entries.clone(), |&e| e)
        };
        assert_eq!(first(0).0.len(), DEFAULT_PAGE_SIZE);
        assert_eq!(first(u32::MAX).0.len(), MAX_PAGE_SIZE);
        assert_eq!(first(0).1, (DEFAULT_PAGE_SIZE - 1).to_string());
    }

    #[test]
    fn a_page_starts_after_its_token_whatever_changed() {
        let request = PageRequest::new(2, "b", |t| Some(t.to_owned())).unwrap();
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // "b" itself gone, "ba" new: the page goes on after "b".
        let (page, next) = request.take(names(&["a", "ba", "c", "d"]), String::clone);
        assert_eq!(page, names(&["ba", "c"]));
        assert_eq!(next, "c");
        let (page, next) = request.take(names(&["a", "b"]), String::clone);
        assert!(page.is_empty() && next.is_empty());
    }

    #[test]
    fn a_token_of_another_kind_is_refused() {
        for token in ["x", "-1", "4294967296", " 1"] {
            let refused = PageRequest::new(0, token, number).err().unwrap();
            assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{token}");
        }
    }
}
