//! `segments`, `segments show` and `segments create`: the tags of a
//! segment store.

use crate::error::CliError;
use crate::store::open;
use serde::Serialize;
use workerid::segment::{
    check_step, Error as SegmentError, SegmentStore, Tag, TagInfo, MAX_SEGMENT_ID,
};

use crate::args::{SegmentsArgs, SegmentsCommand, Target};
use crate::render::table;

#[derive(Debug, Serialize)]
struct TagJson {
    tag: String,
    max_id: u64,
    step: u64,
}

/// One tag, as `segments show --json` prints it.
#[derive(Debug, Serialize)]
struct ShownJson {
    tag: String,
    max_id: u64,
    step: u64,
    /// IDs not handed out yet, up to the largest (2^63 - 1).
    ids_left: u64,
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
    let target = args.store.target("segments")?;
    match &args.action {
        None => list(target, json).await,
        Some(SegmentsCommand::Show { tag }) => show(target, tag, json).await,
        Some(SegmentsCommand::Create {
            tag,
            first_id,
            step,
        }) => create(target, tag, *first_id, *step, json).await,
    }
}

async fn list(target: Target<'_>, json: bool) -> Result<String, CliError> {
    let tags = open(target, true).await?.list_tags().await?;
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

/// One tag from the store's list: there is no call that reads one alone,
/// and a store that cannot list answers `Unsupported` (exit 6).
async fn show(target: Target<'_>, tag: &str, json: bool) -> Result<String, CliError> {
    let tag = Tag::new(tag)?; // a bad name is refused before any I/O
    let tags = open(target, true).await?.list_tags().await?;
    let TagInfo { max_id, step, .. } =
        tags.into_iter()
            .find(|t| t.tag == tag)
            .ok_or_else(|| SegmentError::UnknownTag {
                tag: tag.to_string(),
            })?;
    let ids_left = (MAX_SEGMENT_ID + 1).saturating_sub(max_id);
    if json {
        let out = ShownJson {
            tag: tag.to_string(),
            max_id,
            step,
            ids_left,
        };
        return Ok(serde_json::to_string_pretty(&out)? + "\n");
    }
    let rows = [
        vec![
            "TAG".into(),
            "MAX_ID".into(),
            "STEP".into(),
            "IDS_LEFT".into(),
        ],
        vec![
            tag.to_string(),
            max_id.to_string(),
            step.to_string(),
            ids_left.to_string(),
        ],
    ];
    Ok(table(&rows))
}

async fn create(
    target: Target<'_>,
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
    let created = open(target, false)
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
