//! Many IDs in one request: `count` and `format` in the query of `/alloc`,
//! `/api/segment/get/{tag}` and `/api/snowflake/get/{key}`. A request
//! without `count` is answered exactly as go-id-alloc and Leaf answer it.

use std::fmt::Write;
use std::ops::Range;

/// The default and the largest `max_batch` setting.
pub const DEFAULT_MAX_BATCH: u64 = 10_000;
pub const LARGEST_MAX_BATCH: u64 = 1_000_000;

/// How a batch is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `[201,202,203]`.
    Array,
    /// Runs of consecutive IDs, first and last: `[[201,203]]`.
    Ranges,
}

/// What a query asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    pub count: u64,
    pub format: Format,
}

/// A query that asks for a batch badly: its stable code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadBatch {
    pub code: &'static str,
    pub msg: String,
}

/// The batch a query asks for: `None` without `count` (one ID, answered as
/// go-id-alloc and Leaf do, `format` then has no effect).
///
/// # Errors
/// `invalid_count` unless `count` is a whole number from 1 to `max` (the
/// first `count` decides; a repeated one is refused); `invalid_format`
/// unless `format` is `array` or `ranges`.
pub fn parse(query: Option<&str>, max: u64) -> Result<Option<Batch>, BadBatch> {
    let Some(query) = query else {
        return Ok(None);
    };
    let (mut count, mut format) = (None, Format::Array);
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match key.as_ref() {
            "count" => {
                let bad = || BadBatch {
                    code: "invalid_count",
                    msg: format!("count must be a whole number from 1 to {max}"),
                };
                if count.is_some() {
                    return Err(bad());
                }
                let n = (!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| value.parse::<u64>().ok())
                    .flatten()
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(bad)?;
                count = Some(n);
            }
            "format" => {
                format = match value.as_ref() {
                    "array" => Format::Array,
                    "ranges" => Format::Ranges,
                    _ => {
                        return Err(BadBatch {
                            code: "invalid_format",
                            msg: "format must be array or ranges".into(),
                        })
                    }
                }
            }
            _ => {}
        }
    }
    Ok(count.map(|count| Batch { count, format }))
}

/// Runs of consecutive IDs (half-open), adjacent ones merged, from IDs in
/// the order they were handed out.
pub fn runs(ids: impl IntoIterator<Item = u64>) -> Vec<Range<u64>> {
    let mut runs: Vec<Range<u64>> = Vec::new();
    for id in ids {
        match runs.last_mut() {
            Some(last) if last.end == id => last.end = id + 1,
            _ => runs.push(id..id + 1),
        }
    }
    runs
}

/// The JSON of `runs` in `format`.
pub fn json(runs: &[Range<u64>], format: Format) -> String {
    let ids: u64 = runs.iter().map(|r| r.end - r.start).sum();
    let mut out = String::with_capacity(2 + 21 * ids.min(1 << 20) as usize);
    out.push('[');
    let mut first = true;
    for run in runs {
        let mut item = |out: &mut String, text: std::fmt::Arguments<'_>| {
            if !first {
                out.push(',');
            }
            first = false;
            // Writing to a String cannot fail.
            let _ = out.write_fmt(text);
        };
        match format {
            Format::Array => {
                for id in run.clone() {
                    item(&mut out, format_args!("{id}"));
                }
            }
            Format::Ranges => item(&mut out, format_args!("[{},{}]", run.start, run.end - 1)),
        }
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_whole_numbers_within_the_bound() {
        assert_eq!(parse(None, 10), Ok(None));
        assert_eq!(parse(Some("biz_tag=a"), 10), Ok(None));
        assert_eq!(parse(Some("biz_tag=a&format=ranges"), 10), Ok(None));
        assert_eq!(
            parse(Some("biz_tag=a&count=10"), 10),
            Ok(Some(Batch {
                count: 10,
                format: Format::Array
            }))
        );
        assert_eq!(
            parse(Some("count=1&format=ranges"), 10),
            Ok(Some(Batch {
                count: 1,
                format: Format::Ranges
            }))
        );
        for bad in [
            "count=",
            "count=0",
            "count=-1",
            "count=11",
            "count=1.5",
            "count=+3",
            "count= 3",
            "count=abc",
            "count=1&count=2",
            "count=99999999999999999999999",
        ] {
            let err = parse(Some(bad), 10).unwrap_err();
            assert_eq!(err.code, "invalid_count", "{bad}");
            assert!(err.msg.contains("1 to 10"), "{bad}: {}", err.msg);
        }
        assert_eq!(
            parse(Some("count=3&format=csv"), 10).unwrap_err().code,
            "invalid_format"
        );
    }

    proptest::proptest! {
        /// Any query: no panic; a batch asked for is within the bound; and
        /// a count is taken exactly when it is a whole number in the bound,
        /// in decimal digits alone, given once.
        #[test]
        fn any_query_gives_a_batch_within_the_bound_or_a_refusal(
            query in "\\PC{0,40}",
            n in 0u64..30,
            max in 1u64..20,
        ) {
            if let Ok(Some(batch)) = parse(Some(&query), max) {
                proptest::prop_assert!((1..=max).contains(&batch.count));
            }
            let asked = parse(Some(&format!("count={n}")), max);
            if (1..=max).contains(&n) {
                proptest::prop_assert_eq!(asked, Ok(Some(Batch { count: n, format: Format::Array })));
            } else {
                proptest::prop_assert_eq!(asked.map_err(|e| e.code), Err("invalid_count"));
            }
        }
    }

    #[test]
    fn runs_and_json() {
        let r = runs([5, 6, 7, 9, 10, 3]);
        assert_eq!(r, vec![5..8, 9..11, 3..4]);
        assert_eq!(json(&r, Format::Array), "[5,6,7,9,10,3]");
        assert_eq!(json(&r, Format::Ranges), "[[5,7],[9,10],[3,3]]");
        assert_eq!(
            json(&runs([u64::MAX - 1]), Format::Array),
            format!("[{}]", u64::MAX - 1)
        );
    }
}
