//! The seed workloads on tokio tasks and channels: the "rust" native reference of pytest-concurrency.
//!
//!     prog WORKLOAD ROUNDS WARMUP key=value ... [server=HOST:PORT]
//!
//! Same protocol as the Go program (pytest_concurrency/native/go/main.go): JSON lines on stdout,
//! `{"memory":..}` first for spawn, `{"round":i,"warmup":b,"ns":N,"result":{..}}` per round,
//! `{"usage":..}` around the measured rounds, `{"done":true}`. The Python side checks the results.
//! PYTEST_CONCURRENCY_NATIVE_CORRUPT=1 makes every round corrupt one message, for the tests.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

type Params = HashMap<String, String>;

fn fail(message: String) -> ! {
    eprintln!("{message}");
    std::process::exit(2);
}

fn int(p: &Params, key: &str) -> usize {
    let value = p.get(key).map(String::as_str).unwrap_or("");
    value.parse().unwrap_or_else(|_| fail(format!("parameter {key}={value:?} is not an integer")))
}

fn corrupt() -> bool {
    std::env::var("PYTEST_CONCURRENCY_NATIVE_CORRUPT").as_deref() == Ok("1")
}

// -- channels: capacity 0 / N / unbounded ------------------------------------------------------

/// tokio has no rendezvous channel (`mpsc::channel(0)` panics), so capacity 0 is built from
/// what it has: the item travels with a oneshot sender, and `put` returns once the receiver
/// fired it on taking the item, as a Go unbuffered channel returns on hand-off.
enum Tx<T> {
    Rendezvous(mpsc::Sender<(T, oneshot::Sender<()>)>),
    Bounded(mpsc::Sender<T>),
    Unbounded(mpsc::UnboundedSender<T>),
}

enum Rx<T> {
    Rendezvous(mpsc::Receiver<(T, oneshot::Sender<()>)>),
    Bounded(mpsc::Receiver<T>),
    Unbounded(mpsc::UnboundedReceiver<T>),
}

/// `None`: unbounded.
fn channel<T>(capacity: Option<usize>) -> (Tx<T>, Rx<T>) {
    match capacity {
        Some(0) => {
            let (tx, rx) = mpsc::channel(1);
            (Tx::Rendezvous(tx), Rx::Rendezvous(rx))
        }
        Some(n) => {
            let (tx, rx) = mpsc::channel(n);
            (Tx::Bounded(tx), Rx::Bounded(rx))
        }
        None => {
            let (tx, rx) = mpsc::unbounded_channel();
            (Tx::Unbounded(tx), Rx::Unbounded(rx))
        }
    }
}

fn closed<E, R>(_: E) -> R {
    fail("a channel's receiver was dropped while a sender still used it".into())
}

impl<T> Tx<T> {
    async fn put(&self, item: T) {
        match self {
            Tx::Rendezvous(tx) => {
                let (taken, wait) = oneshot::channel();
                tx.send((item, taken)).await.unwrap_or_else(closed);
                wait.await.unwrap_or_else(closed);
            }
            Tx::Bounded(tx) => tx.send(item).await.unwrap_or_else(closed),
            Tx::Unbounded(tx) => tx.send(item).unwrap_or_else(closed),
        }
    }
}

impl<T> Rx<T> {
    /// `None` once every sender is gone and nothing is left.
    async fn get(&mut self) -> Option<T> {
        match self {
            Rx::Rendezvous(rx) => rx.recv().await.map(|(item, taken)| {
                let _ = taken.send(());
                item
            }),
            Rx::Bounded(rx) => rx.recv().await,
            Rx::Unbounded(rx) => rx.recv().await,
        }
    }
}

fn capacity(p: &Params) -> Option<usize> {
    match p.get("capacity").map(String::as_str) {
        Some("none") => None,
        _ => Some(int(p, "capacity")),
    }
}

fn pair(v: Option<(i64, i64)>) -> String {
    v.map_or("null".into(), |(a, b)| format!("[{a},{b}]"))
}

// -- ring ----------------------------------------------------------------------------------

