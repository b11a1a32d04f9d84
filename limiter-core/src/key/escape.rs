//! Escaping the identities store keys are built of, which nobody trusts.
//!
//! An identity (a user name, an IP address, an API key) is escaped so that it
//! can never change the key's shape: `:` separates the key's parts, and `{`
//! `}` would form a Redis Cluster hash tag. Identities longer than
//! [`MAX_IDENTITY_LEN`] after escaping are replaced by their SHA-256, so a
//! 10 kB header cannot make a 10 kB key. The hashed form starts with
//! [`HASHED_IDENTITY_PREFIX`], `%` followed by a letter that is not a hex
//! digit, which no escaped identity can contain (an escaped `%` is always
//! followed by two hex digits): no identity can spell another's hash.

use std::fmt::Write;

use sha2::{Digest, Sha256};

/// The longest escaped identity kept as it is; longer ones are hashed.
pub const MAX_IDENTITY_LEN: usize = 128;

/// How a hashed identity starts: `%s` can never appear in an escaped one.
pub const HASHED_IDENTITY_PREFIX: &str = "%sha256-";

/// Appends `identity` to `key`, escaped and, when too long, hashed.
///
/// `%`, `:`, `{`, `}`, spaces and control characters are percent-encoded, so
/// two different identities never give the same text.
///
/// ```
/// let mut key = String::from("rate_limit:");
/// limiter_core::push_identity(&mut key, "a:b{c}");
/// assert_eq!(key, "rate_limit:a%3Ab%7Bc%7D");
///
/// let mut long = String::new();
/// limiter_core::push_identity(&mut long, &"x".repeat(10_000));
/// assert!(long.starts_with(limiter_core::HASHED_IDENTITY_PREFIX));
/// assert_eq!(long.len(), "%sha256-".len() + 64);
/// ```
pub fn push_identity(key: &mut String, identity: &str) {
    push_identity_bytes(key, identity.as_bytes());
}

/// [`push_identity`] for raw bytes, such as a header value that is not UTF-8.
///
/// Bytes that are not valid UTF-8 are percent-encoded. Since every `%` of
/// valid text is itself encoded, the result stays unique per input.
///
/// ```
/// let mut key = String::new();
/// limiter_core::push_identity_bytes(&mut key, b"caf\xe9");
/// assert_eq!(key, "caf%E9");
/// ```
pub fn push_identity_bytes(key: &mut String, identity: &[u8]) {
    // Most identities (addresses, API keys, user names) are printable ASCII
    // with nothing to escape: copied whole, without decoding them.
    if identity.len() <= MAX_IDENTITY_LEN && identity.iter().all(|&b| kept_as_is(b)) {
        // Every byte is ASCII, so the text is valid UTF-8.
        if let Ok(text) = std::str::from_utf8(identity) {
            key.push_str(text);
        }
        return;
    }
    push_escaped(key, identity);
}

/// [`push_identity_bytes`] character by character: escaped, and hashed
/// when too long.
fn push_escaped(key: &mut String, identity: &[u8]) {
    let escaped_len: usize = identity
        .utf8_chunks()
        .map(|chunk| {
            let valid: usize = chunk.valid().chars().map(escaped_len).sum();
            valid + 3 * chunk.invalid().len()
        })
        .sum();
    if escaped_len > MAX_IDENTITY_LEN {
        key.push_str(HASHED_IDENTITY_PREFIX);
        for byte in Sha256::digest(identity) {
            let _ = write!(key, "{byte:02x}");
        }
        return;
    }
    key.reserve(escaped_len);
    for chunk in identity.utf8_chunks() {
        for c in chunk.valid().chars() {
            if needs_escape(c) {
                let mut buf = [0; 4];
                for byte in c.encode_utf8(&mut buf).bytes() {
                    let _ = write!(key, "%{byte:02X}");
                }
            } else {
                key.push(c);
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(key, "%{byte:02X}");
        }
    }
}

fn escaped_len(c: char) -> usize {
    if needs_escape(c) {
        3 * c.len_utf8()
    } else {
        c.len_utf8()
    }
}

/// Whether `byte` is ASCII that [`needs_escape`] leaves as it is: visible
/// (no space nor control character) and none of `%`, `:`, `{`, `}`.
fn kept_as_is(byte: u8) -> bool {
    byte.is_ascii_graphic() && !matches!(byte, b'%' | b':' | b'{' | b'}')
}

fn needs_escape(c: char) -> bool {
    matches!(c, '%' | ':' | '{' | '}') || c.is_whitespace() || c.is_control()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(identity: &str) -> String {
        let mut key = String::new();
        push_identity(&mut key, identity);
        key
    }

    #[test]
    fn separators_and_hash_tags_are_escaped() {
        assert_eq!(escaped("203.0.113.7"), "203.0.113.7");
        assert_eq!(escaped("2001:db8::1"), "2001%3Adb8%3A%3A1");
        assert_eq!(escaped("{tag}"), "%7Btag%7D");
        assert_eq!(escaped("50%"), "50%25");
        assert_eq!(escaped("a b\n"), "a%20b%0A");
        assert_eq!(escaped("老钱"), "老钱");
        // The escape character itself is escaped, so escaping is injective.
        assert_ne!(escaped("%3A"), escaped(":"));
    }

    #[test]
    fn invalid_utf8_cannot_collide_with_text() {
        let mut raw = String::new();
        push_identity_bytes(&mut raw, b"a\x80");
        assert_eq!(raw, "a%80");
        assert_eq!(escaped("a%80"), "a%2580");
    }

    #[test]
    fn ascii_copied_whole_is_escaped_the_same() {
        // Every byte alone and between two letters, and a typical API key,
        // as the character-by-character path escapes them.
        let mut cases: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        cases.extend((0..=255u8).map(|b| vec![b'a', b, b'z']));
        cases.push(b"k-0123456789abcdef.42_~!".to_vec());
        cases.push(vec![b'a'; MAX_IDENTITY_LEN]);
        cases.push(vec![b'a'; MAX_IDENTITY_LEN + 1]);
        for case in cases {
            let (mut fast, mut general) = (String::from("p:"), String::from("p:"));
            push_identity_bytes(&mut fast, &case);
            push_escaped(&mut general, &case);
            assert_eq!(fast, general, "{case:?}");
        }
        assert_eq!(escaped("k-1.2"), "k-1.2");
        assert_eq!(escaped("a\x7fb"), "a%7Fb");
    }

    #[test]
    fn long_identities_are_hashed_at_the_boundary() {
        assert_eq!(escaped(&"a".repeat(128)), "a".repeat(128));
        let hashed = escaped(&"a".repeat(129));
        assert!(hashed.starts_with("%sha256-"));
        assert_eq!(hashed.len(), 72);
        assert_ne!(hashed, escaped(&"a".repeat(130)));
        // 43 colons escape to 129 bytes.
        assert!(escaped(&":".repeat(43)).starts_with("%sha256-"));
    }

    #[test]
    fn no_identity_spells_another_identitys_hash() {
        let hashed = escaped(&"a".repeat(129));
        // The hashed form itself, sent as an identity, is escaped: its `%` becomes `%25`.
        assert_eq!(escaped(&hashed), format!("%25{}", &hashed[1..]));
        assert_ne!(escaped(&hashed), hashed);
        // And so is its old spelling, as bytes too.
        let old_form = &hashed[1..];
        assert_eq!(escaped(old_form), old_form);
        let mut raw = String::new();
        push_identity_bytes(&mut raw, hashed.as_bytes());
        assert_ne!(raw, hashed);
    }
}
