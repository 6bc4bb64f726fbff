#!/usr/bin/env bash
# test386: the core module's tests built for GOARCH=386.
#
# Why keep a 32-bit run: a 64-bit atomic that is not 8-byte aligned panics only
# at run time on 386, so building is not enough; the tests must execute.
#
# How they run, decided by a probe (never skipped silently; the first line of
# output says which way it went):
#   - natively, where this kernel executes 32-bit binaries;
#   - otherwise under qemu-user's qemu-i386 (Debian: apt-get install qemu-user),
#     through `go test -exec scripts/qemu386exec.sh`, with GODEBUG=asyncpreemptoff=1
#     (that script says why, and which emulator faults it runs again);
#   - neither: fail, saying what to install.
#
# Usage: scripts/test386.sh [-probe] [go test flags and packages]
#   -probe  print "native", "qemu" or "none" and exit 0 (for .ci/run's installs).
set -euo pipefail
GO="${GO:-go}"
here=$(cd "$(dirname "$0")" && pwd)

probe() {
	local dir bin
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' RETURN
	bin="$dir/probe"
	# A program of its own, in a module of its own: the probe depends on no
	# package of this repository.
	printf 'module probe\n\ngo 1.21\n' >"$dir/go.mod"
	printf 'package main\n\nfunc main() {}\n' >"$dir/main.go"
	if ! (cd "$dir" && GOARCH=386 GOFLAGS= "$GO" build -o "$bin" .) >/dev/null 2>"$dir/err"; then
		echo "test386: cannot build the 386 probe:" >&2
		cat "$dir/err" >&2
		echo "build-failed"
		return
	fi
	# A kernel that hands 32-bit binaries to qemu through binfmt_misc
	# (Debian's qemu-user-binfmt) runs the probe, but not natively: take the
	# emulator's way, which knows its faults.
	local binfmt="${BINFMT_DIR:-/proc/sys/fs/binfmt_misc}/qemu-i386"
	if "$bin" >/dev/null 2>&1 && ! { [ -r "$binfmt" ] && grep -q '^enabled' "$binfmt"; }; then
		echo native
	elif command -v qemu-i386 >/dev/null 2>&1 &&
		GODEBUG=asyncpreemptoff=1 "$here/qemu386exec.sh" "$bin" >/dev/null 2>&1; then
		echo qemu
	else
		echo none
	fi
}

if [ "${1:-}" = "-probe" ]; then
	probe
	exit 0
fi
[ $# -gt 0 ] || set -- -count=1 ./...

how=$(probe)
case "$how" in
native)
	echo "test386: running the 386 tests natively (this kernel executes 32-bit binaries)"
	GOARCH=386 "$GO" test "$@"
	;;
qemu)
	echo "test386: this kernel cannot execute 32-bit binaries; running the 386 tests under $(command -v qemu-i386) ($(qemu-i386 --version | head -1)), GODEBUG=asyncpreemptoff=1"
	GOARCH=386 GODEBUG=asyncpreemptoff=1 "$GO" test -exec "$here/qemu386exec.sh" "$@"
	;;
none)
	echo "test386: FAIL: this kernel cannot execute 32-bit binaries and qemu-i386 is missing or cannot run them." >&2
	echo "test386: install qemu-user (Debian: apt-get install -y qemu-user); .ci/run does so on a bare machine." >&2
	exit 1
	;;
*)
	echo "test386: FAIL: the 386 probe could not be built" >&2
	exit 1
	;;
esac
