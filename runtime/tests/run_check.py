#!/usr/bin/env python3
"""Runs check_prog in each mode with OPC_CHECK=1 and checks the verdicts.

Usage: run_check.py path/to/check_prog
"""
import os
import subprocess
import sys

# mode -> (must be reported as a race, words the report must contain)
CASES = {
    'race': (True, ["node 'consumer' (stream 2) reads", "written by node 'producer' (stream 1)"]),
    'ordered': (False, []),
    'war': (True, ["node 'producer' (stream 1) writes", "read by node 'consumer' (stream 2)"]),
    'host-sync': (False, []),
    'kernel-race': (True, ["node 'kernel_consumer'", "node 'kernel_producer'"]),
    'graph-race': (True, ["check_prog: captured", "node 'consumer'", "node 'producer'"]),
    'graph-ok': (False, []),
    'ignored': (True, ["node 'consumer'"]),
    'disjoint': (False, []),
    'strided-disjoint': (False, []),
    'strided-race': (True, ["node 'poke' (stream 2) writes", "written by node 'even' (stream 1)"]),
    'pageable-race': (True, ["node 'consumer' (stream 2) reads",
                             "written by a pageable cudaMemcpy on stream 0 without synchronisation"]),
    'pageable-synced': (False, []),
    'pageable-async': (False, []),
    'pinned-copy': (False, []),
    'memset-race': (True, ["node 'consumer' (stream 2) reads", "written by a cudaMemset"]),
    'free-in-use': (True, ["freed by cudaFree while node 'producer' on stream 1 may still use it"]),
    'free-graph': (True, ["check_prog: captured", "freed by cudaFree while node 'consumer' on stream 2"]),
    'free-synced': (False, []),
    'destroy-syncs': (False, []),
    'workspace-race': (True, ["node 'reduce_b' (stream 2) writes", "by node 'reduce_a' (stream 1)"]),
    'nan-fill': (False, []),
    'device-cross': (True, ["node 'cross' (stream 3 on device 1) writes",
                            "access to device 0's memory from device 1 without a transfer"]),
    'peer-race': (True, ["node 'peer_copy' (stream 3 on device 1) reads",
                         "written by node 'producer' (stream 1)"]),
    'peer-ordered': (False, []),
}


def run(prog, mode, check):
    env = dict(os.environ)
    env.pop('OPC_CHECK', None)
    env.pop('OPC_DEVICE_COUNT', None)
    if check:
        env['OPC_CHECK'] = '1'
    p = subprocess.run([prog, mode], env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def main():
    prog = sys.argv[1]
    failures = 0
    for mode, (racy, words) in CASES.items():
        rc, err = run(prog, mode, True)
        problems = []
        if racy:
            if rc == 0:
                problems.append('exit status 0, expected a failure')
            # a race, or an access to another device's memory
            if 'opc-check: race:' not in err and 'without a transfer' not in err:
                problems.append('nothing reported')
            for w in words:
                if w not in err:
                    problems.append('report lacks %r' % w)
        else:
            if rc != 0:
                problems.append('exit status %d, expected 0' % rc)
            if 'race' in err:
                problems.append('a race was reported')
        if problems:
            failures += 1
            print('FAIL %s: %s\n--- stderr ---\n%s' % (mode, '; '.join(problems), err))
        else:
            print('ok   %s' % mode)
    # Without OPC_CHECK nothing is checked: the racy program just runs.
    rc, err = run(prog, 'race', False)
    if rc != 0 or 'race' in err:
        failures += 1
        print('FAIL race without OPC_CHECK: status %d\n%s' % (rc, err))
    else:
        print('ok   race without OPC_CHECK')
    sys.exit(1 if failures else 0)


main()
