//! The floor's seccomp programs, as data: the classic BPF a filter runs on each system call
//! of the agent's tree (`crates/confine` installs them and answers what they stop).
//!
//! - [`connect_filter`]: with a network namespace of the tree's own, `connect(2)`,
//!   `listen(2)` and `sendto(2)` with an address wait for the wrapper; nothing else is
//!   looked at (the namespace holds the rest in).
//! - [`host_filter`]: without one (a container's engine refuses it), the network is decided
//!   per call: `connect(2)` and `sendto(2)` with an address wait for the wrapper, a socket
//!   of any kind but a Unix, a netlink or a TCP one is stopped for the wrapper to refuse and
//!   audit, and what would leave without a `connect` is refused outright: a TCP Fast Open
//!   (`MSG_FASTOPEN`), `io_uring` (its connections make no system call), and the socket
//!   calls of other architectures' programs (32-bit, x32).

/// A jump target in a program, by name.
type Label = &'static str;

/// One step of a program as it is written: jumps name their targets.
enum Op {
    /// Loads the 32-bit word at this offset of `seccomp_data`.
    Load(u32),
    /// Jumps to the first label when the word loaded equals the value, else to the second.
    Eq(u32, Label, Label),
    /// Jumps to the first label when the word loaded has any of the bits, else to the second.
    Set(u32, Label, Label),
    /// Keeps only these bits of the word loaded.
    And(u32),
    /// Answers the call.
    Ret(u32),
    /// Names the next step.
    At(Label),
}

/// `BPF_LD | BPF_W | BPF_ABS`, `BPF_JMP | BPF_JEQ | BPF_K`, `BPF_JMP | BPF_JSET | BPF_K`,
/// `BPF_ALU | BPF_AND | BPF_K`, `BPF_RET | BPF_K`.
const LD: u16 = 0x20;
const JEQ: u16 = 0x15;
const JSET: u16 = 0x45;
const AND: u16 = 0x54;
const RET: u16 = 0x06;

/// Where the architecture and the call's number lie in `seccomp_data`.
const ARCH: u32 = 4;
const NR: u32 = 0;

/// The low half of argument `i` (an `int`) in `seccomp_data`, and its high half.
const fn arg(i: u32) -> u32 {
    16 + 8 * i + if cfg!(target_endian = "little") { 0 } else { 4 }
}
const fn arg_high(i: u32) -> u32 {
    16 + 8 * i + if cfg!(target_endian = "little") { 4 } else { 0 }
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;

/// The socket calls of the 32-bit programs this architecture runs (i386's on x86_64,
/// arm's on aarch64): `socketcall` where there is one, `socket`, `connect`, `sendto`,
/// `sendmsg`, `sendmmsg` and `io_uring_setup`.
#[cfg(target_arch = "x86_64")]
const COMPAT_SOCKET_CALLS: &[u32] = &[102, 359, 362, 369, 370, 345, 425];
#[cfg(not(target_arch = "x86_64"))]
const COMPAT_SOCKET_CALLS: &[u32] = &[281, 283, 290, 296, 374, 425];

/// x32's calls carry this bit in their number (on x86_64).
const X32: u32 = 0x4000_0000;

/// Assembles `ops`: each jump's target put as the offset the kernel counts.
///
/// # Panics
/// On a label used and never placed, or a jump backwards or past 255 steps: a program
/// written wrong here, which the tests below run.
#[allow(
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "the programs are constants of this file, each run by its tests"
)]
fn assemble(ops: &[Op]) -> Vec<libc::sock_filter> {
    let mut at = std::collections::HashMap::new();
    let mut n = 0usize;
    for op in ops {
        match op {
            Op::At(label) => {
                at.insert(*label, n);
            }
            _ => n += 1,
        }
    }
    let mut out = Vec::with_capacity(n);
    let step = |code, k, jt, jf| libc::sock_filter { code, jt, jf, k };
    for op in ops {
        let i = out.len();
        let to = |label: &Label| -> u8 {
            let target = at[label];
            u8::try_from(target - (i + 1)).expect("a short forward jump")
        };
        match op {
            Op::At(_) => continue,
            Op::Load(offset) => out.push(step(LD, *offset, 0, 0)),
            Op::Eq(k, yes, no) => out.push(step(JEQ, *k, to(yes), to(no))),
            Op::Set(k, yes, no) => out.push(step(JSET, *k, to(yes), to(no))),
            Op::And(k) => out.push(step(AND, *k, 0, 0)),
            Op::Ret(k) => out.push(step(RET, *k, 0, 0)),
        }
    }
    out
}

