//! Round trips between two ranks (threads of this process, pinned to CPUs
//! 0 and 1), for profiling the request-reply path: `cargo run --release -p
//! symmetry-am --example rtt -- [ALG] [ROUNDS]`. First a send to itself and
//! a poll on one thread (the software cost of a message, every line in the
//! cache), then the round trip, then the floors (a cache-line ping-pong and
//! two rings of stamped slots). `ONLY_SELF=1` stops after the first (for
//! `valgrind --tool=callgrind`, which counts instructions where no cycle
//! counter is available); `NO_FLOORS=1` prints only the ping-pong floor;
//! `STREAM=1` runs, after the send to itself, one writer streaming to a
//! polling receiver instead of the round trip. `PACKETS=N` gives the
//! queues N packets instead of [`Config::default`]'s.

use std::time::Instant;

use symmetry_am::{AmError, Claim, Config, Endpoint, Msg, Token, job};

fn ping<C: Claim>(t: &mut Token<'_, C, u64>, m: &Msg<'_>) -> Result<(), AmError> {
    t.reply(1, &[m.args[0]])
}

fn pong<C: Claim>(t: &mut Token<'_, C, u64>, _m: &Msg<'_>) -> Result<(), AmError> {
    *t.state() += 1;
    Ok(())
}

/// [`Config::default`], with `PACKETS` packets if that is set.
fn config() -> Config {
    let packets = std::env::var("PACKETS").ok().and_then(|v| v.parse().ok());
    packets.map_or_else(Config::default, |p| Config::default().with_packets(p))
}

fn run<C: Claim>(rounds: u64) {
    let cfg = config();
    let cfg = &cfg;
    let out = job::run_threads(2, |job| -> Result<Option<f64>, AmError> {
        pin(job.rank as usize);
        let mut ep = Endpoint::<C, u64>::join(&job, cfg, 0)?;
        ep.register(0, ping::<C>)?;
        ep.register(1, pong::<C>)?;
        ep.barrier()?;
        if job.rank == 1 {
            while *ep.state() == 0 {
                ep.poll()?;
            }
            ep.finish()?;
            return Ok(None);
        }
        let t0 = Instant::now();
        for i in 0..rounds {
            ep.request(1, 0, &[i])?;
            while *ep.state() == i {
                ep.poll()?;
            }
        }
        let ns = t0.elapsed().as_nanos() as f64 / rounds as f64;
        // Tell rank 1 to stop: a pong-handler message bumps its state.
        ep.request(1, 1, &[])?;
        ep.finish()?;
        Ok(Some(ns))
    });
    let ns = out[0].as_ref().expect("rank 0").expect("a time");
    println!("{}: {ns:.1} ns per round trip", C::NAME);
}

/// Sends to itself and polls, on one thread: the software cost of a
/// send and a delivery, with every line in the cache.
fn self_loop<C: Claim>(rounds: u64) {
    let cfg = Config::default();
    let cfg = &cfg;
    let out = job::run_threads(1, |job| -> Result<f64, AmError> {
        pin(0);
        let mut ep = Endpoint::<C, u64>::join(&job, cfg, 0)?;
        ep.register(1, pong::<C>)?;
        let t0 = Instant::now();
        for i in 0..rounds {
            ep.request(0, 1, &[i])?;
            ep.poll()?;
        }
        let ns = t0.elapsed().as_nanos() as f64 / rounds as f64;
        ep.finish()?;
        Ok(ns)
    });
    let ns = out[0].as_ref().expect("rank 0");
    println!("{}: send + poll to self {ns:.1} ns", C::NAME);
}

/// One writer streams `rounds` short requests to a polling receiver: ns
/// per message.
fn stream<C: Claim>(rounds: u64) -> f64 {
    let cfg = config();
    let cfg = &cfg;
    let out = job::run_threads(2, |job| -> Result<Option<f64>, AmError> {
        pin(job.rank as usize);
        let mut ep = Endpoint::<C, u64>::join(&job, cfg, 0)?;
        ep.register(1, pong::<C>)?;
        ep.barrier()?;
        if job.rank == 1 {
            while *ep.state() < rounds {
                if ep.poll()? == 0 {
                    std::hint::spin_loop();
                }
            }
            ep.finish()?;
            return Ok(None);
        }
        let t0 = Instant::now();
        for i in 0..rounds {
            ep.request(1, 1, &[i])?;
        }
        ep.finish()?;
        Ok(Some(t0.elapsed().as_nanos() as f64 / rounds as f64))
    });
    out[0].as_ref().expect("rank 0").expect("a time")
}

