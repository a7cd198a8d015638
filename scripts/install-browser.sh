#!/usr/bin/env bash
# Installs Debian's Chromium for the /docs browser test (test/docs). playwright-core drives it through
# executablePath; Playwright's own browser download does not work on machines without internet.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null || true
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version