/// With a network namespace of the tree's own: `connect(2)` and `listen(2)` of this
/// architecture, and `sendto(2)` with an address, wait for the wrapper; everything else
/// (including other architectures' calls, which then stay inside the namespace) goes on.
pub fn connect_filter() -> Vec<libc::sock_filter> {
    use Op::*;
    let nr = |n: libc::c_long| n as u32;
    assemble(&[
        Load(ARCH),
        Eq(AUDIT_ARCH, "native", "allow"),
        At("native"),
        Load(NR),
        Eq(nr(libc::SYS_connect), "notify", "1"),
        At("1"),
        Eq(nr(libc::SYS_listen), "notify", "2"),
        At("2"),
        Eq(nr(libc::SYS_sendto), "sendto", "allow"),
        At("sendto"),
        Load(arg(4)),
        Eq(0, "high", "notify"),
        At("high"),
        Load(arg_high(4)),
        Eq(0, "allow", "notify"),
        At("notify"),
        Ret(libc::SECCOMP_RET_USER_NOTIF),
        At("allow"),
        Ret(libc::SECCOMP_RET_ALLOW),
    ])
}

/// Without a network namespace of the tree's own (see the module's text).
pub fn host_filter() -> Vec<libc::sock_filter> {
    use Op::*;
    let nr = |n: libc::c_long| n as u32;
    let mut ops = vec![
        Load(ARCH),
        Eq(AUDIT_ARCH, "native", "foreign"),
        At("foreign"),
    ];
    ops.push(Load(NR));
    for (i, call) in COMPAT_SOCKET_CALLS.iter().enumerate() {
        let next = ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"][i];
        ops.extend([Eq(*call, "refuse", next), At(next)]);
    }
    ops.push(Ret(libc::SECCOMP_RET_ALLOW));
    ops.extend([
        At("native"),
        Load(NR),
        Set(
            if cfg!(target_arch = "x86_64") { X32 } else { 0 },
            "nosys",
            "n0",
        ),
        At("n0"),
        Eq(nr(libc::SYS_connect), "notify", "n1"),
        At("n1"),
        Eq(nr(libc::SYS_socket), "socket", "n2"),
        At("n2"),
        Eq(nr(libc::SYS_sendto), "sendto", "n3"),
        At("n3"),
        Eq(nr(libc::SYS_sendmsg), "sendmsg", "n4"),
        At("n4"),
        Eq(nr(libc::SYS_sendmmsg), "sendmmsg", "n5"),
        At("n5"),
        Eq(nr(libc::SYS_io_uring_setup), "nosys", "allow"),
        // socket(family, type, protocol): Unix and netlink go on, TCP on IPv4 and IPv6
        // goes on, anything else waits to be refused with its audit.
        At("socket"),
        Load(arg(0)),
        Eq(libc::AF_UNIX as u32, "allow", "s1"),
        At("s1"),
        Eq(libc::AF_NETLINK as u32, "allow", "s2"),
        At("s2"),
        Eq(libc::AF_INET as u32, "inet", "s3"),
        At("s3"),
        Eq(libc::AF_INET6 as u32, "inet", "notify"),
        At("inet"),
        Load(arg(1)),
        And(0xf),
        Eq(libc::SOCK_STREAM as u32, "protocol", "notify"),
        At("protocol"),
        Load(arg(2)),
        Eq(0, "allow", "p1"),
        At("p1"),
        Eq(libc::IPPROTO_TCP as u32, "allow", "notify"),
        // sendto(fd, buf, len, flags, addr, addrlen).
        At("sendto"),
        Load(arg(3)),
        Set(libc::MSG_FASTOPEN as u32, "refuse", "address"),
        At("address"),
        Load(arg(4)),
        Eq(0, "high", "notify"),
        At("high"),
        Load(arg_high(4)),
        Eq(0, "allow", "notify"),
        // sendmsg(fd, msg, flags), sendmmsg(fd, msgs, count, flags).
        At("sendmsg"),
        Load(arg(2)),
        Set(libc::MSG_FASTOPEN as u32, "refuse", "allow"),
        At("sendmmsg"),
        Load(arg(3)),
        Set(libc::MSG_FASTOPEN as u32, "refuse", "allow"),
        At("notify"),
        Ret(libc::SECCOMP_RET_USER_NOTIF),
        At("refuse"),
        Ret(libc::SECCOMP_RET_ERRNO | libc::EACCES as u32),
        At("nosys"),
        Ret(libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        At("allow"),
        Ret(libc::SECCOMP_RET_ALLOW),
    ]);
    assemble(&ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `prog` on one call as the kernel would (the subset of classic BPF used here).
    fn run(prog: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let op = prog[pc];
            pc += 1;
            match op.code {
                LD => {
                    let k = op.k as usize;
                    acc = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                }
                AND => acc &= op.k,
                JEQ | JSET => {
                    let yes = match op.code {
                        JEQ => acc == op.k,
                        _ => acc & op.k != 0,
                    };
                    pc += usize::from(if yes { op.jt } else { op.jf });
                }
                RET => return op.k,
                other => panic!("unknown step {other:#x}"),
            }
        }
    }

    const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const REFUSE: u32 = libc::SECCOMP_RET_ERRNO | libc::EACCES as u32;

    fn call(nr: libc::c_long, args: [u64; 6]) -> u32 {
        run(&host_filter(), AUDIT_ARCH, nr as u32, args)
    }

    #[test]
    fn without_a_namespace_only_unix_netlink_and_tcp_sockets_are_made() {
        let socket = |family: i32, kind: i32, protocol: i32| {
            call(
                libc::SYS_socket,
                [family as u64, kind as u64, protocol as u64, 0, 0, 0],
            )
        };
        let stream = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
        assert_eq!(socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0), ALLOW);
        assert_eq!(socket(libc::AF_NETLINK, libc::SOCK_RAW, 0), ALLOW);
        assert_eq!(socket(libc::AF_INET, stream, 0), ALLOW);
        assert_eq!(
            socket(libc::AF_INET6, libc::SOCK_STREAM, libc::IPPROTO_TCP),
            ALLOW
        );
        assert_eq!(socket(libc::AF_INET, libc::SOCK_DGRAM, 0), NOTIFY);
        assert_eq!(socket(libc::AF_INET6, libc::SOCK_RAW, 1), NOTIFY);
        assert_eq!(socket(libc::AF_INET, libc::SOCK_STREAM, 262), NOTIFY);
        assert_eq!(socket(libc::AF_PACKET, libc::SOCK_RAW, 0), NOTIFY);
    }

    #[test]
    fn without_a_namespace_connections_wait_and_what_leaves_without_one_is_refused() {
        assert_eq!(call(libc::SYS_connect, [3, 0x1000, 16, 0, 0, 0]), NOTIFY);
        assert_eq!(call(libc::SYS_sendto, [3, 0x1000, 9, 0, 0, 0]), ALLOW);
        assert_eq!(
            call(libc::SYS_sendto, [3, 0x1000, 9, 0, 0x2000, 16]),
            NOTIFY
        );
        assert_eq!(
            call(libc::SYS_sendto, [3, 0x1000, 9, 0, 1 << 40, 16]),
            NOTIFY
        );
        let fastopen = libc::MSG_FASTOPEN as u64;
        assert_eq!(call(libc::SYS_sendto, [3, 1, 9, fastopen, 2, 16]), REFUSE);
        assert_eq!(call(libc::SYS_sendmsg, [3, 1, fastopen, 0, 0, 0]), REFUSE);
        assert_eq!(call(libc::SYS_sendmsg, [3, 1, 0, 0, 0, 0]), ALLOW);
        assert_eq!(call(libc::SYS_sendmmsg, [3, 1, 2, fastopen, 0, 0]), REFUSE);
        let nosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        assert_eq!(call(libc::SYS_io_uring_setup, [8, 0, 0, 0, 0, 0]), nosys);
        assert_eq!(call(libc::SYS_read, [0; 6]), ALLOW);
        for compat in COMPAT_SOCKET_CALLS {
            assert_eq!(run(&host_filter(), 0x4000_0003, *compat, [0; 6]), REFUSE);
        }
        assert_eq!(run(&host_filter(), 0x4000_0003, 3, [0; 6]), ALLOW);
        if cfg!(target_arch = "x86_64") {
            let x32_connect = X32 | libc::SYS_connect as u32;
            assert_eq!(run(&host_filter(), AUDIT_ARCH, x32_connect, [0; 6]), nosys);
        }
    }

    #[test]
    fn with_a_namespace_connect_listen_and_addressed_datagrams_wait() {
        let prog = connect_filter();
        let native = |nr: libc::c_long, args| run(&prog, AUDIT_ARCH, nr as u32, args);
        assert_eq!(native(libc::SYS_connect, [0; 6]), NOTIFY);
        assert_eq!(native(libc::SYS_listen, [0; 6]), NOTIFY);
        assert_eq!(native(libc::SYS_sendto, [3, 1, 2, 0, 0, 0]), ALLOW);
        assert_eq!(native(libc::SYS_sendto, [3, 1, 2, 0, 5, 16]), NOTIFY);
        assert_eq!(native(libc::SYS_socket, [2, 2, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&prog, 0x4000_0003, 362, [0; 6]), ALLOW);
    }
}
