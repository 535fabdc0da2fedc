/* eztrace_pthread_probe: per-record cost of EZTrace's Pthread module.
 *
 *   eztrace_pthread_probe VARIANT N
 *
 * EZTrace's `pthread` module cannot trace an MPI program here (with `mpich` it
 * hangs in MPI_Init, alone it aborts at the end), so its calls are measured by
 * this plain C program, run untraced (`./eztrace_pthread_probe mutex 20000`) and
 * traced (`eztrace -t pthread ./eztrace_pthread_probe mutex 20000`). One thread,
 * so no call ever waits for another: the loop time is the calls' own cost plus,
 * traced, the records' cost. The loop runs in CHUNKS equal parts, each timed;
 * the loop time is CHUNKS times the median part, printed as the last line of
 * stdout ("loop_seconds 0.001234"), as eztrace_probe.c does. Variants and the
 * records EZTrace 2.0 writes per iteration (calibration/eztrace.py counts them):
 *
 *   mutex     pthread_mutex_lock, one addition,     Enter, Leave of pthread_mutex_lock
 *             pthread_mutex_unlock                  and of pthread_mutex_unlock (the
 *                                                   mutex's address on each Enter)
 *   pbarrier  pthread_barrier_wait on a barrier of  Enter, Leave of pthread_barrier_wait
 *             one thread (it returns at once)       (the barrier's address on the Enter)
 *
 * A barrier of two threads is not a variant: on this kind of machine the time
 * a waiting thread takes to wake varies over a factor of 3 between runs, more
 * than the records add, and it ran faster traced as often as slower.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNKS 21

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t barrier;
static volatile double sink;

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void loop(int mutex_variant, long n)
{
    for (long i = 0; i < n; i++) {
        if (mutex_variant) {
            pthread_mutex_lock(&mutex);
            sink = sink + 1.0;
            pthread_mutex_unlock(&mutex);
        } else {
            pthread_barrier_wait(&barrier);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "mutex") != 0 && strcmp(argv[1], "pbarrier") != 0)) {
        fprintf(stderr, "usage: eztrace_pthread_probe mutex|pbarrier N\n");
        return 2;
    }
    int mutex_variant = strcmp(argv[1], "mutex") == 0;
    long n = atol(argv[2]);
    pthread_barrier_init(&barrier, NULL, 1);
    loop(mutex_variant, n / 10 + 1); /* warm up: first-call costs, pages */
    double part[CHUNKS];
    for (int c = 0; c < CHUNKS; c++) {
        double t0 = now();
        loop(mutex_variant, n / CHUNKS);
        part[c] = now() - t0;
    }
    qsort(part, CHUNKS, sizeof part[0], by_value);
    printf("loop_seconds %.9f\n", part[CHUNKS / 2] * CHUNKS);
    return 0;
}
