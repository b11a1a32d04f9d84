//! The sliding log over several rules.
//!
//! A request at `now` passes iff, for every rule `(N, W)`, the allowed
//! requests in `(now - W, now]` plus its cost stay within `N`. An allowed
//! request is recorded as `cost` entries at `now`; a denied one is not recorded.
//!
//! Entries later than `now` count too: they exist only when clocks disagree
//! (a thread that read the time a moment earlier than another, a Redis
//! clock stepped back), and counting them keeps the limit exact.

mod entries;

use super::Micros;
use crate::decision::{Decision, RuleStatus};
use crate::policy::MAX_RULES;
use crate::rule::Rule;

pub use entries::Log;

/// Checks (and on success records) a request of `cost` at `now`.
pub fn check(log: &mut Log, rules: &[Rule], now: Micros, cost: u64) -> Decision {
    check_within(log, rules, longest_window_us(rules), now, cost)
}

/// [`check`] given the rules' longest window (as
/// [`Policy::longest_window_us`](crate::Policy::longest_window_us) keeps it).
#[inline]
pub fn check_within(
    log: &mut Log,
    rules: &[Rule],
    longest: Micros,
    now: Micros,
    cost: u64,
) -> Decision {
    debug_assert_eq!(longest, longest_window_us(rules));
    // Entries at or before `now - longest` are outside every window. Only
    // the front of the log is read: usually none or one entry leaves.
    if let Some(expired_before) = now.checked_sub(longest) {
        log.expire(expired_before);
    }
    let entries = log.as_slice();
    let newest = entries.last().copied();
    // Each rule's status as if the request is recorded (it usually is);
    // a denial reads them again below.
    let mut statuses = [RuleStatus::EMPTY; MAX_RULES];
    let (mut fewest, mut fewest_remaining) = (0, u64::MAX);
    let mut denied = None::<(u64, usize)>;
    for (i, (rule, status)) in rules.iter().zip(&mut statuses).enumerate() {
        let start = window_start(entries, now, rule, longest);
        let count = (entries.len() - start) as u64;
        let window = rule.window_us();
        if count + cost > rule.limit() {
            // The request passes once enough entries have left this window:
            // the oldest `excess` ones, so the last of them decides.
            let wait = entries[start + excess(count, cost, rule) - 1] + window - now;
            if denied.is_none_or(|(longest_wait, _)| wait > longest_wait) {
                denied = Some((wait, i));
            }
        }
        // Once recorded, the window's oldest entry is its oldest before, or
        // the request's own (at `now`, before any later entry).
        let oldest = entries.get(start).map_or(now, |&t| t.min(now));
        let remaining = rule.limit().saturating_sub(count + cost);
        *status = RuleStatus {
            remaining,
            available_after_us: oldest + window - now,
        };
        if remaining < fewest_remaining {
            (fewest, fewest_remaining) = (i, remaining);
        }
    }
    let (decided_by, newest) = match denied {
        None if cost > 0 => {
            log.record(now, cost, || most_entries(rules, longest));
            (fewest, Some(newest.map_or(now, |t| t.max(now))))
        }
        // Nothing recorded.
        _ => {
            unrecorded_statuses(&mut statuses, log.as_slice(), rules, now, cost, longest);
            (denied.map_or(fewest, |(_, i)| i), newest)
        }
    };
    let newest_from_now = newest.map(|t| t as i64 - now as i64);
    conclude(
        rules,
        statuses,
        decided_by,
        denied,
        newest_from_now,
        longest,
    )
}

/// Each rule's status when the request is not recorded (denied): a rule
/// it violates frees quota once the same request would pass, any other
/// when its oldest entry leaves.
#[cold]
fn unrecorded_statuses(
    statuses: &mut [RuleStatus; MAX_RULES],
    entries: &[Micros],
    rules: &[Rule],
    now: Micros,
    cost: u64,
    longest: Micros,
) {
    for (rule, status) in rules.iter().zip(statuses) {
        let start = window_start(entries, now, rule, longest);
        let count = (entries.len() - start) as u64;
        let freed_by = match count + cost > rule.limit() {
            true => entries.get(start + excess(count, cost, rule) - 1),
            false => entries.get(start),
        };
        *status = RuleStatus {
            remaining: rule.limit().saturating_sub(count),
            available_after_us: freed_by.map_or(0, |&t| t + rule.window_us() - now),
        };
    }
}

