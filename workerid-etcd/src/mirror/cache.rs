//! The mirrors a store keeps, one per namespace and pool it acquires in: at
//! most [`MAX_MIRRORS`], the least recently used dropped past it (its watch
//! ends with it), so that callers naming ever new namespaces or pool sizes
//! cannot grow the store's memory and etcd watches without bound.

use std::collections::HashMap;
use std::sync::Arc;

use super::Mirror;

/// The most mirrors kept at once.
pub(crate) const MAX_MIRRORS: usize = 64;

/// Mirrors by namespace and largest worker ID, with when each was last used.
#[derive(Debug, Default)]
pub(crate) struct Mirrors {
    by_pool: HashMap<(String, u32), (Arc<Mirror>, u64)>,
    uses: u64,
}

impl Mirrors {
    /// The mirror of `pool`, made by `make` when there is none.
    pub(crate) fn get_or_make(
        &mut self,
        (namespace, max_worker_id): (&str, u32),
        make: impl FnOnce() -> Arc<Mirror>,
    ) -> Arc<Mirror> {
        self.uses += 1;
        let key = (namespace.to_owned(), max_worker_id);
        if let Some((mirror, used)) = self.by_pool.get_mut(&key) {
            *used = self.uses;
            return mirror.clone();
        }
        if self.by_pool.len() >= MAX_MIRRORS {
            let oldest = self
                .by_pool
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                self.by_pool.remove(&oldest);
            }
        }
        let mirror = make();
        self.by_pool.insert(key, (mirror.clone(), self.uses));
        mirror
    }

    /// Drops the mirrors of `namespace` (it was removed).
    pub(crate) fn remove_namespace(&mut self, namespace: &str) {
        self.by_pool.retain(|(name, _), _| name != namespace);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_pool.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;

    fn mirror(namespace: &str) -> Arc<Mirror> {
        let namespace = workerid_core::Namespace::new(namespace).unwrap();
        Mirror::new(Keys::new("test", &namespace), 7)
    }

    #[test]
    fn the_least_recently_used_mirror_goes_past_the_bound() {
        let mut mirrors = Mirrors::default();
        let first = mirrors.get_or_make(("ns-0", 7), || mirror("ns-0"));
        for i in 1..MAX_MIRRORS {
            let name = format!("ns-{i}");
            mirrors.get_or_make((name.as_str(), 7), || mirror(&name));
        }
        // ns-0 used again: ns-1 is now the least recently used.
        let again = mirrors.get_or_make(("ns-0", 7), || panic!("ns-0 is kept"));
        assert!(Arc::ptr_eq(&first, &again));
        mirrors.get_or_make(("ns-new", 7), || mirror("ns-new"));
        assert_eq!(mirrors.len(), MAX_MIRRORS);
        let mut made = false;
        mirrors.get_or_make(("ns-1", 7), || {
            made = true;
            mirror("ns-1")
        });
        assert!(made, "ns-1 was dropped and made again");
        mirrors.get_or_make(("ns-0", 7), || panic!("ns-0 is still kept"));
        mirrors.remove_namespace("ns-0");
        assert_eq!(mirrors.len(), MAX_MIRRORS - 1);
    }
}
