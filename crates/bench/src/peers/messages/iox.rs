//! iceoryx2's publish-subscribe peer (`ipc::Service`, the inter-process
//! kind) with a `u64` payload.
//! Built with the `iceoryx2` feature.

use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::*;
use iceoryx2::sample_mut_uninit::SampleMutUninit;
use iceoryx2::service::port_factory::publish_subscribe::PortFactory;

use super::*;
use crate::stats::median;

/// A publish-subscribe service of `u64` between processes.
type Service = PortFactory<ipc::Service, u64, ()>;
/// A sample loaned from a publisher's shared-memory pool, not yet
/// written.
type Loan = SampleMutUninit<ipc::Service, MaybeUninit<u64>, ()>;

/// How long a receiver waits for a sample before it calls it lost. A
/// round trip takes microseconds and a descheduled peer is back
/// within a time slice, but a `peer-messages --quick` run on 2 CPUs
/// once had both sides of the round trip wait for each other's sample
/// for ten minutes, each `send` having reached its one subscriber.
const STALL: Duration = Duration::from_secs(10);

/// Wraps iceoryx2's error of call `what`.
fn err<E: std::fmt::Debug>(what: &'static str) -> impl FnOnce(E) -> PeerError {
    move |e| PeerError::Iceoryx2 {
        what,
        detail: format!("{e:?}"),
    }
}

/// A node of this process with iceoryx2's default configuration (not
/// a configuration file of the machine) that installs no signal
/// handlers (the harness keeps its own).
fn node() -> Result<Node<ipc::Service>, PeerError> {
    NodeBuilder::new()
        .config(&Config::default())
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<ipc::Service>()
        .map_err(err("node"))
}

/// A service name no other run uses: the process id, a counter, `what`.
fn unique(what: &str) -> Result<ServiceName, PeerError> {
    static RUN: AtomicU64 = AtomicU64::new(0);
    let run = RUN.fetch_add(1, Ordering::Relaxed);
    let name = format!("symmetry/peer-messages/{}/{run}/{what}", std::process::id());
    ServiceName::new(&name).map_err(err("service name"))
}

/// A publisher that waits while the subscriber's queue is full (where
/// safe overflow is off), iceoryx2's way not to lose a sample: it
/// yields the CPU, then sleeps, until there is room.
fn publisher(s: &Service) -> Result<Publisher<ipc::Service, u64, ()>, PeerError> {
    s.publisher_builder()
        .unable_to_deliver_strategy(UnableToDeliverStrategy::Block)
        .create()
        .map_err(err("publisher"))
}

fn subscriber(s: &Service) -> Result<Subscriber<ipc::Service, u64, ()>, PeerError> {
    s.subscriber_builder().create().map_err(err("subscriber"))
}

fn loan(p: &Publisher<ipc::Service, u64, ()>) -> Result<Loan, PeerError> {
    p.loan_uninit().map_err(err("loan"))
}

/// Writes `v` in the loaned `sample` (zero-copy: the payload is written
/// in the shared segment) and sends it to the one subscriber.
fn send(sample: Loan, v: u64) -> Result<(), PeerError> {
    match sample.write_payload(v).send().map_err(err("send"))? {
        1 => Ok(()),
        n => Err(PeerError::Unreached(n)),
    }
}

/// Busy-polls `s` for the next value, as iceoryx2's benchmarks do
/// (yielding after a while: participants may outnumber cores); fails
/// once `quit` is set (the other side gave up), or when nothing has
/// come for [`STALL`] (a sample lost: `super::iox_tries` runs the
/// measurement again on new services).
fn receive(s: &Subscriber<ipc::Service, u64, ()>, quit: &AtomicBool) -> Result<u64, PeerError> {
    spin_until_within(Some(STALL), || {
        if quit.load(Ordering::Relaxed) {
            return Some(Err(PeerError::OtherSideFailed));
        }
        let got = s.receive().map_err(err("receive"));
        got.map(|x| x.map(|x| *x)).transpose()
    })
    .unwrap_or(Err(PeerError::Stalled(STALL)))
}

/// Runs `body`, setting `quit` if it fails so that the other side stops
/// waiting.
fn or_quit<T>(
    quit: &AtomicBool,
    body: impl FnOnce() -> Result<T, PeerError>,
) -> Result<T, PeerError> {
    let out = body();
    if out.is_err() {
        quit.store(true, Ordering::Relaxed);
    }
    out
}

/// The ping side's rounds `rounds`: each sends its value in the sample
/// `next` loaned before, loans the next sample before it waits for the
/// echo (off the round trip's path, as iceoryx2's benchmark loans), and
/// checks that the echo is the value + 1; returns the loan left over.
fn ping_rounds(
    (tx, rx): (
        &Publisher<ipc::Service, u64, ()>,
        &Subscriber<ipc::Service, u64, ()>,
    ),
    quit: &AtomicBool,
    rounds: Range<u64>,
    mut next: Loan,
) -> Result<Loan, PeerError> {
    for i in rounds {
        send(next, i)?;
        next = loan(tx)?;
        match receive(rx, quit)? {
            r if r == i + 1 => {}
            got => {
                return Err(PeerError::WrongEcho {
                    peer: "iceoryx2",
                    sent: i,
                    got,
                });
            }
        }
    }
    Ok(next)
}

