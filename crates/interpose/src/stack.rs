//! The stack a lock is first contended at: return addresses from the
//! unwinder, the first one outside the system's lock code, and each
//! written as `symbol+0xOFF (object+0xOFF)`.
//!
//! Walked only on cold paths (a lock's first contended acquisition, a
//! futex wait on a thread's own parking word), with libgcc's
//! `_Unwind_Backtrace`, which reads the `.eh_frame` tables every object
//! carries, so programs built without frame pointers (Rust's and most C
//! programs' default) unwind too. Nothing is allocated while walking.
//!
//! Which frames are the system's: those in this library, the C library
//! and its threads library, the dynamic loader, libgcc and the C++
//! runtime (by object file name). A Rust program's own `std`, `core` and
//! `parking_lot` are compiled into the program, so they cannot be told
//! apart here without symbols: `symmetry profile` skips them afterwards,
//! with the program's debug information, walking the kept stack.

use std::ffi::{CStr, c_int, c_void};

/// Most frames kept per stack.
pub(crate) const DEPTH: usize = 16;

/// Return addresses, innermost first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frames {
    ips: [usize; DEPTH],
    len: usize,
}

impl Frames {
    /// No frames.
    pub(crate) const EMPTY: Frames = Frames {
        ips: [0; DEPTH],
        len: 0,
    };

    /// The frames, innermost first.
    pub(crate) fn ips(&self) -> &[usize] {
        &self.ips[..self.len]
    }
}

#[allow(non_camel_case_types)]
type _Unwind_Trace_Fn = extern "C" fn(ctx: *mut c_void, arg: *mut c_void) -> c_int;

unsafe extern "C" {
    fn _Unwind_Backtrace(trace: _Unwind_Trace_Fn, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
}

/// `_URC_NO_REASON`: go on walking.
const GO_ON: c_int = 0;
/// `_URC_NORMAL_STOP`: stop.
const STOP: c_int = 4;

extern "C" fn step(ctx: *mut c_void, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `&mut Frames` that `walk` passed, alive for the
    // whole walk; `ctx` is the unwinder's context for this frame.
    let (f, ip) = unsafe { (&mut *arg.cast::<Frames>(), _Unwind_GetIP(ctx)) };
    if ip == 0 || f.len == DEPTH {
        return STOP;
    }
    f.ips[f.len] = ip;
    f.len += 1;
    GO_ON
}

/// The caller's stack, innermost first, starting at the first frame
/// outside this library.
#[cold]
#[inline(never)]
pub(crate) fn walk() -> Frames {
    let mut f = Frames::EMPTY;
    // SAFETY: `step` only writes into `f`, which outlives the call.
    unsafe { _Unwind_Backtrace(step, (&raw mut f).cast()) };
    let own = f.ips().iter().take_while(|&&ip| is_own(ip)).count();
    f.ips.copy_within(own..f.len, 0);
    f.len -= own;
    f
}

/// The first frame outside the system's lock code (see the module docs),
/// or 0 if every frame is inside it.
pub(crate) fn first_outside(f: &Frames) -> usize {
    f.ips()
        .iter()
        .copied()
        .find(|&ip| !is_system(ip))
        .unwrap_or(0)
}

/// The object containing `ip`, as `dladdr` sees it.
fn object_of(ip: usize) -> Option<(libc::Dl_info, &'static CStr)> {
    // SAFETY: dladdr only reads the loader's tables; `info` is plain data.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::dladdr(ip as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr filled `dli_fname` with a NUL-terminated path that
    // lives as long as the object stays loaded (objects holding code
    // that is running are).
    Some((info, unsafe { CStr::from_ptr(info.dli_fname) }))
}

/// Whether `ip` is in this library.
fn is_own(ip: usize) -> bool {
    let here = is_own as *const () as usize;
    match (object_of(ip), object_of(here)) {
        (Some((a, _)), Some((b, _))) => a.dli_fbase == b.dli_fbase,
        _ => false,
    }
}

/// Object files whose frames are the system's lock code.
const SYSTEM: &[&str] = &[
    "libc.so",
    "libpthread.so",
    "ld-linux",
    "libgcc_s.so",
    "libstdc++.so",
    "libc++.so",
    "libsymmetry_interpose",
];

/// Whether `ip` is in one of the [`SYSTEM`] objects (or in none).
fn is_system(ip: usize) -> bool {
    let Some((_, path)) = object_of(ip) else {
        return true;
    };
    let path = path.to_bytes();
    let base = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    SYSTEM
        .iter()
        .any(|s| base.windows(s.len()).any(|w| w == s.as_bytes()))
}

/// `symbol+0xOFF (object+0xOFF)` for a code address, as `dladdr` sees it.
pub(crate) fn describe(site: usize) -> String {
    if site == 0 {
        return "(unknown site)".into();
    }
    let Some((info, path)) = object_of(site) else {
        return format!("({site:#x})");
    };
    let object = path.to_string_lossy();
    // The main program's name is whatever it was started as (`pigz`,
    // `./a.out`, or empty): name it by its absolute path instead.
    let object = if object.starts_with('/') {
        object.into_owned()
    } else {
        std::fs::read_link("/proc/self/exe")
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| object.into_owned())
    };
    let base = info.dli_fbase as usize;
    let mut s = String::new();
    if !info.dli_sname.is_null() {
        // SAFETY: a non-null `dli_sname` is a NUL-terminated symbol name.
        let sym = unsafe { CStr::from_ptr(info.dli_sname) }.to_string_lossy();
        s.push_str(&format!("{sym}+{:#x} ", site - info.dli_saddr as usize));
    }
    s.push_str(&format!("({object}+{:#x})", site.wrapping_sub(base)));
    s
}

/// Every frame of `f`, described.
pub(crate) fn describe_all(f: &Frames) -> Vec<String> {
    f.ips().iter().map(|&ip| describe(ip)).collect()
}
