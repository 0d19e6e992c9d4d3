//! `GET /history`: the timeline switches (failovers, switchovers) the DCS keeps.

use super::timestamp::parse_timestamp;
use crate::patroni::PatroniError;

/// One line of `GET /history`: `[parent_timeline, switch_lsn, reason, timestamp?, new_leader?]`.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// The timeline that *ended* at this switch.
    pub timeline: u64,
    /// WAL position of the switch, in bytes.
    pub switch_lsn: u64,
    pub reason: String,
    /// Unix time of the switch (absent in histories written by old versions).
    pub timestamp_seconds: Option<f64>,
    /// The member that became leader (since Patroni 3.0).
    pub new_leader: Option<String>,
}

/// Parses `GET /history`.
///
/// # Errors
/// [`PatroniError::Json`] when the body is not an array of arrays, [`PatroniError::Decode`]
/// when a row is not 3 to 5 elements of the documented types.
pub fn parse_history(body: &[u8]) -> Result<Vec<HistoryEntry>, PatroniError> {
    let rows: Vec<Vec<serde_json::Value>> = serde_json::from_slice(body)?;
    rows.iter().map(|row| parse_history_row(row)).collect()
}

fn parse_history_row(row: &[serde_json::Value]) -> Result<HistoryEntry, PatroniError> {
    let invalid = || PatroniError::Decode(format!("invalid history entry: {row:?}"));
    if !(3..=5).contains(&row.len()) {
        return Err(invalid());
    }
    let timeline = row[0].as_u64().ok_or_else(invalid)?;
    let switch_lsn = row[1].as_u64().ok_or_else(invalid)?;
    let reason = row[2].as_str().ok_or_else(invalid)?.to_owned();
    let timestamp_seconds = match row.get(3) {
        None | Some(serde_json::Value::Null) => None,
        Some(value) => {
            Some(parse_timestamp(value.as_str().ok_or_else(invalid)?).ok_or_else(invalid)?)
        }
    };
    let new_leader = match row.get(4) {
        None | Some(serde_json::Value::Null) => None,
        Some(value) => Some(value.as_str().ok_or_else(invalid)?.to_owned()),
    };
    Ok(HistoryEntry {
        timeline,
        switch_lsn,
        reason,
        timestamp_seconds,
        new_leader,
    })
}
