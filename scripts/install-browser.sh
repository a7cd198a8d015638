#!/usr/bin/env bash
# Installs Debian's Chromium for the /docs browser test (test/docs). playwright-core drives it through
# executablePath; Playwright's own browser download does not work on machines without internet.
set -euo pipefail
usage='usage: npm run setup:browser

Installs Debian'"'"'s chromium (apt-get, with sudo when not root) unless /usr/bin/chromium is there already.

  --help   this text

Exit status: 0 chromium is installed, 2 bad usage; otherwise what apt-get exits with.'
if [ $# -gt 0 ]; then
  if [ "$1" = --help ] && [ $# -eq 1 ]; then printf '%s\n' "$usage"; exit 0; fi
  printf 'setup:browser: unexpected argument %s\n\n%s\n' "$1" "$usage" >&2
  exit 2
fi
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null || true
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version
