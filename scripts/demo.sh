#!/bin/sh
# demo.sh serves a page on loopback and runs curl under hermetic against
# it: once through an allowed name, once through a name the policy refuses,
# with --trace showing the refusal. Both names map to 127.0.0.1 with
# --resolve; nothing leaves the machine. It needs curl and python3 (the
# server); HERMETIC names a built binary, otherwise the script builds one.
set -eu

cd "$(dirname "$0")/.."
for tool in curl python3; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "demo: $tool is needed and is not on PATH" >&2
		exit 1
	fi
done
work=$(mktemp -d)
srv=""
cleanup() {
	if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bin=${HERMETIC:-}
if [ -z "$bin" ]; then
	echo "== building hermetic"
	bin=$work/hermetic
	go build -o "$bin" ./cmd/hermetic
fi
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac

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
# hermetic's lines (stderr) go with curl's output, in the order written.
echo "== allowed: hermetic $* -- curl http://api.demo.test:$port/"
"$bin" "$@" -- curl -sS "http://api.demo.test:$port/" 2>&1

echo
echo "== blocked: hermetic $* -- curl http://evil.demo.test:$port/"
"$bin" "$@" -- curl -sS "http://evil.demo.test:$port/" 2>&1 || true

echo
echo "== blocked, and the run fails with --fail-on-block (exit status 2):"
status=0
"$bin" "$@" --fail-on-block --quiet -- curl -sS -o /dev/null "http://evil.demo.test:$port/" 2>&1 || status=$?
echo "exit status $status"

echo
echo "== a client that ignores the proxy settings: hermetic $* -- curl --noproxy '*' http://127.0.0.1:$port/"
echo "   (in the network namespace, the default on Linux, it reaches nothing; with --isolate=none it would)"
"$bin" "$@" --quiet -- curl -sS --max-time 5 --noproxy '*' "http://127.0.0.1:$port/" 2>&1 || true
