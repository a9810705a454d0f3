#!/bin/sh
# Installs the servers and clients tests/floor_net/names.rs runs in its own network namespace
# (Debian's openssh-server and redis: sshd, redis-server, redis-cli), and the clients
# tests/floor_net/credentials.rs uses a token from (Debian's gh, Python's requests from PyPI),
# if they are missing.
# Idempotent and quiet. Nothing here starts or configures a system service: the test starts
# its own sshd and redis-server inside its namespace, with files of its own.
set -eu
# tests/floor_net/credentials.rs: Python's requests, a client the credentials are used from.
python3 -c 'import requests' 2>/dev/null \
  || python3 -m pip install -q requests==2.32.3 >/dev/null 2>&1 \
  || python3 -m pip install -q --break-system-packages requests==2.32.3 >/dev/null
[ -x /usr/sbin/sshd ] && [ -x /usr/bin/redis-server ] && [ -x /usr/bin/redis-cli ] && [ -x /usr/bin/gh ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "tests/floor_net/setup.sh: as root: apt-get install openssh-server redis-server redis-tools gh" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends openssh-server redis-server redis-tools gh >/dev/null
# The packages start their system services; the test needs none of them.
for s in ssh redis-server; do
  command -v service >/dev/null && service "$s" stop >/dev/null 2>&1 || true
done