/// How many of a window's `count` entries must leave before a request of
/// `cost` passes its rule.
#[inline]
fn excess(count: u64, cost: u64, rule: &Rule) -> usize {
    (count + cost - rule.limit()) as usize
}

/// Gives back `cost` entries recorded at `at` (entries at one time are
/// alike, so any of them are that request's): the log then holds what it
/// would hold had the request not been recorded. Entries that have left
/// already are not given back twice.
pub fn refund(log: &mut Log, at: Micros, cost: u64) {
    let entries = log.as_slice();
    let start = entries.partition_point(|&t| t < at);
    let end = entries.partition_point(|&t| t <= at);
    let gone = (end - start).min(usize::try_from(cost).unwrap_or(usize::MAX));
    log.remove(start, gone);
}

/// The decision from what the log held before the request: each rule's
/// count and when it makes more quota available, the longest wait over the
/// violated rules with its rule (`None`: allowed), and the newest entry's
/// time minus now once the request is recorded (`None`: an empty log).
/// The Redis scripts' replies are read through it, so they answer as the
/// memory store's [`check`] does.
pub fn decide(
    rules: &[Rule],
    counts: &[u64],
    available_after: &[u64],
    denied: Option<(u64, usize)>,
    newest_from_now: Option<i64>,
    cost: u64,
) -> Decision {
    let recorded = if denied.is_none() { cost } else { 0 };
    let mut statuses = [RuleStatus::EMPTY; MAX_RULES];
    for (i, rule) in rules.iter().enumerate() {
        statuses[i] = RuleStatus {
            remaining: rule.limit().saturating_sub(counts[i] + recorded),
            available_after_us: available_after[i],
        };
    }
    let decided_by = match denied {
        Some((_, i)) => i,
        None => fewest_remaining(&statuses[..rules.len()]),
    };
    conclude(
        rules,
        statuses,
        decided_by,
        denied,
        newest_from_now,
        longest_window_us(rules),
    )
}

/// The decision over every rule's status, decided by the violated rule
/// that waits longest (a denial) or the first with fewest requests left;
/// every rule is clear once the newest entry has left the longest window.
#[inline]
fn conclude(
    rules: &[Rule],
    statuses: [RuleStatus; MAX_RULES],
    decided_by: usize,
    denied: Option<(u64, usize)>,
    newest_from_now: Option<i64>,
    longest: Micros,
) -> Decision {
    let reset_after_us =
        newest_from_now.map_or(0, |newest| (newest + longest as i64).max(0) as u64);
    Decision::from_statuses(
        rules[decided_by],
        statuses,
        rules.len(),
        decided_by,
        denied.map(|(wait, _)| wait),
        0,
        reset_after_us,
    )
}

/// The most entries a log checked against `rules` holds: every entry is
/// inside the longest window, so no more than that window's limit.
fn most_entries(rules: &[Rule], longest: Micros) -> u64 {
    rules
        .iter()
        .filter(|r| r.window_us() == longest)
        .map(|r| r.limit())
        .min()
        .unwrap_or(0)
}

/// Folds `other` into `log` so that every window holds at least as many
/// entries as either did: the i-th newest entry of the result is the later
/// of the two logs' i-th newest, and the result is as long as the longer.
/// So a one-entry log raises a merge's count in a window by one at most.
pub fn merge(log: &mut Log, mut other: Log) {
    if other.len() > log.len() {
        std::mem::swap(log, &mut other);
    }
    let skip = log.len() - other.len();
    for (mine, theirs) in log.as_mut_slice().iter_mut().skip(skip).zip(other) {
        *mine = (*mine).max(theirs);
    }
}

