/* The blocking MPI token ring of ring.c, every MPI call from one Pthread per
 * rank (a communication thread, MPI_THREAD_SERIALIZED): the main thread only
 * initialises MPI, creates and joins the thread. EZTrace lists each rank's main
 * thread in MPI_COMM_WORLD and records the calls on the thread's location; the
 * reader takes the thread as the rank (docs/design.md §4).
 * Usage: commring [ITERS=2000] [WORK=40000] */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include "work.h"
#include "parts.h"

static long iters, work;

static void *ring(void *arg)
{
    (void)arg;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    double tok = 0.0, acc = 0.0;
    long per = ez_per_part(iters);
    ez_parts parts;
    ez_parts_start(&parts); /* the loop's start: both runs time from here */
    for (long it = 0; it < per * EZ_PARTS; it++) {
        if (rank == 0) {
            acc += ez_work(work, tok);
            MPI_Send(&tok, 1, MPI_DOUBLE, next, 0, MPI_COMM_WORLD);
            MPI_Recv(&tok, 1, MPI_DOUBLE, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&tok, 1, MPI_DOUBLE, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            acc += ez_work(work, tok);
            tok += 1.0;
            MPI_Send(&tok, 1, MPI_DOUBLE, next, 0, MPI_COMM_WORLD);
        }
        if ((it + 1) % per == 0)
            ez_parts_mark(&parts); /* a part's end; the last: the loop's end */
    }
    ez_parts_print(&parts, rank);
    if (rank == 0)
        printf("commring tok=%g acc=%g\n", tok, acc);
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
