/* Which EZTrace records stop the streamed run from cutting?  MODE 0: MPI_Ibarrier +
   MPI_Wait; 1: MPI_Isend/MPI_Irecv + MPI_Waitall; 2: persistent Send_init/Recv_init +
   MPI_Startall + MPI_Waitall; 3: MPI_Iallreduce + MPI_Test loop; 4: blocking only.
   Each iteration ends in MPI_Barrier. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static void work(int n) { volatile double x = 0; for (int i = 0; i < n; i++) x += i * 0.5; }
int main(int argc, char **argv) {
  int mode = atoi(argv[1]), iters = atoi(argv[2]);
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  double s[4] = {1, 2, 3, 4}, r[4];
  MPI_Request q[2];
  if (mode == 2) {
    MPI_Send_init(s, 4, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &q[0]);
    MPI_Recv_init(r, 4, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &q[1]);
  }
  for (int it = 0; it < iters; it++) {
    work(20000);
    if (mode == 0) { MPI_Ibarrier(MPI_COMM_WORLD, &q[0]); MPI_Wait(&q[0], MPI_STATUS_IGNORE); }
    if (mode == 1) {
      MPI_Irecv(r, 4, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &q[0]);
      MPI_Isend(s, 4, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &q[1]);
      MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    }
    if (mode == 2) { MPI_Startall(2, q); MPI_Waitall(2, q, MPI_STATUSES_IGNORE); }
    if (mode == 3) {
      int flag = 0; MPI_Iallreduce(s, r, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[0]);
      while (!flag) { work(2000); MPI_Test(&q[0], &flag, MPI_STATUS_IGNORE); }
    }
    if (mode == 4) { MPI_Send(s, 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD); MPI_Recv(r, 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (mode == 2) { MPI_Request_free(&q[0]); MPI_Request_free(&q[1]); }
  MPI_Finalize();
  if (rank == 0) printf("ok\n");
  return 0;
}
