/* A ring whose receives are MPI_Recv in most iterations and MPI_Irecv completed in
   MPI_Wait in every third: EZTrace 2.0 records no receive for the latter, so each
   channel has gaps among its recorded receives. PAUSE_US: the sleep between
   iterations (tests/data/eztrace/clockring: -DPAUSE_US=200). */
#include <mpi.h>
#include <unistd.h>
#ifndef PAUSE_US
#define PAUSE_US 50000
#endif
int main(int argc, char **argv) {
  int rank, size, buf[2] = {0}, in[2];
  MPI_Request rq;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int it = 0; it < 9; it++) {
    MPI_Send(buf, 2, MPI_INT, next, 1, MPI_COMM_WORLD);
    MPI_Send(buf, 2, MPI_INT, next, 1, MPI_COMM_WORLD);
    if (it % 3 == 2) {
      MPI_Irecv(in, 2, MPI_INT, prev, 1, MPI_COMM_WORLD, &rq);
      MPI_Wait(&rq, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(in, 2, MPI_INT, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Recv(in, 2, MPI_INT, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    usleep(PAUSE_US);
  }
  MPI_Finalize();
  return 0;
}
