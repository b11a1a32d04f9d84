//! Each region's share of a window's quota: what it may admit without
//! asking anyone. The shares add up to the quota exactly, whatever the
//! quota, so no region ever holds more than the quota leaves it.

/// The share of the region ranked `rank` (0-based, by name) among
/// `regions`: the quota divided evenly, the remainder one each to the
/// first regions by name. Every region computes every region's share alike.
pub(crate) fn share(quota: u64, regions: usize, rank: usize) -> u64 {
    let regions = regions.max(1) as u64;
    let base = quota / regions;
    base + u64::from((rank as u64) < quota % regions)
}

/// The part of the share of the region ranked `owner` that the region
/// ranked `taker` may take once the owner has been out of touch with it
/// long enough: the owner's share divided evenly among the others, the
/// remainder one each to the first by name. The parts add up to the share.
pub(crate) fn portion(quota: u64, regions: usize, owner: usize, taker: usize) -> u64 {
    let owner_share = share(quota, regions, owner);
    let among_others = taker - usize::from(taker > owner);
    share(owner_share, regions.saturating_sub(1), among_others)
}

/// The rank of each of `names` among them all, by name.
pub(crate) fn ranks<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<usize> {
    let names: Vec<&str> = names.into_iter().collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    names
        .iter()
        .map(|name| sorted.partition_point(|other| other < name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_quota_exactly() {
        for quota in 0..200 {
            for regions in 1..8 {
                let total: u64 = (0..regions).map(|rank| share(quota, regions, rank)).sum();
                assert_eq!(total, quota, "quota {quota}, {regions} regions");
            }
        }
        assert_eq!(
            (0..3).map(|r| share(31, 3, r)).collect::<Vec<_>>(),
            [11, 10, 10]
        );
        // Fewer requests than regions: the first by name hold one each.
        assert_eq!(
            (0..3).map(|r| share(2, 3, r)).collect::<Vec<_>>(),
            [1, 1, 0]
        );
    }

    #[test]
    fn the_parts_of_a_share_add_up_to_it() {
        for quota in 0..100 {
            for regions in 2..6 {
                for owner in 0..regions {
                    let parts: u64 = (0..regions)
                        .filter(|&taker| taker != owner)
                        .map(|taker| portion(quota, regions, owner, taker))
                        .sum();
                    assert_eq!(parts, share(quota, regions, owner));
                }
            }
        }
        // 31 over three: middle (rank 0) holds 11, north 10, south 10;
        // middle's 11 goes 6 to north and 5 to south.
        assert_eq!(portion(31, 3, 0, 1), 6);
        assert_eq!(portion(31, 3, 0, 2), 5);
        assert_eq!(portion(31, 3, 2, 0), 5);
    }

    #[test]
    fn every_region_ranks_the_regions_alike() {
        assert_eq!(ranks(["north", "middle", "south"]), [1, 0, 2]);
        assert_eq!(ranks(["south", "north", "middle"]), [2, 1, 0]);
    }
}