/// The log a key checked against `rules` at `now` inherits from a merged
/// summary of evicted logs that expires at `expires_at`.
///
/// The key's own log, if it is in the merge, is elementwise older than the
/// merge's newest entries, no longer than `most_entries`, and its newest
/// entry is at most `expires_at` minus the longest window, and at most now
/// (its requests came before). Keeping only that many of the newest entries,
/// none later than those instants, still counts at least the key's own
/// entries in every window: at worst a full log of requests at `now`. It
/// denies nothing after `expires_at`.
pub fn inherit(merged: &Log, expires_at: Micros, rules: &[Rule], now: Micros) -> Log {
    let longest = longest_window_us(rules);
    let latest = expires_at.saturating_sub(longest).min(now);
    let keep = usize::try_from(most_entries(rules, longest)).unwrap_or(usize::MAX);
    let skip = merged.len().saturating_sub(keep);
    merged.iter().skip(skip).map(|&t| t.min(latest)).collect()
}

/// The longest of the rules' windows: how long an entry counts at all.
pub fn longest_window_us(rules: &[Rule]) -> Micros {
    rules.iter().map(Rule::window_us).max().unwrap_or(0)
}

/// The index of the first entry inside the rule's window `(now - W, now]`:
/// 0 for the longest window, which every entry left is inside.
#[inline]
fn window_start(entries: &[Micros], now: Micros, rule: &Rule, longest: Micros) -> usize {
    match now.checked_sub(rule.window_us()) {
        Some(outside) if rule.window_us() != longest => entries.partition_point(|&t| t <= outside),
        _ => 0,
    }
}

