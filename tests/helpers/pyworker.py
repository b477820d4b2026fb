"""pyworker: the Python client (clients/python) as one of tst_capi's callers.

    pyworker.py HOME PROVIDER LOG TOKENS

Admits, holds a few ms and settles calls until killed, logging each as capiworker.c does:
"A LO HI TOKENS" (asked at LO, admitted by HI, µs), "B PID T" (holding from T), "E PID T" (still
holding at T), each group in one write.
"""

import os
import random
import sys
import time

import tollgate


def now_us():
    # CLOCK_MONOTONIC, as every caller of tst_capi stamps its log: one clock for all.
    return time.monotonic_ns() // 1000


def log(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def main():
    home, provider, path, tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    pid = os.getpid()
    while True:
        lo = now_us()
        try:
            with tollgate.call(provider, caller="py-worker", input_tokens=tokens // 2,
                               max_tokens=tokens - tokens // 2, timeout=20, home=home) as call:
                hi = now_us()
                log(path, f"A {lo} {hi} {tokens}\nB {pid} {hi}\n")
                time.sleep(random.uniform(0.001, 0.02))
                log(path, f"E {pid} {now_us()}\n")
                call.settle(input_tokens=tokens // 2, output_tokens=tokens - tokens // 2)
        except (tollgate.Timeout, tollgate.Refused):
            pass


if __name__ == "__main__":
    main()
