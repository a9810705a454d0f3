use super::*;

/// The write end of a new pipe, and whether a read of its read end sees every writer
/// gone (end of file) rather than one still open.
fn pipe_probe() -> (OwnedFd, impl Fn() -> bool) {
    let (read, write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    let ended = move || {
        let mut byte = [0u8; 1];
        match nix::unistd::read(read.as_raw_fd(), &mut byte) {
            Ok(0) => true,
            Err(nix::errno::Errno::EAGAIN) => false,
            other => panic!("{other:?}"),
        }
    };
    (write, ended)
}

#[test]
fn a_descriptor_given_to_hold_outlives_the_wrappers_close_of_it() {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .unwrap();
    let mut guardian = Guardian {
        pipe: std::fs::File::from(ours),
        pid: 0,
        cleans: false,
    };
    let (write, ended) = pipe_probe();
    assert!(guardian.hold(write));
    // The orders are read as the guardian reads them, to the socket's end (the wrapper
    // gone); the descriptor that came with `hold` is open on this side still.
    let reader = std::thread::spawn(move || Orders::read(std::fs::File::from(theirs)));
    drop(guardian);
    let orders = reader.join().unwrap();
    assert!(orders.clean_up.is_empty() && orders.roots.is_empty());
    assert!(!ended(), "the descriptor held was closed");

    // Without `hold`, the same close is the last.
    let (write, ended) = pipe_probe();
    drop(write);
    assert!(ended());
}
