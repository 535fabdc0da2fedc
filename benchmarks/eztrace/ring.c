/* Blocking MPI token ring: ITERS rounds of MPI_Send/MPI_Recv around all
 * ranks, WORK floating-point steps before each send.
 * Usage: ring [ITERS=2000] [WORK=40000] */
#include <mpi.h>
#include <stdio.h>
#include "work.h"
#include "parts.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long iters = ez_arg(argc, argv, 1, 2000), work = ez_arg(argc, argv, 2, 40000);
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
        printf("ring tok=%g acc=%g\n", tok, acc);
    MPI_Finalize();
    return 0;
}
