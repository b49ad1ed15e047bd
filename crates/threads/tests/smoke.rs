use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use symmetry_threads::*;

fn chain<S: Strategy>(procs: usize, total: u64) -> ShutdownReport {
    let mut rt: Runtime<S> = Runtime::new(procs).unwrap();
    let h = rt.handle();
    let done = Arc::new(AtomicU64::new(0));
    fn cycle<S: Strategy>(h: Handle<S>, left: u64, done: Arc<AtomicU64>) {
        done.fetch_add(1, Ordering::Relaxed);
        if left > 1 {
            let h2 = h.clone();
            h.spawn_detached(move || cycle(h2, left - 1, done));
        }
    }
    let per = total / procs as u64;
    for _ in 0..procs {
        let h2 = h.clone();
        let d = done.clone();
        h.spawn_detached(move || cycle(h2, per, d));
    }
    while done.load(Ordering::Relaxed) < per * procs as u64 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    drop(h);
    rt.shutdown()
}

#[test]
fn smoke_all() {
    for p in [1, 2, 3] {
        let r = chain::<SingleLock>(p, 100_000);
        eprintln!("single {p}: {r:?}");
        assert!(r.nothing_leaked());
        let r = chain::<MultiLock>(p, 100_000);
        assert!(r.nothing_leaked(), "{r:?}");
        let r = chain::<LocalFreelist>(p, 100_000);
        assert!(r.nothing_leaked(), "{r:?}");
        let r = chain::<IdleQueue>(p, 100_000);
        eprintln!("idle {p}: {r:?}");
        assert!(r.nothing_leaked(), "{r:?}");
        let r = chain::<LocalReadyq>(p, 100_000);
        eprintln!("lrq {p}: {r:?}");
        assert!(r.nothing_leaked(), "{r:?}");
    }
}

#[test]
fn join_and_panic() {
    let rt: Runtime<LocalReadyq> = Runtime::new(2).unwrap();
    let h = rt.handle();
    let s = rt
        .block_on(move || {
            let kids: Vec<_> = (0..10u64).map(|i| h.spawn(move || i * i)).collect();
            kids.into_iter().map(|k| k.join().unwrap()).sum::<u64>()
        })
        .unwrap();
    assert_eq!(s, 285);
    let e = rt
        .handle()
        .builder()
        .name("boom")
        .spawn(|| panic!("kaput"))
        .join()
        .unwrap_err();
    assert_eq!(e.to_string(), "user thread 'boom' panicked: kaput");
}
