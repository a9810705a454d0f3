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
