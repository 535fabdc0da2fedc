/* The blocking MPI token ring's loop, shared by ring.c (called from main) and
 * commring.c (called from a communication thread): ITERS rounds of
 * MPI_Send/MPI_Recv around all ranks, WORK floating-point steps before each send,
 * timed in parts (parts.h); prints "NAME tok=... acc=..." on rank 0. */
#ifndef EZ_RINGLOOP_H
#define EZ_RINGLOOP_H
#include <mpi.h>
#include <stdio.h>
#include "work.h"
#include "parts.h"

static void ez_ring(const char *name, long iters, long work)
{
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
        printf("%s tok=%g acc=%g\n", name, tok, acc);
}
#endif
