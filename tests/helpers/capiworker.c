/* capiworker: the C library (tollgate.h) driven from a C program, for tst_capi. Pure C: it also
 * proves the header is.
 *   capiworker loop HOME PROVIDER LOG TOKENS     admit/hold/settle until killed, logging each call
 *   capiworker record LOG LO_US TOKENS          inside `tollgate run`: logs its admission and hold
 *   capiworker checks HOME PROVIDER             bad input, use after end and after close, cancel
 *   capiworker fork HOME PROVIDER               fork() after open: refused in the child
 *   capiworker status HOME                      prints tollgate_status_json
 *   capiworker slots HOME PROVIDER N TIMEOUT_MS admits N slot-holding calls at once, then ends them
 *   capiworker moved HOME PROVIDER              a call after the home was moved and re-created
 *   capiworker http HOME PROVIDER               the HTTP answer's way: a JSON 200 with its usage,
 *                                               a 429 with its Retry-After (both read by the library)
 * Log lines (one write each): "A LO HI TOKENS" (asked at LO, admitted by HI, µs of
 * CLOCK_MONOTONIC, the clock of every caller's log), "B PID T" (holding from T), "E PID T"
 * (still holding at T). Exit 0 when all went as expected; lines "FAIL ..." say what did not. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <tollgate.h>
#include <unistd.h>

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static void log_line(const char* path, const char* line)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    ssize_t ignored = write(fd, line, strlen(line));
    (void)ignored;
    close(fd);
}

static int failures = 0;
static void expect(int cond, const char* what, const tollgate_error* err)
{
    if (!cond) {
        printf("FAIL %s (%s)\n", what, err ? err->message : "");
        ++failures;
    }
}

static void hold_a_little(void)
{
    struct timespec ts = { 0, (rand() % 20 + 1) * 1000000L };
    nanosleep(&ts, NULL);
}

static int loop(const char* where, const char* provider, const char* logPath, long long tokens)
{
    tollgate_error err;
    tollgate_home* home = NULL;
    if (tollgate_home_open(where, &home, &err) != TOLLGATE_OK) {
        fprintf(stderr, "capiworker: %s\n", err.message);
        return 2;
    }
    srand((unsigned)getpid());
    char line[160];
    for (;;) {
        tollgate_call* call = NULL;
        if (tollgate_call_new(
                home, provider, "c-worker", NULL, tokens / 2, tokens - tokens / 2, TOLLGATE_SLOT, &call, &err)
            != TOLLGATE_OK) {
            fprintf(stderr, "capiworker: %s\n", err.message);
            return 2;
        }
        const long long lo = now_us();
        const int rc = tollgate_call_admit(call, 20000, &err);
        if (rc == TOLLGATE_OK) {
            const long long hi = now_us();
            snprintf(line, sizeof line, "A %lld %lld %lld\nB %d %lld\n", lo, hi, tokens, (int)getpid(), hi);
            log_line(logPath, line);
            hold_a_little();
            snprintf(line, sizeof line, "E %d %lld\n", (int)getpid(), now_us());
            log_line(logPath, line);
            if (tollgate_call_settle(call, tokens / 2, tokens - tokens / 2, &err) != TOLLGATE_OK)
                fprintf(stderr, "capiworker: settle: %s\n", err.message);
        } else if (rc != TOLLGATE_E_TIMEOUT && rc != TOLLGATE_E_REFUSED) {
            fprintf(stderr, "capiworker: admit: %s\n", err.message);
            return 2;
        }
        tollgate_call_free(call);
    }
}

static int record(const char* logPath, const char* lo, const char* tokens)
{
    /* Dies with the `tollgate run` that holds the slot: a killed holder's command does not
     * outlive its slot. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char line[160];
    const long long hi = now_us();
    snprintf(line, sizeof line, "A %s %lld %s\nB %d %lld\n", lo, hi, tokens, (int)getpid(), hi);
    log_line(logPath, line);
    srand((unsigned)getpid());
    hold_a_little();
    snprintf(line, sizeof line, "E %d %lld\n", (int)getpid(), now_us());
    log_line(logPath, line);
    return 0;
}

struct waiter
{
    tollgate_call* call;
    int rc;
    tollgate_error err;
};

static void* admit_long(void* arg)
{
    struct waiter* w = arg;
    w->rc = tollgate_call_admit(w->call, 600000, &w->err);
    return NULL;
}

static int checks(const char* where, const char* provider)
{
    tollgate_error err;
    tollgate_home* home = NULL;
    tollgate_call* call = NULL;
    /* Bad arguments: a status code, never a crash. */
    expect(tollgate_home_open(where, NULL, &err) == TOLLGATE_E_USAGE, "open without out", &err);
    expect(tollgate_home_open("redis:/nohost", &home, &err) == TOLLGATE_E_USAGE && !home, "a URL-like home",
        &err);
    expect(strstr(err.message, "redis:/nohost") != NULL, "the refusal names the home", &err);
    expect(tollgate_home_open("/nonexistent-parent/x/home", &home, &err) == TOLLGATE_E_NOT_FOUND,
        "a home whose parent is missing", &err);
    expect(strstr(err.message, "/nonexistent-parent") != NULL, "the refusal names the path", &err);
    if (tollgate_home_open(where, &home, &err) != TOLLGATE_OK) {
        printf("FAIL open %s: %s\n", where, err.message);
        return 1;
    }
    expect(tollgate_call_new(home, NULL, "x", NULL, 1, 1, 0, &call, &err) == TOLLGATE_E_USAGE, "no provider",
        &err);
    expect(tollgate_call_new(home, provider, "x", NULL, -1, 1, 0, &call, &err) == TOLLGATE_E_USAGE && !call,
        "negative input tokens", &err);
    expect(tollgate_call_new(home, provider, "x", NULL, 1, 1, 64, &call, &err) == TOLLGATE_E_USAGE,
        "bad flags", &err);
    expect(tollgate_call_admit(NULL, 0, &err) == TOLLGATE_E_USAGE, "admit NULL", &err);
    expect(tollgate_call_settle(NULL, 1, 1, NULL) == TOLLGATE_E_USAGE, "settle NULL, no error struct", NULL);
    expect(tollgate_status_json(home, NULL, &err) == TOLLGATE_E_USAGE, "status without out", &err);
    tollgate_call_free(NULL);
    tollgate_home_close(NULL);

    /* An unknown provider. */
    expect(tollgate_call_new(home, "no-such-provider", "x", NULL, 1, 1, 0, &call, &err) == TOLLGATE_OK, "new",
        &err);
    int rc = tollgate_call_admit(call, 0, &err);
    expect(rc == TOLLGATE_E_USAGE || rc == TOLLGATE_E_NOT_FOUND, "an unknown provider is refused", &err);
    tollgate_call_free(call);

    /* Out of turn: settle before admit, a negative timeout, twice, after release. */
    expect(tollgate_call_new(home, provider, "x", NULL, 10, 10, TOLLGATE_SLOT, &call, &err) == TOLLGATE_OK,
        "new", &err);
    expect(tollgate_call_settle(call, 1, 1, &err) == TOLLGATE_E_STATE, "settle before admit", &err);
    expect(tollgate_call_admit(call, -5, &err) == TOLLGATE_E_USAGE, "negative timeout", &err);
    expect(tollgate_call_admit(call, 10000, &err) == TOLLGATE_OK, "admit", &err);
    expect(tollgate_call_fence(call) > 0 && tollgate_call_holds_slot(call), "a fence and a slot", &err);
    expect(tollgate_call_admit(call, 0, &err) == TOLLGATE_E_STATE, "admitted twice", &err);
    expect(tollgate_call_settle(call, -2, 1, &err) == TOLLGATE_E_USAGE, "settle below -1", &err);
    expect(tollgate_call_report_429(call, -7, &err) == TOLLGATE_E_USAGE, "a negative retry-after", &err);
    expect(tollgate_call_settle(call, 5, 5, &err) == TOLLGATE_OK, "settle", &err);
    expect(tollgate_call_settle(call, 5, 5, &err) == TOLLGATE_E_STATE, "settled twice", &err);
    expect(tollgate_call_release(call, &err) == TOLLGATE_E_STATE, "released after settle", &err);
    expect(tollgate_call_report_429(call, 0, &err) == TOLLGATE_E_STATE, "429 after settle", &err);
    expect(strstr(err.message, "already ended") != NULL, "the message says why", &err);
    tollgate_call_free(call);

    /* Cancelled from another thread: the only slot is held, a second call waits, cancel ends it. */
    tollgate_call* holder = NULL;
    struct waiter w = { NULL, -1, { 0 } };
    expect(
        tollgate_call_new(home, provider, "holder", NULL, 1, 1, TOLLGATE_SLOT, &holder, &err) == TOLLGATE_OK,
        "new", &err);
    expect(tollgate_call_admit(holder, 10000, &err) == TOLLGATE_OK, "the holder", &err);
    expect(
        tollgate_call_new(home, provider, "waiter", NULL, 1, 1, TOLLGATE_SLOT, &w.call, &err) == TOLLGATE_OK,
        "new", &err);
    pthread_t t;
    pthread_create(&t, NULL, admit_long, &w);
    struct timespec pause = { 0, 100000000L };
    nanosleep(&pause, NULL); /* not needed for correctness: a cancel before the wait ends it too */
    tollgate_call_cancel(w.call);
    pthread_join(t, NULL);
    expect(w.rc == TOLLGATE_E_CANCELLED, "the waiter was cancelled", &w.err);
    tollgate_call_free(w.call);

    /* Refused at once: a try while the only slot is held is a timeout at once. */
    expect(tollgate_call_new(home, provider, "try", NULL, 1, 1, TOLLGATE_SLOT, &call, &err) == TOLLGATE_OK,
        "new", &err);
    rc = tollgate_call_admit(call, 0, &err);
    expect(rc == TOLLGATE_E_TIMEOUT, "a try with no slot free", &err);
    tollgate_call_free(call);

    /* A handle used after its home was closed: the call answers CLOSED, and free gives its slot back. */
    tollgate_home_close(home);
    expect(tollgate_call_settle(holder, 1, 1, &err) == TOLLGATE_E_CLOSED, "settle after close", &err);
    tollgate_call_free(holder);
    if (tollgate_home_open(where, &home, &err) != TOLLGATE_OK) {
        printf("FAIL reopen: %s\n", err.message);
        return 1;
    }
    expect(tollgate_call_new(home, provider, "after", NULL, 1, 1, TOLLGATE_SLOT, &call, &err) == TOLLGATE_OK,
        "new", &err);
    expect(tollgate_call_admit(call, 10000, &err) == TOLLGATE_OK, "the freed call gave its slot back", &err);
    expect(tollgate_call_release(call, &err) == TOLLGATE_OK, "release", &err);
    tollgate_call_free(call);
    char* json = NULL;
    expect(tollgate_status_json(home, &json, &err) == TOLLGATE_OK && json && strstr(json, "\"providers\""),
        "status json", &err);
    tollgate_string_free(json);
    tollgate_home_close(home);
    printf("%s\n", failures ? "checks failed" : "checks ok");
    return failures ? 1 : 0;
}