/// See [`super::iceoryx2_rtt_ns`].
pub(super) fn rtt_ns(rounds: u64) -> Result<f64, PeerError> {
    let node = node()?;
    // iceoryx2's publish-subscribe latency benchmark: one publisher and
    // one subscriber, no history, a buffer of one sample that a newer
    // one replaces (safe overflow).
    let service = |what| -> Result<Service, PeerError> {
        node.service_builder(&unique(what)?)
            .publish_subscribe::<u64>()
            .max_publishers(1)
            .max_subscribers(1)
            .history_size(0)
            .subscriber_max_buffer_size(1)
            .enable_safe_overflow(true)
            .create()
            .map_err(err("service"))
    };
    let (ping, pong) = (service("ping")?, service("pong")?);
    let cpus = cpus_for(2);
    let (ready, quit) = (Barrier::new(2), AtomicBool::new(false));
    let total = WARMUP_ROUNDS + rounds;
    std::thread::scope(|s| {
        let echo = s.spawn(|| {
            pin(&cpus, 1);
            let ports = or_quit(&quit, || Ok((subscriber(&ping)?, publisher(&pong)?)));
            ready.wait();
            or_quit(&quit, || {
                let (rx, tx) = ports?;
                for _ in 0..total {
                    // Loaned before the ping arrives, as iceoryx2's
                    // benchmark loans.
                    let next = loan(&tx)?;
                    send(next, receive(&rx, &quit)? + 1)?;
                }
                Ok(())
            })
        });
        let timed = s.spawn(|| {
            pin(&cpus, 0);
            let ports = or_quit(&quit, || Ok((publisher(&ping)?, subscriber(&pong)?)));
            ready.wait();
            or_quit(&quit, || {
                let (tx, rx) = ports?;
                let mut next = ping_rounds((&tx, &rx), &quit, 0..WARMUP_ROUNDS, loan(&tx)?)?;
                // Timed in blocks, as symmetry-am's round trip is: a
                // block in which the scheduler ran something else on
                // one of the two CPUs does not move the median.
                let block = (rounds / 5).clamp(1, 1_000);
                let mut per_round = Vec::new();
                for first in (WARMUP_ROUNDS..total).step_by(block as usize) {
                    let last = (first + block).min(total);
                    let start = Instant::now();
                    next = ping_rounds((&tx, &rx), &quit, first..last, next)?;
                    per_round.push(start.elapsed().as_nanos() as f64 / (last - first) as f64);
                }
                median(&per_round).ok_or(PeerError::NoRound)
            })
        });
        let timed = timed
            .join()
            .map_err(|_| PeerError::Panicked("iceoryx2 ping thread"))?;
        let echo = echo
            .join()
            .map_err(|_| PeerError::Panicked("iceoryx2 echo thread"))?;
        // The side that failed first says why; the other one only
        // that it was told to stop.
        match (timed, echo) {
            (Ok(ns), Ok(())) => Ok(ns),
            (Err(e), Ok(())) | (Ok(_), Err(e)) => Err(e),
            (Err(PeerError::OtherSideFailed), Err(e)) | (Err(e), Err(_)) => Err(e),
        }
    })
}

/// See [`super::iceoryx2_many_to_one`].
pub(super) fn many_to_one(writers: u32, ints: u64) -> Result<ManyToOne, PeerError> {
    let writers = u64::from(writers.max(1));
    let node = node()?;
    // No sample may be lost: with safe overflow off, a publisher whose
    // queue to the subscriber is full waits (`Block`) instead of
    // replacing the oldest sample.
    let service = node
        .service_builder(&unique("many-to-one")?)
        .publish_subscribe::<u64>()
        .max_publishers(writers as usize)
        .max_subscribers(1)
        .history_size(0)
        .subscriber_max_buffer_size(QUEUE_SLOTS)
        .enable_safe_overflow(false)
        .create()
        .map_err(err("service"))?;
    let cpus = cpus_for(writers as usize + 1);
    let (gate, quit) = (Barrier::new(writers as usize + 1), AtomicBool::new(false));
    std::thread::scope(|s| {
        let senders: Vec<_> = (0..writers)
            .map(|w| {
                let (service, gate, quit, cpus) = (&service, &gate, &quit, &cpus);
                s.spawn(move || {
                    pin(cpus, w as usize + 1);
                    let tx = or_quit(quit, || publisher(service));
                    gate.wait();
                    or_quit(quit, || {
                        let tx = tx?;
                        share(w, writers, ints).try_for_each(|v| send(loan(&tx)?, v))
                    })
                })
            })
            .collect();
        let got = s
            .spawn(|| {
                pin(&cpus, 0);
                let rx = or_quit(&quit, || subscriber(&service));
                gate.wait();
                or_quit(&quit, || {
                    let rx = rx?;
                    let start = Instant::now();
                    let (mut count, mut sum) = (0u64, 0u64);
                    while count < ints {
                        sum = sum.wrapping_add(receive(&rx, &quit)?);
                        count += 1;
                    }
                    let elapsed = start.elapsed();
                    // Nothing more may arrive: every integer came once.
                    let extra = rx.receive().map_err(err("receive"))?.is_some();
                    let verified = !extra && sum == expected_sum(ints);
                    Ok(ManyToOne::new(elapsed, ints, verified, Mode::Threads))
                })
            })
            .join()
            .map_err(|_| PeerError::Panicked("iceoryx2 receiver thread"))?;
        for t in senders {
            t.join()
                .map_err(|_| PeerError::Panicked("iceoryx2 writer thread"))??;
        }
        got
    })
}
