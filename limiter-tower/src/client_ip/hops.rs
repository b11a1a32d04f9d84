//! The hops of forwarding header fields, as the addresses they name:
//! `Some(ip)`, IPv4-mapped IPv6 as IPv4, or `None` for an entry that is not
//! an address. Parsed from the raw bytes: a field that is not text still has
//! its well-formed entries.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The entries of one `X-Forwarded-For` or `X-Real-IP` field: addresses
/// separated by commas.
pub(super) fn address_list(field: &[u8]) -> impl Iterator<Item = Option<IpAddr>> + '_ {
    field
        .split(|&byte| byte == b',')
        .map(trim_whitespace)
        .filter(|entry| !entry.is_empty())
        .map(node)
}

/// The `for=` nodes of one `Forwarded` field's elements (RFC 7239):
/// `for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711"`.
pub(super) fn forwarded(field: &[u8]) -> impl Iterator<Item = Option<IpAddr>> + '_ {
    split_unquoted(field, b',')
        .map(trim_whitespace)
        .filter(|element| !element.is_empty())
        .map(forwarded_for)
}

/// The `for=` node of one `Forwarded` element; `None` when the element is
/// malformed, has no `for=` or more than one, or names no address.
fn forwarded_for(element: &[u8]) -> Option<IpAddr> {
    let mut found = None;
    for pair in split_unquoted(element, b';').map(trim_whitespace) {
        if pair.is_empty() {
            continue;
        }
        let equals = pair.iter().position(|&byte| byte == b'=')?;
        let name = trim_whitespace(&pair[..equals]);
        let value = parameter_value(trim_whitespace(&pair[equals + 1..]))?;
        if name.is_empty() || !name.iter().all(|&byte| is_token_byte(byte)) {
            return None;
        }
        // Each parameter occurs at most once per element (RFC 7239, 4).
        if name.eq_ignore_ascii_case(b"for") && found.replace(value).is_some() {
            return None;
        }
    }
    node(&found?)
}

/// A parameter's value: a token, or a quoted string unescaped. Lenient
/// about which bytes a token holds (`for=192.0.2.7:80` is read), strict
/// about where quotes stand.
fn parameter_value(value: &[u8]) -> Option<Cow<'_, [u8]>> {
    let Some(quoted) = value.strip_prefix(b"\"") else {
        let token = !value.is_empty()
            && !value
                .iter()
                .any(|&byte| matches!(byte, b'"' | b' ' | b'\t'));
        return token.then_some(Cow::Borrowed(value));
    };
    let inner = quoted.strip_suffix(b"\"")?;
    if !inner.contains(&b'\\') {
        return (!inner.contains(&b'"')).then_some(Cow::Borrowed(inner));
    }
    let mut unescaped = Vec::with_capacity(inner.len());
    let mut bytes = inner.iter();
    while let Some(&byte) = bytes.next() {
        match byte {
            b'\\' => unescaped.push(*bytes.next()?),
            b'"' => return None,
            _ => unescaped.push(byte),
        }
    }
    Some(Cow::Owned(unescaped))
}

/// One address, with or without a port: `192.0.2.7`, `192.0.2.7:4711`,
/// `2001:db8::7`, `[2001:db8::7]`, `[2001:db8::7]:4711`.
fn node(text: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(text).ok()?;
    let ip = if let Some(bracketed) = text.strip_prefix('[') {
        let (v6, after) = bracketed.split_once(']')?;
        if !after.is_empty() && !is_port(after.strip_prefix(':')?) {
            return None;
        }
        IpAddr::V6(v6.parse::<Ipv6Addr>().ok()?)
    } else if let Ok(ip) = text.parse::<IpAddr>() {
        ip
    } else {
        let (v4, port) = text.split_once(':')?;
        if !is_port(port) {
            return None;
        }
        IpAddr::V4(v4.parse::<Ipv4Addr>().ok()?)
    };
    Some(ip.to_canonical())
}

/// A port number, or an obfuscated port (`_` and letters, digits, `.`, `_`,
/// `-`; RFC 7239, 6.3).
fn is_port(port: &str) -> bool {
    let digits = (1..=5).contains(&port.len())
        && port.bytes().all(|byte| byte.is_ascii_digit())
        && port.parse::<u16>().is_ok();
    let obfuscated = port.strip_prefix('_').is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
    });
    digits || obfuscated
}

/// A token character (RFC 9110, 5.6.2).
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

fn trim_whitespace(bytes: &[u8]) -> &[u8] {
    let is_space = |byte: &u8| matches!(byte, b' ' | b'\t');
    let start = bytes
        .iter()
        .position(|b| !is_space(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_space(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// `bytes` split at each `delimiter` outside quoted strings. A quote left
/// open runs to the end.
fn split_unquoted(bytes: &[u8], delimiter: u8) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(bytes);
    std::iter::from_fn(move || {
        let text = rest?;
        let (mut quoted, mut escaped) = (false, false);
        for (i, &byte) in text.iter().enumerate() {
            if escaped {
                escaped = false;
            } else if quoted {
                match byte {
                    b'\\' => escaped = true,
                    b'"' => quoted = false,
                    _ => {}
                }
            } else if byte == b'"' {
                quoted = true;
            } else if byte == delimiter {
                rest = Some(&text[i + 1..]);
                return Some(&text[..i]);
            }
        }
        rest = None;
        Some(text)
    })
}
