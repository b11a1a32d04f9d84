//! `GET /trending` of the UGC server: one global quota, leased. Two server
//! processes sharing Redis answer every request within the limit while
//! asking Redis far less than once per request.

use limiter_tests::UgcServer;
use limiter_tests::http::send;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_serve_trending_through_leases() {
    let redis = limiter_tests::redis();
    let servers = UgcServer::two_on_redis(redis.url());
    let server = redis.server().expect("the test's own Redis");
    let calls = || -> u64 {
        server
            .command(&["INFO", "commandstats"])
            .lines()
            .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |calls| calls.parse().unwrap())
    };
    let before = calls();
    let mut requests = tokio::task::JoinSet::new();
    // Fewer than the 1,000 a second allows, in whatever time they take.
    for i in 0..400 {
        let addr = servers[i % 2].addr();
        requests.spawn(async move { send(addr, "GET", "/trending", &[], b"").await.unwrap() });
    }
    let responses = requests.join_all().await;
    assert!(responses.iter().all(|r| r.status == 200));
    let calls = calls() - before;
    assert!(calls * 2 < 400, "{calls} Redis calls for 400 requests");
}
