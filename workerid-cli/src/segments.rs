//! `segments` and `segments create`: the tags of a segment store.

use crate::error::CliError;
use crate::store::open;
use serde::Serialize;
use workerid::segment::{check_step, SegmentStore, Tag, MAX_SEGMENT_ID};

use crate::args::{SegmentsArgs, SegmentsCommand};
use crate::render::table;

#[derive(Debug, Serialize)]
struct TagJson {
    tag: String,
    max_id: u64,
    step: u64,
}

#[derive(Debug, Serialize)]
struct CreatedJson {
    tag: String,
    created: bool,
    first_id: u64,
    step: u64,
}

/// `workerid segments [create ...]`.
pub async fn segments(args: &SegmentsArgs, json: bool) -> Result<String, CliError> {
    let url = args.store.url("segments")?;
    match &args.action {
        None => list(url, json).await,
        Some(SegmentsCommand::Create {
            tag,
            first_id,
            step,
        }) => create(url, tag, *first_id, *step, json).await,
    }
}

async fn list(url: &str, json: bool) -> Result<String, CliError> {
    let tags = open(url, true).await?.list_tags().await?;
    if json {
        let tags: Vec<TagJson> = tags
            .into_iter()
            .map(|t| TagJson {
                tag: t.tag.to_string(),
                max_id: t.max_id,
                step: t.step,
            })
            .collect();
        return Ok(serde_json::to_string_pretty(&tags)? + "\n");
    }
    if tags.is_empty() {
        return Ok("no segment tags\n".into());
    }
    let mut rows = vec![vec!["TAG".into(), "MAX_ID".into(), "STEP".into()]];
    rows.extend(
        tags.iter()
            .map(|t| vec![t.tag.to_string(), t.max_id.to_string(), t.step.to_string()]),
    );
    Ok(table(&rows))
}

async fn create(
    url: &str,
    tag: &str,
    start: u64,
    step: u64,
    json: bool,
) -> Result<String, CliError> {
    // Every input is checked before any I/O.
    let tag = Tag::new(tag)?;
    check_step(step)?;
    if start == 0 || start > MAX_SEGMENT_ID {
        return Err(CliError::Usage(format!(
            "--first-id {start} must be in 1..={MAX_SEGMENT_ID}"
        )));
    }
    let created = open(url, false)
        .await?
        .create_tag(&tag, start, step)
        .await?;
    if !created {
        return Err(CliError::Refused(format!(
            "tag {tag} exists already: nothing was changed (see `workerid segments`)"
        )));
    }
    if json {
        let out = CreatedJson {
            tag: tag.to_string(),
            created,
            first_id: start,
            step,
        };
        return Ok(serde_json::to_string_pretty(&out)? + "\n");
    }
    Ok(format!(
        "created tag {tag}: first ID {start}, step {step}\n"
    ))
}
