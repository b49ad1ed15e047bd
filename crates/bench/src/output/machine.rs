//! The machine a run was measured on: `machine.json`.
//!
//! Every result directory holds one `machine.json` beside the CSV files
//! (SPEC §1, "Results are data"): CPU model, logical and online CPUs, kernel,
//! whether the machine is virtualized and by which hypervisor, memory, the
//! rustc that built the harness, the git commit, the build profile, when and
//! with which command the run was made.
//!
//! Detection reads only cheap, unprivileged sources (`/proc/cpuinfo`,
//! `/proc/meminfo`, `/sys`, `uname`, CPUID) and never fails: whatever cannot
//! be found is reported as `unknown` (or `None`). `rustc` and the commit are
//! captured at build time by `build.rs`.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// File name of the machine description inside a result directory.
pub const MACHINE_FILE: &str = "machine.json";

/// Description of the machine and build that produced a set of results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model name from `/proc/cpuinfo`, e.g. `Intel(R) Xeon(R) Processor`.
    pub cpu_model: String,
    /// Logical CPUs this process may use (`std::thread::available_parallelism`).
    pub logical_cpus: usize,
    /// CPUs online in the system (`/sys/devices/system/cpu/online` or sysconf).
    pub online_cpus: usize,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Operating system: `PRETTY_NAME` of `/etc/os-release`, else the target OS.
    pub os: String,
    /// Whether the CPU reports the `hypervisor` flag.
    pub virtualized: bool,
    /// Hypervisor name (`kvm`, `xen`, `hyperv`, `vmware`, ...) if known.
    pub hypervisor: Option<String>,
    /// Total memory in GiB (`MemTotal` of `/proc/meminfo`), 0 if unknown.
    pub memory_gib: f64,
    /// `rustc --version` of the compiler that built the harness.
    pub rustc: String,
    /// Short git commit of the build, `-dirty` if the tree had changes.
    pub git_commit: String,
    /// Build profile: `release` or `debug`.
    pub profile: String,
    /// When the run started, ISO-8601 UTC (`2025-01-31T12:00:00Z`).
    pub timestamp_utc: String,
    /// Whether the run used `--quick`.
    pub quick: bool,
    /// The command line of the run.
    pub command: String,
}

impl Machine {
    /// Detects the current machine. Never fails; unknown fields read
    /// `unknown`, `0` or `None`.
    pub fn detect(quick: bool) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let virtualized = cpuinfo_has_flag(&cpuinfo, "hypervisor");
        let logical_cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Machine {
            cpu_model: cpu_model(&cpuinfo),
            logical_cpus,
            online_cpus: online_cpus().unwrap_or(logical_cpus),
            kernel: uname_field(UnameField::Release).unwrap_or_else(|| "unknown".into()),
            os: os_name(),
            virtualized,
            hypervisor: hypervisor(virtualized),
            memory_gib: memory_gib().unwrap_or(0.0),
            rustc: option_env!("SYMMETRY_RUSTC")
                .unwrap_or("unknown")
                .to_string(),
            git_commit: option_env!("SYMMETRY_GIT").unwrap_or("unknown").to_string(),
            profile: if cfg!(debug_assertions) {
                "debug".into()
            } else {
                "release".into()
            },
            timestamp_utc: iso8601_utc(SystemTime::now()),
            quick,
            command: command_line(),
        }
    }

    /// Cores the harness plans for: `logical_cpus`, at least 1.
    pub fn cores(&self) -> usize {
        self.logical_cpus.max(1)
    }

    /// Whether running `threads` threads oversubscribes this machine.
    pub fn oversubscribed(&self, threads: usize) -> bool {
        threads > self.cores()
    }

    /// Writes `dir/machine.json` (pretty-printed), creating `dir` if needed.
    pub fn write_json(&self, dir: &Path) -> Result<(), String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: cannot create directory: {e}", dir.display()))?;
        let path = dir.join(MACHINE_FILE);
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| format!("{}: cannot serialize: {e}", path.display()))?;
        text.push('\n');
        std::fs::write(&path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))
    }

    /// Reads the machine description of a results directory, with an
    /// error that says what to do when `dir` is missing or holds no
    /// results (`symmetry report` and `symmetry compare` read theirs so).
    pub fn read_results(dir: &Path) -> Result<Machine, String> {
        if !dir.is_dir() {
            return Err(format!(
                "{} does not exist or is not a directory",
                dir.display()
            ));
        }
        if !dir.join(MACHINE_FILE).is_file() {
            return Err(format!(
                "{0} holds no results (no machine.json): run `symmetry run ID --out {0}` or \
                 `symmetry reproduce --out {0}` first",
                dir.display()
            ));
        }
        Machine::read_json(dir)
    }

    /// Reads `dir/machine.json`.
    pub fn read_json(dir: &Path) -> Result<Machine, String> {
        let path = dir.join(MACHINE_FILE);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a valid machine description: {e}", path.display()))
    }

    /// One line for captions and the report, e.g. `Intel(R) Xeon(R)
    /// Processor, 2 logical CPUs, Linux 6.1.0, virtualized (kvm), rustc
    /// 1.95.0, commit abc1234`.
    pub fn summary(&self) -> String {
        let cpus = if self.logical_cpus == 1 {
            "1 logical CPU".to_string()
        } else {
            format!("{} logical CPUs", self.logical_cpus)
        };
        let virt = match (&self.virtualized, &self.hypervisor) {
            (true, Some(h)) => format!("virtualized ({h})"),
            (true, None) => "virtualized".to_string(),
            (false, _) => "bare metal".to_string(),
        };
        // "rustc 1.95.0 (abc 2026-01-01)" -> "rustc 1.95.0"
        let rustc: String = self
            .rustc
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        let mut line = format!(
            "{}, {cpus}, {} {}, {virt}, {rustc}, commit {}",
            self.cpu_model,
            kernel_name(),
            self.kernel,
            self.git_commit
        );
        if self.profile != "release" {
            line.push_str(&format!(", {} build", self.profile));
        }
        if self.quick {
            line.push_str(", --quick");
        }
        line
    }
}

