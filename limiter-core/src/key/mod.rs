//! Store keys: [`Key`], the text a store keeps a limit's state under; and
//! the escaping of the identities keys are built of (`escape`).

mod escape;
#[cfg(test)]
mod tests;

use std::fmt;
use std::hash::{Hash, Hasher};

pub use escape::{HASHED_IDENTITY_PREFIX, MAX_IDENTITY_LEN, push_identity, push_identity_bytes};

/// The key of a check, as stores keep it.
///
/// A limit's key is `{start}{identity}:{limit}`
/// (`rate_limit:user=alice:posts-create_reply`), or `{start}{limit}` for a
/// global limit, which names nobody. Built so, it knows where the
/// identity's part lies, so the key of the identity's block, plan and
/// penalties is read from it rather than cut out of text. Any other key is
/// text given whole (`Key::from(text)`, [`set_text`](Self::set_text)),
/// with no identity's part.
///
/// ```
/// use limiter_core::{Identity, Key};
///
/// let key = Key::of_identity("rate_limit:", |k| Identity::user("a:b").push_key(k), "replies");
/// assert_eq!(key.as_str(), "rate_limit:user=a%3Ab:replies");
/// assert_eq!(key.identity_part(), Some("user=a%3Ab"));
/// assert_eq!(key.identity_key(), Some("rate_limit:user=a%3Ab"));
///
/// let global = Key::global("rate_limit:", "feed");
/// assert_eq!((global.as_str(), global.identity_part()), ("rate_limit:feed", None));
///
/// // Text of one's own: the same key, however it was built.
/// let text = Key::from("rate_limit:feed");
/// assert_eq!(text.identity_part(), None);
/// assert_eq!(text, global);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Key {
    text: String,
    /// Where the identity's part starts and ends in `text`; past any text
    /// ([`NO_IDENTITY`]) for a global limit's key, or text given whole, so
    /// that a key is 32 bytes, moved in and out of a reused buffer on every
    /// request.
    identity: (u32, u32),
}

/// The identity's span of a key without one: `text.get` of it is `None`.
const NO_IDENTITY: (u32, u32) = (u32::MAX, u32::MAX);

const _: () = assert!(std::mem::size_of::<Key>() == 32);

impl Key {
    /// An empty key, a buffer to [`set`](Self::set).
    pub const fn new() -> Self {
        Self {
            text: String::new(),
            identity: NO_IDENTITY,
        }
    }

    /// `{start}{identity}:{limit}`, `push_identity` appending the
    /// identity's part (its kind's marker and its escaped value, as
    /// [`Identity::push_key`](crate::Identity::push_key) writes them).
    #[inline]
    pub fn of_identity(start: &str, push_identity: impl FnOnce(&mut String), limit: &str) -> Self {
        let mut key = Self::new();
        key.set(start, push_identity, limit);
        key
    }

    /// A global limit's key, `{start}{limit}`.
    #[inline]
    pub fn global(start: &str, limit: &str) -> Self {
        let mut key = Self::new();
        key.set_global(start, limit);
        key
    }

    /// Makes this key [`of_identity`](Self::of_identity)'s, reusing its
    /// buffer.
    #[inline]
    pub fn set(&mut self, start: &str, push_identity: impl FnOnce(&mut String), limit: &str) {
        let text = &mut self.text;
        text.clear();
        text.reserve(start.len() + limit.len() + 48);
        text.push_str(start);
        let begin = text.len();
        push_identity(text);
        let end = text.len();
        text.push(':');
        text.push_str(limit);
        // Keys are far shorter than 4 GiB: an identity is hashed past 128
        // bytes.
        self.identity = (begin as u32, end as u32);
    }

    /// Makes this key [`global`](Self::global)'s, reusing its buffer.
    #[inline]
    pub fn set_global(&mut self, start: &str, limit: &str) {
        self.text.clear();
        self.text.push_str(start);
        self.text.push_str(limit);
        self.identity = NO_IDENTITY;
    }

    /// Makes this key `text`, with no identity's part, reusing its buffer.
    #[inline]
    pub fn set_text(&mut self, text: &str) {
        self.text.clear();
        self.text.push_str(text);
        self.identity = NO_IDENTITY;
    }

    /// The key as stores keep it.
    #[inline]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The identity's part (`user=alice`); `None` for a global limit, or
    /// text given whole.
    #[inline]
    pub fn identity_part(&self) -> Option<&str> {
        let (begin, end) = self.identity;
        self.text.get(begin as usize..end as usize)
    }

    /// `{start}{identity}`: the key of the identity's block and plan when
    /// `start` is the layer's prefix; `None` for a global limit, or text
    /// given whole.
    #[inline]
    pub fn identity_key(&self) -> Option<&str> {
        let (_, end) = self.identity;
        self.text.get(..end as usize)
    }

    /// The key's text.
    #[inline]
    pub fn into_string(self) -> String {
        self.text
    }
}

impl From<String> for Key {
    /// A key of `text`, with no identity's part; `text` becomes its buffer.
    #[inline]
    fn from(text: String) -> Self {
        Self {
            text,
            identity: NO_IDENTITY,
        }
    }
}

impl From<&str> for Key {
    /// A key of `text`, with no identity's part.
    #[inline]
    fn from(text: &str) -> Self {
        Self::from(text.to_owned())
    }
}

impl From<&String> for Key {
    /// A key of `text`, with no identity's part.
    #[inline]
    fn from(text: &String) -> Self {
        Self::from(text.as_str())
    }
}

/// Keys are equal when their texts are: how each was built does not
/// matter.
impl PartialEq for Key {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Key {}

/// Hashed as its text is.
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl AsRef<str> for Key {
    #[inline]
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The key of the identity a key starts with: `key` up to the first `:`
/// after `start` (the prefix and its `:`), an identity escaping its own.
/// `{prefix}:user=alice:reply` gives `{prefix}:user=alice`, the key of
/// that user's block and plan.
///
/// ```
/// assert_eq!(
///     limiter_core::identity_key_of("rate_limit:user=alice:reply", "rate_limit:".len()),
///     Some("rate_limit:user=alice")
/// );
/// ```
pub fn identity_key_of(key: &str, start: usize) -> Option<&str> {
    let end = key
        .get(start..)?
        .find(':')
        .map_or(key.len(), |at| start + at);
    Some(&key[..end])
}

/// Whether `block_key`, the key of an identity's block, is a client
/// address's: every other kind of identity carries a marker ending in `=`
/// after the key's last `:`.
pub(crate) fn names_address(block_key: &str) -> bool {
    !block_key
        .rsplit(':')
        .next()
        .unwrap_or(block_key)
        .contains('=')
}
