//! Both directions of a tunnel between the client and the upstream, once a connection is
//! allowed.

use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The buffer of each direction of a tunnel (a bulk transfer moves in large reads).
const PUMP_BUFFER: usize = 256 * 1024;

/// Both directions of a tunnel until both ends are done.
async fn pump<A, B>(a: &mut A, b: &mut B) -> std::io::Result<(u64, u64)>
where
    A: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + ?Sized,
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + ?Sized,
{
    tokio::io::copy_bidirectional_with_sizes(a, b, PUMP_BUFFER, PUMP_BUFFER).await
}

/// Both directions between two sockets: `splice(2)` through a pipe on Linux (the bytes never
/// reach user space), else [`pump`].
pub(super) async fn pump_sockets(a: &TcpStream, b: &TcpStream) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        tokio::try_join!(splice::one_way(a, b), splice::one_way(b, a))?;
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let (mut a, mut b) = (a, b);
        pump(&mut a, &mut b).await.map(|_| ())
    }
}

#[cfg(target_os = "linux")]
mod splice {
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, OwnedFd};

    use nix::fcntl::{fcntl, splice, FcntlArg, OFlag, SpliceFFlags};
    use nix::sys::socket::{shutdown, Shutdown};
    use tokio::io::Interest;
    use tokio::net::TcpStream;

    /// The most moved by one call (and the pipe's size, where the system allows it).
    const CHUNK: usize = 1 << 20;

    /// Moves what `from` receives to `to` until `from` ends, then ends `to`'s writing side.
    pub(super) async fn one_way(from: &TcpStream, to: &TcpStream) -> io::Result<()> {
        let (read, write) = pipe()?;
        let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
        loop {
            let n = loop {
                from.readable().await?;
                match from.try_io(Interest::READABLE, || {
                    Ok(splice(
                        from.as_fd(),
                        None,
                        write.as_fd(),
                        None,
                        CHUNK,
                        flags,
                    )?)
                }) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            };
            if n == 0 {
                let _ = shutdown(to.as_raw_fd(), Shutdown::Write);
                return Ok(());
            }
            let mut left = n;
            while left > 0 {
                to.writable().await?;
                match to.try_io(Interest::WRITABLE, || {
                    Ok(splice(read.as_fd(), None, to.as_fd(), None, left, flags)?)
                }) {
                    Ok(m) => left -= m,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            }
        }
    }

    /// A non-blocking pipe, as large as the system allows up to [`CHUNK`].
    fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
        let (r, w) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
        // A smaller pipe is fine.
        let _ = fcntl(w.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(CHUNK as libc::c_int));
        Ok((r, w))
    }
}

/// A `CONNECT` tunnel: the client's own socket back from hyper where it can be (no extra
/// layer in the way of a bulk transfer), with what hyper had read ahead sent on first.
pub(super) async fn tunnel(upgraded: hyper::upgrade::Upgraded, mut upstream: TcpStream) {
    match upgraded.downcast::<TokioIo<TcpStream>>() {
        Ok(parts) => {
            let client = parts.io.into_inner();
            if !parts.read_buf.is_empty() && upstream.write_all(&parts.read_buf).await.is_err() {
                return;
            }
            let _ = pump_sockets(&client, &upstream).await;
        }
        Err(upgraded) => {
            let mut client = TokioIo::new(upgraded);
            let _ = pump(&mut client, &mut upstream).await;
        }
    }
}
