#!/usr/bin/env bash
# The shared-memory transport between two real users (docs/reliability.md, "Runtime and
# transports"): a victim job and an attacker who knows the victim's uid and session name. Needs
# root (to take two unprivileged uids with setpriv); exits 77 (skipped) without it.
#   1. the attacker creates the victim's default token directory first (/tmp/ccoll-<uid>, world
#      writable): the victim refuses it with a clear error and computes nothing;
#   2. the attacker runs a rank of the victim's session at the same time: the victim's job
#      completes with exact results, the attacker's rank never joins it;
#   3. the directory, token file and segment ccoll creates are the victim's own (0700 / 0600): the
#      attacker can neither list, read nor open them while the job waits for its last rank;
#   4. segments the attacker leaves under predictable names are never used by the victim.
# Usage: tests/security/two_users.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
example="$build/examples/example_allreduce_shm"
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root to run as two users"; exit 77; }
command -v setpriv >/dev/null || { echo "skipped: no setpriv"; exit 77; }
[ -x "$example" ] || { echo "missing $example (build the examples first)"; exit 1; }

victim=23001
attacker=23002
work=$(mktemp -d /tmp/ccoll-two-users.XXXXXX)
chmod 755 "$work"
cleanup() {
  pkill -u "$attacker" -f example_allreduce_shm 2>/dev/null || true
  pkill -u "$victim" -f example_allreduce_shm 2>/dev/null || true
  rm -rf "$work" "/tmp/ccoll-$victim" "/tmp/ccoll-$attacker"
  find /dev/shm -maxdepth 1 \( -user "$victim" -o -user "$attacker" \) -delete 2>/dev/null || true
}
trap cleanup EXIT
cleanup_state() {
  rm -rf "/tmp/ccoll-$victim" "/tmp/ccoll-$attacker"
  find /dev/shm -maxdepth 1 \( -user "$victim" -o -user "$attacker" \) -delete 2>/dev/null || true
}
install -m 755 "$example" "$work/example"
as() {  # as UID CMD...: run as an unprivileged uid with no supplementary groups
  local uid=$1; shift
  env -u XDG_RUNTIME_DIR -u CCOLL_SHM_DIR HOME=/tmp \
    setpriv --reuid="$uid" --regid="$uid" --clear-groups --inh-caps=-all "$@"
}
failures=0
fails() { ! "$@" >/dev/null 2>&1; }  # fails CMD...: CMD exits non-zero
check() {  # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}
# Two ranks of the victim's session `demo`; prints the ranks' output, returns the worst status.
victim_job() {
  local rc=0 pids=()
  for r in 0 1; do
    as "$victim" env CCOLL_RANK=$r CCOLL_SIZE=2 CCOLL_SESSION=demo "$work/example" \
      >"$work/victim.$r.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return "$rc"
}

echo "== 1. the attacker owns the victim's token directory"
cleanup_state
as "$attacker" mkdir -m 0777 "/tmp/ccoll-$victim"
rc=0; timeout 120 bash -c "$(declare -f as victim_job); work=$work victim=$victim victim_job" || rc=$?
cat "$work"/victim.*.out
check "victim exits with an error (status $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "the error names the directory and why" grep -q "is not a private directory of this user" \
  "$work/victim.0.out"
check "the victim computed nothing" bash -c "! grep -q 'wrong elements' $work/victim.*.out"

echo "== 2. the attacker runs a rank of the victim's session at the same time"
cleanup_state
as "$attacker" env CCOLL_RANK=1 CCOLL_SIZE=2 CCOLL_SESSION=demo timeout 20 "$work/example" \
  >"$work/attacker.out" 2>&1 &
attacker_pid=$!
sleep 0.5
rc=0; timeout 120 bash -c "$(declare -f as victim_job); work=$work victim=$victim victim_job" || rc=$?
cat "$work"/victim.*.out
check "victim job succeeds (status $rc)" test "$rc" -eq 0
check "both victim ranks: 0 wrong elements" bash -c \
  "grep -q 'rank 0 of 2: 0 wrong' $work/victim.0.out && grep -q 'rank 1 of 2: 0 wrong' $work/victim.1.out"
# The attacker's rank looks in its own token directory: it never sees the victim's segment and,
# without its own rank 0, gives up at its deadline (or at the 20 s cap).
kill "$attacker_pid" 2>/dev/null || true
wait "$attacker_pid" 2>/dev/null || true
check "the attacker's rank never completed an allreduce" bash -c "! grep -q 'wrong elements' $work/attacker.out"

echo "== 3. what ccoll creates for the victim: private to the victim while the job waits"
cleanup_state
# Rank 0 alone: it creates the directory, the segment and the token, then waits for rank 1.
as "$victim" env CCOLL_RANK=0 CCOLL_SIZE=2 CCOLL_SESSION=demo "$work/example" \
  >"$work/victim.0.out" 2>&1 &
rank0=$!
token=""
for _ in $(seq 1 100); do  # up to 10 s
  # The published token, not the temporary file it is renamed from (NAME.tmp.PID).
  token=$(find "/tmp/ccoll-$victim" -maxdepth 1 -type f ! -name '*.tmp.*' 2>/dev/null |
    head -n 1) || true
  [ -n "$token" ] && break
  sleep 0.1
done
segment=$(find /dev/shm -maxdepth 1 -user "$victim" -name 'ccoll.*' | head -n 1) || true
check "rank 0 published a token and a segment" test -n "$token" -a -n "$segment"
check "the token directory is the victim's, mode 0700" \
  test "$(stat -c '%u %a' "/tmp/ccoll-$victim")" = "$victim 700"
check "the token file is mode 0600" test "$(stat -c %a "$token")" = 600
check "the segment is the victim's, mode 0600" test "$(stat -c '%u %a' "$segment")" = "$victim 600"
check "the attacker cannot list the token directory" fails as "$attacker" ls "/tmp/ccoll-$victim"
check "the attacker cannot read the token" fails as "$attacker" cat "$token"
check "the attacker cannot open the segment for writing" fails as "$attacker" \
  sh -c "exec 3<>'$segment'"
check "nor read it" fails as "$attacker" cat "$segment"
as "$victim" env CCOLL_RANK=1 CCOLL_SIZE=2 CCOLL_SESSION=demo "$work/example" \
  >"$work/victim.1.out" 2>&1 || true
wait "$rank0" || true
cat "$work"/victim.*.out
check "the job then completes: 0 wrong elements on both ranks" bash -c \
  "grep -q 'rank 0 of 2: 0 wrong' $work/victim.0.out && grep -q 'rank 1 of 2: 0 wrong' $work/victim.1.out"

echo "== 4. segments the attacker leaves under predictable names are ignored"
cleanup_state
for name in ccoll.demo ccoll-demo ccoll.demo.00000000000000000000000000000000; do
  as "$attacker" sh -c "umask 0; head -c 1048576 /dev/zero > /dev/shm/$name"
done
rc=0; timeout 120 bash -c "$(declare -f as victim_job); work=$work victim=$victim victim_job" || rc=$?
cat "$work"/victim.*.out
check "victim job succeeds beside the attacker's segments (status $rc)" test "$rc" -eq 0
check "both victim ranks: 0 wrong elements" bash -c \
  "grep -q 'rank 0 of 2: 0 wrong' $work/victim.0.out && grep -q 'rank 1 of 2: 0 wrong' $work/victim.1.out"

echo
if [ "$failures" -ne 0 ]; then
  echo "two-user security checks: $failures failed"
  exit 1
fi
echo "two-user security checks: all passed"