/// The kernel's name for the summary line (`Linux` on Linux).
fn kernel_name() -> String {
    if cfg!(target_os = "linux") {
        "Linux".into()
    } else {
        uname_field(UnameField::Sysname).unwrap_or_else(|| std::env::consts::OS.into())
    }
}

/// First `model name` (x86), `Model`/`Hardware` or `cpu model` line.
fn cpu_model(cpuinfo: &str) -> String {
    for key in ["model name", "cpu model", "Model", "Hardware", "cpu"] {
        for line in cpuinfo.lines() {
            if let Some((k, v)) = line.split_once(':')
                && k.trim() == key
                && !v.trim().is_empty()
            {
                return v.split_whitespace().collect::<Vec<_>>().join(" ");
            }
        }
    }
    "unknown".into()
}

/// Whether the `flags` line of `/proc/cpuinfo` lists `flag`.
fn cpuinfo_has_flag(cpuinfo: &str, flag: &str) -> bool {
    cpuinfo
        .lines()
        .filter_map(|line| line.split_once(':'))
        .filter(|(k, _)| k.trim() == "flags")
        .any(|(_, v)| v.split_whitespace().any(|f| f == flag))
}

/// Parses a CPU list such as `0-3,5,7-8` into its count.
fn count_cpu_list(list: &str) -> Option<usize> {
    let list = list.trim();
    if list.is_empty() {
        return None;
    }
    let mut count = 0usize;
    for part in list.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().ok()?;
                let b: usize = b.trim().parse().ok()?;
                count += b.checked_sub(a)? + 1;
            }
            None => {
                part.parse::<usize>().ok()?;
                count += 1;
            }
        }
    }
    Some(count)
}

/// Online CPUs of the system.
fn online_cpus() -> Option<usize> {
    if let Some(n) = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| count_cpu_list(&s))
    {
        return Some(n);
    }
    // SAFETY: sysconf only reads a system constant; no pointers involved.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0)
}

/// Which `uname` field to read.
#[derive(Debug, Clone, Copy)]
enum UnameField {
    Sysname,
    Release,
}

