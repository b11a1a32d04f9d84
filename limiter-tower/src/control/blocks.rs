//! Blocks through the handle: an identity's block in every store the
//! handle answers for (its own, and those it merged).

use std::time::Duration;

use limiter_core::{BlockOrigin, Change, Error, Identity, ListedBlock, SharedControl, required};

use super::Control;

impl Control {
    /// Blocks `identity` for `duration` on every instance sharing the
    /// store (each store, after [`merge`](Self::merge): this one's first,
    /// then each merged one's, the first failure answered), until the
    /// block ends or [`unblock`](Self::unblock). Each request it makes is
    /// answered 429 with `Retry-After` the block's remaining time and a
    /// problem of type [`BLOCKED`](crate::BLOCKED):
    ///
    /// | identity | what the block covers |
    /// |---|---|
    /// | an address ([`Identity::ip`]; an IPv6 address stands for its network, /64 by default) | every limited route of that client address, whatever the route counts by |
    /// | a user | every limit keyed by that user, and [`attempt_on`](Self::attempt_on) such a limit |
    /// | a header's value (an API key) | every limit keyed by that header's value |
    /// | a custom function's value | every limit keyed by a custom function that answers it |
    pub async fn block(&self, identity: &Identity, duration: Duration) -> Result<(), Error> {
        for (part, shared) in self.every_block_store("blocks")? {
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

    /// Lifts `identity`'s block on every instance sharing the store (each
    /// store, as [`block`](Self::block) sets it).
    pub async fn unblock(&self, identity: &Identity) -> Result<(), Error> {
        for (part, shared) in self.every_block_store("blocks")? {
            let key = part.identity_key(identity);
            shared.change(Change::Unblock { key: &key }).await?;
        }
        Ok(())
    }

    /// How long `identity` stays blocked, as this instance knows it (its
    /// own block, not its address's): the longest in any store.
    pub fn blocked(&self, identity: &Identity) -> Option<Duration> {
        (self.parts())
            .filter_map(|part| part.block_of(&part.identity_key(identity)))
            .max()
    }

    /// The live blocks this instance knows, in key order: at most `max`
    /// (up to [`MAX_BLOCKS_PAGE`](limiter_core::MAX_BLOCKS_PAGE)) whose
    /// keys come after `after` (the last key of the page before; `None`
    /// for the first page), from every store (a key blocked in several
    /// listed once, with its longest block). Each block's key names its
    /// identity's kind (see [`Identity`]); its origin says whether an
    /// operator or a penalty set it. Fails with [`Error::Unsupported`] for
    /// a store that keeps no blocks.
    pub fn blocks(&self, after: Option<&str>, max: usize) -> Result<Vec<ListedBlock>, Error> {
        let mut listed = Vec::new();
        for (_, shared) in self.every_block_store("listing blocks")? {
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
    fn every_block_store(
        &self,
        what: &'static str,
    ) -> Result<Vec<(&Control, &dyn SharedControl)>, Error> {
        (self.parts())
            .map(|part| {
                let shared = part.context.store.capabilities().as_shared_control();
                Ok((part, required(shared, what)?))
            })
            .collect()
    }
}
