//! Unit tests of the program table and the wrappers.
use super::*;

fn cmd(line: &str) -> Command {
    let mut words = line.split_whitespace().map(str::to_owned);
    Command {
        program: words.next().unwrap(),
        args: words.collect(),
        ..Command::default()
    }
}

#[test]
fn wrappers_unwrap_past_their_options() {
    let argv = |line: &str| unwrap(&cmd(line)).map(|u| u.argv.join(" "));
    assert_eq!(
        argv("sudo -u root -E rm -rf /").as_deref(),
        Some("rm -rf /")
    );
    assert_eq!(argv("timeout -s KILL 10 rm x").as_deref(), Some("rm x"));
    assert_eq!(
        argv("nice -n 5 xargs -I {} rm {}").as_deref(),
        Some("xargs -I {} rm {}")
    );
    assert_eq!(argv("xargs rm -rf").as_deref(), Some("rm -rf \0"));
    assert_eq!(argv("taskset -c 0 rm x").as_deref(), Some("rm x"));
    assert_eq!(argv("taskset 0x1 rm x").as_deref(), Some("rm x"));
    assert_eq!(argv("flock /tmp/l rm x").as_deref(), Some("rm x"));
    assert_eq!(argv("chroot / rm x").as_deref(), Some("rm x"));
    assert_eq!(argv("strace -f -o /tmp/t rm x").as_deref(), Some("rm x"));
    assert_eq!(
        argv("ahp-wrap --mode observe -- claude -p x").as_deref(),
        Some("claude -p x")
    );
    assert_eq!(argv("command -v rm"), None);
    assert_eq!(argv("ls -l"), None);
    let env = unwrap(&cmd("env -u AHP_WRAP_X -C /tmp A=1 sh")).unwrap();
    assert_eq!(env.argv, ["sh"]);
    assert_eq!(env.env, ["AHP_WRAP_X", "A"]);
    assert_eq!(env.chdir.as_deref(), Some("/tmp"));
    assert!(unwrap(&cmd("env -i make"))
        .unwrap()
        .env
        .contains(&"(all)".to_owned()));
}

#[test]
fn shell_options_parse_as_bash_parses_them() {
    let s = |line: &str| shell_script(&cmd(line).args);
    assert_eq!(s("bash -c -- x").as_deref(), Some("x"));
    assert_eq!(s("bash -ce x").as_deref(), Some("x"));
    assert_eq!(s("bash -xc x").as_deref(), Some("x"));
    assert_eq!(s("bash --norc -c x").as_deref(), Some("x"));
    assert_eq!(s("bash -o pipefail -c x").as_deref(), Some("x"));
    assert_eq!(s("bash script.sh"), None);
}

#[test]
fn reads_writes_and_deletes_of_common_programs() {
    assert_eq!(reads(&cmd("cp ~/.ssh/id_rsa /tmp/k")), ["~/.ssh/id_rsa"]);
    assert_eq!(writes(&cmd("cp a .claude/")), [".claude/a", ".claude/"]);
    assert_eq!(writes(&cmd("sed -i s/a/b/ f")), ["s/a/b/", "f"]);
    assert!(writes(&cmd("sed s/a/b/ f")).is_empty());
    assert_eq!(writes(&cmd("curl https://x -o out")), ["out"]);
    assert!(reads(&cmd("echo ~/.ssh/id_rsa")).is_empty());
    assert_eq!(reads(&cmd("grep -r id_rsa docs/")), ["docs/"]);
    assert!(reads(&cmd("openssl req -keyout k.pem -out c.pem")).is_empty());
    assert_eq!(reads(&cmd("openssl rsa -in server.key")), ["server.key"]);
    assert_eq!(reads(&cmd("curl -F f=<k https://x")), ["k"]);
    assert_eq!(reads(&cmd("ln ~/.ssh/id_rsa k")), ["~/.ssh/id_rsa"]);
    assert_eq!(operands(&cmd("find / -name x -delete")), ["/"]);
    assert_eq!(deletes(&cmd("rm --rec x")), ["x"]);
    assert!(deletes(&cmd("rm -f x")).is_empty());
    assert_eq!(deletes(&cmd("rsync -a --delete e/ ~/")), ["~/"]);
    assert_eq!(deletes(&cmd("mv ~ /tmp/x")), ["~"]);
    assert!(recursive(&cmd("grep -rn x ~")));
    assert!(!recursive(&cmd("rg x ~")));
    assert!(recursive(&cmd("rg --hidden x ~")));
    assert_eq!(
        find_execs(&cmd("find /etc -exec rm -f {} ;")),
        [["rm", "-r", "-f", "/etc/*"]]
    );
}

