/* pthreads.c timed by the program itself: each thread reads CLOCK_MONOTONIC
 * before its pthread_mutex_lock, after its pthread_mutex_unlock, and just before
 * and just after every pthread_barrier_wait; the program prints the mean round
 * and quantiles of four spans per round (both threads' rounds together):
 *   work:             from the return of the barrier call to the lock call;
 *   lock+unlock:      the two calls, contention included;
 *   waiter hand-over: from the last thread's clock before its barrier call to
 *                     the other thread's clock after its return (the wake-up);
 *   last own:         the last thread's own barrier call (it wakes the other).
 * The same spans traced and untraced say which part of a round tracing dilates.
 * Run untraced and traced in turn (docs/realrun.md, "pthreads"):
 *   gcc -O2 -pthread pthreads_handover.c -o handover
 *   ./handover 20000 400 && eztrace -t pthread ./handover 20000 400
 * Usage: pthreads_handover [ITERS=20000] [WORK=400] (two threads) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "work.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t barrier;
static double shared_sum;
static long iters, work;
static double *before[2], *after[2], *locking[2], *unlocked[2];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *run(void *arg)
{
    long id = (long)arg;
    for (long it = 0; it < iters; it++) {
        double r = ez_work(work, (double)id + shared_sum * 1e-12);
        locking[id][it] = now();
        pthread_mutex_lock(&lock);
        shared_sum += r;
        pthread_mutex_unlock(&lock);
        unlocked[id][it] = now();
        before[id][it] = now();
        pthread_barrier_wait(&barrier);
        after[id][it] = now();
    }
    return NULL;
}

static int ascending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void quantiles(const char *what, double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, ascending);
    printf("%-17s us: q05 %.3f q10 %.3f q25 %.3f q50 %.3f q75 %.3f\n", what,
           1e6 * v[n / 20], 1e6 * v[n / 10], 1e6 * v[n / 4], 1e6 * v[n / 2], 1e6 * v[3 * n / 4]);
}

int main(int argc, char **argv)
{
    iters = ez_arg(argc, argv, 1, 20000);
    work = ez_arg(argc, argv, 2, 400);
    if (iters < 20)
        return 2;
    size_t bytes = (size_t)iters * sizeof(double);
    double *handover = malloc(bytes), *own = malloc(bytes);
    double *busy = malloc(2 * bytes), *locked = malloc(2 * bytes);
    for (int i = 0; i < 2; i++) {
        before[i] = malloc(bytes);
        after[i] = malloc(bytes);
        locking[i] = malloc(bytes);
        unlocked[i] = malloc(bytes);
    }
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_t th[2];
    double t0 = now();
    for (long i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, run, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    printf("loop_seconds %.9f\n", now() - t0);
    for (long it = 0; it < iters; it++) {
        int last = before[0][it] > before[1][it] ? 0 : 1;
        handover[it] = after[1 - last][it] - before[last][it];
        own[it] = after[last][it] - before[last][it];
    }
    long n = 0;
    for (int i = 0; i < 2; i++)
        for (long it = 1; it < iters; it++, n++) {
            busy[n] = locking[i][it] - after[i][it - 1];
            locked[n] = unlocked[i][it] - locking[i][it];
        }
    printf("mean round us %.3f\n", 1e6 * (after[0][iters - 1] - after[0][0]) / (double)(iters - 1));
    quantiles("work", busy, n);
    quantiles("lock+unlock", locked, n);
    quantiles("waiter hand-over", handover, iters);
    quantiles("last own", own, iters);
    return 0;
}
