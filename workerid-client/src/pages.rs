//! The server's List calls answer a page at a time; a store call of the
//! client reads every page.

use std::collections::HashSet;
use std::future::Future;

use tonic::{Code, Status};

/// One page of a paged call: its entries, the token of the next page
/// (empty: this was the last), and what else the page says.
pub(crate) struct Page<T, M> {
    pub entries: Vec<T>,
    pub next: String,
    pub about: M,
}

/// Every entry of a paged call, and what its last page says besides:
/// `call` asks for the page after a token (empty: the first).
///
/// # Errors
/// The failure of the first page that fails, as the server answered it,
/// or `INTERNAL` for a server that hands out a token twice (its pages
/// would never end).
pub(crate) async fn every_page<T, M, F, Fut>(mut call: F) -> Result<(Vec<T>, M), Status>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<Page<T, M>, Status>>,
{
    let mut entries = Vec::new();
    let mut seen = HashSet::new();
    let mut token = String::new();
    loop {
        let page = call(token).await?;
        entries.extend(page.entries);
        if page.next.is_empty() {
            return Ok((entries, page.about));
        }
        if !seen.insert(page.next.clone()) {
            return Err(Status::new(
                Code::Internal,
                "the server gave the same page token twice",
            ));
        }
        token = page.next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(entries: Vec<u32>, next: &str) -> Page<u32, usize> {
        Page {
            about: entries.len(),
            entries,
            next: next.to_owned(),
        }
    }

    #[tokio::test]
    async fn pages_are_read_to_the_last() {
        let pages = [(vec![1, 2], "2"), (vec![3], "3"), (vec![], "")];
        let mut asked = Vec::new();
        let (all, last) = every_page(|token| {
            asked.push(token.clone());
            let (entries, next) = pages[asked.len() - 1].clone();
            async move { Ok(page(entries, next)) }
        })
        .await
        .unwrap();
        assert_eq!(all, [1, 2, 3]);
        assert_eq!(last, 0, "what the last page says");
        assert_eq!(asked, ["", "2", "3"]);
    }

    #[tokio::test]
    async fn a_token_given_twice_ends_the_reading() {
        let cycle = ["a", "b", "a"];
        let mut n = 0;
        let refused = every_page(|_| {
            n += 1;
            let next = cycle[(n - 1) % cycle.len()];
            async move { Ok(page(vec![1], next)) }
        })
        .await
        .unwrap_err();
        assert_eq!(refused.code(), Code::Internal);
        assert_eq!(n, 3);
    }
}
