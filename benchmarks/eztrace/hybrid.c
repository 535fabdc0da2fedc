/* MPI+OpenMP: each iteration an OpenMP parallel loop (static schedule, a
 * critical section per thread) computes a rank-local sum, then the ranks
 * MPI_Allreduce it (called by the master thread only: MPI_THREAD_FUNNELED).
 * Usage: hybrid [ITERS=400] [WORK=150000]; threads from OMP_NUM_THREADS. */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include "work.h"
#include "parts.h"

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long iters = ez_arg(argc, argv, 1, 400), work = ez_arg(argc, argv, 2, 150000);
    double total = 0.0;
    long per = ez_per_part(iters);
    ez_parts parts;
    ez_parts_start(&parts); /* the loop's start: both runs time from here */
    for (long it = 0; it < per * EZ_PARTS; it++) {
        double local = 0.0;
#pragma omp parallel
        {
            int nt = omp_get_num_threads();
            double mine = ez_work(work / nt, (double)omp_get_thread_num() + total * 1e-12);
#pragma omp critical
            local += mine;
        }
        MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if ((it + 1) % per == 0)
            ez_parts_mark(&parts); /* a part's end; the last: the loop's end */
    }
    ez_parts_print(&parts, rank);
    if (rank == 0)
        printf("hybrid total=%g\n", total);
    MPI_Finalize();
    return 0;
}
