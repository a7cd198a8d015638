#!/usr/bin/env bash
# Signed call to the service, as docs/signing.md describes (for trying the API by hand).
#   SW_URL=http://localhost:8080 SW_ID=op-1 SW_SECRET=operator-secret scripts/signed-curl.sh POST /v1/operator/players/kick '{"playerRef":"p1"}'
# Set SW_KIND=provider to sign as a provider (X-Provider-Id). Extra curl options (-i, -v, ...) may follow the
# body, or the path when there is no body: a third argument starting with '-' is an option, not a body.
set -euo pipefail
usage='usage: scripts/signed-curl.sh METHOD PATH [BODY] [curl options...]

Calls the service signed as docs/signing.md describes (for trying the API by hand): SW_URL (default
http://localhost:8080), SW_ID (op-1), SW_SECRET (operator-secret), SW_KIND=provider to sign as a provider.

Exit status: 0 the service answered 2xx or 3xx (its body printed), 22 it answered 400 or more (its body
printed too), 2 bad usage; otherwise curl'"'"'s own.'
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then printf '%s\n' "$usage"; exit 0; fi
if [ $# -lt 2 ] || ! [[ $1 =~ ^[A-Z]+$ ]] || [ "${2#/}" = "$2" ]; then
  printf 'signed-curl: expected METHOD (GET, POST, ...) and a PATH starting with /\n\n%s\n' "$usage" >&2
  exit 2
fi
method=$1; target=$2; shift 2
body=''
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then body=$1; shift; fi
url=${SW_URL:-http://localhost:8080}; id=${SW_ID:-op-1}; secret=${SW_SECRET:-operator-secret}
header=X-Operator-Id; [ "${SW_KIND:-operator}" = provider ] && header=X-Provider-Id
path=${target%%\?*}   # calls to the service sign the path only
ts=$(date +%s); nonce=$(openssl rand -hex 12)
hash=$(printf '%s' "$body" | sha256sum | cut -d' ' -f1)
sig=$(printf '%s\n%s\n%s\n%s\n%s' "$ts" "$nonce" "$method" "$path" "$hash" | openssl dgst -sha256 -hmac "$secret" -hex | sed 's/^.* //')
args=(-sS --fail-with-body -X "$method" "$url$target" -H "$header: $id" -H "X-Timestamp: $ts" -H "X-Nonce: $nonce" -H "X-Signature: $sig")
[ -n "$body" ] && args+=(-H 'content-type: application/json' --data-binary "$body")
status=0
curl "${args[@]}" "$@" || status=$?
echo
exit "$status"
