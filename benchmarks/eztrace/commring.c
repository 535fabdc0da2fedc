/* The blocking MPI token ring of ring.c (ringloop.h), every MPI call from one
 * Pthread per rank (a communication thread, MPI_THREAD_SERIALIZED): the main
 * thread only initialises MPI, creates and joins the thread. EZTrace lists each
 * rank's main thread in MPI_COMM_WORLD and records the calls on the thread's
 * location; the reader takes the thread as the rank (docs/design.md §4).
 * Usage: commring [ITERS=2000] [WORK=40000] */
#include <mpi.h>
#include <pthread.h>
#include "ringloop.h"

static long iters, work;

static void *ring(void *arg)
{
    (void)arg;
    ez_ring("commring", iters, work);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    iters = ez_arg(argc, argv, 1, 2000);
    work = ez_arg(argc, argv, 2, 40000);
    pthread_t th;
    pthread_create(&th, NULL, ring, NULL);
    pthread_join(th, NULL);
    MPI_Finalize();
    return 0;
}
