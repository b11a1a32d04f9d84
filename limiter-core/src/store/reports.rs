//! Reports that instances publish through a shared store for each other to
//! read, such as each limit's top offenders: per board, one report per
//! instance, the latest replacing the one before, read until its time to
//! live has passed.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;

use crate::Error;

/// One instance's latest report on a board
/// ([`SharedControl::reports`](crate::SharedControl::reports)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The instance that published it.
    pub instance: String,
    /// How long ago it was published, by the store's clock.
    pub age: Duration,
    /// What it says, as published.
    pub body: String,
}

/// The longest report a store keeps, in bytes: room for a limit's 100 top
/// offenders of the longest identity counted.
pub const MAX_REPORT_BYTES: usize = 64 * 1024;

/// The most instances whose reports one board holds at once.
pub const MAX_REPORTERS: usize = 256;

/// The longest board or instance name, in bytes.
const MAX_NAME_BYTES: usize = 512;

/// Refuses a report a store would not keep: `Error::Full` naming the
/// bound it passes.
pub fn validate_report(board: &str, instance: &str, body: &str) -> Result<(), Error> {
    if board.is_empty() || board.len() > MAX_NAME_BYTES {
        return Err(Error::Full(format!(
            "a board's name is 1 to {MAX_NAME_BYTES} bytes, not {}",
            board.len()
        )));
    }
    if instance.is_empty() || instance.len() > MAX_NAME_BYTES {
        return Err(Error::Full(format!(
            "an instance's name is 1 to {MAX_NAME_BYTES} bytes, not {}",
            instance.len()
        )));
    }
    if body.len() > MAX_REPORT_BYTES {
        return Err(Error::Full(format!(
            "a report is at most {MAX_REPORT_BYTES} bytes, not {}",
            body.len()
        )));
    }
    Ok(())
}

/// The boards of a store kept in this process, on its clock (µs).
#[derive(Debug, Default)]
pub(crate) struct Boards(Mutex<HashMap<String, HashMap<String, Published>>>);

#[derive(Debug)]
struct Published {
    at: u64,
    ttl: u64,
    body: String,
}

impl Published {
    fn live(&self, now: u64) -> bool {
        now.saturating_sub(self.at) <= self.ttl
    }
}

impl Boards {
    pub(crate) fn publish(
        &self,
        board: &str,
        instance: &str,
        body: &str,
        ttl: Duration,
        now: u64,
    ) -> Result<(), Error> {
        validate_report(board, instance, body)?;
        let ttl = u64::try_from(ttl.as_micros()).unwrap_or(u64::MAX);
        let mut boards = self.0.lock();
        let reports = boards.entry(board.to_owned()).or_default();
        reports.retain(|_, report| report.live(now));
        if !reports.contains_key(instance) && reports.len() >= MAX_REPORTERS {
            return Err(Error::Full(format!(
                "{MAX_REPORTERS} instances report on {board:?} already"
            )));
        }
        let published = Published {
            at: now,
            ttl,
            body: body.to_owned(),
        };
        reports.insert(instance.to_owned(), published);
        Ok(())
    }

    pub(crate) fn read(&self, board: &str, now: u64) -> Vec<Report> {
        let mut boards = self.0.lock();
        let Some(reports) = boards.get_mut(board) else {
            return Vec::new();
        };
        reports.retain(|_, report| report.live(now));
        let read = reports
            .iter()
            .map(|(instance, report)| Report {
                instance: instance.clone(),
                age: Duration::from_micros(now.saturating_sub(report.at)),
                body: report.body.clone(),
            })
            .collect();
        if reports.is_empty() {
            boards.remove(board);
        }
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_report_of_each_instance_is_read_until_its_ttl() {
        let boards = Boards::default();
        let ttl = Duration::from_secs(15);
        boards.publish("top", "a", "one", ttl, 1_000_000).unwrap();
        boards.publish("top", "a", "two", ttl, 2_000_000).unwrap();
        boards.publish("top", "b", "three", ttl, 3_000_000).unwrap();
        let mut read = boards.read("top", 4_000_000);
        read.sort_by(|x, y| x.instance.cmp(&y.instance));
        let report = |instance: &str, age_s, body: &str| Report {
            instance: instance.to_owned(),
            age: Duration::from_secs(age_s),
            body: body.to_owned(),
        };
        assert_eq!(read, [report("a", 2, "two"), report("b", 1, "three")]);
        // 15 s after `a`'s, it is read; a microsecond later, gone.
        assert_eq!(boards.read("top", 17_000_000).len(), 2);
        assert_eq!(
            boards.read("top", 17_000_001),
            [report("b", 14, "three")].map(|mut r| {
                r.age = Duration::from_micros(14_000_001);
                r
            })
        );
        assert!(boards.read("elsewhere", 0).is_empty());
    }

    #[test]
    fn reports_past_their_bounds_are_refused() {
        let boards = Boards::default();
        let ttl = Duration::from_secs(1);
        let long = "x".repeat(MAX_REPORT_BYTES + 1);
        assert!(matches!(
            boards.publish("top", "a", &long, ttl, 0),
            Err(Error::Full(_))
        ));
        assert!(matches!(
            boards.publish("", "a", "", ttl, 0),
            Err(Error::Full(_))
        ));
        for i in 0..MAX_REPORTERS {
            boards.publish("top", &i.to_string(), "", ttl, 0).unwrap();
        }
        assert!(matches!(
            boards.publish("top", "late", "", ttl, 0),
            Err(Error::Full(_))
        ));
        // An instance already reporting replaces its report.
        boards.publish("top", "0", "again", ttl, 0).unwrap();
        // Once the others' reports are past their time, there is room.
        boards.publish("top", "late", "", ttl, 2_000_000).unwrap();
        assert_eq!(boards.read("top", 2_000_000).len(), 1);
    }
}