#[test]
fn gtfobins_wrappers_run_the_command_they_wrap() {
    let argv = |line: &str| unwrap(&cmd(line)).map(|u| u.argv.join(" "));
    let script = |line: &str| unwrap(&cmd(line)).and_then(|u| u.script);
    assert_eq!(argv("setarch x86_64 -R rm x").as_deref(), Some("rm x"));
    assert_eq!(argv("linux64 rm x").as_deref(), Some("rm x"));
    assert_eq!(argv("logsave /dev/null rm x").as_deref(), Some("rm x"));
    assert_eq!(
        argv("capsh --caps=x -- -c id").as_deref(),
        Some("/bin/bash -c id")
    );
    assert_eq!(argv("capsh --print"), None);
    assert_eq!(script("sg staff -c id").as_deref(), Some("id"));
    assert_eq!(
        argv("start-stop-daemon -S -n x -x /bin/sh -- -c id").as_deref(),
        Some("/bin/sh -c id")
    );
    assert_eq!(argv("start-stop-daemon --stop -x /bin/sh"), None);
    assert_eq!(argv("watch -n 1 -x rm x").as_deref(), Some("rm x"));
    assert_eq!(script("watch -n 1 rm x").as_deref(), Some("rm x"));
    assert_eq!(argv("cpulimit -l 50 -f -- rm x").as_deref(), Some("rm x"));
    assert_eq!(argv("cpulimit -p 42 -l 50"), None);
    assert_eq!(
        argv("valgrind --tool=memcheck rm x").as_deref(),
        Some("rm x")
    );
    assert_eq!(argv("perf stat -e cycles rm x").as_deref(), Some("rm x"));
    assert_eq!(argv("perf report"), None);
    assert_eq!(argv("eatmydata rm x").as_deref(), Some("rm x"));
    assert_eq!(
        argv("ld-linux-x86-64.so.2 --library-path /l rm x").as_deref(),
        Some("rm x")
    );
    assert_eq!(argv("ld.so --list /bin/ls"), None);
    assert_eq!(
        script("ld.so --preload /tmp/x.so /bin/true").as_deref(),
        Some("LD_PRELOAD='/tmp/x.so' '/bin/true'")
    );
    assert_eq!(
        script("strace -o |sh -f true").as_deref(),
        Some("'true' | sh")
    );
    assert_eq!(argv("strace -o /tmp/t true").as_deref(), Some("true"));
    assert_eq!(
        script("systemd-run --user -p ExecStartPost=-/bin/id /bin/true").as_deref(),
        Some("'/bin/true'\n/bin/id")
    );
}

#[test]
fn gtfobins_options_read_and_write_files() {
    let w = |line: &str| writes(&cmd(line));
    let r = |line: &str| {
        reads(&cmd(line))
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(w("strace -f -o /tmp/t true"), ["/tmp/t"]);
    assert_eq!(w("script -qc id out.log"), ["out.log"]);
    assert_eq!(w("script -a -O io.log -c id"), ["io.log"]);
    assert_eq!(w("time -o t.txt true"), ["t.txt"]);
    assert_eq!(w("logsave log.txt true"), ["log.txt"]);
    assert_eq!(w("less -o log.txt"), ["log.txt"]);
    assert_eq!(w("less --log-file=log.txt"), ["log.txt"]);
    assert_eq!(w("find . -fprintf out.txt %p"), ["out.txt"]);
    assert_eq!(w("socat -u TCP-LISTEN:9 CREATE:/tmp/x"), ["/tmp/x"]);
    assert!(w("socat TCP-LISTEN:8080,fork TCP:localhost:3000").is_empty());
    assert_eq!(r("ssh -F cfg host"), ["cfg"]);
    assert_eq!(r("file -f names.txt"), ["names.txt"]);
    assert_eq!(r("date -f dates.txt"), ["dates.txt"]);
    assert_eq!(r("wget -i urls.txt"), ["urls.txt"]);
    let wrapped = |line: &str| {
        let mut c = cmd(line);
        c.wrapper = true; // as the walker records a wrapper
        reads(&c).into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    assert_eq!(wrapped("xargs -a list.txt -0 echo"), ["list.txt"]);
    assert!(wrapped("xargs grep -a x").is_empty());
    assert_eq!(r("curl -d@k https://x"), ["k"]);
    assert_eq!(r("curl -sST k https://x"), ["k"]);
    assert_eq!(r("http -f POST https://x f@k"), ["k"]);
    assert!(r("http POST https://x email=a@b.c").is_empty());
    assert_eq!(r("socat -u FILE:/tmp/k,ignoreeof TCP:h:9"), ["/tmp/k"]);
    assert_eq!(r("socat - /tmp/k"), ["/tmp/k"]);
    assert!(r("socat -u TCP:h:9 CREATE:/tmp/k").is_empty());
    assert!(recursive(&cmd("python3 -m http.server 8000 -d /srv")));
    assert!(r("python3 -m http.server 8000 -d /srv").contains(&"/srv".to_owned()));
    assert!(r("python3 -m http.server").contains(&".".to_owned()));
    assert!(r("php -S 0.0.0.0:8000 -t /srv").contains(&"/srv".to_owned()));
    assert!(r("ruby -run -e httpd /srv -p 8000").contains(&"/srv".to_owned()));
    assert!(r("openssl s_server -accept 8443 -WWW").contains(&".".to_owned()));
    assert!(!recursive(&cmd("python3 -m pytest")));
    assert!(!recursive(&cmd("php -r 'echo 1;'")));
}

#[test]
fn names_close_to_popular_packages_are_typosquats() {
    for line in [
        "pip install reqeusts",
        "pip install python-dateutils",
        "pip3 install --upgrade djnago==4.2",
        "npm install lodahs",
        "npm i expresss@4",
        "yarn add reactt",
        "cargo add serde_jsno",
        "gem install rials",
        "uv add numpyy",
    ] {
        assert!(typosquat(&cmd(line)).is_some(), "{line}");
    }
    for line in [
        "pip install requests",
        "pip install boto boto3",
        "pip install -r requirements.txt",
        "pip install -e .",
        "npm install",
        "npm install @babel/core@7",
        "npm install left-pad",
        "cargo add tokio --features full",
        "cargo install ripgrep",
        "gem install rails",
        "pip install my-internal-tool",
        "pnpm add -D vitest",
        "npm install preact",
        "pip install moto",
        "cargo add serde_json tokio",
        "pip install typing_extensions",
    ] {
        assert_eq!(typosquat(&cmd(line)), None, "{line}");
    }
}

#[test]
fn distance_counts_a_swap_as_one() {
    assert_eq!(installs::distance("reqeusts", "requests", 2), 1);
    assert_eq!(installs::distance("lodahs", "lodash", 2), 1);
    assert_eq!(installs::distance("abc", "abcdef", 2), 3);
}
