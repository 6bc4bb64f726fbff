#!/usr/bin/env bash
# qemu386exec_test: checks which failures scripts/qemu386exec.sh runs again and which it
# reports at once, with a stand-in qemu-i386 on PATH that prints a given output and exits with a
# given status (the real emulator's faults are too rare to wait for: about one binary in forty).
# Run by `make test386`; exits non-zero, naming the case, if a decision is wrong.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The stand-in: each run appends a line to $dir/runs, prints $FAKE_OUT and exits $FAKE_RC,
# except that a run numbered $FAKE_OK_ON (if set) passes, as a retried emulator fault does.
cat >"$dir/qemu-i386" <<'FAKE'
#!/usr/bin/env bash
echo run >>"$FAKE_DIR/runs"
n=$(wc -l <"$FAKE_DIR/runs")
if [ "$n" = "${FAKE_OK_ON:-0}" ]; then echo PASS; exit 0; fi
printf '%b\n' "$FAKE_OUT"
exit "$FAKE_RC"
FAKE
chmod +x "$dir/qemu-i386"

failed=0
# check NAME RC OUTPUT OK_ON WANT_RC WANT_RUNS
check() {
	local name=$1 rc=$2 out=$3 okon=$4 wantrc=$5 wantruns=$6 got gotruns
	rm -f "$dir/runs"
	PATH="$dir:$PATH" FAKE_DIR=$dir FAKE_OUT=$out FAKE_RC=$rc FAKE_OK_ON=$okon \
		"$here/qemu386exec.sh" ./pkg.test -test.v >/dev/null 2>&1
	got=$?
	gotruns=$(wc -l <"$dir/runs")
	if [ "$got" != "$wantrc" ] || [ "$gotruns" != "$wantruns" ]; then
		echo "qemu386exec_test: $name: exit $got after $gotruns runs, want exit $wantrc after $wantruns" >&2
		failed=1
	fi
}

# Emulator faults in the Go runtime: run again, and a pass on the second run is a pass.
check "morestack on g0" 2 'fatal error: morestack on g0' 2 0 2
check "SIGSEGV in the runtime" 2 'SIGSEGV: segmentation violation\nPC=0x8049000' 2 0 2
check "uncaught SIGTRAP at start-up" 133 'qemu: uncaught target signal 5 (Trace/breakpoint trap) - core dumped' 2 0 2
check "a fault every time gives up after 3" 133 'qemu: uncaught target signal 5 (Trace/breakpoint trap) - core dumped' 0 133 3
# Failures of the code under test: reported at once, never run again.
check "a failed test" 1 '--- FAIL: TestX (0.00s)\nFAIL' 2 1 1
check "a Go panic" 2 'panic: unaligned 64-bit atomic operation' 2 2 1
check "a panic that the emulator then kills" 133 'panic: boom\nqemu: uncaught target signal 5 (Trace/breakpoint trap) - core dumped' 2 133 1
check "a deadlock" 2 'fatal error: all goroutines are asleep - deadlock!' 2 2 1
check "a timeout" 2 'panic: test timed out after 10m0s' 2 2 1
check "an unknown failure" 1 'something else' 2 1 1
check "a pass" 0 'PASS' 0 0 1

[ $failed -eq 0 ] && echo "qemu386exec_test: ok"
exit $failed
