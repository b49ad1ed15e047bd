//! The rank program itself (see `main.rs`).

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use symmetry_am::{
    AmError, Claim, Config, Endpoint, Job, Msg, ReduceOp, Token, claim::NAMES, for_each_claim,
};

/// The queue sizes of every mode: 4 packets, 2 bulk blocks of 1 KiB (tests
/// that take part as a rank must use the same).
const CONFIG: Config = Config::new()
    .with_packets(4)
    .with_bulk_blocks(2)
    .with_bulk_bytes(1024);

/// Longest an `exchange` waits for its deliveries: a hang guard only.
const HANG_GUARD: Duration = Duration::from_secs(120);

const USAGE: &str = "usage: am-selftest MODE ...
  exchange ALG N [--bulk] [--verbose]
  hold-claim ALG DEST [--bulk]
  hold-lock ALG DEST
  idle ALG
  send ALG DEST K [--bulk] [--go]
  slow-send ALG DEST
  abort-after-join ALG [RANK]
  from-env
(run as a rank of a job: SYMMETRY_AM_JOB, SYMMETRY_AM_RANK, SYMMETRY_AM_SIZE)";

/// How a run fails.
enum Fail {
    /// Bad arguments or environment: exit 2.
    Usage(String),
    /// A failed check or an Active Messages error: exit 1.
    Check(String),
}

impl From<AmError> for Fail {
    fn from(e: AmError) -> Self {
        Fail::Check(e.to_string())
    }
}

pub(crate) fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rank = std::env::var(symmetry_am::job::ENV_RANK).unwrap_or_else(|_| "?".into());
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail::Usage(msg)) => {
            eprintln!("am-selftest: {msg}\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Fail::Check(msg)) => {
            eprintln!(
                "am-selftest rank {rank} ({}): FAILED: {msg}",
                args.join(" ")
            );
            ExitCode::from(1)
        }
    }
}

fn run(args: &[String]) -> Result<(), Fail> {
    let Some(mode) = args.first() else {
        return Err(Fail::Usage("no mode given".into()));
    };
    if mode == "from-env" {
        return from_env(&args[1..]);
    }
    if !matches!(
        mode.as_str(),
        "exchange"
            | "hold-claim"
            | "hold-lock"
            | "idle"
            | "send"
            | "slow-send"
            | "abort-after-join"
    ) {
        return Err(Fail::Usage(format!(
            "unknown mode {mode:?} (accepted: exchange, hold-claim, hold-lock, idle, send, slow-send, abort-after-join, from-env)"
        )));
    }
    let Some(alg) = args.get(1) else {
        return Err(Fail::Usage(format!(
            "{mode}: no claim algorithm given (accepted: {})",
            NAMES.join(", ")
        )));
    };
    let rest = &args[2..];
    macro_rules! by_name {
        ($($name:literal => $ty:ty;)*) => {
            match alg.as_str() {
                $($name => run_mode::<$ty>(mode, rest),)*
                _ => Err(Fail::Usage(format!(
                    "unknown claim algorithm {alg:?} (accepted: {})",
                    NAMES.join(", ")
                ))),
            }
        };
    }
    for_each_claim!(by_name)
}

/// Positional arguments and flags of a mode.
struct Opts {
    pos: Vec<String>,
    bulk: bool,
    go: bool,
    verbose: bool,
}

fn opts(mode: &str, rest: &[String], npos: std::ops::RangeInclusive<usize>) -> Result<Opts, Fail> {
    let mut o = Opts {
        pos: Vec::new(),
        bulk: false,
        go: false,
        verbose: false,
    };
    for a in rest {
        match a.as_str() {
            "--bulk" if mode != "idle" && mode != "abort-after-join" => o.bulk = true,
            "--go" if mode == "send" => o.go = true,
            "--verbose" if mode == "exchange" => o.verbose = true,
            s if s.starts_with("--") => {
                return Err(Fail::Usage(format!("{mode}: unknown option {s:?}")));
            }
            s => o.pos.push(s.to_string()),
        }
    }
    if !npos.contains(&o.pos.len()) {
        return Err(Fail::Usage(format!(
            "{mode}: {} arguments after the algorithm, expected {npos:?}",
            o.pos.len()
        )));
    }
    Ok(o)
}

