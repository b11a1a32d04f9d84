use super::*;

const T0: u64 = 1_000_000_000;
const SECOND: u64 = 1_000_000;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn keys(list: &BlockList, now: u64) -> Vec<String> {
    list.page(None, MAX_BLOCKS_PAGE, now)
        .into_iter()
        .map(|b| b.key)
        .collect()
}

#[test]
fn a_block_lasts_its_duration_to_the_microsecond() {
    let list = BlockList::new();
    assert_eq!(list.blocked("k", || T0), None);
    list.block("k", secs(900), BlockOrigin::Operator, T0)
        .unwrap();
    assert_eq!(list.blocked("k", || T0), Some(secs(900)));
    let last = T0 + 899_999_999;
    assert_eq!(list.blocked("k", || last), Some(Duration::from_micros(1)));
    assert_eq!(list.blocked("k", || last + 1), None);
    assert!(list.is_empty());
    list.block("k", secs(5), BlockOrigin::Penalty, T0).unwrap();
    list.unblock("k");
    assert_eq!(list.blocked("k", || T0), None);
    assert_eq!(list.blocked("other", || T0), None);
}

#[test]
fn past_the_penalty_bound_the_soonest_ending_penalty_block_gives_way() {
    let list = BlockList::with_max_penalty_blocks(3);
    for (i, s) in [40, 10, 30, 20].into_iter().enumerate() {
        list.block(&format!("rl:user=u{i}"), secs(s), BlockOrigin::Penalty, T0)
            .unwrap();
    }
    // u1 (10 s) ended soonest: evicted when u3 came.
    assert_eq!(keys(&list, T0), ["rl:user=u0", "rl:user=u2", "rl:user=u3"]);
    assert_eq!(list.held(BlockOrigin::Penalty), 3);
    // A fresh offender whose block ends sooner than all the others is kept:
    // the soonest-ending of the others goes (u3, 20 s).
    list.block("rl:user=fresh", secs(5), BlockOrigin::Penalty, T0)
        .unwrap();
    assert_eq!(list.blocked("rl:user=fresh", || T0), Some(secs(5)));
    assert_eq!(
        keys(&list, T0),
        ["rl:user=fresh", "rl:user=u0", "rl:user=u2"]
    );
}

#[test]
fn an_operator_block_survives_any_flood_of_penalty_blocks() {
    let list = BlockList::with_max_penalty_blocks(10);
    list.block("rl:user=victim", secs(1), BlockOrigin::Operator, T0)
        .unwrap();
    for i in 0..1_000 {
        let now = T0 + i;
        list.block(
            &format!("rl:user=x{i}"),
            secs(900),
            BlockOrigin::Penalty,
            now,
        )
        .unwrap();
    }
    assert_eq!(list.held(BlockOrigin::Penalty), 10);
    assert_eq!(list.held(BlockOrigin::Operator), 1);
    assert_eq!(
        list.blocked("rl:user=victim", || T0 + 1_000),
        Some(Duration::from_micros(SECOND - 1_000))
    );
    // The last offender of the flood is blocked; the first 990 gave way.
    assert_eq!(
        list.blocked("rl:user=x999", || T0 + 1_000),
        Some(secs(900) - Duration::from_micros(1))
    );
    assert_eq!(list.blocked("rl:user=x989", || T0 + 1_000), None);
    assert_eq!(
        list.blocked("rl:user=x990", || T0 + 1_000),
        Some(secs(900) - Duration::from_micros(10))
    );
}

#[test]
fn operator_blocks_are_refused_past_their_bound_and_ended_ones_are_swept() {
    let list = BlockList::new();
    for i in 0..MAX_BLOCKS {
        list.block(&format!("{i}"), secs(1), BlockOrigin::Operator, T0)
            .unwrap();
    }
    let refused = list.block("one-more", secs(1), BlockOrigin::Operator, T0);
    assert!(matches!(refused, Err(crate::Error::Full(ref m)) if m.contains("operator blocks")));
    // A key already blocked may be blocked again, and penalties still block.
    list.block("7", secs(9), BlockOrigin::Operator, T0).unwrap();
    list.block("one-more", secs(1), BlockOrigin::Penalty, T0)
        .unwrap();
    assert_eq!(list.blocked("one-more", || T0), Some(secs(1)));
    // Once the blocks end they are swept, and a new one is taken.
    let later = T0 + SECOND;
    list.block("one-more", secs(1), BlockOrigin::Operator, later)
        .unwrap();
    assert_eq!(list.held(BlockOrigin::Operator), 2);
    assert_eq!(list.held(BlockOrigin::Penalty), 0);
    assert_eq!(keys(&list, later), ["7", "one-more"]);
}

