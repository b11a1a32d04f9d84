//! The identities each limit under one router layer denied, counted on
//! this instance and published through the store every few seconds, so
//! that any instance answers one view across all of them
//! (limiter-tower's `Control::top_denied`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use crate::{DeniedReport, Identity, TopDenied};

/// How often an instance publishes its counts unless told otherwise.
pub const DEFAULT_PUBLISH_EVERY: Duration = Duration::from_secs(5);

/// How many identities of each limit an instance publishes: the most the
/// admin router lists.
pub const PUBLISHED: usize = 100;

/// How many publishing periods a report is read for: an instance that
/// stopped leaves the view within them.
const PERIODS_READ: u32 = 3;

/// The top offenders of each limit under one router layer, by the limit's
/// name: a sketch each, made at the limit's first denial. Kept per layer,
/// not per limit, so that two applications in one process (or two routers
/// sharing a `#[rate_limit]` handler) each list their own denials.
#[derive(Debug)]
pub struct Offenders {
    sketches: RwLock<HashMap<Box<str>, Arc<TopDenied>>>,
    /// This instance's name on the store's boards.
    instance: RwLock<Arc<str>>,
    /// How often the counts are published.
    every: Duration,
    /// Whether the task that publishes them runs.
    publishing: AtomicBool,
}

impl Offenders {
    /// Counts published every `every`, under `instance`'s name.
    pub fn new(instance: Arc<str>, every: Duration) -> Self {
        Self {
            sketches: RwLock::default(),
            instance: RwLock::new(instance),
            every,
            publishing: AtomicBool::new(false),
        }
    }

    /// Counts a denial of `identity` by the limit `limit`.
    pub fn record(&self, limit: &str, identity: &Identity) {
        let found = read(&self.sketches).get(limit).cloned();
        let sketch = found.unwrap_or_else(|| {
            let mut sketches = self.sketches.write().unwrap_or_else(|p| p.into_inner());
            Arc::clone(
                sketches
                    .entry(limit.into())
                    .or_insert_with(|| Arc::new(TopDenied::new())),
            )
        });
        sketch.record_identity(identity);
    }

    /// What this instance counted of `limit`'s offenders, live; an empty
    /// report when it denied nobody.
    pub fn report(&self, limit: &str) -> DeniedReport {
        let sketch = read(&self.sketches).get(limit).cloned();
        sketch.map_or_else(DeniedReport::default, |sketch| sketch.report(PUBLISHED))
    }

    /// Each limit's report, by its name, as published now.
    pub fn reports(&self) -> Vec<(Box<str>, DeniedReport)> {
        let sketches: Vec<_> = read(&self.sketches)
            .iter()
            .map(|(limit, sketch)| (limit.clone(), Arc::clone(sketch)))
            .collect();
        sketches
            .into_iter()
            .map(|(limit, sketch)| (limit, sketch.report(PUBLISHED)))
            .collect()
    }

    /// This instance's name on the boards.
    pub fn instance(&self) -> Arc<str> {
        Arc::clone(&read(&self.instance))
    }

    /// Names this instance `instance` on the boards.
    pub fn set_instance(&self, instance: Arc<str>) {
        *self.instance.write().unwrap_or_else(|p| p.into_inner()) = instance;
    }

    /// How often the counts are published.
    pub fn every(&self) -> Duration {
        self.every
    }

    /// How long a published report is read.
    pub fn ttl(&self) -> Duration {
        self.every.saturating_mul(PERIODS_READ)
    }

    /// Whether the caller is to start the publishing task: the first time
    /// asked, and again after [`stopped_publishing`](Self::stopped_publishing).
    pub fn starts_publishing(&self) -> bool {
        !self.every.is_zero()
            && !self.publishing.load(Ordering::Relaxed)
            && !self.publishing.swap(true, Ordering::AcqRel)
    }

    /// The publishing task could not start (no runtime): the next denial
    /// tries again.
    pub fn stopped_publishing(&self) {
        self.publishing.store(false, Ordering::Release);
    }
}

/// The board a limit's counts are published on: the limit's keys' start
/// (the key prefix) and its name.
pub fn board(key_start: &str, limit: &str) -> String {
    format!("top-denied:{key_start}{limit}")
}

/// This process's default name: the host's name and the process id.
pub fn default_instance() -> Arc<str> {
    static INSTANCE: OnceLock<Arc<str>> = OnceLock::new();
    let instance = INSTANCE.get_or_init(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .or_else(|| std::env::var("COMPUTERNAME").ok())
            .map(|host| host.trim().to_owned())
            .filter(|host| !host.is_empty())
            .unwrap_or_else(|| "localhost".to_owned());
        sanitized(&format!("{host}-{}", std::process::id()))
    });
    Arc::clone(instance)
}

/// A new layer's default name: the process's
/// ([`default_instance`]), followed by `-2`, `-3`... for each layer made
/// after the first, so that two applications in one process sharing a
/// store count as two instances.
pub fn layer_instance() -> Arc<str> {
    static LAYERS: AtomicUsize = AtomicUsize::new(0);
    match LAYERS.fetch_add(1, Ordering::Relaxed) {
        0 => default_instance(),
        made => format!("{}-{}", default_instance(), made + 1).into(),
    }
}

/// `id` with every character but visible ASCII replaced by `_`: a header's
/// value.
pub fn sanitized(id: &str) -> Arc<str> {
    id.chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect::<String>()
        .into()
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}