fn number(what: &str, s: &str) -> Result<u64, Fail> {
    s.parse()
        .map_err(|_| Fail::Usage(format!("{what} = {s:?} is not a non-negative integer")))
}

fn job() -> Result<Job, Fail> {
    match Job::from_env() {
        Ok(Some(job)) => Ok(job),
        Ok(None) => Err(Fail::Usage(format!(
            "not started as a rank of a job ({} is not set; use symmetry_am::job::spawn)",
            symmetry_am::job::ENV_JOB
        ))),
        Err(e) => Err(Fail::Usage(format!("bad job environment: {e}"))),
    }
}

fn rank_arg(what: &str, s: &str, job: &Job) -> Result<u32, Fail> {
    let r = number(what, s)?;
    u32::try_from(r)
        .ok()
        .filter(|&r| r < job.size)
        .ok_or_else(|| Fail::Usage(format!("{what} = {r} (accepted: 0..{})", job.size)))
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed stdout only means nobody listens; the rank goes on.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn run_mode<C: Claim>(mode: &str, rest: &[String]) -> Result<(), Fail> {
    match mode {
        "exchange" => {
            let o = opts(mode, rest, 1..=1)?;
            let n = number("N", &o.pos[0])?;
            exchange::<C>(&job()?, n, o.bulk, o.verbose)
        }
        "hold-claim" => {
            let o = opts(mode, rest, 1..=1)?;
            let job = job()?;
            let dest = rank_arg("DEST", &o.pos[0], &job)?;
            let mut ep = Endpoint::<C>::join(&job, &CONFIG, ())?;
            ep.debug_abandon_claim(dest, o.bulk)?;
            say("claimed");
            sleep_forever()
        }
        "hold-lock" => {
            let o = opts(mode, rest, 1..=1)?;
            let job = job()?;
            let dest = rank_arg("DEST", &o.pos[0], &job)?;
            let mut ep = Endpoint::<C>::join(&job, &CONFIG, ())?;
            if !ep.debug_hold_lock(dest)? {
                return Err(Fail::Usage(format!("{} has no claim lock", C::NAME)));
            }
            say("held");
            sleep_forever()
        }
        "idle" => {
            opts(mode, rest, 0..=0)?;
            let job = job()?;
            let _ep = Endpoint::<C>::join(&job, &CONFIG, ())?;
            say("joined");
            sleep_forever()
        }
        "send" => {
            let o = opts(mode, rest, 2..=2)?;
            let job = job()?;
            let dest = rank_arg("DEST", &o.pos[0], &job)?;
            let k = number("K", &o.pos[1])?;
            let mut ep = Endpoint::<C>::join(&job, &CONFIG, ())?;
            say("joined");
            if o.go {
                let mut line = String::new();
                std::io::stdin()
                    .lock()
                    .read_line(&mut line)
                    .map_err(|e| Fail::Check(format!("reading the go line: {e}")))?;
            }
            let mut buf = Vec::new();
            for seq in 0..k {
                if o.bulk {
                    payload(job.rank, dest, seq, CONFIG.bulk_bytes as usize, &mut buf);
                    ep.request_bulk(dest, 0, &[seq], &buf)?;
                } else {
                    ep.request(dest, 0, &[seq])?;
                }
            }
            say("done");
            Ok(())
        }
        "slow-send" => {
            // One request to DEST whose sender stalls between its claim
            // and its READY store until told to go on: a live sender that
            // a busy machine descheduled at the worst moment.
            let o = opts(mode, rest, 1..=1)?;
            let job = job()?;
            let dest = rank_arg("DEST", &o.pos[0], &job)?;
            let mut ep = Endpoint::<C>::join(&job, &CONFIG, ())?;
            say("joined");
            let mut failed = None;
            ep.debug_slow_request(dest, 0, &[0], || {
                say("claimed");
                let mut line = String::new();
                if let Err(e) = std::io::stdin().lock().read_line(&mut line) {
                    failed = Some(format!("reading the go line: {e}"));
                }
            })?;
            if let Some(e) = failed {
                return Err(Fail::Check(e));
            }
            say("done");
            Ok(())
        }
        "abort-after-join" => {
            let o = opts(mode, rest, 0..=1)?;
            let job = job()?;
            let victim = match o.pos.first() {
                Some(s) => rank_arg("RANK", s, &job)?,
                None => 1.min(job.size - 1),
            };
            let _ep = Endpoint::<C>::join(&job, &CONFIG, ())?;
            if job.rank == victim {
                std::process::abort();
            }
            sleep_forever()
        }
        _ => unreachable!("modes are checked in run"),
    }
}

fn from_env(rest: &[String]) -> Result<(), Fail> {
    if !rest.is_empty() {
        return Err(Fail::Usage("from-env takes no arguments".into()));
    }
    match Job::from_env() {
        Ok(None) => say("none"),
        Ok(Some(j)) => say(&format!("job {} {} {}", j.name, j.rank, j.size)),
        Err(e) => {
            say(&format!("error: {e}"));
            return Err(Fail::Check(format!("Job::from_env: {e}")));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// exchange

/// SplitMix64's finalizer: the value and payload of every message derive
/// from (source, destination, sequence number) through it.
fn mix(x: u64) -> u64 {
    symmetry_locks::platform::rng::SplitMix64::new(x).next_u64()
}

/// The value request (src -> dest, seq) carries.
fn value(src: u32, dest: u32, seq: u64) -> u64 {
    mix((u64::from(src) << 56) ^ (u64::from(dest) << 48) ^ seq)
}

/// The bulk payload of request (src -> dest, seq): 1..=max bytes.
fn payload(src: u32, dest: u32, seq: u64, max: usize, buf: &mut Vec<u8>) {
    let v = value(src, dest, seq);
    let len = 1 + (mix(v) % max as u64) as usize;
    buf.clear();
    buf.extend((0..len).map(|i| (v >> ((i % 8) * 8)) as u8 ^ (i / 8) as u8));
}

/// Handler ids of `exchange`.
const H_REQUEST: u16 = 0;
const H_ECHO: u16 = 1;

/// Most failures recorded (the first ones say what went wrong).
const MAX_ERRORS: usize = 20;

/// State of an `exchange` rank.
struct Exchange {
    me: u32,
    n: u64,
    bulk: bool,
    bulk_bytes: usize,
    /// Per source: which sequence numbers were delivered.
    seen: Vec<Vec<bool>>,
    /// Requests delivered, all sources.
    delivered: u64,
    /// Per destination: which sequence numbers were echoed.
    echoed: Vec<Vec<bool>>,
    /// Echoes received.
    echoes: u64,
    /// Wrapping sum of the values delivered to this rank.
    recv_sum: u64,
    /// Failed checks.
    errors: Vec<String>,
    /// Scratch buffer for expected payloads.
    scratch: Vec<u8>,
}

impl Exchange {
    fn fail(&mut self, msg: String) {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(msg);
        }
    }

    /// Checks the bulk data of a message between `src` and `dest` with
    /// sequence number `seq`.
    fn check_bulk(&mut self, what: &str, src: u32, dest: u32, seq: u64, got: &[u8]) {
        if !self.bulk {
            if !got.is_empty() {
                self.fail(format!(
                    "{what} {src}->{dest} #{seq}: {} bulk bytes on a short message",
                    got.len()
                ));
            }
            return;
        }
        let mut want = std::mem::take(&mut self.scratch);
        payload(src, dest, seq, self.bulk_bytes, &mut want);
        if got != want.as_slice() {
            let first = got
                .iter()
                .zip(&want)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(want.len()));
            self.fail(format!(
                "{what} {src}->{dest} #{seq}: bulk data of {} bytes differs from the {} bytes sent (first difference at byte {first})",
                got.len(),
                want.len()
            ));
        }
        self.scratch = want;
    }
}

fn on_request<C: Claim>(t: &mut Token<'_, C, Exchange>, m: &Msg<'_>) -> Result<(), AmError> {
    let me = t.rank();
    let st = t.state();
    let &[src, seq, val] = m.args else {
        st.fail(format!(
            "request from {}: {} words, expected 3",
            m.src,
            m.args.len()
        ));
        return Ok(());
    };
    if src != u64::from(m.src) {
        st.fail(format!(
            "request #{seq}: packet says source {}, message says {src}",
            m.src
        ));
    }
    if seq >= st.n {
        st.fail(format!(
            "request from {}: sequence number {seq} >= N = {}",
            m.src, st.n
        ));
        return Ok(());
    }
    let want = value(m.src, me, seq);
    if val != want {
        st.fail(format!(
            "request {}->{me} #{seq}: value {val:#x}, sent {want:#x}",
            m.src
        ));
    }
    st.check_bulk("request", m.src, me, seq, m.bulk);
    if std::mem::replace(&mut st.seen[m.src as usize][seq as usize], true) {
        st.fail(format!("request {}->{me} #{seq} delivered twice", m.src));
    }
    st.delivered += 1;
    st.recv_sum = st.recv_sum.wrapping_add(val);
    if st.bulk {
        t.reply_bulk(H_ECHO, &[seq, val], m.bulk)
    } else {
        t.reply(H_ECHO, &[seq, val])
    }
}

fn on_echo<C: Claim>(t: &mut Token<'_, C, Exchange>, m: &Msg<'_>) -> Result<(), AmError> {
    let me = t.rank();
    let st = t.state();
    let &[seq, val] = m.args else {
        st.fail(format!(
            "echo from {}: {} words, expected 2",
            m.src,
            m.args.len()
        ));
        return Ok(());
    };
    if seq >= st.n {
        st.fail(format!(
            "echo from {}: sequence number {seq} >= N = {}",
            m.src, st.n
        ));
        return Ok(());
    }
    let want = value(me, m.src, seq);
    if val != want {
        st.fail(format!(
            "echo of {me}->{} #{seq}: value {val:#x}, sent {want:#x}",
            m.src
        ));
    }
    st.check_bulk("echo of", me, m.src, seq, m.bulk);
    if std::mem::replace(&mut st.echoed[m.src as usize][seq as usize], true) {
        st.fail(format!("echo of {me}->{} #{seq} delivered twice", m.src));
    }
    st.echoes += 1;
    Ok(())
}

fn exchange<C: Claim>(job: &Job, n: u64, bulk: bool, verbose: bool) -> Result<(), Fail> {
    let size = job.size;
    let per_source = usize::try_from(n)
        .ok()
        .filter(|&n| n <= 1 << 24)
        .ok_or_else(|| Fail::Usage(format!("N = {n} (accepted: 0..=16777216)")))?;
    let state = Exchange {
        me: job.rank,
        n,
        bulk,
        bulk_bytes: CONFIG.bulk_bytes as usize,
        seen: vec![vec![false; per_source]; size as usize],
        delivered: 0,
        echoed: vec![vec![false; per_source]; size as usize],
        echoes: 0,
        recv_sum: 0,
        errors: Vec::new(),
        scratch: Vec::new(),
    };
    let mut ep = Endpoint::<C, Exchange>::join(job, &CONFIG, state)?;
    ep.register(H_REQUEST, on_request::<C>)?;
    ep.register(H_ECHO, on_echo::<C>)?;
    ep.barrier()?;
    say("joined");

    let me = job.rank;
    let mut sent_sum = 0u64;
    let mut buf = Vec::new();
    for seq in 0..n {
        for d in 0..size {
            // Start at a different destination on every rank.
            let dest = (me + d) % size;
            let v = value(me, dest, seq);
            sent_sum = sent_sum.wrapping_add(v);
            let args = [u64::from(me), seq, v];
            if bulk {
                payload(me, dest, seq, CONFIG.bulk_bytes as usize, &mut buf);
                ep.request_bulk(dest, H_REQUEST, &args, &buf)?;
            } else {
                ep.request(dest, H_REQUEST, &args)?;
            }
        }
    }

    // Every echo back, and every request in (other ranks may still send).
    let total = n * u64::from(size);
    let deadline = Instant::now() + HANG_GUARD;
    ep.poll_until(|s| (s.echoes >= total && s.delivered >= total) || Instant::now() > deadline)?;
    let st = ep.state();
    let mut errors = st.errors.clone();
    if st.echoes != total || st.delivered != total {
        errors.push(format!(
            "after {HANG_GUARD:?}: {} of {total} echoes and {} of {total} requests",
            st.echoes, st.delivered
        ));
    }
    for (src, seen) in st.seen.iter().enumerate() {
        let missing = seen.iter().filter(|&&s| !s).count();
        if missing > 0 {
            let first = seen.iter().position(|&s| !s).unwrap_or(0);
            errors.push(format!(
                "{missing} requests from rank {src} never delivered (first: #{first})"
            ));
        }
    }
    for (dest, echoed) in st.echoed.iter().enumerate() {
        let missing = echoed.iter().filter(|&&s| !s).count();
        if missing > 0 {
            let first = echoed.iter().position(|&s| !s).unwrap_or(0);
            errors.push(format!(
                "{missing} requests to rank {dest} never echoed (first: #{first})"
            ));
        }
    }
    let stats = ep.stats();
    if stats.recovered_packets != 0 || stats.recovered_bulk != 0 {
        errors.push(format!(
            "recovered {} packets and {} bulk blocks with every sender alive",
            stats.recovered_packets, stats.recovered_bulk
        ));
    }

    // Cross-rank checks: the values sent and received agree globally,
    // with each other and with the closed form every rank can compute.
    let recv_sum = ep.state().recv_sum;
    let expected = (0..size)
        .flat_map(|s| (0..size).map(move |d| (s, d)))
        .flat_map(|(s, d)| (0..n).map(move |q| value(s, d, q)))
        .fold(0u64, u64::wrapping_add);
    let all_sent = ep.allreduce(sent_sum, ReduceOp::Sum)?;
    let all_recv = ep.allreduce(recv_sum, ReduceOp::Sum)?;
    let all_delivered = ep.allreduce(ep.state().delivered, ReduceOp::Sum)?;
    if all_sent != expected || all_recv != expected {
        errors.push(format!(
            "checksums: sent {all_sent:#x}, received {all_recv:#x}, expected {expected:#x}"
        ));
    }
    if all_delivered != total * u64::from(size) {
        errors.push(format!(
            "{all_delivered} requests delivered in all, expected {}",
            total * u64::from(size)
        ));
    }
    let failed_ranks = ep.allreduce(u64::from(!errors.is_empty()), ReduceOp::Sum)?;
    let me_state = ep.state().me;
    let stats = ep.finish()?;
    if !errors.is_empty() {
        return Err(Fail::Check(format!(
            "{} failed checks:\n  {}",
            errors.len(),
            errors.join("\n  ")
        )));
    }
    if failed_ranks != 0 {
        return Err(Fail::Check(format!(
            "{failed_ranks} other ranks failed their checks"
        )));
    }
    if verbose {
        say(&format!(
            "rank {me_state}: exchange {} N={n}{} ok: sent {}, delivered {}, full waits {}",
            C::NAME,
            if bulk { " bulk" } else { "" },
            stats.sent,
            stats.delivered,
            stats.full_waits
        ));
    }
    Ok(())
}
