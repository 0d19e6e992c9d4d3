#!/usr/bin/env bash
# python-ssl-tickets.sh - does Patroni's REST server issue TLS 1.3 session tickets, and resume?
# A Python HTTP server with the SSLContext of Patroni 4.1.5's RestApiServer.__initialize
# (patroni/api.py: ssl.create_default_context(ssl.Purpose.CLIENT_AUTH), load_cert_chain,
# wrap_socket(server_side=True, do_handshake_on_connect=False), ThreadingMixIn + HTTPServer,
# HTTP/1.0) on 127.0.0.1, a throw-away certificate, and `openssl s_client` twice: the first
# connection saves its session (-sess_out), the next two offer it (-sess_in).
# Usage: python-ssl-tickets.sh [PORT]   (default 18443; python3 and openssl on PATH)
set -euo pipefail
port="${1:-18443}"
dir=$(mktemp -d)
server=""
cleanup() {
  if [[ -n $server ]]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem -out cert.pem \
  -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
cat >server.py <<'PY'
import ssl, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.end_headers()
        self.wfile.write(b'{"state": "running"}')

    def log_message(self, *args):
        pass

class Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True

server = Server(('127.0.0.1', int(sys.argv[1])), Handler)
ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=None)
ctx.load_cert_chain(certfile='cert.pem', keyfile='key.pem')
server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
print(sys.version.split()[0], ssl.OPENSSL_VERSION, 'num_tickets', ctx.num_tickets, flush=True)
server.serve_forever()
PY
python3 server.py "$port" >server.log 2>&1 &
server=$!
for _ in $(seq 50); do grep -q num_tickets server.log && break; sleep 0.1; done
cat server.log
get() { printf 'GET /patroni HTTP/1.0\r\n\r\n' | timeout 5 openssl s_client -connect "127.0.0.1:$port" -tls1_3 -CAfile cert.pem -ign_eof "$@" 2>&1 || true; }
first=$(get -sess_out session.pem -msg)
echo "first connection: $(grep -E '^(New|Reused),' <<<"$first"), NewSessionTicket messages: $(grep -c 'NewSessionTicket' <<<"$first")"
for i in 1 2; do
  echo "offering the saved session ($i): $(get -sess_in session.pem | grep -E '^(New|Reused),|^HTTP/1' | paste -sd' ')"
done
