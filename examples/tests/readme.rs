//! The README's program is `src/bin/quickstart.rs`, byte for byte, and it
//! does what the README says: served over real HTTP, three 200s, then a 429
//! with its `Retry-After`. And no Rust snippet of the README or a guide
//! hides lines: a rendered page would show rustdoc's `# ` lines as they are.
//!
//! The program listens on `LIMITER_ADDR`, `127.0.0.1:3000` by default. The
//! test sets `127.0.0.1:0` so that the system picks a free port (a server a
//! developer left on port 3000, or another test run, cannot collide with
//! it), and reads the address the program prints when it is bound.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

const README: &str = include_str!("../../README.md");
const QUICKSTART: &str = include_str!("../src/bin/quickstart.rs");

/// How long the program may take to start, and a request to be answered.
const PATIENCE: Duration = Duration::from_secs(30);

/// The text of the first ```` ```rust,no_run ```` block of `markdown`, its last
/// newline included.
fn first_rust_block(markdown: &str) -> &str {
    // `no_run`: as a doc test it would serve until stopped.
    let fence = "```rust,no_run\n";
    let start = markdown.find(fence).expect("a ```rust,no_run block") + fence.len();
    let length = markdown[start..]
        .find("\n```")
        .expect("the block's closing fence")
        + 1;
    &markdown[start..start + length]
}

#[test]
fn the_readme_shows_the_quickstart_program() {
    let shown = first_rust_block(README);
    assert!(
        shown == QUICKSTART,
        "the first ```rust block of README.md differs from examples/src/bin/quickstart.rs: \
         copy one into the other\n--- README.md\n{shown}\n--- quickstart.rs\n{QUICKSTART}"
    );
}

/// The running program, killed when dropped (a failed assertion included).
struct Program(Child);

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every line of a ```` ```rust ```` block of the README and the guides
/// that rustdoc would hide (`# ` or a lone `#`), as `file:line`.
#[test]
fn no_snippet_hides_lines() {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut pages = vec![("README.md".to_owned(), README.to_owned())];
    for entry in std::fs::read_dir(docs).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            pages.push((name, std::fs::read_to_string(entry.path()).unwrap()));
        }
    }
    assert!(pages.len() > 5, "the guides were not found");
    let mut hidden = Vec::new();
    for (name, text) in &pages {
        let mut in_rust = None;
        for (number, line) in text.lines().enumerate() {
            if let Some(info) = line.trim_start().strip_prefix("```") {
                in_rust = match in_rust {
                    Some(_) => None,
                    None => Some(info.starts_with("rust")),
                };
            } else if in_rust == Some(true)
                && (line.trim() == "#" || line.trim_start().starts_with("# "))
            {
                hidden.push(format!("{name}:{}", number + 1));
            }
        }
    }
    assert!(hidden.is_empty(), "hidden lines: {hidden:?}");
}

/// Starts the program on a free port and answers the address it listens on.
fn start() -> (Program, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_quickstart"))
        .env("LIMITER_ADDR", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the quickstart program starts");
    let stdout = child.stdout.take().expect("its stdout");
    let program = Program(child);
    let (sender, first_line) = mpsc::channel();
    std::thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let _ = sender.send(line);
        // Read on, so that the program never writes into a closed pipe.
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
    });
    let line = first_line
        .recv_timeout(PATIENCE)
        .expect("the program says where it listens");
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("{line:?}: {e}"));
    (program, addr)
}

/// Connects to `addr`, retrying until it accepts connections.
async fn connect(addr: SocketAddr) -> TcpStream {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match TcpStream::connect(addr).await {
            Ok(stream) => return stream,
            Err(e) if Instant::now() < deadline => {
                eprintln!("{addr}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{addr} accepts no connection: {e}"),
        }
    }
}

