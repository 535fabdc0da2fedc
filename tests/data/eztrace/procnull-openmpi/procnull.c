/* non-periodic halo: MPI_PROC_NULL neighbours, Sendrecv, Isend/Irecv to PROC_NULL, ANY_SOURCE/ANY_TAG, Waitsome with statuses */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  double a[8] = {0}, b[8];
  for (int it = 0; it < 3; it++) {
    MPI_Sendrecv(a, 8, MPI_DOUBLE, right, 0, b, 8, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Request r[4]; MPI_Status st[4]; int outc, outi[4], done = 0;
    MPI_Irecv(b, 8, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(b, 8, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &r[1]);
    MPI_Isend(a, 8, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &r[2]);
    MPI_Isend(a, 8, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &r[3]);
    while (done < 4) { MPI_Waitsome(4, r, &outc, outi, st); if (outc == MPI_UNDEFINED) break; done += outc; }
    if (left != MPI_PROC_NULL) MPI_Send(a, 1, MPI_DOUBLE, left, 7, MPI_COMM_WORLD);
    if (right != MPI_PROC_NULL) MPI_Recv(b, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(a, 1, MPI_DOUBLE, right, 8, MPI_COMM_WORLD);
    MPI_Recv(b, 1, MPI_DOUBLE, left, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