/// The first rule with the fewest requests remaining.
pub fn fewest_remaining(statuses: &[RuleStatus]) -> usize {
    let mut best = 0;
    for (i, s) in statuses.iter().enumerate() {
        if s.remaining < statuses[best].remaining {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const S: u64 = 1_000_000;

    fn rules() -> [Rule; 2] {
        [
            Rule::new(10, Duration::from_secs(60)).unwrap(),
            Rule::new(20, Duration::from_secs(120)).unwrap(),
        ]
    }

    #[test]
    fn an_entry_exactly_one_window_old_no_longer_counts() {
        let rule = [Rule::new(1, Duration::from_secs(60)).unwrap()];
        let mut log = Log::new();
        assert!(check(&mut log, &rule, 1_000 * S, 1).allowed());
        let denied = check(&mut log, &rule, 1_060 * S - 1, 1);
        assert_eq!(denied.retry_after(), Some(Duration::from_micros(1)));
        assert!(check(&mut log, &rule, 1_060 * S, 1).allowed());
    }

    #[test]
    fn the_longest_wait_over_violated_rules_decides() {
        let mut log = Log::new();
        let t0 = 10_000 * S;
        // 10 at t0, then 10 more at t0 + 60 s: rule 1 is full again, rule 2 too.
        for _ in 0..10 {
            assert!(check(&mut log, &rules(), t0, 1).allowed());
        }
        for _ in 0..10 {
            assert!(check(&mut log, &rules(), t0 + 60 * S, 1).allowed());
        }
        let d = check(&mut log, &rules(), t0 + 70 * S, 1);
        assert!(!d.allowed());
        // Rule 1 frees at t0 + 120 s (50 s), rule 2 at t0 + 120 s too (50 s): the first wins ties.
        assert_eq!(d.retry_after(), Some(Duration::from_secs(50)));
        assert_eq!(d.rule_index(), 0);
        assert_eq!(d.rules()[0].remaining(), 0);
        assert_eq!(d.rules()[1].remaining(), 0);
        assert_eq!(d.reset_after(), Duration::from_secs(110));
        // Each violated rule's own wait.
        let waits: Vec<_> = d.rules().iter().map(|r| r.available_after()).collect();
        assert_eq!(waits, [Duration::from_secs(50), Duration::from_secs(50)]);
    }

    #[test]
    fn each_rule_says_when_it_frees_more_quota() {
        let mut log = Log::new();
        let t0 = 10_000 * S;
        assert!(check(&mut log, &rules(), t0, 1).allowed());
        assert!(check(&mut log, &rules(), t0 + 30 * S, 9).allowed());
        // Rule 1 is full: denied until the first entry leaves its 60 s window;
        // rule 2 (10 of 20 used) frees quota when that entry leaves its 120 s one.
        let d = check(&mut log, &rules(), t0 + 40 * S, 1);
        assert_eq!(d.retry_after(), Some(Duration::from_secs(20)));
        let waits: Vec<_> = d.rules().iter().map(|r| r.available_after()).collect();
        assert_eq!(waits, [Duration::from_secs(20), Duration::from_secs(80)]);
        // After the first entry left rule 1's window, its oldest is at t0 + 30 s.
        let d = check(&mut log, &rules(), t0 + 60 * S, 1);
        assert!(d.allowed());
        let waits: Vec<_> = d.rules().iter().map(|r| r.available_after()).collect();
        assert_eq!(waits, [Duration::from_secs(30), Duration::from_secs(60)]);
        assert_eq!(d.reset_after(), Duration::from_secs(120));
    }

    #[test]
    fn allowed_requests_report_the_tightest_rule() {
        let mut log = Log::new();
        let d = check(&mut log, &rules(), 5 * S, 3);
        assert!(d.allowed());
        assert_eq!((d.limit(), d.remaining(), d.rule_index()), (10, 7, 0));
        assert_eq!(d.rules()[1].remaining(), 17);
        assert_eq!(d.reset_after(), Duration::from_secs(120));
        assert_eq!(log.len(), 3);
    }

    #[test]
    fn entries_later_than_now_count_and_stay_in_order() {
        // Another thread read the clock 5 µs later and recorded first.
        let rule = [Rule::new(2, Duration::from_secs(60)).unwrap()];
        let t0 = 1_000 * S;
        let mut log = Log::from([t0 + 5]);
        let d = check(&mut log, &rule, t0, 1);
        assert_eq!((d.allowed(), d.remaining()), (true, 0));
        assert_eq!(log, [t0, t0 + 5]);
        // Its oldest entry is now's: quota frees one window from now; every
        // rule is clear once the later entry has left.
        assert_eq!(d.rules()[0].available_after(), Duration::from_secs(60));
        assert_eq!(d.reset_after(), Duration::from_micros(60 * S + 5));
        let denied = check(&mut log, &rule, t0 + 1, 1);
        assert_eq!(
            denied.retry_after(),
            Some(Duration::from_micros(60 * S - 1))
        );
        assert_eq!(log, [t0, t0 + 5]);
    }

    #[test]
    fn a_merge_takes_the_later_of_the_ith_newest_entries() {
        let mut log = Log::from([10, 20, 30, 40]);
        merge(&mut log, Log::from([25, 35]));
        assert_eq!(log, [10, 20, 30, 40]);
        merge(&mut log, Log::from([50]));
        assert_eq!(log, [10, 20, 30, 50]);
        let mut short = Log::from([45]);
        merge(&mut short, Log::from([10, 20, 30, 40]));
        assert_eq!(short, [10, 20, 30, 45]);
    }

    #[test]
    fn an_inherited_log_keeps_what_the_policy_can_hold_and_ends_with_the_merge() {
        let rules = [
            Rule::new(3, Duration::from_micros(100)).unwrap(),
            Rule::new(1, Duration::from_micros(10)).unwrap(),
        ];
        let merged = Log::from([1_000, 1_010, 1_020, 1_030, 1_095]);
        // At most 3 entries; none later than the expiry minus 100 µs, or
        // than now.
        assert_eq!(
            inherit(&merged, 1_190, &rules, 1_100),
            [1_020, 1_030, 1_090]
        );
        assert_eq!(
            inherit(&merged, 1_300, &rules, 1_100),
            [1_020, 1_030, 1_095]
        );
        assert_eq!(
            inherit(&merged, 1_300, &rules, 1_025),
            [1_020, 1_025, 1_025]
        );
    }
}
