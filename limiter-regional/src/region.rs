//! A region: a name and the Redis (standalone or Cluster) that counts there.

use std::fmt;

/// The longest region name.
const MAX_NAME_LEN: usize = 32;

/// One region: its name and where its Redis is.
///
/// The name is part of what every region stores, so each region must be
/// known by the same name in every region's configuration.
///
/// ```
/// use limiter_regional::Region;
///
/// let north = Region::open("north", "redis://10.1.0.1:6379/")?;
/// assert_eq!(north.name(), "north");
/// assert!(Region::open("north pole", "redis://10.1.0.1:6379/").is_err());
/// # Ok::<(), limiter_regional::RegionError>(())
/// ```
pub struct Region {
    pub(crate) name: Box<str>,
    pub(crate) endpoint: Endpoint,
}

/// Where a region's Redis is, as given: each connection to it (the
/// regional links, the Redis store that keeps its blocks) is opened from it.
pub(crate) enum Endpoint {
    /// A standalone Redis's URL.
    Standalone(String),
    /// A Redis Cluster's seeds (URLs).
    Cluster(Vec<String>),
}

impl Endpoint {
    /// A Redis store on this endpoint, connecting on first use.
    pub(crate) fn open_store(
        &self,
        config: limiter_redis::RedisConfig,
    ) -> Result<limiter_redis::RedisStore, limiter_core::Error> {
        match self {
            Self::Standalone(url) => limiter_redis::RedisStore::open_with(url, config),
            Self::Cluster(seeds) => limiter_redis::RedisStore::open_cluster_with(
                seeds.iter().map(String::as_str),
                config,
            ),
        }
    }
}

/// Why a regional store could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegionError {
    /// A region's name must be 1 to 32 ASCII letters, digits, `-` or `_`.
    #[error("a region's name is 1 to 32 ASCII letters, digits, '-' or '_', got {name:?}")]
    InvalidName {
        /// The name that was given.
        name: String,
    },
    /// Two regions of one store have the same name.
    #[error("the region {name:?} is named twice")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// A region's Redis URL is malformed.
    #[error("region {name}: {source}")]
    Redis {
        /// The region.
        name: String,
        /// What redis-rs said.
        #[source]
        source: redis::RedisError,
    },
    /// The Redis store keeping a region's blocks and penalties could not
    /// be opened.
    #[error("region {name}: {source}")]
    Store {
        /// The region.
        name: String,
        /// What the Redis store said.
        #[source]
        source: limiter_core::Error,
    },
}

impl Region {
    /// A region whose Redis is the standalone server at `url`. Connects on
    /// first use; fails only for a malformed name or URL.
    pub fn open(name: &str, url: &str) -> Result<Self, RegionError> {
        let name = valid_name(name)?;
        // Refuses a malformed URL now rather than at the first call.
        redis::Client::open(url).map_err(|source| RegionError::Redis {
            name: name.to_string(),
            source,
        })?;
        Ok(Self {
            name,
            endpoint: Endpoint::Standalone(url.to_owned()),
        })
    }

    /// A region whose Redis is the Redis Cluster reachable through `seeds`
    /// (URLs). Connects on first use.
    pub fn open_cluster<'a>(
        name: &str,
        seeds: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, RegionError> {
        let name = valid_name(name)?;
        let seeds: Vec<String> = seeds.into_iter().map(str::to_owned).collect();
        // Refuses malformed seeds now rather than at the first call.
        redis::cluster::ClusterClient::new(seeds.clone()).map_err(|source| RegionError::Redis {
            name: name.to_string(),
            source,
        })?;
        Ok(Self {
            name,
            endpoint: Endpoint::Cluster(seeds),
        })
    }

    /// The region's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the region's Redis is a Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.endpoint, Endpoint::Cluster(_))
    }
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("name", &self.name)
            .field("cluster", &self.is_cluster())
            .finish_non_exhaustive()
    }
}

/// A name fit for the stored field names (`{name}:c`): no separator, no
/// space, no hash tag.
fn valid_name(name: &str) -> Result<Box<str>, RegionError> {
    let fits = (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if fits {
        Ok(name.into())
    } else {
        Err(RegionError::InvalidName {
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_break_a_field_are_refused() {
        for bad in ["", "north pole", "a:b", "{tag}", "ö", &"x".repeat(33)] {
            let error = Region::open(bad, "redis://127.0.0.1/").unwrap_err();
            assert!(matches!(error, RegionError::InvalidName { .. }), "{bad:?}");
        }
        for good in ["north", "eu-west_1", &"x".repeat(32)] {
            assert_eq!(
                Region::open(good, "redis://127.0.0.1/").unwrap().name(),
                good
            );
        }
        let error = Region::open("north", "http://nowhere").unwrap_err();
        assert!(error.to_string().starts_with("region north: "), "{error}");
    }
}
