/* capibench: in-process admission through libtollgate.so next to a `tollgate acquire` spawn,
 * in the same run (bench/capibench.sh builds and runs it, with bench/capibench.py for Python).
 *   capibench HOME TOLLGATE CALLS SPAWNS
 * Prints one line per row: "row NAME median_us p99_us n". */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <tollgate.h>
#include <unistd.h>

extern char** environ;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int by_value(const void* a, const void* b)
{
    const double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static void row(const char* name, double* v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    printf("row %s %.1f %.1f %d\n", name, v[n / 2], v[(n * 99) / 100], n);
}

int main(int argc, char** argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: capibench HOME TOLLGATE CALLS SPAWNS\n");
        return 2;
    }
    const char* where = argv[1];
    const int calls = atoi(argv[3]), spawns = atoi(argv[4]);
    double* admit = calloc((size_t)calls, sizeof(double));
    double* cycle = calloc((size_t)calls, sizeof(double));
    double* spawn = calloc((size_t)spawns, sizeof(double));
    tollgate_error err;
    tollgate_home* home = NULL;
    if (!admit || !cycle || !spawn || tollgate_home_open(where, &home, &err) != TOLLGATE_OK) {
        fprintf(stderr, "capibench: %s\n", err.message);
        return 1;
    }
    /* A warm-up pass, untimed (the first calls open files and fault pages in), then the timed one. */
    for (int pass = 0; pass < 2; ++pass)
        for (int i = 0; i < calls; ++i) {
            tollgate_call* call = NULL;
            const double t0 = now_us();
            int rc = tollgate_call_new(home, "bench", "capibench", NULL, 10, 10, 0, &call, &err);
            const double t1 = now_us();
            rc = rc ? rc : tollgate_call_admit(call, 10000, &err);
            const double t2 = now_us();
            rc = rc ? rc : tollgate_call_settle(call, 10, 10, &err);
            tollgate_call_free(call);
            const double t3 = now_us();
            if (rc != TOLLGATE_OK) {
                fprintf(stderr, "capibench: %s\n", err.message);
                return 1;
            }
            if (pass == 1) {
                admit[i] = t2 - t1;
                cycle[i] = t3 - t0;
            }
        }
    tollgate_home_close(home);
    char* args[] = { argv[2], "acquire", "bench", "--caller", "spawnbench", "--tokens", "20", "--home",
        (char*)where, "-q", NULL };
    for (int i = 0; i < spawns; ++i) {
        pid_t pid;
        int status = 0;
        const double t0 = now_us();
        if (posix_spawn(&pid, argv[2], NULL, NULL, args, environ) != 0 || waitpid(pid, &status, 0) != pid
            || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "capibench: tollgate acquire failed\n");
            return 1;
        }
        spawn[i] = now_us() - t0;
    }
    row("c_admit", admit, calls);
    row("c_call", cycle, calls);
    row("cli_acquire_spawn", spawn, spawns);
    return 0;
}
