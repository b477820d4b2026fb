"""capibench.py HOME CALLS: the same calls as bench/capibench.c through the Python client.
Prints "row NAME median_us p99_us n" lines."""

import sys
import time

import tollgate


def row(name, values):
    values.sort()
    print(f"row {name} {values[len(values) // 2]:.1f} {values[len(values) * 99 // 100]:.1f} {len(values)}")


def main():
    home, calls = sys.argv[1], int(sys.argv[2])
    h = tollgate.open_home(home)
    admit, cycle = [], []
    for _ in range(calls):  # a warm-up pass, untimed (as capibench.c does)
        with h.call("bench", caller="capibench.py", input_tokens=10, max_tokens=10, slot=False) as c:
            c.settle(input_tokens=10, output_tokens=10)
    for _ in range(calls):
        t0 = time.perf_counter()
        c = h.call("bench", caller="capibench.py", input_tokens=10, max_tokens=10, slot=False)
        t1 = time.perf_counter()
        c.admit(10)
        t2 = time.perf_counter()
        c.settle(input_tokens=10, output_tokens=10)
        del c
        t3 = time.perf_counter()
        admit.append((t2 - t1) * 1e6)
        cycle.append((t3 - t0) * 1e6)
    row("python_admit", admit)
    row("python_call", cycle)
    cycle = []
    for _ in range(calls):
        t0 = time.perf_counter()
        with tollgate.call("bench", caller="capibench.py", input_tokens=10, max_tokens=10, slot=False,
                           home=home) as c:
            c.settle(input_tokens=10, output_tokens=10)
        cycle.append((time.perf_counter() - t0) * 1e6)
    row("python_with_call", cycle)


if __name__ == "__main__":
    main()