/// Pins the calling thread to CPU `cpu` (if it exists): the ranks of a
/// round trip on two fixed cores, as the harness runs them.
fn pin(cpu: usize) {
    // Best effort: an unpinned run still measures a round trip.
    let _ = symmetry_locks::platform::affinity::pin_current(cpu);
}

/// A cache line bounced between two threads: the floor of a round trip.
fn pingpong(rounds: u64) -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    let line = AtomicU64::new(0);
    pin(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(1);
            for i in 0..rounds {
                while line.load(Ordering::Acquire) != 2 * i + 1 {
                    std::hint::spin_loop();
                }
                line.store(2 * i + 2, Ordering::Release);
            }
        });
        for i in 0..rounds {
            line.store(2 * i + 1, Ordering::Release);
            while line.load(Ordering::Acquire) != 2 * i + 2 {
                std::hint::spin_loop();
            }
        }
    });
    t0.elapsed().as_nanos() as f64 / rounds as f64
}

/// Two rings of 128-byte slots, one each way, a sequence number per slot:
/// the floor of a request-reply protocol over rings.
fn rings(rounds: u64, n: u64) -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    #[repr(align(128))]
    struct Slot(AtomicU64, [AtomicU64; 3]);
    let mk = || {
        (0..n)
            .map(|_| Slot(AtomicU64::new(0), Default::default()))
            .collect::<Vec<_>>()
    };
    let (req, rep) = (mk(), mk());
    pin(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(1);
            for i in 0..rounds {
                let q = &req[(i % n) as usize];
                while q.0.load(Ordering::Acquire) != i + 1 {
                    std::hint::spin_loop();
                }
                let v = q.1[0].load(Ordering::Relaxed);
                let r = &rep[(i % n) as usize];
                r.1[0].store(v, Ordering::Relaxed);
                r.0.store(i + 1, Ordering::Release);
            }
        });
        for i in 0..rounds {
            let q = &req[(i % n) as usize];
            q.1[0].store(i, Ordering::Relaxed);
            q.0.store(i + 1, Ordering::Release);
            let r = &rep[(i % n) as usize];
            while r.0.load(Ordering::Acquire) != i + 1 {
                std::hint::spin_loop();
            }
        }
    });
    t0.elapsed().as_nanos() as f64 / rounds as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let alg = args.get(1).map_or("stamp", String::as_str);
    let rounds = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    macro_rules! by_name {
        ($($name:literal => $ty:ty;)*) => {
            match alg {
                $($name => {
                    self_loop::<$ty>(rounds);
                    if std::env::var_os("ONLY_SELF").is_none() {
                        run::<$ty>(rounds)
                    }
                })*
                other => eprintln!("unknown algorithm {other:?}"),
            }
        };
    }
    symmetry_am::for_each_claim!(by_name);
    if std::env::var_os("ONLY_SELF").is_some() {
        return;
    }
    if std::env::var_os("STREAM").is_some() {
        macro_rules! stream_by_name {
            ($($name:literal => $ty:ty;)*) => {
                match alg {
                    $($name => {
                        for _ in 0..3 {
                            let ns = stream::<$ty>(rounds);
                            println!("{}: one writer, {ns:.1} ns per message", $name);
                        }
                    })*
                    _ => {}
                }
            };
        }
        symmetry_am::for_each_claim!(stream_by_name);
        return;
    }
    if std::env::var_os("NO_FLOORS").is_some() {
        println!("cache-line ping-pong: {:.1} ns", pingpong(rounds));
        return;
    }
    println!(
        "cache-line ping-pong: {:.1} ns per round trip",
        pingpong(rounds)
    );
    for n in [1, 2, 4, 16, 64, 256] {
        println!(
            "two rings of {n} stamped slots: {:.1} ns per round trip",
            rings(rounds, n)
        );
    }
}
