//! A panic in a user thread is announced with the user thread's name, not
//! only the processor's OS thread name. The message goes to stderr, so
//! the test re-executes itself as a child and reads it.
#![cfg(not(loom))]

use std::process::Command;

use symmetry_threads::{LocalReadyq, Runtime};

const CHILD: &str = "SYMMETRY_THREADS_PANIC_NOTE_CHILD";
const TEST: &str = "a_panic_names_the_user_thread";

#[test]
fn a_panic_names_the_user_thread() {
    if std::env::var_os(CHILD).is_some() {
        let rt: Runtime<LocalReadyq> = Runtime::new(1).unwrap();
        let e = rt
            .handle()
            .builder()
            .name("worker-7")
            .spawn(|| -> u32 { panic!("kaput") })
            .join()
            .unwrap_err();
        assert_eq!(e.panic_message(), Some("kaput"));
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("user thread 'worker-7' (id "), "{stderr}");
    // The previous hook (std's) still printed the message itself.
    assert!(stderr.contains("kaput"), "{stderr}");
}
