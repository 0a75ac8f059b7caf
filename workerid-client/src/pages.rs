//! The server's List calls answer a page at a time; a store call of the
//! client reads every page.

use std::future::Future;

use tonic::{Code, Status};

/// Every entry of a paged call: `call` asks for the page after a token
/// (empty: the first) and answers its entries and the next token (empty:
/// that was the last).
///
/// # Errors
/// The first page's failure as the server answered it, or `INTERNAL` for
/// a server that hands back a token it was given (it would never end).
pub(crate) async fn every_page<T, F, Fut>(mut call: F) -> Result<Vec<T>, Status>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, String), Status>>,
{
    let mut entries = Vec::new();
    let mut token = String::new();
    loop {
        let (page, next) = call(token.clone()).await?;
        entries.extend(page);
        if next.is_empty() {
            return Ok(entries);
        }
        if next == token {
            return Err(Status::new(
                Code::Internal,
                "the server gave the same page token twice",
            ));
        }
        token = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pages_are_read_to_the_last() {
        let pages = [(vec![1, 2], "2"), (vec![3], "3"), (vec![], "")];
        let mut asked = Vec::new();
        let all = every_page(|token| {
            asked.push(token.clone());
            let i = asked.len() - 1;
            let (page, next) = pages[i].clone();
            async move { Ok((page, next.to_owned())) }
        })
        .await
        .unwrap();
        assert_eq!(all, [1, 2, 3]);
        assert_eq!(asked, ["", "2", "3"]);
    }

    #[tokio::test]
    async fn a_repeated_token_ends_the_reading() {
        let refused = every_page(|_| async { Ok((vec![1], "same".to_owned())) })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::Internal);
    }
}
