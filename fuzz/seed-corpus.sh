#!/usr/bin/env bash
# seed-corpus.sh - start each fuzz target from the real captures in tests/fixtures (Patroni
# 3.3.8/4.1.5 JSON, pysyncobj 0.3.12/0.3.17 frames and pickles, syncobj_admin output) and a few
# configuration files, so libFuzzer begins with valid inputs rather than learning the formats.
# Writes fuzz/corpus/<target>/ (git-ignored). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
C=fuzz/corpus
mkdir -p "$C"/{patroni_json,raft_frame,pickle,admin_text,config_files}
for f in tests/fixtures/patroni-*/*.json; do
  cp "$f" "$C/patroni_json/$(basename "$(dirname "$f")")-$(basename "$f")"
done
for d in tests/fixtures/pysyncobj/*/; do
  c=$(basename "$d")
  # raft_frame's first byte selects plain (even) or keyed (odd) decoding
  for f in "$d"*.bin; do { printf '\000'; cat "$f"; } >"$C/raft_frame/$c-$(basename "$f")"; done
  for f in "$d"*.pickle; do cp "$f" "$C/pickle/$c-$(basename "$f")"; done
  cp "$d/expected_admin.txt" "$C/admin_text/$c.txt"
done
printf 'clusters:\n  - scope: orders\n    patroni_urls: [http://10.0.1.1:8008]\n    raft_password_file: /etc/pw\n    allow_api_url_hosts: [10.0.0.0/24]\n' >"$C/config_files/exporter.yml"
printf 'tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\nbasic_auth_users:\n  prom: x\n' >"$C/config_files/web.yml"
printf "scope: pg\nrestapi:\n  connect_address: '10.1.2.3:8008'\n  certfile: /c.pem\n  keyfile: /k.pem\n  verify_client: required\nctl:\n  insecure: true\nraft:\n  self_addr: '10.1.2.3:2222'\n  partner_addrs: [10.1.2.4:2222]\n  password: x\n" >"$C/config_files/patroni.yml"
echo "seeded: $(find "$C" -type f | wc -l) files in $C"
