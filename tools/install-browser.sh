#!/usr/bin/env bash
# Install Debian's `chromium` for the report's browser test and for PNG/SVG figure export (kaleido).
# Called by `make test`. Never fails the build: where it cannot install, it says why and exits 0,
# and the browser test then skips with that reason.
set -u

have() { command -v "$1" >/dev/null 2>&1; }

for b in chromium chromium-browser google-chrome google-chrome-stable; do
    if have "$b"; then
        echo "install-browser: $b already installed ($(command -v "$b"))"
        exit 0
    fi
done
if [ -n "${BROWSER_PATH:-}" ] && [ -x "${BROWSER_PATH}" ]; then
    echo "install-browser: using BROWSER_PATH=${BROWSER_PATH}"
    exit 0
fi
if [ "$(id -u)" != "0" ]; then
    echo "install-browser: not root, so cannot apt-get install chromium; install it yourself (sudo apt-get install chromium) or set BROWSER_PATH; the browser test will be skipped"
    exit 0
fi
if ! have apt-get; then
    echo "install-browser: no apt-get on this machine; install Chrome/Chromium and set BROWSER_PATH; the browser test will be skipped"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
echo "install-browser: apt-get install chromium (Debian package; a minute or two)"
if ! apt-get update -qq; then
    echo "install-browser: apt-get update failed; the browser test will be skipped"
    exit 0
fi
# fonts-liberation gives the figures readable text; chromium's other recommends are not needed headless.
if ! apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null; then
    echo "install-browser: apt-get install chromium failed; the browser test will be skipped"
    exit 0
fi
echo "install-browser: installed $(chromium --version 2>/dev/null | head -n1)"
exit 0
