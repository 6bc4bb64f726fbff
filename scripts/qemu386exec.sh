#!/usr/bin/env bash
# qemu386exec: `go test -exec` program for scripts/test386.sh on a kernel that cannot execute
# 32-bit binaries. It runs one package's 386 test binary under qemu-i386.
#
# qemu-user keeps one i386 descriptor table for all the threads of a process, while Linux gives
# each thread its own TLS descriptor; Go's 386 runtime sets the same descriptor on every thread
# (set_thread_area), so under the emulator a thread can be left with another thread's g. Most of
# it is avoided with asynchronous preemption off (no signal, so no segment reload on sigreturn;
# scripts/test386.sh sets GODEBUG=asyncpreemptoff=1), but thread start-up still crashes the
# runtime now and then (seen: "morestack on g0" in sysmon, "schedule: holding locks", a SIGSEGV
# in runqput, "runtime: split stack overflow" with "mcall called on m->g0 stack" in sysmon at
# start), about one package binary in forty. Once (CI, the fuzz package's binary at 0.18 s) the
# emulator itself reported "qemu: uncaught target signal 5 (Trace/breakpoint trap)": the runtime
# reached its abort (INT 3 on 386) with no handler in place, printing nothing of its own.
#
# Such a crash is not the code under test, so the binary runs again, at most 3 times in all, and
# each retry is announced on stderr. Only those runtime-internal signatures are retried: a test
# failure, a Go panic (an unaligned 64-bit atomic is one: the reason the 386 run exists), a
# deadlock or a timeout fails at once. scripts/qemu386exec_test.sh checks these decisions.
set -uo pipefail
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for attempt in 1 2 3; do
	qemu-i386 "$@" >"$out" 2>&1
	rc=$?
	if [ $rc -eq 0 ] || grep -q '^panic: \|^fatal error: all goroutines are asleep\|^--- FAIL\|test timed out' "$out" ||
		! grep -q '^fatal error: morestack on g0\|^fatal error: schedule: holding locks\|^fatal error: runtime: \|^SIGSEGV: segmentation violation\|^SIGTRAP: trace trap\|^qemu: uncaught target signal\|^fatal error: unexpected signal during runtime execution' "$out"; then
		cat "$out"
		exit $rc
	fi
	next="running it again"
	[ $attempt -lt 3 ] || next="giving up"
	echo "test386: $(basename "$1") died of an emulator fault in the Go runtime ($(grep -m1 '^fatal error\|^SIG' "$out")); attempt $attempt of 3, $next" >&2
done
cat "$out"
exit $rc
