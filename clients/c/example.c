/* The README's C example (tests/tst_capi.cpp checks that the README holds this text, and
 * compiles and runs it; scripts/installcheck.sh compiles it against the installed library). */
#include <stdio.h>
#include <tollgate.h>

int main(int argc, char** argv)
{
    tollgate_error err;
    tollgate_home* home = NULL;
    if (tollgate_home_open(argc > 1 ? argv[1] : NULL, &home, &err) != TOLLGATE_OK) {
        fprintf(stderr, "tollgate: %s\n", err.message);
        return 1;
    }
    tollgate_call* call = NULL;
    /* One call to Anthropic: 1200 prompt tokens, at most 800 out, holding a parallel slot. */
    int rc = tollgate_call_new(
        home, "anthropic", "nightly", "claude-sonnet-4-5", 1200, 800, TOLLGATE_SLOT, &call, &err);
    if (rc == TOLLGATE_OK)
        rc = tollgate_call_admit(call, 30000, &err); /* wait for room, 30 s at most */
    if (rc == TOLLGATE_OK) {
        /* ... the request to the provider goes here; it answered with its usage: ... */
        rc = tollgate_call_settle(call, 1187, 412, &err);
    }
    if (rc != TOLLGATE_OK)
        fprintf(stderr, "tollgate: %s (%s)\n", err.message, tollgate_status_name(rc));
    tollgate_call_free(call);
    tollgate_home_close(home);
    return rc == TOLLGATE_OK ? 0 : 1;
}
