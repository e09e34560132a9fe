#!/bin/sh
# Validates every TOML file under deploy/ with `kvrelay --check`, as an operator would before
# shipping it. Two stand-ins, because the files describe other machines:
#   - a file key (ca_file, cert_file, key_file, token_file) names a secret that exists only where
#     the file is deployed; it is pointed at a readable stand-in file, and a state dir at a
#     writable stand-in directory; the rest is checked as is;
#   - a file without [[engine]] is the base of a sidecar whose engine comes from flags; it is
#     checked with a stand-in engine identity (the Kubernetes test runs it with the real flags).
# Before trusting a pass it makes sure the harness can fail: a broken copy must be rejected.
# Usage: check_tomls.sh KVRELAY_BINARY DEPLOY_DIR
set -u
kvrelay=$1
deploy=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo stand-in > "$tmp/stand-in"

check() {  # check FILE -> kvrelay's exit code; its stderr in $tmp/err
  # A state dir (the durable index's) names a directory of the deployed machine: a writable
  # stand-in directory.
  sed -E -e 's#^([[:space:]]*(ca_file|cert_file|key_file|token_file)[[:space:]]*=[[:space:]]*)"[^"]+"#\1"'"$tmp"'/stand-in"#' \
    -e 's#^([[:space:]]*dir[[:space:]]*=[[:space:]]*)"[^"]+"#\1"'"$tmp"'/state"#' \
    "$1" > "$tmp/candidate.toml"
  if grep -q '^[[:space:]]*\[\[engine\]\]' "$tmp/candidate.toml"; then
    "$kvrelay" --config "$tmp/candidate.toml" --check > "$tmp/out" 2> "$tmp/err"
  else
    "$kvrelay" --config "$tmp/candidate.toml" --replica-id=stand-in --model-id=stand-in --check \
      > "$tmp/out" 2> "$tmp/err"
  fi
}

files=$(find "$deploy" -name '*.toml' | sort)
count=0
failed=0
for f in $files; do
  count=$((count + 1))
  if check "$f"; then
    echo "ok   $f"
  else
    echo "FAIL $f: $(head -n 1 "$tmp/err")"
    failed=$((failed + 1))
  fi
done

# The harness itself: an unknown key must be rejected.
first=$(echo "$files" | head -n 1)
if [ -n "$first" ]; then
  { cat "$first"; printf '\n[log]\nlevle = "info"\n'; } > "$tmp/broken.toml"
  if check "$tmp/broken.toml"; then
    echo "FAIL the harness accepted a broken file (kvrelay --check does not reject?)"
    failed=$((failed + 1))
  fi
fi

if [ "$count" -lt 3 ]; then
  echo "FAIL found $count TOML files under $deploy; expected the default config and both Kubernetes ones"
  failed=$((failed + 1))
fi
echo "$count files, $failed failure(s)"
[ "$failed" -eq 0 ]
