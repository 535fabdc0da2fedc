/* Deterministic compute kernel shared by the EZTrace real-run programs: a
 * fixed number of dependent floating-point operations, so that each
 * iteration's work is the same in the traced and the untraced run. */
#ifndef EZ_WORK_H
#define EZ_WORK_H
#include <stdlib.h>

static double ez_work(long n, double seed)
{
    double x = seed;
    for (long i = 0; i < n; i++)
        x = x * 0.999999 + 1e-7 * (double)(i & 7);
    return x;
}

/* Iterations and work per iteration from argv (defaults in the caller). */
static long ez_arg(int argc, char **argv, int i, long dflt)
{
    return argc > i ? atol(argv[i]) : dflt;
}
#endif
