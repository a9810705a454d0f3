//! The three terminal requests the person's channel needs that have no safe wrapper in `nix`:
//! how much input waits, putting input back, and the window's size.

use std::os::fd::{AsRawFd, BorrowedFd};

/// How many bytes wait in the terminal's input queue (0 when it cannot be told).
pub fn queued(tty: BorrowedFd<'_>) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int, which we own, for a descriptor we borrow.
    match unsafe { libc::ioctl(tty.as_raw_fd(), libc::FIONREAD, &mut n) } {
        0 => usize::try_from(n).unwrap_or(0),
        _ => 0,
    }
}

/// Puts `bytes` back at the head of the terminal's input queue (`TIOCSTI`, where the kernel
/// still allows it: `dev.tty.legacy_tiocsti`, and the capability it asks for otherwise);
/// returns how many could not be.
pub fn push_input(tty: BorrowedFd<'_>, bytes: &[u8]) -> usize {
    bytes
        .iter()
        // SAFETY: TIOCSTI reads one byte, which we own, for a descriptor we borrow.
        .filter(|b| unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCSTI, *b as *const u8) } != 0)
        .count()
}

/// The terminal window's size as `(rows, columns)`.
pub fn window(tty: BorrowedFd<'_>) -> Option<(u16, u16)> {
    // SAFETY: an all-zero winsize is a valid value of this plain C struct.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize, which we own, for a descriptor we borrow.
    match unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) } {
        0 => Some((ws.ws_row, ws.ws_col)),
        _ => None,
    }
}

/// Sets the terminal window's size (the kernel sends `SIGWINCH` to the terminal's foreground
/// process group when it changed).
pub fn set_window(tty: BorrowedFd<'_>, rows: u16, columns: u16) -> std::io::Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: columns,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize, which we own, for a descriptor we borrow.
    match unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCSWINSZ, &ws) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}
