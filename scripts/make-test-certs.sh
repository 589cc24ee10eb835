#!/usr/bin/env bash
# Makes a throwaway test PKI in DIR with the openssl CLI (EC P-256 keys: fast):
#   ca.pem                 the test CA (trusted only by tests that say so)
#   server.pem/.key        for 127.0.0.1 and localhost, signed by the CA
#   wronghost.pem/.key     for other.invalid only, signed by the CA
#   expired.pem/.key       for 127.0.0.1 and localhost, signed by the CA, expired in 2020
#   selfsigned.pem/.key    for 127.0.0.1 and localhost, self-signed (no CA)
#   server.pin             curl's "sha256//<base64>" pin of server.key
# Usage: scripts/make-test-certs.sh DIR
set -euo pipefail
dir="$1"
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
local_san="subjectAltName=IP:127.0.0.1,DNS:localhost"

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days 2 -subj "/CN=AppNorth Test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out ca.pem 2>/dev/null

# A leaf signed by the CA through `openssl ca`, which takes explicit start and
# end dates (that is how the expired one is made without faking the clock).
cat > ca.cnf <<CNF
[ ca ]
default_ca = test_ca
[ test_ca ]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
copy_extensions = copy
unique_subject = no
[ any ]
commonName = supplied
[ leaf ]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
CNF
: > index.txt
echo 1000 > serial
leaf() { # name san startdate enddate
    key "$1.key"
    openssl req -new -key "$1.key" -subj "/CN=$1" -addext "$2" -out "$1.csr" 2>/dev/null
    openssl ca -batch -config ca.cnf -extensions leaf -cert ca.pem -keyfile ca.key \
        -startdate "$3" -enddate "$4" -in "$1.csr" -out "$1.pem" 2>/dev/null
}
now=$(date -u +%s)
stamp() { date -u -d "@$1" +%Y%m%d%H%M%SZ; }
leaf server "$local_san" "$(stamp $((now - 3600)))" "$(stamp $((now + 86400)))"
leaf wronghost "subjectAltName=DNS:other.invalid" "$(stamp $((now - 3600)))" "$(stamp $((now + 86400)))"
leaf expired "$local_san" 20200101000000Z 20200102000000Z

key selfsigned.key
openssl req -x509 -new -key selfsigned.key -sha256 -days 2 -subj "/CN=selfsigned" \
    -addext "$local_san" -out selfsigned.pem 2>/dev/null

printf 'sha256//%s\n' "$(openssl pkey -in server.key -pubout -outform DER 2>/dev/null \
    | openssl dgst -sha256 -binary | openssl base64 -A)" > server.pin
