//! Sharding a hot key: `S` sub-keys, each with `1/S` of the limit, taken in
//! turn. The sub-keys' hash tags are chosen, the same way on every
//! instance, so that shard `i` hashes into the `i`-th of `S` equal parts of
//! the 16,384 cluster slots: on a cluster whose slots are split evenly
//! among at least `S` primaries, each shard sits on a primary of its own.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::store::Store;
use crate::{Error, Key, Policy, Verdict};

use super::state::Instance;

/// Redis Cluster's slot count.
const SLOTS: u32 = 16_384;

/// The sub-key and policy of each shard of `key`.
pub(super) fn shards_of(key: &Key, policy: &Policy, shards: u32) -> (Vec<Key>, Policy) {
    let keys = (0..shards)
        .map(|shard| shard_key_of(key, shard, shards))
        .collect();
    (keys, policy.divided(shards))
}

/// The shard the next request of `key` goes to, without taking the turn.
pub(super) fn next(hot: &Instance, key: &Key, policy: &Policy, shards: u32) -> (Key, Policy) {
    let turn = hot.turn.load(Ordering::Relaxed);
    let shard = (turn % u64::from(shards)) as u32;
    (shard_key_of(key, shard, shards), policy.divided(shards))
}

pub(super) async fn check<S: Store>(
    hot: &Instance,
    store: &Arc<S>,
    key: &Key,
    policy: &Policy,
    shards: u32,
    cost: u64,
) -> Result<Verdict, Error> {
    let turn = hot.turn.fetch_add(1, Ordering::Relaxed);
    let shard = (turn % u64::from(shards)) as u32;
    metrics::counter!("limiter_shard_picks_total", "shard" => shard.to_string()).increment(1);
    let share = policy.divided(shards);
    share.validate_cost(cost)?;
    let sub_key = shard_key_of(key, shard, shards);
    super::verdict_of(&**store, &sub_key, &share, cost).await
}

/// [`shard_key`] as a store takes it.
fn shard_key_of(key: &Key, shard: u32, shards: u32) -> Key {
    Key::from(shard_key(key.as_str(), shard, shards))
}

/// The key of shard `shard` of `shards`: the key with a hash tag that puts
/// it into the shard's part of the slots. Appended (`key:{tag}`) when the
/// key has no `{` (its prefix stays first); put first otherwise, since
/// Redis hashes the first `{…}` of a key.
pub fn shard_key(key: &str, shard: u32, shards: u32) -> String {
    let tag = shard_tag(key, shard, shards);
    if key.contains('{') {
        format!("{{{tag}}}{key}")
    } else {
        format!("{key}:{{{tag}}}")
    }
}

/// `s{shard}.{n}` with the first `n` whose slot lies within the middle
/// half of the shard's part of the slots (`n` starts from the key's hash,
/// so keys spread over the slots of that part).
fn shard_tag(key: &str, shard: u32, shards: u32) -> String {
    let part = SLOTS / shards;
    let (low, high) = (shard * part + part / 4, shard * part + 3 * part / 4);
    let start = fnv1a(key.as_bytes()) % 1_000_000;
    let mut tag = String::new();
    for n in start.. {
        tag.clear();
        use std::fmt::Write;
        let _ = write!(tag, "s{shard}.{n}");
        if (low..high).contains(&slot(tag.as_bytes())) {
            break;
        }
    }
    tag
}

/// The cluster slot of a hash tag's text: CRC16 (XMODEM) modulo 16,384.
pub fn slot(tag: &[u8]) -> u32 {
    let mut crc: u16 = 0;
    for &byte in tag {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    u32::from(crc) % SLOTS
}

/// A hash that is the same on every instance (sub-keys must agree).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(slot(b"123456789"), 0x31C3 % SLOTS);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
    }

    #[test]
    fn shards_fall_into_their_own_part_of_the_slots() {
        for shards in [2, 3, 4, 7, 64] {
            let part = SLOTS / shards;
            for shard in 0..shards {
                let key = shard_key("rate_limit:global:trending", shard, shards);
                let tag = &key[key.find('{').unwrap() + 1..key.find('}').unwrap()];
                assert_eq!(slot(tag.as_bytes()) / part, shard, "{key}");
            }
        }
        assert!(shard_key("rate_limit:x", 1, 3).starts_with("rate_limit:x:{s1."));
        assert!(shard_key("{user}:x", 1, 3).starts_with("{s1."));
    }
}
