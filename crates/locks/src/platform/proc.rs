//! A process as Linux's `/proc/PID/stat` shows it: its state letter and its
//! task flags, and from them whether it is alive or already ending.
//!
//! A `stat` line is `pid (comm) state ppid pgrp session tty_nr tpgid flags
//! ...`, where `comm`, the command name, may itself hold spaces and
//! parentheses: fields are counted from the *last* `)`.

/// The kernel's `PF_EXITING` task flag (`include/linux/sched.h`): set as a
/// process starts to exit, before it frees its memory and closes its files.
pub const PF_EXITING: u64 = 0x4;

/// The fields of a `/proc/PID/stat` line that symmetry reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The state letter: `R` running, `S` sleeping, `Z` zombie, `X` dead, ...
    pub state: char,
    /// The task flags (`PF_*`).
    pub flags: u64,
}

impl Stat {
    /// Parses one `/proc/PID/stat` line; `None` if it is not one.
    pub fn parse(line: &str) -> Option<Stat> {
        let mut fields = line.rsplit_once(')')?.1.split_whitespace();
        let state = fields.next()?.chars().next()?;
        // After state: ppid, pgrp, session, tty_nr, tpgid, then flags.
        let flags = fields.nth(5)?.parse().ok()?;
        Some(Stat { state, flags })
    }

    /// Reads `/proc/PID/stat`; `None` if the process does not exist (or
    /// `/proc` is not mounted).
    pub fn of(pid: u32) -> Option<Stat> {
        Stat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// A zombie or dead: it has exited and only waits to be reaped.
    pub fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }

    /// Marked exiting by the kernel ([`PF_EXITING`]).
    pub fn exiting(&self) -> bool {
        self.flags & PF_EXITING != 0
    }
}

/// Whether process `pid` exists and has not exited (a killed child that its
/// parent has not reaped yet still exists, as a zombie: not alive). Pid 0
/// (no process recorded) counts as alive.
pub fn alive(pid: u32) -> bool {
    if pid == 0 {
        return true;
    }
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(raw, 0) };
    if rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    match Stat::of(pid) {
        Some(s) => !s.exited(),
        None => rc == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_spaces_and_parentheses() {
        let s = Stat::parse("42 (a (b) c) S 1 42 42 0 -1 4194560 10 0").unwrap();
        assert_eq!(
            s,
            Stat {
                state: 'S',
                flags: 4_194_560
            }
        );
        assert!(!s.exited() && !s.exiting());
        let odd = Stat::parse("42 () R 1 2 3 4 5 6 7) R 1 2 3 4 5 4 9").unwrap();
        assert_eq!(
            odd,
            Stat {
                state: 'R',
                flags: 4
            }
        );
        let z = Stat::parse("7 (x) Z 1 7 7 0 -1 4 0").unwrap();
        assert!(z.exited() && z.exiting());
    }

    #[test]
    fn refuses_what_is_not_a_stat_line() {
        assert_eq!(Stat::parse(""), None);
        assert_eq!(Stat::parse("1 (x"), None);
        assert_eq!(Stat::parse("1 (x) S 1 2"), None);
        assert_eq!(Stat::parse("1 (x) S 1 2 3 4 5 notanumber"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_reaped_child_is_not() {
        assert!(alive(std::process::id()));
        assert!(Stat::of(std::process::id()).is_some());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!alive(pid));
        assert!(!alive(u32::MAX));
    }
}
