#!/usr/bin/env bash
# Proves that .ci/book-browser-check.mjs fails on a broken link: it is run on a two-page book
# whose first page links to a missing page, to a missing fragment of the other page and to a
# placeholder address, and must exit non-zero naming all three (and nothing on the good links).
# Usage: .ci/book-browser-check-fails.sh (from anywhere; it needs chromium, like the check).
set -euo pipefail
cd "$(dirname "$0")/.."
book=$(mktemp -d)
trap 'rm -rf "$book"' EXIT
cat > "$book/index.html" <<'HTML'
<!doctype html><html><head><title>A</title><link rel="icon" href="data:,"></head><body><main><h1 id="top">A</h1>
<p><a href="other.html#top">a good link</a>, <a href="missing.html">a missing page</a>,
<a href="other.html#nowhere">a missing fragment</a>,
<a href="https://example.invalid/workbook/blob/main/engine/src/bench.rs">a placeholder address</a>.</p>
</main></body></html>
HTML
cat > "$book/other.html" <<'HTML'
<!doctype html><html><head><title>B</title><link rel="icon" href="data:,"></head><body><main><h1 id="top">B</h1>
<p><a href="index.html#top">back</a></p></main></body></html>
HTML
if node --experimental-websocket .ci/book-browser-check.mjs "$book" > "$book/log" 2>&1; then
  cat "$book/log"
  echo "FAIL: the browser check passed a book with broken links"
  exit 1
fi
for expected in "index.html: broken link: /missing.html" "index.html: broken link: /other.html#nowhere" \
  "index.html: link to a placeholder address: https://example.invalid/"; do
  if ! grep -qF "$expected" "$book/log"; then
    cat "$book/log"
    echo "FAIL: the browser check did not report: $expected"
    exit 1
  fi
done
if grep -q "other.html: " "$book/log"; then
  cat "$book/log"
  echo "FAIL: the browser check reported a problem on a page with none"
  exit 1
fi
echo "the browser check fails on each kind of broken link: $(head -n1 "$book/log")"
