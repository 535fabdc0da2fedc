/* microbench: n calls of an empty function, for the external tracer probe.
 *
 *   microbench N [EXTRA_NS]
 *
 * Calls an empty, non-inlined function N times and prints the loop's own time
 * as the last line of stdout ("loop_seconds 0.001234567"), so that
 * `calibrate overhead --timing stdout` can leave the tracer's start-up and
 * trace write-out out of the measurement.
 *
 * Built with a tracer that instruments functions (e.g. `scorep cc`), every call
 * writes two records, Enter and Leave: use --events-per-iteration 2.
 *
 * EXTRA_NS (default 0) makes every iteration last at least EXTRA_NS nanoseconds
 * longer by spinning on the clock: a fake "tracer" with a known cost, used by
 * the tests to check that the probe recovers an injected overhead. The spin
 * follows a running deadline, so reading the clock does not add up.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The instrumented function: empty, but a real call the compiler keeps. */
__attribute__((noinline)) void microbench_empty(void)
{
    __asm__ __volatile__("" ::: "memory");
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s N [EXTRA_NS]\n", argv[0]);
        return 2;
    }
    char *end;
    long long n = strtoll(argv[1], &end, 10);
    if (*end != '\0' || n < 0) {
        fprintf(stderr, "%s: N must be a non-negative integer, got '%s'\n", argv[0], argv[1]);
        return 2;
    }
    double extra = 0.0;
    if (argc == 3) {
        extra = strtod(argv[2], &end) * 1e-9;
        if (*end != '\0' || extra < 0) {
            fprintf(stderr, "%s: EXTRA_NS must be a number >= 0, got '%s'\n", argv[0], argv[2]);
            return 2;
        }
    }
    double t0 = now();
    if (extra > 0) {
        double deadline = t0;
        for (long long i = 0; i < n; i++) {
            microbench_empty();
            deadline += extra;
            while (now() < deadline) {
            }
        }
    } else {
        for (long long i = 0; i < n; i++)
            microbench_empty();
    }
    double t1 = now();
    printf("iterations %lld\nloop_seconds %.9f\n", n, t1 - t0);
    return 0;
}
