#!/usr/bin/env python3
"""cpubench: benchmark rows by CPU time per op, for a machine shared with other builds.

On the project's 2-core machine, shared with other sessions (load 8 to 20), wall-clock
ns/op spreads by +-40-200%: a run that waits for a core is charged for the wait. This runs
each row in a process of its own for a fixed count of ops and charges it the child's CPU time
(user + sys, less that of a run of no benchmark), which leaves the waits out. The GC's
background work, on any core, is counted: it is the row's cost too.

Rows of several test binaries are interleaved, binary by binary within a round, so that a
burst of load hits them alike. Output, one file per binary (OUT-NAME.txt), is in Go's
benchmark format with ns/op (wall) and cpu-ns/op side by side, for benchstat:
  benchstat -filter '.unit:cpu-ns/op' old=OUT-old.txt new=OUT-new.txt

Usage: scripts/cpubench.py -rounds 10 -out /tmp/nk -dir bench \\
         -bin old=/tmp/old.test -bin new=/tmp/new.test \\
         -row '^BenchmarkKeyed$/^scenario=newkey$/^impl=locker$=2000000x' ...
A row is a -test.bench pattern, '=', and a -test.benchtime of the form Nx.
"""
import argparse
import re
import resource
import subprocess
import time


def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(binary, cwd, bench, benchtime):
    c0 = cpu()
    p = subprocess.run([binary, '-test.run', '^$', '-test.bench', bench, '-test.benchtime', benchtime,
                        '-test.count', '1', '-test.benchmem'], capture_output=True, text=True, cwd=cwd, check=True)
    return cpu() - c0, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('-rounds', type=int, default=10)
    ap.add_argument('-out', required=True)
    ap.add_argument('-dir', default='.')
    ap.add_argument('-bin', action='append', required=True, help='NAME=PATH')
    ap.add_argument('-row', action='append', required=True, help='PATTERN=Nx')
    a = ap.parse_args()
    bins = [b.split('=', 1) for b in a.bin]
    rows = [r.rsplit('=', 1) for r in a.row]
    outs = {name: open('%s-%s.txt' % (a.out, name), 'a') for name, _ in bins}
    line_re = re.compile(r'(Benchmark\S+)\s+(\d+)\s+([\d.]+) ns/op(.*)')
    for rnd in range(a.rounds):
        for name, path in bins:
            startup, _ = run(path, a.dir, '^$', '1x')
            f = outs[name]
            for bench, benchtime in rows:
                c, out = run(path, a.dir, bench, benchtime)
                for line in out.splitlines():
                    m = line_re.match(line)
                    if m:
                        n = int(m.group(2))
                        f.write('%s %d %s ns/op %.1f cpu-ns/op%s\n' % (
                            m.group(1), n, m.group(3), (c - startup) * 1e9 / n, m.group(4)))
            f.write('# round %d %s load %s\n' % (rnd, time.strftime('%H:%M:%S'),
                                                 open('/proc/loadavg').read().split()[0]))
            f.flush()


if __name__ == '__main__':
    main()
