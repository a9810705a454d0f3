#!/bin/sh
# Installs RabbitMQ (Debian's rabbitmq-server) for the HCP fleet tests (tests/fleet*.rs), if
# it is missing. Idempotent and quiet. The tests start their own private brokers on free
# ports; nothing here starts or configures a system broker.
set -eu
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "tests/rabbitmq/setup.sh: rabbitmq-server is not installed; as root: apt-get install rabbitmq-server" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends rabbitmq-server >/dev/null
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || {
  echo "tests/rabbitmq/setup.sh: rabbitmq-server installed, but /usr/lib/rabbitmq/bin/rabbitmq-server is missing" >&2
  exit 1
}
