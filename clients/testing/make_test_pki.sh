#!/bin/sh
# A throwaway PKI for TLS tests, made with openssl(1) in the folder DIR (created if need be):
#   ca.pem, ca.key              the CA that signs the rest
#   stranger.pem, stranger.key  a second CA that nobody trusts
#   server.pem, server.key      for localhost and 127.0.0.1
#   alice.pem/.key, bob.pem/.key  clients, identified as CN=alice and CN=bob
# Certificates last a day: make them when the test runs, never at build time.
#
#   make_test_pki.sh "$TEST_TMPDIR/pki"
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
mkdir -p "$1"
cd "$1"

# A self-signed CA named $1.
ca() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=$1" \
    -keyout "$1.key" -out "$1.pem" 2>/dev/null
}

# A certificate for CN=$1, signed by ca, valid for localhost and 127.0.0.1.
leaf() {
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$1.key" -out "$1.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
}

ca ca
ca stranger
leaf server
leaf alice
leaf bob
