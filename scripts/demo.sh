#!/bin/sh
# demo.sh builds hermetic, serves a page on loopback, and runs curl under
# hermetic twice against it: once through an allowed name, once through a
# name the policy refuses, with --trace showing the refusal.
# Both names map to 127.0.0.1 with --resolve; nothing leaves the machine.
set -eu

cd "$(dirname "$0")/.."
work=$(mktemp -d)
srv=""
cleanup() {
	if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "== building hermetic"
go build -o "$work/hermetic" ./cmd/hermetic

mkdir "$work/www"
echo "hello from api.demo.test" >"$work/www/index.html"
python3 -c '
import functools, http.server, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
handler = functools.partial(Quiet, directory=sys.argv[1])
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
print(srv.server_address[1], flush=True)
srv.serve_forever()
' "$work/www" >"$work/port" &
srv=$!
i=0
while [ ! -s "$work/port" ]; do
	i=$((i + 1))
	if [ "$i" -gt 100 ]; then
		echo "the demo server did not start" >&2
		exit 1
	fi
	sleep 0.05
done
port=$(cat "$work/port")

set -- --allow-domain api.demo.test --allow-cidr 127.0.0.1 \
	--resolve api.demo.test=127.0.0.1 --resolve evil.demo.test=127.0.0.1 --trace

echo
echo "== allowed: hermetic $* -- curl http://api.demo.test:$port/"
"$work/hermetic" "$@" -- curl -sS "http://api.demo.test:$port/"

echo
echo "== blocked: hermetic $* -- curl http://evil.demo.test:$port/"
"$work/hermetic" "$@" -- curl -sS "http://evil.demo.test:$port/" || true

echo
echo "== blocked, and the run fails with --fail-on-block:"
status=0
"$work/hermetic" "$@" --fail-on-block --quiet -- curl -sS -o /dev/null "http://evil.demo.test:$port/" 2>/dev/null || status=$?
echo "exit status $status"