async fn ring(p: Params) -> String {
    let (n, m) = (int(&p, "n") as i64, int(&p, "m") as i64);
    let (first, mut inbox) = channel::<i64>(capacity(&p));
    let mut nodes = Vec::new();
    for _ in 0..n - 1 {
        let (tx, rx) = channel::<i64>(capacity(&p));
        let mut from = std::mem::replace(&mut inbox, rx);
        nodes.push(tokio::spawn(async move {
            loop {
                let v = from.get().await.unwrap_or_else(|| fail("ring node's inbox closed".into()));
                tx.put(v).await;
                if v == 0 {
                    return;
                }
            }
        }));
    }
    let last = tokio::spawn(async move {
        let (mut received, mut weighted, mut bad) = (0i64, 0i64, None);
        loop {
            let v = inbox.get().await.unwrap_or_else(|| fail("ring's last inbox closed".into()));
            if v != m - 1 - received && bad.is_none() {
                bad = Some((received, v));
            }
            received += 1;
            weighted += received * v; // order-sensitive: the Python side recomputes it
            if v == 0 {
                return format!(r#"{{"received":{received},"weighted":{weighted},"bad":{}}}"#, pair(bad));
            }
        }
    });
    let broken = corrupt();
    for v in (0..m).rev() {
        first.put(if broken && v == m - 1 && m > 1 { v + 1 } else { v }).await;
    }
    for node in nodes {
        node.await.unwrap();
    }
    last.await.unwrap()
}

// -- chain ---------------------------------------------------------------------------------

/// One receiver's (received, checksum, first bad index or -1, its sequence number).
type Tally = (usize, usize, i64, usize);

async fn receive<T>(mut rx: Rx<T>, weigh: impl Fn(&T) -> (usize, usize)) -> Tally {
    let (mut received, mut checksum, mut bad_index, mut bad_seq) = (0, 0, -1i64, 0);
    while let Some(event) = rx.get().await {
        let (seq, weight) = weigh(&event);
        if seq != received && bad_index < 0 {
            (bad_index, bad_seq) = (received as i64, seq);
        }
        checksum += weight;
        received += 1;
    }
    (received, checksum, bad_index, bad_seq)
}

/// The checksum reads a payload as the Python workload does: its length plus the byte at
/// seq mod length.
fn weight(seq: usize, payload: &[u8]) -> usize {
    if payload.is_empty() { 0 } else { payload.len() + payload[seq % payload.len()] as usize }
}

async fn chain(p: Params) -> String {
    let (workers, events, size) = (int(&p, "workers"), int(&p, "events"), int(&p, "size"));
    let kind = p.get("payload").cloned().unwrap_or_default();
    let template: Vec<u8> = (0..size)
        .map(|i| if kind == "str" { 97 + (i % 26) as u8 } else { (i % 256) as u8 })
        .collect();
    let shared: Arc<str> = Arc::from(String::from_utf8(template.clone()).unwrap_or_default());
    let broken = corrupt();
    let seq_of = move |w: usize, seq: usize| if broken && w == 0 && seq == events / 2 { seq + 1 } else { seq };
    let mut receivers = Vec::new();
    let mut senders = Vec::new();
    for w in 0..workers {
        match kind.as_str() {
            "int" => {
                let (tx, rx) = channel::<usize>(capacity(&p));
                receivers.push(tokio::spawn(receive(rx, |&seq| (seq, seq))));
                senders.push(tokio::spawn(async move {
                    for seq in 0..events {
                        tx.put(seq_of(w, seq)).await;
                    }
                }));
            }
            "str" => {
                // shared: every event holds a reference to the one string (Arc clone)
                let (tx, rx) = channel::<(usize, Arc<str>)>(capacity(&p));
                receivers.push(tokio::spawn(receive(rx, |(seq, s)| (*seq, weight(*seq, s.as_bytes())))));
                let shared = shared.clone();
                senders.push(tokio::spawn(async move {
                    for seq in 0..events {
                        tx.put((seq_of(w, seq), shared.clone())).await;
                    }
                }));
            }
            "bytes" => {
                // a fresh copy per event
                let (tx, rx) = channel::<(usize, Vec<u8>)>(capacity(&p));
                receivers.push(tokio::spawn(receive(rx, |(seq, b)| (*seq, weight(*seq, b)))));
                let template = template.clone();
                senders.push(tokio::spawn(async move {
                    for seq in 0..events {
                        tx.put((seq_of(w, seq), template.clone())).await;
                    }
                }));
            }
            other => fail(format!("chain payload {other:?} unknown; valid: int, str, bytes")),
        }
    }
    for sender in senders {
        sender.await.unwrap();
    }
    let mut tallies = Vec::new();
    for receiver in receivers {
        let (received, checksum, bad_index, bad_seq) = receiver.await.unwrap();
        tallies.push(format!("[{received},{checksum},{bad_index},{bad_seq}]"));
    }
    format!(r#"{{"receivers":[{}]}}"#, tallies.join(","))
}

// -- switch --------------------------------------------------------------------------------

async fn switch(p: Params) -> String {
    let rounds = int(&p, "rounds") as i64;
    let (there_tx, mut there_rx) = channel::<i64>(Some(0));
    let (back_tx, mut back_rx) = channel::<i64>(Some(0));
    let broken = corrupt();
    let pong = tokio::spawn(async move {
        let mut answered = 0;
        while let Some(v) = there_rx.get().await {
            back_tx.put(if broken && answered == 0 { v + 2 } else { v + 1 }).await;
            answered += 1;
        }
        answered
    });
    let mut bad = None;
    for i in 0..rounds {
        there_tx.put(i).await;
        let answer = back_rx.get().await.unwrap_or_else(|| fail("pong ended early".into()));
        if answer != i + 1 && bad.is_none() {
            bad = Some((i, answer));
        }
    }
    drop(there_tx); // ends pong
    format!(r#"{{"answered":{},"bad":{}}}"#, pong.await.unwrap(), pair(bad))
}

// -- spawn ---------------------------------------------------------------------------------

/// `count` tasks alive at once; `measure` runs once all of them are parked. A tokio mpsc
/// channel has one receiver, so each task parks on a oneshot of its own instead of sharing a
/// release channel.
async fn spawn_tasks(p: &Params, mut measure: impl FnMut()) -> String {
    let count = int(p, "count");
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<usize>();
    let broken = corrupt();
    let mut tasks = Vec::with_capacity(count);
    let mut releases = Vec::with_capacity(count);
    for id in 0..count {
        let (release, parked) = oneshot::channel::<()>();
        let ready = ready_tx.clone();
        releases.push(release);
        tasks.push(tokio::spawn(async move {
            ready.send(id).unwrap_or_else(closed);
            parked.await.unwrap_or_else(closed);
            if broken && id == 0 { 1 } else { id }
        }));
    }
    let mut seen = vec![false; count];
    let (mut distinct, mut seen_sum) = (0usize, 0usize);
    for _ in 0..count {
        let id = ready_rx.recv().await.unwrap();
        if id < count && !seen[id] {
            seen[id] = true;
            distinct += 1;
            seen_sum += id;
        }
    }
    measure();
    for release in releases {
        let _ = release.send(());
    }
    let (mut wrong, mut first) = (0, None);
    for (i, task) in tasks.into_iter().enumerate() {
        let r = task.await.unwrap();
        if r != i {
            if wrong == 0 {
                first = Some((i as i64, r as i64));
            }
            wrong += 1;
        }
    }
    format!(
        r#"{{"seen":{distinct},"seen_sum":{seen_sum},"returned":{count},"wrong":{wrong},"first_wrong":{}}}"#,
        pair(first)
    )
}

async fn spawn(p: Params) -> String {
    spawn_tasks(&p, || {}).await
}

fn resident_bytes() -> i64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: i64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as i64
}

// -- io ------------------------------------------------------------------------------------

async fn request(server: &str, id: u64, latency: Duration) -> u64 {
    let mut conn = tokio::net::TcpStream::connect(server)
        .await
        .unwrap_or_else(|e| fail(format!("connecting to the latency server {server}: {e}")));
    let mut msg = [0u8; 16];
    msg[..8].copy_from_slice(&id.to_be_bytes());
    msg[8..].copy_from_slice(&(latency.as_micros() as u64).to_be_bytes());
    conn.write_all(&msg).await.unwrap_or_else(|e| fail(format!("writing to the latency server: {e}")));
    conn.read_exact(&mut msg).await.unwrap_or_else(|e| fail(format!("reading from the latency server: {e}")));
    u64::from_be_bytes(msg[..8].try_into().unwrap())
}

async fn io(p: Params) -> String {
    let tasks = int(&p, "tasks");
    let latency_s: f64 = p["latency"].parse().unwrap_or_else(|_| fail(format!("latency={:?} is not a number", p["latency"])));
    let latency = Duration::from_secs_f64(latency_s);
    let tcp = p.get("transport").map(String::as_str) == Some("tcp");
    let server: Arc<str> = Arc::from(p.get("server").cloned().unwrap_or_default());
    let broken = corrupt();
    let jobs: Vec<_> = (0..tasks as u64)
        .map(|job| {
            let server = server.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                let mut got = if broken && job == 0 { 1 } else { job };
                if tcp {
                    got = request(&server, got, latency).await;
                } else {
                    tokio::time::sleep(latency).await;
                }
                format!("[{got},{}]", start.elapsed().as_nanos())
            })
        })
        .collect();
    let mut replies = Vec::with_capacity(tasks);
    for job in jobs {
        replies.push(job.await.unwrap());
    }
    format!(r#"{{"replies":[{}]}}"#, replies.join(","))
}

// -- rounds --------------------------------------------------------------------------------

/// VmHWM: getrusage's ru_maxrss keeps the high-water mark of the process that forked us (the
/// Python session) across exec.
fn peak_resident_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn usage() {
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let us = |t: libc::timeval| t.tv_sec as i64 * 1_000_000 + t.tv_usec as i64;
    println!(
        r#"{{"usage":{{"user_us":{},"sys_us":{},"nvcsw":{},"nivcsw":{},"maxrss_kib":{}}}}}"#,
        us(r.ru_utime), us(r.ru_stime), r.ru_nvcsw, r.ru_nivcsw, peak_resident_kib()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        fail(format!("usage: {} WORKLOAD ROUNDS WARMUP key=value ...", args[0]));
    }
    let mut p = Params::new();
    for arg in &args[4..] {
        let (key, value) = arg.split_once('=').unwrap_or_else(|| fail(format!("argument {arg:?} is not key=value")));
        p.insert(key.into(), value.into());
    }
    p.insert("_rounds".into(), args[2].clone());
    p.insert("_warmup".into(), args[3].clone());
    let (rounds, warmup) = (int(&p, "_rounds"), int(&p, "_warmup"));
    let workload = args[1].as_str();
    if !["ring", "chain", "switch", "spawn", "io"].contains(&workload) {
        fail(format!("unknown workload {workload:?}; valid: ring, chain, switch, spawn, io"));
    }
    // The multi-thread runtime, one worker per core: what #[tokio::main] gives.
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    if workload == "spawn" {
        let before = resident_bytes();
        let mut grown = 0;
        runtime.block_on(spawn_tasks(&p, || grown = resident_bytes() - before));
        println!(r#"{{"memory":{{"rss_bytes":{grown},"heap_bytes":null}}}}"#);
    }
    for i in 0..warmup + rounds {
        if i == warmup {
            usage();
        }
        let p = p.clone();
        let start = Instant::now();
        let result = runtime.block_on(async move {
            match workload {
                "ring" => ring(p).await,
                "chain" => chain(p).await,
                "switch" => switch(p).await,
                "spawn" => spawn(p).await,
                _ => io(p).await,
            }
        });
        let ns = start.elapsed().as_nanos();
        println!(r#"{{"round":{i},"warmup":{},"ns":{ns},"result":{result}}}"#, i < warmup);
    }
    usage();
    println!(r#"{{"done":true}}"#);
}