static int forked(const char* where, const char* provider)
{
    tollgate_error err;
    tollgate_home* home = NULL;
    tollgate_call* call = NULL;
    if (tollgate_home_open(where, &home, &err) != TOLLGATE_OK) {
        printf("FAIL open: %s\n", err.message);
        return 1;
    }
    expect(tollgate_call_new(home, provider, "parent", NULL, 1, 1, TOLLGATE_SLOT, &call, &err) == TOLLGATE_OK,
        "new", &err);
    expect(tollgate_call_admit(call, 10000, &err) == TOLLGATE_OK, "the parent's call", &err);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        tollgate_call* other = NULL;
        int bad = 0;
        bad |= tollgate_call_new(home, provider, "child", NULL, 1, 1, 0, &other, &err) != TOLLGATE_E_FORKED;
        bad |= strstr(err.message, "fork") == NULL;
        bad |= tollgate_call_settle(call, 1, 1, &err) != TOLLGATE_E_FORKED;
        char* json = NULL;
        bad |= tollgate_status_json(home, &json, &err) != TOLLGATE_E_FORKED;
        tollgate_call_free(call); /* the parent's slot is not given back from here */
        tollgate_home_close(home);
        /* The child opens the home again and is admitted on its own. */
        tollgate_home* mine = NULL;
        bad |= tollgate_home_open(where, &mine, &err) != TOLLGATE_OK;
        bad |= tollgate_call_new(mine, provider, "child", NULL, 1, 1, 0, &other, &err) != TOLLGATE_OK;
        bad |= tollgate_call_admit(other, 10000, &err) != TOLLGATE_OK;
        bad |= tollgate_call_settle(other, 1, 1, &err) != TOLLGATE_OK;
        tollgate_call_free(other);
        tollgate_home_close(mine);
        _exit(bad ? 1 : 0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the child was refused the parent's home and opened its own", NULL);
    /* The parent's call is still its own: its slot was not given back by the child. */
    expect(tollgate_call_holds_slot(call), "the parent still holds its slot", NULL);
    expect(tollgate_call_settle(call, 1, 1, &err) == TOLLGATE_OK, "the parent settles", &err);
    tollgate_call_free(call);
    tollgate_home_close(home);
    printf("%s\n", failures ? "fork failed" : "fork ok");
    return failures ? 1 : 0;
}

static int status(const char* where)
{
    tollgate_error err;
    tollgate_home* home = NULL;
    char* json = NULL;
    if (tollgate_home_open(where, &home, &err) != TOLLGATE_OK
        || tollgate_status_json(home, &json, &err) != TOLLGATE_OK) {
        fprintf(stderr, "capiworker: %s\n", err.message);
        return 1;
    }
    printf("%s\n", json);
    tollgate_string_free(json);
    tollgate_home_close(home);
    return 0;
}

static int slots(const char* where, const char* provider, int n, long long timeoutMs)
{
    tollgate_error err;
    tollgate_home* home = NULL;
    if (tollgate_home_open(where, &home, &err) != TOLLGATE_OK) {
        fprintf(stderr, "capiworker: %s\n", err.message);
        return 1;
    }
    tollgate_call* calls[64] = { 0 };
    int admitted = 0;
    for (int i = 0; i < n && i < 64; ++i) {
        if (tollgate_call_new(home, provider, "final", NULL, 0, 0, TOLLGATE_SLOT, &calls[i], &err)
                == TOLLGATE_OK
            && tollgate_call_admit(calls[i], timeoutMs, &err) == TOLLGATE_OK)
            ++admitted;
        else
            printf("FAIL slot %d: %s\n", i, err.message);
    }
    for (int i = 0; i < n && i < 64; ++i) {
        if (calls[i] && tollgate_call_holds_slot(calls[i]))
            (void)tollgate_call_release(calls[i], &err);
        tollgate_call_free(calls[i]);
    }
    tollgate_home_close(home);
    printf("admitted %d\n", admitted);
    return admitted == n ? 0 : 1;
}

/* An open home whose directory is moved away and re-created by someone else: after a line on
 * stdin (the test has moved it), a new call must be counted in the directory the path names
 * now. Prints "held" once its first slot-holding call is admitted, then "admitted" or "FAIL". */
static int moved(const char* where, const char* provider)
{
    tollgate_error err;
    tollgate_home* home = NULL;
    tollgate_call* first = NULL;
    tollgate_call* second = NULL;
    if (tollgate_home_open(where, &home, &err) != TOLLGATE_OK
        || tollgate_call_new(home, provider, "mover", NULL, 0, 0, TOLLGATE_SLOT, &first, &err) != TOLLGATE_OK
        || tollgate_call_admit(first, 10000, &err) != TOLLGATE_OK) {
        printf("FAIL first: %s\n", err.message);
        return 1;
    }
    if (tollgate_call_settle(first, 0, 0, &err) != TOLLGATE_OK) {
        printf("FAIL settle: %s\n", err.message);
        return 1;
    }
    tollgate_call_free(first); /* its connection is kept by the home */
    printf("held\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 1;
    int rc = tollgate_call_new(home, provider, "mover", NULL, 0, 0, TOLLGATE_SLOT, &second, &err);
    if (rc == TOLLGATE_OK)
        rc = tollgate_call_admit(second, 0, &err);
    if (rc == TOLLGATE_OK)
        printf("admitted\n");
    else
        printf("refused %d: %s\n", rc, err.message);
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) /* the test has looked: let go */
        return 1;
    if (second)
        tollgate_call_free(second);
    tollgate_home_close(home);
    return 0;
}

static int http(const char* where, const char* provider)
{
    tollgate_error err;
    tollgate_home* home = NULL;
    tollgate_call* call = NULL;
    if (tollgate_home_open(where, &home, &err) != TOLLGATE_OK) {
        printf("FAIL open: %s\n", err.message);
        return 1;
    }
    static const char request[]
        = "{\"model\":\"claude-x\",\"max_tokens\":300,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    expect(tollgate_call_new_http(home, provider, "http", request, sizeof request - 1, &call, &err)
            == TOLLGATE_OK,
        "new_http", &err);
    expect(tollgate_call_tokens(call) >= 300, "the estimate holds max_tokens", &err);
    expect(tollgate_call_body(call, "x", 1, &err) == TOLLGATE_E_STATE, "a body before admission", &err);
    expect(tollgate_call_admit(call, 10000, &err) == TOLLGATE_OK, "admit", &err);
    expect(tollgate_call_finish(call, 0, &err) == TOLLGATE_E_STATE, "finish before the headers", &err);
    const char* names[] = { "Content-Type", "anthropic-ratelimit-requests-limit" };
    const char* values[] = { "application/json", "50" };
    expect(tollgate_call_headers(call, 200, names, values, 2, &err) == TOLLGATE_OK, "headers", &err);
    expect(
        tollgate_call_headers(call, 200, names, values, 2, &err) == TOLLGATE_E_STATE, "headers twice", &err);
    static const char part1[] = "{\"id\":\"x\",\"usage\":{\"input_tokens\":";
    static const char part2[] = "21,\"output_tokens\":9}}";
    expect(tollgate_call_body(call, part1, sizeof part1 - 1, &err) == TOLLGATE_OK, "body 1", &err);
    expect(tollgate_call_body(call, part2, sizeof part2 - 1, &err) == TOLLGATE_OK, "body 2", &err);
    expect(tollgate_call_finish(call, 0, &err) == TOLLGATE_OK, "finish", &err);
    tollgate_call_free(call);

    call = NULL;
    expect(tollgate_call_new_http(home, provider, "http", request, sizeof request - 1, &call, &err)
            == TOLLGATE_OK,
        "new_http", &err);
    expect(tollgate_call_admit(call, 10000, &err) == TOLLGATE_OK, "admit", &err);
    printf("estimate %lld\n", (long long)tollgate_call_tokens(call)); /* stands: a 429 has no usage */
    const char* names429[] = { "retry-after", "content-type" };
    const char* values429[] = { "4", "application/json" };
    expect(
        tollgate_call_headers(call, 429, names429, values429, 2, &err) == TOLLGATE_OK, "429 headers", &err);
    static const char body429[] = "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}";
    expect(tollgate_call_body(call, body429, sizeof body429 - 1, &err) == TOLLGATE_OK, "429 body", &err);
    expect(tollgate_call_finish(call, 0, &err) == TOLLGATE_OK, "429 finish", &err);
    tollgate_call_free(call);

    /* Hostile input: a NULL header, a status out of range, a body that is not JSON. */
    call = NULL;
    expect(tollgate_call_new_http(home, provider, "http", "\xff\x00not json", 10, &call, &err) == TOLLGATE_OK,
        "a body that is not JSON still gets an estimate", &err);
    expect(tollgate_call_headers(call, 200, names, NULL, 2, &err) == TOLLGATE_E_USAGE, "NULL values", &err);
    tollgate_call_free(call);
    expect(tollgate_call_new_http(home, provider, "http", NULL, 5, &call, &err) == TOLLGATE_E_USAGE,
        "NULL body", &err);
    tollgate_home_close(home);
    printf("%s\n", failures ? "http failed" : "http ok");
    return failures ? 1 : 0;
}

int main(int argc, char** argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 6 && strcmp(argv[1], "loop") == 0)
        return loop(argv[2], argv[3], argv[4], atoll(argv[5]));
    if (argc == 5 && strcmp(argv[1], "record") == 0)
        return record(argv[2], argv[3], argv[4]);
    if (argc == 4 && strcmp(argv[1], "checks") == 0)
        return checks(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "fork") == 0)
        return forked(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "moved") == 0)
        return moved(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "http") == 0)
        return http(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "status") == 0)
        return status(argv[2]);
    if (argc == 6 && strcmp(argv[1], "slots") == 0)
        return slots(argv[2], argv[3], atoi(argv[4]), atoll(argv[5]));
    fprintf(stderr, "usage: capiworker loop|record|checks|fork|http|status|slots ...\n");
    return 2;
}
