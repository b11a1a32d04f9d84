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
    fn every_region_ranks_the_regions_alike() {
        assert_eq!(ranks(["north", "middle", "south"]), [1, 0, 2]);
        assert_eq!(ranks(["south", "north", "middle"]), [2, 1, 0]);
    }
}