/// `GET /` on a connection of its own: status, headers and body text.
async fn get(addr: SocketAddr) -> (StatusCode, HeaderMap, String) {
    let exchange = async {
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(connect(addr).await))
                .await
                .expect("an HTTP/1.1 connection");
        tokio::spawn(connection);
        let request = Request::get("/")
            .header("host", addr.to_string())
            .body(Empty::<Bytes>::new())
            .expect("a request");
        let response = sender.send_request(request).await.expect("a response");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("the body").to_bytes();
        let body = String::from_utf8(body.to_vec()).expect("a text body");
        (parts.status, parts.headers, body)
    };
    tokio::time::timeout(PATIENCE, exchange)
        .await
        .expect("an answer in time")
}

#[tokio::test]
async fn the_quickstart_program_answers_429_after_three_requests() {
    let (_program, addr) = start();
    let first_request = Instant::now();
    let mut allowed = 0;
    let (headers, body) = loop {
        let (status, headers, body) = get(addr).await;
        match status {
            StatusCode::OK => {
                assert_eq!(body, "Hello, world!\n");
                allowed += 1;
                assert!(allowed <= 3, "more than 3 requests allowed");
            }
            StatusCode::TOO_MANY_REQUESTS => break (headers, body),
            other => panic!("unexpected {other}: {headers:?} {body}"),
        }
    };
    let elapsed = first_request.elapsed();
    assert_eq!(allowed, 3, "200s before the 429");

    // The first request leaves its 60 s window 60 s after it was allowed:
    // Retry-After is that, in whole seconds rounded up.
    let retry_after: u64 = headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After in seconds");
    let earliest = 60 - elapsed.as_secs().min(59);
    assert!(
        (earliest..=60).contains(&retry_after),
        "Retry-After: {retry_after}, {elapsed:?} after the first request"
    );
    assert_eq!(headers["ratelimit-policy"], r#""3-per-60s";q=3;w=60"#);
    assert_eq!(
        headers["ratelimit"],
        format!(r#""3-per-60s";r=0;t={retry_after}"#).as_str()
    );
    assert_eq!(headers["content-type"], "application/problem+json");
    assert!(body.contains("quota-exceeded"), "{body}");
}

/// The examples of the README's "Testing" section, as it shows them.
mod testing_section {
    use std::time::Duration;

    use axum::Router;
    use axum::body::Body;
    use axum::extract::Path;
    use axum::http::{Request, StatusCode};
    use axum::routing::post;
    use limiter_tower::{Limiter, LimiterLayer, ManualClock, MemoryStore, rate_limit};
    use tower::ServiceExt as _; // oneshot

    #[rate_limit(rules = [(5, 60s)], by = user)]
    async fn reply(Path(post): Path<u64>, body: String) -> String {
        format!("reply to {post}: {body}")
    }

    #[tokio::test]
    async fn a_reply_names_its_post() {
        let sent = reply::unlimited(Path(7), "thanks".to_owned()).await;
        assert_eq!(sent, "reply to 7: thanks");
    }

    #[rate_limit(rules = [(1, 60s)], by = global)]
    async fn create_post() -> &'static str {
        "created"
    }

    #[tokio::test]
    async fn one_post_a_minute() {
        let clock = ManualClock::new(Duration::from_secs(1_750_000_000));
        let store = MemoryStore::with_clock(clock.clone());
        let app = Router::new()
            .route("/posts", post(create_post)) // #[rate_limit(rules = [(1, 60s)], by = global)]
            .layer(LimiterLayer::new(Limiter::new(store)));
        let send = || {
            app.clone()
                .oneshot(Request::post("/posts").body(Body::empty()).unwrap())
        };

        assert_eq!(send().await.unwrap().status(), StatusCode::OK);
        assert_eq!(
            send().await.unwrap().status(),
            StatusCode::TOO_MANY_REQUESTS
        );
        clock.advance(Duration::from_secs(60));
        assert_eq!(send().await.unwrap().status(), StatusCode::OK);
    }
}
