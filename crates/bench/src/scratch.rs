//! Private scratch directories for experiments that write files (an input
//! file, a program they build, recorded profiles).
//!
//! The harness often runs as root, and `/tmp` is shared with every user of
//! the machine. A directory named after the process id could be created
//! first by someone else, who would then own what the harness writes and,
//! for a program built there, what it runs. So a scratch directory gets an
//! unpredictable name and mode 0700 from `mkdtemp(3)`, which fails rather
//! than reuse an existing path, and it is removed with everything in it
//! when dropped, so runs leave nothing behind.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// A directory of this process's own under the temporary directory,
/// removed when dropped.
#[derive(Debug)]
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// Creates `$TMPDIR/PREFIX-XXXXXX` (six random characters) with mode
    /// 0700.
    pub fn new(prefix: &str) -> Result<ScratchDir, String> {
        let template = std::env::temp_dir().join(format!("{prefix}-XXXXXX"));
        let mut bytes = template.clone().into_os_string().into_vec();
        if bytes.contains(&0) {
            return Err(format!(
                "{}: a path with a NUL byte cannot be created",
                template.display()
            ));
        }
        bytes.push(0);
        // SAFETY: `bytes` is a writable, NUL-terminated buffer that lives
        // across the call; mkdtemp only rewrites its trailing `XXXXXX` in
        // place and keeps no pointer to it.
        let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
        if made.is_null() {
            return Err(format!(
                "cannot create a scratch directory {}: {}",
                template.display(),
                std::io::Error::last_os_error()
            ));
        }
        bytes.pop();
        Ok(ScratchDir(PathBuf::from(OsString::from_vec(bytes))))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        // Nothing useful can be done about a failure here; the directory
        // is private and under the temporary directory.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::ScratchDir;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_unique_and_removed() {
        let a = ScratchDir::new("symmetry-scratch-test").unwrap();
        let b = ScratchDir::new("symmetry-scratch-test").unwrap();
        assert_ne!(a.path(), b.path());
        let meta = std::fs::metadata(a.path()).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        std::fs::write(a.path().join("f"), b"x").unwrap();
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists(), "{} was left behind", path.display());
    }
}
