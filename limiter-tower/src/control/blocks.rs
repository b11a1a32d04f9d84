//! Blocks through the handle: an identity's block in every store the
//! handle answers for (its own, and those it merged).

use std::time::Duration;

use limiter_core::{BlockOrigin, Change, Error, Identity, ListedBlock, SharedControl, required};

use super::Control;

pub(super) async fn block(
    control: &Control,
    identity: &Identity,
    duration: Duration,
) -> Result<(), Error> {
    for (part, shared) in every_block_store(control, "blocks")? {
        let key = part.identity_key(identity);
        let block = Change::Block {
            key: &key,
            duration,
            origin: BlockOrigin::Operator,
        };
        shared.change(block).await?;
    }
    Ok(())
}

pub(super) async fn unblock(control: &Control, identity: &Identity) -> Result<(), Error> {
    for (part, shared) in every_block_store(control, "blocks")? {
        let key = part.identity_key(identity);
        shared.change(Change::Unblock { key: &key }).await?;
    }
    Ok(())
}

pub(super) fn blocked(control: &Control, identity: &Identity) -> Option<Duration> {
    (control.parts())
        .filter_map(|part| part.block_of(&part.identity_key(identity)))
        .max()
}

pub(super) fn blocks(
    control: &Control,
    after: Option<&str>,
    max: usize,
) -> Result<Vec<ListedBlock>, Error> {
    let mut listed = Vec::new();
    for (_, shared) in every_block_store(control, "listing blocks")? {
        // On the store's own clock (a test's manual one too).
        let tables = shared.tables();
        listed.extend(tables.blocks().page(after, max, tables.now()));
    }
    // Each store's first `max` after `after`: the first `max` of all
    // are among them.
    listed.sort_by(|a, b| a.key.cmp(&b.key).then(b.left.cmp(&a.left)));
    listed.dedup_by(|later, kept| later.key == kept.key);
    listed.truncate(max);
    Ok(listed)
}

/// Each handle and its store's shared control, all of them found
/// before any is changed: [`Error::Unsupported`] naming `what` for a
/// store without.
fn every_block_store<'a>(
    control: &'a Control,
    what: &'static str,
) -> Result<Vec<(&'a Control, &'a dyn SharedControl)>, Error> {
    (control.parts())
        .map(|part| {
            let shared = part.context.shared.store.capabilities().as_shared_control();
            Ok((part, required(shared, what)?))
        })
        .collect()
}
