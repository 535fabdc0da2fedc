#include <mpi.h>
#include <omp.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int provided, rank; double s = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  omp_set_max_active_levels(2);
  for (int it = 0; it < 3; it++) {
#pragma omp parallel num_threads(2) reduction(+:s)
    {
#pragma omp parallel num_threads(2) reduction(+:s)
      { for (int i = 0; i < 20000; i++) s += i * 1e-9; }
    }
    MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  if (rank == 0) printf("%f\n", s);
  MPI_Finalize();
}
