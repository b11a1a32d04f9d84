use std::hash::BuildHasher;

use super::*;

fn user_key(start: &str, user: &str, limit: &str) -> Key {
    Key::of_identity(start, |k| push_identity(k, user), limit)
}

#[test]
fn the_same_text_is_the_same_key_however_it_is_built() {
    let text = "rate_limit:alice:replies";
    let mut set = Key::new();
    set.set("rate_limit:", |k| k.push_str("alice"), "replies");
    let mut set_global = Key::new();
    set_global.set_global("rate_limit:alice:", "replies");
    let mut set_text = Key::new();
    set_text.set_text(text);
    let built = [
        user_key("rate_limit:", "alice", "replies"),
        Key::global("rate_limit:alice:", "replies"),
        Key::from(text),
        Key::from(text.to_owned()),
        set,
        set_global,
        set_text,
    ];
    for key in &built {
        assert_eq!(key.as_str(), text);
        assert_eq!(key, &built[0]);
    }
    assert_ne!(Key::from("rate_limit:bob:replies"), built[0]);
}

#[test]
fn a_reused_buffer_is_written_anew() {
    let mut key = user_key("rate_limit:", "alice", "replies");
    key.set("rate_limit:", |k| k.push_str("bob"), "replies");
    assert_eq!(key.as_str(), "rate_limit:bob:replies");
    assert_eq!(key.identity_part(), Some("bob"));
    key.set_global("rate_limit:", "feed");
    assert_eq!(
        (key.as_str(), key.identity_part()),
        ("rate_limit:feed", None)
    );
    key.set_text("login:ada");
    assert_eq!(key.as_str(), "login:ada");
    assert_eq!((key.identity_part(), key.identity_key()), (None, None));
    key.set_text("");
    assert_eq!(key, Key::default());
}

#[test]
fn keys_equal_and_hash_by_their_text() {
    let of_identity = user_key("p:", "a", "l");
    let whole = Key::from("p:a:l");
    assert_eq!(of_identity, whole);
    assert_ne!(of_identity, Key::from("p:a:m"));
    let state = foldhash::fast::FixedState::default();
    assert_eq!(state.hash_one(&of_identity), state.hash_one("p:a:l"));
    assert_eq!(whole.to_string(), "p:a:l");
    assert_eq!(AsRef::<str>::as_ref(&whole), "p:a:l");
}
