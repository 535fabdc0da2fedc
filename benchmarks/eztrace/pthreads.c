/* Pthreads: NTHREADS threads run ITERS rounds; each round a thread computes
 * WORK steps, adds its result to a shared sum under a mutex, and waits at a
 * pthread barrier; the main thread joins them at the end.
 * Usage: pthreads [ITERS=1000] [WORK=100000] [NTHREADS=2] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "work.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t barrier;
static double shared_sum;
static long iters, work;

static void *run(void *arg)
{
    long id = (long)arg;
    for (long it = 0; it < iters; it++) {
        double r = ez_work(work, (double)id + shared_sum * 1e-12);
        pthread_mutex_lock(&lock);
        shared_sum += r;
        pthread_mutex_unlock(&lock);
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    iters = ez_arg(argc, argv, 1, 1000);
    work = ez_arg(argc, argv, 2, 100000);
    int n = (int)ez_arg(argc, argv, 3, 2);
    pthread_t th[64];
    if (n < 1 || n > 64)
        return 2;
    pthread_barrier_init(&barrier, NULL, (unsigned)n);
    struct timespec t0, t1; /* the loop: first pthread_create to last pthread_join */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++)
        pthread_create(&th[i], NULL, run, (void *)i);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("loop_seconds %.9f\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    printf("pthreads sum=%g\n", shared_sum);
    return 0;
}
