/* 2 ranks x 2 OpenMP threads: 6 rounds of work (the second thread does twice
 * the first's) and an MPI_Allreduce in `omp single` (MPI_THREAD_SERIALIZED):
 * whichever thread arrives first makes the rank's call, so a rank's collectives
 * lie on both of its threads. */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
static volatile double sink;
int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double x = rank, s = 0;
    #pragma omp parallel
    {
        for (int r = 0; r < 6; r++) {
            double w = 0;
            for (int i = 0; i < 20000 * (omp_get_thread_num() + 1); i++) w += i * 0.5;
            sink = w;
            #pragma omp single
            MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    MPI_Finalize();
    if (rank == 0) printf("ok %g\n", s);
    return 0;
}
