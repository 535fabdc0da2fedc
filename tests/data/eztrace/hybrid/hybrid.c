/* MPI+OpenMP: each iteration an OpenMP parallel loop (static schedule, a
 * critical section per thread) computes a rank-local sum, then the ranks
 * MPI_Allreduce it (called by the master thread only: MPI_THREAD_FUNNELED).
 * Usage: hybrid [ITERS=400] [WORK=150000]; threads from OMP_NUM_THREADS. */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include "work.h"

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long iters = ez_arg(argc, argv, 1, 400), work = ez_arg(argc, argv, 2, 150000);
    double total = 0.0;
    MPI_Barrier(MPI_COMM_WORLD); /* the loop's start: both runs time from here */
    double t_start = MPI_Wtime();
    for (long it = 0; it < iters; it++) {
        double local = 0.0;
#pragma omp parallel
        {
            int nt = omp_get_num_threads();
            double mine = ez_work(work / nt, (double)omp_get_thread_num() + total * 1e-12);
#pragma omp critical
            local += mine;
        }
        MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* the loop's end */
    double t_loop = MPI_Wtime() - t_start;
    if (rank == 0)
        printf("loop_seconds %.9f\n", t_loop);
    if (rank == 0)
        printf("hybrid total=%g\n", total);
    MPI_Finalize();
    return 0;
}
