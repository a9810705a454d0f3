//! SOCKS5 on the proxy's port (told from HTTP by its first byte): no authentication,
//! `CONNECT` only, a name or an address.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::tunnel::pump_sockets;
use super::{Egress, REQUEST_TIMEOUT};

impl Egress {
    /// A SOCKS5 client (no authentication, `CONNECT` only).
    pub(super) async fn socks5(
        self: Arc<Self>,
        mut stream: TcpStream,
        peer: SocketAddr,
    ) -> Result<(), String> {
        let io = |e: std::io::Error| e.to_string();
        let (host, port) = tokio::time::timeout(REQUEST_TIMEOUT, async {
            let mut head = [0u8; 2];
            stream.read_exact(&mut head).await.map_err(io)?;
            let mut methods = vec![0u8; head[1] as usize];
            stream.read_exact(&mut methods).await.map_err(io)?;
            if !methods.contains(&0) {
                stream.write_all(&[5, 0xff]).await.map_err(io)?;
                return Err("a SOCKS5 client without the no-authentication method".to_owned());
            }
            stream.write_all(&[5, 0]).await.map_err(io)?;
            let mut req = [0u8; 4];
            stream.read_exact(&mut req).await.map_err(io)?;
            if req[1] != 1 {
                stream.write_all(&socks_reply(7)).await.map_err(io)?;
                return Err(format!("SOCKS5 command {} is not supported", req[1]));
            }
            let host = match req[3] {
                1 => {
                    let mut a = [0u8; 4];
                    stream.read_exact(&mut a).await.map_err(io)?;
                    std::net::Ipv4Addr::from(a).to_string()
                }
                3 => {
                    let len = stream.read_u8().await.map_err(io)?;
                    let mut name = vec![0u8; len as usize];
                    stream.read_exact(&mut name).await.map_err(io)?;
                    String::from_utf8_lossy(&name).into_owned()
                }
                4 => {
                    let mut a = [0u8; 16];
                    stream.read_exact(&mut a).await.map_err(io)?;
                    format!("[{}]", std::net::Ipv6Addr::from(a))
                }
                t => {
                    stream.write_all(&socks_reply(8)).await.map_err(io)?;
                    return Err(format!("SOCKS5 address type {t} is not supported"));
                }
            };
            let port = stream.read_u16().await.map_err(io)?;
            Ok((host, port))
        })
        .await
        .map_err(|_| "a SOCKS5 client said nothing".to_owned())??;
        let (upstream, asker) = match self.admit(&host, port, "tcp", "socks5", peer).await {
            Ok(s) => s,
            Err(refusal) => {
                // 2: connection not allowed by ruleset; 4: host unreachable.
                let code = if refusal.decided { 2 } else { 4 };
                let _ = stream.write_all(&socks_reply(code)).await;
                return Err(refusal.reason);
            }
        };
        stream.write_all(&socks_reply(0)).await.map_err(io)?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if crate::floor::hosts::Target::parse(host).is_some_and(|t| self.injects_for(&t)) {
            let host = host.to_ascii_lowercase();
            self.intercept(stream, host, upstream, asker).await;
            return Ok(());
        }
        let _ = pump_sockets(&stream, &upstream).await;
        Ok(())
    }
}

fn socks_reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}
