//! A minimal HTTP/1.1 client over a raw socket, and a way to serve a router
//! on a free loopback port. Raw, so tests can send what real clients refuse
//! to: non-UTF-8 header values, 10 kB headers, garbage forwarding headers.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// A response as received.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names (lower case) and raw values; repeated headers joined with ", ".
    pub headers: HashMap<String, String>,
    /// The body.
    pub body: String,
}

impl Response {
    /// A header's value, panicking with the response when it is absent.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .unwrap_or_else(|| panic!("no {name} header in {self:#?}"))
    }

    /// Asserts a 429's exact fields: `Retry-After`, and per rule
    /// `(name, q, w, r, t)` in `RateLimit-Policy` and `RateLimit`, parsed as
    /// Structured Fields.
    pub fn assert_denied(&self, retry_after: &str, rules: &[(&str, i64, i64, i64, i64)]) {
        assert_eq!(self.status, 429, "{self:#?}");
        assert_eq!(self.header("retry-after"), retry_after, "{self:#?}");
        let params = |pairs: [(&str, i64); 2]| -> HashMap<String, i64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let policy: Vec<_> = rules
            .iter()
            .map(|&(name, q, w, _, _)| (name.to_owned(), params([("q", q), ("w", w)])))
            .collect();
        assert_eq!(self.rate_limit_field("ratelimit-policy"), policy);
        let state: Vec<_> = rules
            .iter()
            .map(|&(name, _, _, r, t)| (name.to_owned(), params([("r", r), ("t", t)])))
            .collect();
        assert_eq!(self.rate_limit_field("ratelimit"), state);
        assert_eq!(self.header("content-type"), "application/problem+json");
        assert!(self.body.contains("quota-exceeded"), "{}", self.body);
    }

    /// One structured-field list item per rule of `RateLimit` or
    /// `RateLimit-Policy`: (name, parameters).
    pub fn rate_limit_field(&self, name: &str) -> Vec<(String, HashMap<String, i64>)> {
        parse_rate_limit_field(self.header(name))
    }
}

/// Parses a `RateLimit` / `RateLimit-Policy` value as a Structured Fields
/// list of strings with integer parameters.
pub fn parse_rate_limit_field(value: &str) -> Vec<(String, HashMap<String, i64>)> {
    let list: sfv::List = sfv::Parser::new(value)
        .parse()
        .unwrap_or_else(|e| panic!("{value:?} is not a structured field list: {e}"));
    list.into_iter()
        .map(|entry| match entry {
            sfv::ListEntry::Item(item) => {
                let name = item
                    .bare_item
                    .as_string()
                    .unwrap_or_else(|| panic!("{value:?}: items are strings"))
                    .as_str()
                    .to_owned();
                let params = item
                    .params
                    .iter()
                    .map(|(k, v)| {
                        let n = v
                            .as_integer()
                            .unwrap_or_else(|| panic!("{value:?}: integer parameters"));
                        (k.as_str().to_owned(), i64::from(n))
                    })
                    .collect();
                (name, params)
            }
            sfv::ListEntry::InnerList(_) => panic!("{value:?}: no inner lists"),
        })
        .collect()
}

/// Sends one request and reads the whole response (`Connection: close`).
/// `headers` values are raw bytes.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
) -> std::io::Result<Response> {
    exchange(TcpStream::connect(addr).await?, method, path, headers, body).await
}

/// The status of one request with no body, as [`send`] gets it.
pub async fn status_of(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
) -> u16 {
    let response = send(addr, method, path, headers, b"").await;
    response
        .unwrap_or_else(|error| panic!("{method} {path}: {error}"))
        .status
}

/// [`send`] from the local address `from` (any of 127.0.0.0/8 reaches a
/// server on 127.0.0.1), for a peer other than 127.0.0.1.
pub async fn send_from(
    from: IpAddr,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
) -> std::io::Result<Response> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    exchange(socket.connect(addr).await?, method, path, headers, body).await
}

/// A request to an admin route: `body` (JSON, sent with its content type
/// when there is one), with the bearer `token` when given, from the local
/// address `from` when given (else 127.0.0.1).
pub async fn admin(
    addr: SocketAddr,
    from: Option<IpAddr>,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> Response {
    let authorization = token.map(|t| format!("Bearer {t}").into_bytes());
    let mut headers: Vec<(&str, &[u8])> = Vec::new();
    if !body.is_empty() {
        headers.push(("content-type", b"application/json"));
    }
    if let Some(value) = &authorization {
        headers.push(("authorization", value));
    }
    let sent = match from {
        Some(from) => send_from(from, addr, method, path, &headers, body.as_bytes()).await,
        None => send(addr, method, path, &headers, body.as_bytes()).await,
    };
    sent.unwrap_or_else(|error| panic!("{method} {path}: {error}"))
}

/// The seconds left of a block, as `GET {path}` on an admin route
/// answered `response`: 200 `{"seconds": N}`, or `None` for 404.
pub fn block_seconds(path: &str, response: &Response) -> Option<u64> {
    match response.status {
        404 => None,
        200 => {
            let body: serde_json::Value = serde_json::from_str(&response.body).unwrap();
            let seconds = body["seconds"].as_u64();
            assert_eq!(body, serde_json::json!({ "seconds": seconds }), "{path}");
            seconds
        }
        _ => panic!("{path}: {response:#?}"),
    }
}

async fn exchange(
    mut stream: TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
) -> std::io::Result<Response> {
    let addr = stream.peer_addr()?;
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n").into_bytes();
    for (name, value) in headers {
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    request.extend_from_slice(body);
    stream.write_all(&request).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no response in 30 s"))??;
    parse_response(&raw)
}

/// Parses a whole raw response, as [`send`] reads it.
pub fn parse_response(raw: &[u8]) -> std::io::Result<Response> {
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| invalid("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid("no status line"))?;
    let mut headers: HashMap<String, String> = HashMap::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let entry = headers.entry(name.trim().to_ascii_lowercase()).or_default();
            if !entry.is_empty() {
                entry.push_str(", ");
            }
            entry.push_str(value.trim());
        }
    }
    let mut body = raw[split + 4..].to_vec();
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t == "chunked")
    {
        body = dechunk(&body);
    }
    Ok(Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = data.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&data[..end]).unwrap_or("0").trim(), 16)
                .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = end + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

/// Serves `router` on a free loopback port with the peer address known
/// (`ConnectInfo`), until the returned handle is dropped with the runtime.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .expect("the test server runs");
    });
    addr
}
