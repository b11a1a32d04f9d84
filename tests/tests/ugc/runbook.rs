//! `docs/runbook.md`'s commands, run against the UGC server in the state
//! the runbook describes, print what it shows. Each `curl` is read as a
//! curl would read it (its flags, the `$TOKEN` variable) and sent with the
//! harness's client.

use std::net::SocketAddr;

use limiter_examples::{Options, app};
use limiter_tests::http::send;
use limiter_tests::ugc::{ADMIN_TOKEN, T0, reply};
use limiter_tower::{Limiter, ManualClock, MemoryStore};

/// Each `sh` block of the runbook's commands, with the `text` block after
/// it that shows what they print, a line each.
fn steps() -> Vec<(Vec<String>, Vec<String>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/runbook.md");
    let text = std::fs::read_to_string(path).unwrap();
    let mut blocks: Vec<(String, Vec<String>)> = Vec::new();
    let mut open: Option<(String, Vec<String>)> = None;
    for line in text.lines() {
        match (line.strip_prefix("```"), open.take()) {
            (Some(info), None) => open = Some((info.to_owned(), Vec::new())),
            (Some(_), Some(block)) => blocks.push(block),
            (None, Some((info, mut lines))) => {
                lines.push(line.to_owned());
                open = Some((info, lines));
            }
            (None, None) => {}
        }
    }
    let mut steps = Vec::new();
    let mut blocks = blocks.into_iter().peekable();
    while let Some((info, commands)) = blocks.next() {
        if info == "sh" {
            let (shown, printed) = blocks.next().expect("what the commands print");
            assert_eq!(shown, "text", "after {commands:?}");
            steps.push((commands, printed));
        }
    }
    steps
}

/// What `command` (a `curl` of the runbook) prints, sent to `addr`.
async fn run(addr: SocketAddr, command: &str) -> String {
    let command = command.replace("$TOKEN", ADMIN_TOKEN);
    let words = shlex::split(&command).unwrap_or_else(|| panic!("not shell words: {command}"));
    let mut words = words.iter().map(String::as_str);
    assert_eq!(words.next(), Some("curl"), "{command}");
    let (mut method, mut headers, mut body) = ("GET", Vec::new(), "");
    let (mut path, mut status_only) = (None, false);
    while let Some(word) = words.next() {
        match word {
            "-s" => {}
            "-o" => assert_eq!(words.next(), Some("/dev/null"), "{command}"),
            "-w" => {
                assert_eq!(words.next(), Some("%{http_code}\\n"), "{command}");
                status_only = true;
            }
            "-X" => method = words.next().unwrap(),
            "-H" => {
                let (name, value) = words.next().unwrap().split_once(": ").unwrap();
                headers.push((name, value.as_bytes()));
            }
            "-d" => body = words.next().unwrap(),
            url => {
                let at = url
                    .strip_prefix("localhost:3000")
                    .expect("the example server");
                path = Some(at);
            }
        }
    }
    let path = path.unwrap_or_else(|| panic!("no URL in {command}"));
    let response = send(addr, method, path, &headers, body.as_bytes())
        .await
        .unwrap();
    if status_only {
        response.status.to_string()
    } else {
        response.body
    }
}

/// Whether `printed` is what the runbook shows: the same JSON value, or
/// the same text.
fn alike(printed: &str, shown: &str) -> bool {
    match (
        serde_json::from_str::<serde_json::Value>(printed),
        serde_json::from_str::<serde_json::Value>(shown),
    ) {
        (Ok(printed), Ok(shown)) => printed == shown,
        _ => printed.trim() == shown.trim(),
    }
}

#[tokio::test]
async fn the_runbooks_commands_print_what_it_shows() {
    // The instance the runbook shows.
    let options = Options {
        instance_id: Some("web-1".to_owned()),
        ..limiter_tests::ugc::options()
    };
    let store = MemoryStore::with_clock(ManualClock::new(T0));
    let addr = limiter_tests::http::serve(app(Limiter::new(store), options)).await;
    // laoqian's 7 replies in a minute, to a limit of 5.
    let mut statuses = Vec::new();
    for _ in 0..7 {
        statuses.push(reply(addr, "laoqian").await.status);
    }
    assert_eq!(statuses, [201, 201, 201, 201, 201, 429, 429]);
    let steps = steps();
    assert_eq!(steps.len(), 5, "{steps:?}");
    for (commands, shown) in steps {
        assert_eq!(commands.len(), shown.len(), "{commands:?} shows {shown:?}");
        for (command, shown) in commands.iter().zip(&shown) {
            let printed = run(addr, command).await;
            assert!(
                alike(&printed, shown),
                "{command}\nprinted {printed}\nshown   {shown}"
            );
        }
    }
}
