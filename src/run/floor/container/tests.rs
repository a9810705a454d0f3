//! The container's readings judged from faked ones: the engines' profiles, a masked `/proc`.

use super::*;

#[test]
fn a_refused_unshare_names_the_engine_and_the_profile_that_gives_it() {
    let docker = Readings {
        unshare_refused: Some(libc::EPERM),
        engine: Some("Docker"),
        ..Readings::default()
    };
    let why = decide(&docker).unwrap_err();
    assert!(
        matches!(
            why,
            Unavailable::EngineSeccomp {
                engine: Some("Docker"),
                errno: nix::errno::Errno::EPERM
            }
        ),
        "{why:?}"
    );
    let why = why.to_string();
    assert!(
        why.starts_with(
            "this Docker container's seccomp profile refuses unshare(2) (Operation not permitted)"
        ),
        "{why}"
    );
    assert!(why.contains("ahp-wrap setup container-profile"), "{why}");
    let unknown = Readings {
        unshare_refused: Some(libc::ENOSYS),
        ..Readings::default()
    };
    assert!(decide(&unknown).unwrap_err().to_string().starts_with(
        "this process's seccomp profile refuses unshare(2) (Function not implemented"
    ));
}

#[test]
fn an_engines_apparmor_profile_is_named_and_a_plain_process_passes() {
    let ubuntu = Readings {
        apparmor: Some("docker-default (enforce)".into()),
        engine: Some("Docker"),
        ..Readings::default()
    };
    let why = decide(&ubuntu).unwrap_err().to_string();
    assert!(
        why.contains("AppArmor profile docker-default (enforce) refuses mount(2)"),
        "{why}"
    );
    assert!(why.contains("--security-opt apparmor=unconfined"), "{why}");
    assert!(decide(&Readings::default()).is_ok());
    // A container that refuses nothing the floor needs (Podman's default profile).
    let podman = Readings {
        engine: Some("Podman"),
        ..Readings::default()
    };
    assert!(decide(&podman).is_ok());
}

/// A container's mounts as Docker makes them (`docker run debian`): its masked paths
/// (a tmpfs over a directory, the container's /dev/null over a file) and its read-only
/// binds of procfs's own directories.
const DOCKER: &str = "\
1187 1040 0:83 / / rw,relatime master:566 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X:/var/lib/docker/overlay2/l/Y,upperdir=/var/lib/docker/overlay2/a/diff,workdir=/var/lib/docker/overlay2/a/work
1188 1187 0:86 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
1189 1187 0:87 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755,inode64
1190 1189 0:88 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666
1191 1187 0:89 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
1192 1191 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate,memory_recursiveprot
1193 1189 0:85 / /dev/mqueue rw,nosuid,nodev,noexec,relatime - mqueue mqueue rw
1194 1189 0:90 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k,inode64
1195 1187 259:2 /var/lib/docker/containers/c/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/nvme0n1p2 rw
1041 1188 0:86 /bus /proc/bus ro,nosuid,nodev,noexec,relatime - proc proc rw
1042 1188 0:86 /fs /proc/fs ro,nosuid,nodev,noexec,relatime - proc proc rw
1043 1188 0:86 /irq /proc/irq ro,nosuid,nodev,noexec,relatime - proc proc rw
1044 1188 0:86 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw
1045 1188 0:86 /sysrq-trigger /proc/sysrq-trigger ro,nosuid,nodev,noexec,relatime - proc proc rw
1046 1188 0:91 / /proc/acpi ro,relatime - tmpfs tmpfs ro,inode64
1047 1188 0:87 /null /proc/kcore rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755,inode64
1048 1188 0:87 /null /proc/keys rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755,inode64
1049 1188 0:87 /null /proc/timer_list rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755,inode64
1050 1188 0:92 / /proc/scsi ro,relatime - tmpfs tmpfs ro,inode64
1051 1191 0:93 / /sys/firmware ro,relatime - tmpfs tmpfs ro,inode64
";

/// A host's, with systemd's automount of binfmt_misc (and binfmt_misc on it) on
/// procfs's one permanently empty directory.
const HOST: &str = "\
22 28 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
23 28 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
28 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
49 22 0:42 / /proc/sys/fs/binfmt_misc rw,relatime shared:27 - autofs systemd-1 rw,fd=32,pgrp=1,timeout=0,minproto=5,maxproto=5,direct,pipe_ino=1793
812 49 0:71 / /proc/sys/fs/binfmt_misc rw,nosuid,nodev,noexec,relatime shared:420 - binfmt_misc binfmt_misc rw
";