#[test]
fn a_key_with_both_kinds_is_blocked_until_the_later_and_unblock_lifts_both() {
    let list = BlockList::with_max_penalty_blocks(1);
    list.block("rl:user=a", secs(10), BlockOrigin::Operator, T0)
        .unwrap();
    list.block("rl:user=a", secs(30), BlockOrigin::Penalty, T0)
        .unwrap();
    assert_eq!(list.blocked("rl:user=a", || T0), Some(secs(30)));
    let listed = list.page(None, 10, T0);
    assert_eq!(listed[0].origin, BlockOrigin::Penalty);
    // The penalty block gives way to another offender's: the operator's stays.
    list.block("rl:user=b", secs(60), BlockOrigin::Penalty, T0)
        .unwrap();
    assert_eq!(list.blocked("rl:user=a", || T0), Some(secs(10)));
    assert_eq!(list.page(None, 10, T0)[0].origin, BlockOrigin::Operator);
    // A penalty block on an operator-blocked key, then unblock: both lifted.
    list.block("rl:user=a", secs(90), BlockOrigin::Penalty, T0)
        .unwrap();
    assert_eq!(list.blocked("rl:user=b", || T0), None);
    list.unblock("rl:user=a");
    assert_eq!(list.blocked("rl:user=a", || T0), None);
    assert!(list.is_empty());
}

#[test]
fn page_lists_live_blocks_in_key_order_after_a_key() {
    let list = BlockList::new();
    for (key, s) in [("rl:c", 3), ("rl:a", 1), ("rl:b", 2), ("rl:d", 9)] {
        list.block(key, secs(s), BlockOrigin::Operator, T0).unwrap();
    }
    list.block("rl:e", secs(5), BlockOrigin::Penalty, T0)
        .unwrap();
    let now = T0 + SECOND;
    // rl:a has ended at `now`.
    assert_eq!(
        list.page(None, 2, now),
        [
            ListedBlock {
                key: "rl:b".into(),
                left: secs(1),
                origin: BlockOrigin::Operator
            },
            ListedBlock {
                key: "rl:c".into(),
                left: secs(2),
                origin: BlockOrigin::Operator
            },
        ]
    );
    let next = list.page(Some("rl:c"), 2, now);
    assert_eq!(
        next,
        [
            ListedBlock {
                key: "rl:d".into(),
                left: secs(8),
                origin: BlockOrigin::Operator
            },
            ListedBlock {
                key: "rl:e".into(),
                left: secs(4),
                origin: BlockOrigin::Penalty
            },
        ]
    );
    assert_eq!(list.page(Some("rl:e"), 2, now), []);
    assert_eq!(list.page(Some("rl:bb"), 1, now)[0].key, "rl:c");
}

#[test]
fn a_page_holds_at_most_a_thousand_blocks() {
    let list = BlockList::new();
    for i in 0..1_500 {
        list.block(
            &format!("rl:user=u{i:04}"),
            secs(60),
            BlockOrigin::Penalty,
            T0,
        )
        .unwrap();
    }
    let page = list.page(None, usize::MAX, T0);
    assert_eq!(page.len(), 1_000);
    assert_eq!(page[999].key, "rl:user=u0999");
}