/// A field of `uname(2)`.
#[allow(clippy::unnecessary_cast)] // `c_char` is `i8` on x86, `u8` elsewhere
fn uname_field(field: UnameField) -> Option<String> {
    // SAFETY: `utsname` is a plain C struct of byte arrays; all-zero is a
    // valid value.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable `utsname` for the duration of the
    // call.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return None;
    }
    let raw = match field {
        UnameField::Sysname => &uts.sysname[..],
        UnameField::Release => &uts.release[..],
    };
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    let s = String::from_utf8_lossy(&bytes).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// `PRETTY_NAME` from `/etc/os-release`, else the target OS name.
fn os_name() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let v = line.strip_prefix("PRETTY_NAME=")?;
                let v = v.trim().trim_matches('"').trim_matches('\'').trim();
                (!v.is_empty()).then(|| v.to_string())
            })
        })
        .unwrap_or_else(|| std::env::consts::OS.to_string())
}

/// The hypervisor's name, from `/sys/hypervisor/type`, the CPUID hypervisor
/// vendor leaf (only consulted when the `hypervisor` flag is set) or the DMI
/// system vendor.
fn hypervisor(virtualized: bool) -> Option<String> {
    if let Ok(t) = std::fs::read_to_string("/sys/hypervisor/type") {
        let t = t.trim();
        if !t.is_empty() {
            return Some(t.to_ascii_lowercase());
        }
    }
    if !virtualized {
        return None;
    }
    if let Some(h) = cpuid_hypervisor() {
        return Some(h);
    }
    let dmi = [
        "/sys/class/dmi/id/sys_vendor",
        "/sys/class/dmi/id/product_name",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    .collect::<Vec<_>>()
    .join(" ");
    hypervisor_from_dmi(&dmi)
}

/// Maps the 12-byte CPUID hypervisor vendor signature to a name.
fn hypervisor_from_signature(sig: &str) -> Option<String> {
    let sig = sig.trim_end_matches('\0');
    let name = match sig {
        "KVMKVMKVM" | "Linux KVM Hv" => "kvm",
        "Microsoft Hv" => "hyperv",
        "VMwareVMware" => "vmware",
        "XenVMMXenVMM" => "xen",
        "TCGTCGTCGTCG" => "qemu-tcg",
        "bhyve bhyve" | "bhyve bhyve " => "bhyve",
        " lrpepyh  vr" | "prl hyperv" => "parallels",
        "VBoxVBoxVBox" => "virtualbox",
        "ACRNACRNACRN" => "acrn",
        "QNXQVMBSQG" => "qnx",
        "EVMMEVMMEVMM" => "intel-evmm",
        "Jailhouse" => "jailhouse",
        other => {
            let t = other.trim();
            if !t.is_empty() && t.chars().all(|c| c.is_ascii_graphic() || c == ' ') {
                return Some(t.to_string());
            }
            return None;
        }
    };
    Some(name.to_string())
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
fn cpuid_hypervisor() -> Option<String> {
    #[cfg(target_arch = "x86")]
    use std::arch::x86::__cpuid;
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::__cpuid;
    let r = __cpuid(0x4000_0000);
    let mut sig = Vec::with_capacity(12);
    for word in [r.ebx, r.ecx, r.edx] {
        sig.extend_from_slice(&word.to_le_bytes());
    }
    hypervisor_from_signature(&String::from_utf8_lossy(&sig))
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "x86")))]
fn cpuid_hypervisor() -> Option<String> {
    None
}

/// Guesses the hypervisor from DMI vendor/product strings.
fn hypervisor_from_dmi(dmi: &str) -> Option<String> {
    let d = dmi.to_ascii_lowercase();
    let table = [
        ("kvm", "kvm"),
        ("qemu", "qemu"),
        ("vmware", "vmware"),
        ("virtualbox", "virtualbox"),
        ("innotek", "virtualbox"),
        ("xen", "xen"),
        ("microsoft corporation", "hyperv"),
        ("amazon ec2", "kvm"),
        ("google compute engine", "kvm"),
        ("parallels", "parallels"),
        ("bhyve", "bhyve"),
    ];
    table
        .iter()
        .find(|(needle, _)| d.contains(needle))
        .map(|(_, name)| name.to_string())
}

/// `MemTotal` of `/proc/meminfo` in GiB, rounded to 0.01.
fn memory_gib() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_memtotal_gib(&text)
}

