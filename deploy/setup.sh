#!/usr/bin/env bash
# Set up Sluice on a fresh machine: Java 17+ for Spark, then the Python package.
#   deploy/setup.sh          runtime only
#   deploy/setup.sh --test   runtime + test dependencies (pytest, the noida-db Kafka broker,
#                            headless Chromium and its driver for the console's browser tests)
set -euo pipefail
cd "$(dirname "$0")/.."

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1])}'
}

if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Java 17 (openjdk-17-jre-headless) for Spark" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "setup: Spark needs Java 17 or newer on PATH. Install it (e.g. 'sudo apt-get install" \
         "openjdk-17-jre-headless') and run this script again." >&2
    exit 1
  fi
fi

# The console's browser tests (tests/e2e/test_console_browser.py) drive Debian's Chromium.
if [ "${1:-}" = "--test" ] && { ! command -v chromium >/dev/null 2>&1 \
    || ! command -v chromedriver >/dev/null 2>&1; }; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing chromium and chromium-driver for the browser tests" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "setup: the browser tests need chromium and chromedriver on PATH (e.g. 'sudo apt-get" \
         "install chromium chromium-driver')." >&2
    exit 1
  fi
fi

PYTHON="${PYTHON:-python3}"
extras=""
if [ "${1:-}" = "--test" ]; then extras="[test,kafka]"; fi
"$PYTHON" -m pip install --quiet --disable-pip-version-check -e ".${extras}"
echo "setup: done ($("$PYTHON" --version), Java $(java_major))" >&2