#[test]
fn a_docker_containers_masked_proc_is_refused_and_a_hosts_is_not() {
    let covered = proc_refused(DOCKER).expect("refused");
    assert_eq!(
        covered,
        [
            "/proc/acpi",
            "/proc/bus",
            "/proc/fs",
            "/proc/irq",
            "/proc/kcore",
            "/proc/keys",
            "/proc/scsi",
            "/proc/sys",
            "/proc/sysrq-trigger",
            "/proc/timer_list"
        ]
    );
    assert_eq!(proc_refused(HOST), None);
    // Only the masked paths, or only the read-only ones, are enough.
    let masked: String = DOCKER
        .lines()
        .filter(|l| !l.contains(" - proc proc") || l.contains(" / /proc "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(proc_refused(&masked).unwrap().len(), 5, "{masked}");
    let read_only: String = DOCKER
        .lines()
        .filter(|l| !l.contains("/null ") && !l.contains("tmpfs ro"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(proc_refused(&read_only).unwrap().len(), 5, "{read_only}");
    // Uncovered (`systempaths=unconfined`), it is given.
    let uncovered: String = DOCKER
        .lines()
        .filter(|l| !l.contains(" /proc/"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(proc_refused(&uncovered), None);
}

#[test]
fn a_proc_mounted_read_only_or_with_other_atime_flags_is_refused_uncovered() {
    let line = |opts: &str, sb: &str| {
        format!("28 1 259:2 / / rw,relatime - ext4 /dev/sda rw\n22 28 0:21 / /proc {opts} - proc proc {sb}\n")
    };
    assert_eq!(proc_refused(&line("rw,nosuid,relatime", "rw")), None);
    for (opts, sb) in [
        ("ro,nosuid,relatime", "rw"),
        ("rw,relatime", "ro"),
        ("rw,noatime", "rw"),
        ("rw,nodiratime,relatime", "rw"),
        ("rw,nosuid", "rw"),
    ] {
        assert_eq!(
            proc_refused(&line(opts, sb)),
            Some(Vec::new()),
            "{opts} {sb}"
        );
    }
    // No /proc at all: nothing to be fully visible.
    assert_eq!(
        proc_refused("28 1 259:2 / / rw,relatime - ext4 /dev/sda rw\n"),
        Some(Vec::new())
    );
    // One fully visible procfs mount anywhere is enough, as the kernel looks at each.
    let two = format!(
        "{DOCKER}2000 1187 0:94 / /run/proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    );
    assert_eq!(proc_refused(&two), None);
}

#[test]
fn a_mount_point_with_a_space_is_read_as_the_kernel_escapes_it() {
    let host_nfsd = format!("{HOST}900 22 0:50 / /proc/fs/nfsd rw,relatime - nfsd nfsd rw\n");
    assert_eq!(
        proc_refused(&host_nfsd),
        Some(vec!["/proc/fs/nfsd".to_owned()])
    );
}

#[test]
fn the_refused_proc_is_withheld_in_a_container_and_a_gap_on_a_host() {
    let docker = Readings {
        proc_refused: proc_refused(DOCKER),
        ..Readings::default()
    };
    let said = ProcRefused::of(&docker).unwrap();
    assert_eq!(
        said.line,
        "processes: the tree sees every process of this machine: the kernel refuses a /proc \
         of its own over this container's partly covered one (Docker: --security-opt \
         systempaths=unconfined, Podman: --security-opt unmask=ALL, Kubernetes: procMount: \
         Unmasked)"
    );
    let mut report = Report::default();
    said.say(&mut report);
    assert!(
        report.complete() && report.withheld.len() == 1,
        "{report:?}"
    );
    let host = Readings {
        proc_refused: Some(vec!["/proc/fs/nfsd".into()]),
        ..Readings::default()
    };
    let said = ProcRefused::of(&host).unwrap();
    assert!(
        said.line
            .ends_with("over this machine's partly covered one (mounted on: /proc/fs/nfsd)"),
        "{}",
        said.line
    );
    let mut report = Report::default();
    said.say(&mut report);
    assert!(!report.complete(), "{report:?}");
    assert_eq!(ProcRefused::of(&Readings::default()), None);
    // The PID namespace stays where only it keeps the signals in.
    assert!(ProcRefused::pid_namespace(5) && !ProcRefused::pid_namespace(6));
}

#[test]
fn this_process_reads_as_unfiltered_outside_a_container() {
    // The unit tests run on the host, where unshare(0) changes nothing and succeeds.
    if std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l == "Seccomp:\t0"))
    {
        assert_eq!(Readings::read().unshare_refused, None);
    }
}
