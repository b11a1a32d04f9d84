//! The distance between regions on one machine: a TCP proxy that delays
//! every byte by a one-way latency in each direction, and can cut the link
//! (a partition) and restore it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// A proxy in front of `target`, adding `one_way` to each direction. Runs
/// on the Tokio runtime it was started on; stopped (every connection cut)
/// when dropped.
///
/// Bytes keep their order and are never lost: a partition holds them (and
/// carries nothing on connections made meanwhile) until [`heal`](Self::heal),
/// as a network that drops packets does until TCP's retransmissions get
/// through. A client meanwhile sees its calls time out, not fail fast.
#[derive(Debug)]
pub struct LatencyProxy {
    addr: SocketAddr,
    one_way: Duration,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    partitioned: watch::Sender<bool>,
    connections: AtomicU64,
}

impl LatencyProxy {
    /// Listens on a free local port and forwards each connection to `target`.
    pub async fn start(target: SocketAddr, one_way: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free local port");
        let addr = listener.local_addr().expect("the listener's address");
        let shared = Arc::new(Shared {
            partitioned: watch::Sender::new(false),
            connections: AtomicU64::new(0),
        });
        let accept = tokio::spawn(accept(listener, target, one_way, Arc::clone(&shared)));
        Self {
            addr,
            one_way,
            shared,
            accept,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://{addr}/`, for a target that is a Redis server.
    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// The latency added to each direction.
    pub fn one_way(&self) -> Duration {
        self.one_way
    }

    /// Cuts the link: nothing gets through, in either direction, until
    /// [`heal`](Self::heal).
    pub fn partition(&self) {
        self.shared.partitioned.send_replace(true);
    }

    /// Restores the link: what was held is delivered, in order.
    pub fn heal(&self) {
        self.shared.partitioned.send_replace(false);
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        // The accept task owns every connection's tasks: they end with it.
        self.accept.abort();
    }
}

async fn accept(listener: TcpListener, target: SocketAddr, one_way: Duration, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                shared.connections.fetch_add(1, Ordering::Relaxed);
                let partitioned = shared.partitioned.subscribe();
                connections.spawn(forward(client, target, one_way, partitioned));
            }
            Some(_) = connections.join_next() => {}
        }
    }
}

async fn forward(
    client: TcpStream,
    target: SocketAddr,
    one_way: Duration,
    partitioned: watch::Receiver<bool>,
) {
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        pipe(client_read, server_write, one_way, partitioned.clone()),
        pipe(server_read, client_write, one_way, partitioned),
    );
}

/// Copies `from` to `to`, each chunk `one_way` after it was read, in order;
/// held while partitioned.
async fn pipe(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    one_way: Duration,
    mut partitioned: watch::Receiver<bool>,
) {
    let (chunks, mut delayed) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read = async move {
        let mut buffer = vec![0; 64 * 1024];
        while let Ok(n) = from.read(&mut buffer).await {
            if n == 0
                || chunks
                    .send((Instant::now() + one_way, buffer[..n].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    };
    let write = async move {
        while let Some((due, bytes)) = delayed.recv().await {
            tokio::time::sleep_until(due).await;
            if partitioned.wait_for(|cut| !*cut).await.is_err()
                || to.write_all(&bytes).await.is_err()
            {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}
