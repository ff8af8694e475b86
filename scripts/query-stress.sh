#!/bin/bash
# 16 conversations sending blocking messages in a loop while QUERY_LOOPS clients GetTask
# every task in a loop, for SECONDS, against `tiny-harness dev` on PORT (its own data dir).
# Prints the messages sent, the messages that failed, and how often the worker logged the
# SDK's lost workflow task (docs/performance.md; since issue 20 GetTask asks no workflow).
#   scripts/query-stress.sh [PORT] [QUERY_LOOPS] [SECONDS]      (needs curl, python3)
# TH=path/to/tiny-harness picks the binary (default target/release/tiny-harness).
PORT=${1:-18180}; Q=${2:-4}; S=${3:-60}
TH=${TH:-target/release/tiny-harness}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
"$TH" dev --port "$PORT" --data-dir "$D/data" > "$D/out" 2> "$D/err" &
H=$!
until curl -sf "http://127.0.0.1:$PORT/.well-known/agent-card.json" > /dev/null; do
  kill -0 $H 2> /dev/null || { echo "the harness did not start:"; cat "$D/err"; exit 1; }
  sleep 0.2
done
rpc() {
  curl -s -m 30 -H 'content-type: application/json' -H 'A2A-Version: 1.0' \
    "http://127.0.0.1:$PORT/a2a/jsonrpc" -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$1\",\"params\":$2}"
}
send() {
  rpc SendMessage "{\"message\":{\"role\":\"ROLE_USER\",\"messageId\":\"$RANDOM$RANDOM$RANDOM\",$1\"parts\":[{\"text\":\"hi\"}]},\"configuration\":{\"historyLength\":1}}"
}
ids=()
for _ in $(seq 16); do
  ids+=("$(send "" | python3 -c 'import sys, json; print(json.load(sys.stdin)["result"]["task"]["id"])')")
done
end=$((SECONDS + S))
loops=()
for id in "${ids[@]}"; do
  (n=0; while [ $SECONDS -lt $end ]; do
     r=$(send "\"taskId\":\"$id\",")
     case "$r" in *'"error"'*) echo "$r" >> "$D/errors" ;; esac
     n=$((n + 1))
   done; echo $n >> "$D/counts") &
  loops+=($!)
done
for _ in $(seq "$Q"); do
  (while [ $SECONDS -lt $end ]; do
     for id in "${ids[@]}"; do rpc GetTask "{\"id\":\"$id\",\"historyLength\":1}" > /dev/null; done
   done) &
  loops+=($!)
done
wait "${loops[@]}"
kill $H; wait $H
sent=$(python3 -c 'import sys; print(sum(int(l) for l in open(sys.argv[1])))' "$D/counts")
failed=$(cat "$D/errors" 2> /dev/null | wc -l)
echo "messages: $sent, failed: $failed, lost workflow tasks: $(grep -c 'already has one' "$D/err")"
[ -s "$D/errors" ] && head -c 400 "$D/errors" && echo
exit 0
