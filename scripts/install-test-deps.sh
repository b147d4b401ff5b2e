#!/usr/bin/env bash
# What the test suite needs beyond .venv (`make deps`, which `make test` runs first), installed with
# apt-get only when it is missing, so a second run installs nothing:
# - a Java JDK and Maven: pyspark (rmqc analyze, tests/pipeline) runs on Java, and make interop
#   builds the real RocketMQ's test programs (tests/interop);
# - Debian's faketime package: tests/node/test_node_clock_steps.py steps and drifts the nodes' wall
#   clocks with libfaketime;
# - e2fsprogs: tests/node/test_node_disk_faults.py mounts small ext4 filesystems (mkfs.ext4, e2fsck;
#   it falls back to a fault hook without them).
# - Debian's chromium: tests/cluster/test_status_page.py drives it headless with Playwright (which
#   must not download a browser of its own);
# - valgrind: tests/bench/test_bench_logic_instructions.py counts the instructions of rmqc's logic
#   per write with its cachegrind (bench/bench_logic_instructions.py);
# - prometheus, for its promtool: tests/deploy check and unit-test the alert rules of deploy/prometheus
#   (~19 MB; the server it also ships is not started: nothing here enables it).
# DEPS_ROOT (default empty: /) is where the libraries are looked for; the tests of this script set it.
set -euo pipefail
root="${DEPS_ROOT:-}"
missing=()
# a JDK (javac) and Maven build the RocketMQ test programs (make interop); java runs them and pyspark
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
compgen -G "$root/usr/lib/*/faketime/libfaketimeMT.so.1" >/dev/null \
  || [ -e "$root/usr/lib/faketime/libfaketimeMT.so.1" ] || missing+=(faketime)
command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
[ -x "$root/usr/bin/chromium" ] || missing+=(chromium)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
echo "installing what the tests need: ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "not root and no sudo: install ${missing[*]} (apt-get install ${missing[*]}), then run make test again" >&2
  exit 1
fi
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq "${missing[@]}"