#[test]
fn holds_addresses_counts_address_keys_through_every_change() {
    let list = BlockList::with_max_penalty_blocks(1);
    assert!(!list.holds_addresses());
    list.block("rl:user=alice", secs(5), BlockOrigin::Operator, T0)
        .unwrap();
    list.block("rl:header.x-api-key=abc", secs(5), BlockOrigin::Penalty, T0)
        .unwrap();
    assert!(!list.holds_addresses());
    list.block("rl:2001%3Adb8%3A%3A/64", secs(5), BlockOrigin::Operator, T0)
        .unwrap();
    assert!(list.holds_addresses());
    list.unblock("rl:2001%3Adb8%3A%3A/64");
    assert!(!list.holds_addresses());
    // Evicted past the penalty bound by a later, longer block.
    list.block("rl:203.0.113.7", secs(1), BlockOrigin::Penalty, T0)
        .unwrap();
    assert!(list.holds_addresses());
    list.block("rl:custom=xyz", secs(9), BlockOrigin::Penalty, T0)
        .unwrap();
    assert!(!list.holds_addresses());
    // Both kinds on one address key count it once; it goes with the last.
    list.block("rl:198.51.100.1", secs(5), BlockOrigin::Operator, T0)
        .unwrap();
    list.block("rl:198.51.100.1", secs(10), BlockOrigin::Penalty, T0)
        .unwrap();
    list.block("rl:custom=xyz", secs(20), BlockOrigin::Penalty, T0)
        .unwrap();
    assert!(list.holds_addresses());
    // Swept once ended.
    assert_eq!(list.blocked("rl:user=alice", || T0 + 5 * SECOND), None);
    assert!(!list.holds_addresses());
    // Replaced.
    list.replace(
        [("rl:192.0.2.1".to_string(), secs(1), BlockOrigin::Operator)],
        T0,
    );
    assert!(list.holds_addresses());
    list.replace([], T0);
    assert!(!list.holds_addresses());
}

#[test]
fn replace_keeps_the_bound_and_the_origins() {
    let list = BlockList::with_max_penalty_blocks(2);
    list.replace(
        [
            ("rl:user=a".to_string(), secs(3), BlockOrigin::Penalty),
            ("rl:user=b".to_string(), secs(1), BlockOrigin::Penalty),
            ("rl:user=c".to_string(), secs(2), BlockOrigin::Penalty),
            ("rl:user=d".to_string(), secs(1), BlockOrigin::Operator),
        ],
        T0,
    );
    assert_eq!(keys(&list, T0), ["rl:user=a", "rl:user=c", "rl:user=d"]);
    assert_eq!(
        list.page(Some("rl:user=c"), 1, T0)[0].origin,
        BlockOrigin::Operator
    );
    list.set_max_penalty_blocks(1);
    assert_eq!(keys(&list, T0), ["rl:user=a", "rl:user=d"]);
    assert_eq!(list.max_penalty_blocks(), 1);
}

/// The process's `limiter_blocks` gauge, by origin: `seen` plus what
/// `snapshotter` read since (its snapshots give what moved since the last).
fn blocks_gauge(
    snapshotter: &metrics_util::debugging::Snapshotter,
    seen: &mut std::collections::BTreeMap<String, f64>,
) -> std::collections::BTreeMap<String, f64> {
    use metrics_util::debugging::DebugValue;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if let DebugValue::Gauge(value) = value {
            let key = key.key();
            let origin = key.labels().next().unwrap().value().to_owned();
            *seen.entry(format!("{}:{origin}", key.name())).or_default() += value.into_inner();
        }
    }
    seen.clone()
}

#[test]
fn the_blocks_gauge_follows_every_list_of_the_process() {
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let gauge = |operator: f64, penalty: f64| {
        std::collections::BTreeMap::from([
            ("limiter_blocks:operator".to_owned(), operator),
            ("limiter_blocks:penalty".to_owned(), penalty),
        ])
    };
    let mut seen = std::collections::BTreeMap::new();
    metrics::with_local_recorder(&recorder, || {
        let first = BlockList::with_max_penalty_blocks(2);
        first
            .block("op", secs(60), BlockOrigin::Operator, T0)
            .unwrap();
        for (i, s) in [10, 20, 30].into_iter().enumerate() {
            let key = format!("p{i}");
            first
                .block(&key, secs(s), BlockOrigin::Penalty, T0)
                .unwrap();
        }
        // The bound held: two penalty blocks.
        assert_eq!(blocks_gauge(&snapshotter, &mut seen), gauge(1.0, 2.0));
        let second = BlockList::new();
        second
            .block("p9", secs(5), BlockOrigin::Penalty, T0)
            .unwrap();
        assert_eq!(blocks_gauge(&snapshotter, &mut seen), gauge(1.0, 3.0));
        first.unblock("op");
        assert_eq!(blocks_gauge(&snapshotter, &mut seen), gauge(0.0, 3.0));
        // Ended blocks leave it when they are swept.
        assert_eq!(second.blocked("p9", || T0 + 5 * SECOND), None);
        assert_eq!(blocks_gauge(&snapshotter, &mut seen), gauge(0.0, 2.0));
        drop(first);
        assert_eq!(blocks_gauge(&snapshotter, &mut seen), gauge(0.0, 0.0));
    });
}