/// Parses `MemTotal:   24682416 kB` into GiB, rounded to 0.01.
fn parse_memtotal_gib(meminfo: &str) -> Option<f64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some((kib / (1024.0 * 1024.0) * 100.0).round() / 100.0)
}

/// The process's command line, arguments with spaces or quotes quoted.
fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.is_empty()
                || a.chars()
                    .any(|c| c.is_whitespace() || "'\"\\$`".contains(c))
            {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Formats `t` as ISO-8601 UTC with second precision, e.g.
/// `2025-01-31T12:00:00Z` (RFC 3339 by `humantime`). Times outside the
/// years 1970 to 9999, which `humantime` cannot show, are clamped to them.
pub fn iso8601_utc(t: SystemTime) -> String {
    let last = UNIX_EPOCH + Duration::from_secs(253_402_300_799); // 9999-12-31T23:59:59Z
    humantime::format_rfc3339_seconds(t.clamp(UNIX_EPOCH, last)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps() {
        assert_eq!(iso8601_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400); // leap day 2000
        assert_eq!(iso8601_utc(t), "2000-02-29T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_735_689_599);
        assert_eq!(iso8601_utc(t), "2024-12-31T23:59:59Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_735_689_599_999);
        assert_eq!(iso8601_utc(t), "2024-12-31T23:59:59Z", "seconds only");
        let t = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(iso8601_utc(t), "1970-01-01T00:00:00Z", "clamped");
        let t = UNIX_EPOCH + Duration::from_secs(1 << 40);
        assert_eq!(iso8601_utc(t), "9999-12-31T23:59:59Z", "clamped");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0-1\n"), Some(2));
        assert_eq!(count_cpu_list("0-3,5,7-8"), Some(7));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list(""), None);
        assert_eq!(count_cpu_list("x"), None);
        assert_eq!(count_cpu_list("3-1"), None);
    }

    #[test]
    fn parsers() {
        assert_eq!(
            parse_memtotal_gib("MemTotal:       24682416 kB\nMemFree: 1 kB\n"),
            Some(23.54)
        );
        assert_eq!(parse_memtotal_gib("nothing"), None);
        let info = "processor\t: 0\nmodel name\t: Intel(R)  Xeon(R) Processor\nflags\t\t: fpu hypervisor sse\n";
        assert_eq!(cpu_model(info), "Intel(R) Xeon(R) Processor");
        assert!(cpuinfo_has_flag(info, "hypervisor"));
        assert!(!cpuinfo_has_flag(info, "hyper"));
        assert_eq!(cpu_model(""), "unknown");
        assert_eq!(
            hypervisor_from_signature("KVMKVMKVM\0\0\0").as_deref(),
            Some("kvm")
        );
        assert_eq!(hypervisor_from_signature("\0\0\0\0"), None);
        assert_eq!(
            hypervisor_from_dmi("QEMU Standard PC").as_deref(),
            Some("qemu")
        );
        assert_eq!(hypervisor_from_dmi("Dell Inc."), None);
    }

    #[test]
    fn detect_and_json_round_trip() {
        let m = Machine::detect(true);
        assert!(m.logical_cpus >= 1);
        assert!(m.cores() >= 1);
        assert!(m.online_cpus >= 1);
        assert!(m.quick);
        assert!(!m.rustc.is_empty() && !m.git_commit.is_empty());
        assert_eq!(m.timestamp_utc.len(), 20, "{}", m.timestamp_utc);
        assert!(!m.oversubscribed(m.cores()));
        assert!(m.oversubscribed(m.cores() + 1));
        let summary = m.summary();
        assert!(
            summary.contains("logical CPU") && summary.contains("commit"),
            "{summary}"
        );

        let dir = std::env::temp_dir().join(format!(
            "symmetry-machine-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        m.write_json(&dir).unwrap();
        let mut back = Machine::read_json(&dir).unwrap();
        assert!((back.memory_gib - m.memory_gib).abs() < 1e-9);
        back.memory_gib = m.memory_gib;
        assert_eq!(back, m);

        std::fs::write(dir.join(MACHINE_FILE), "{ not json").unwrap();
        let err = Machine::read_json(&dir).unwrap_err();
        assert!(err.contains("machine.json"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
        let err = Machine::read_json(&dir).unwrap_err();
        assert!(err.contains("cannot read"), "{err}");
    }
}
