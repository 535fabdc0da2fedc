/* held-out style: persistent requests, Waitany/Waitsome/Testall, Probe, Bsend/Rsend,
 * Sendrecv_replace, v-collectives, Reduce_scatter, Exscan, Comm_dup, RMA fence, Ialltoall */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  int peer = (rank + 1) % size, from = (rank + size - 1) % size;
  double a[64], b[64]; for (int i = 0; i < 64; i++) a[i] = rank + i;
  MPI_Comm dup; MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Request pr[2];
  MPI_Send_init(a, 8, MPI_DOUBLE, peer, 5, dup, &pr[0]);
  MPI_Recv_init(b, 8, MPI_DOUBLE, from, 5, dup, &pr[1]);
  for (int it = 0; it < 4; it++) {
    MPI_Startall(2, pr);
    int idx; MPI_Waitany(2, pr, &idx, MPI_STATUS_IGNORE);
    MPI_Wait(&pr[1 - idx], MPI_STATUS_IGNORE);
  }
  MPI_Request_free(&pr[0]); MPI_Request_free(&pr[1]);
  MPI_Request r[4]; int outc, outi[4];
  MPI_Irecv(b, 4, MPI_DOUBLE, from, 1, MPI_COMM_WORLD, &r[0]);
  MPI_Irecv(b + 4, 4, MPI_DOUBLE, from, 2, MPI_COMM_WORLD, &r[1]);
  MPI_Isend(a, 4, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD, &r[2]);
  MPI_Isend(a, 4, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD, &r[3]);
  int done = 0, flag = 0;
  while (done < 4) { MPI_Waitsome(4, r, &outc, outi, MPI_STATUSES_IGNORE); if (outc == MPI_UNDEFINED) break; done += outc; }
  MPI_Testall(4, r, &flag, MPI_STATUSES_IGNORE);
  if (rank == 0) { MPI_Send(a, 3, MPI_DOUBLE, 1, 9, MPI_COMM_WORLD); }
  if (rank == 1) { MPI_Status st; int n; MPI_Probe(0, 9, MPI_COMM_WORLD, &st); MPI_Get_count(&st, MPI_DOUBLE, &n); MPI_Recv(b, n, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
  int bsz = 1024 + MPI_BSEND_OVERHEAD; void *buf = malloc(bsz); MPI_Buffer_attach(buf, bsz);
  if (rank == 0) MPI_Bsend(a, 2, MPI_DOUBLE, 1, 3, MPI_COMM_WORLD);
  if (rank == 1) MPI_Recv(b, 2, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Buffer_detach(&buf, &bsz); free(buf);
  if (rank == 1) { MPI_Request q; MPI_Irecv(b, 2, MPI_DOUBLE, 0, 4, MPI_COMM_WORLD, &q); MPI_Barrier(MPI_COMM_WORLD); MPI_Wait(&q, MPI_STATUS_IGNORE); }
  else { MPI_Barrier(MPI_COMM_WORLD); if (rank == 0) MPI_Rsend(a, 2, MPI_DOUBLE, 1, 4, MPI_COMM_WORLD); }
  MPI_Sendrecv_replace(a, 4, MPI_DOUBLE, peer, 6, from, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int cnt[16], disp[16]; for (int i = 0; i < size; i++) { cnt[i] = 2; disp[i] = 2 * i; }
  MPI_Gatherv(a, 2, MPI_DOUBLE, b, cnt, disp, MPI_DOUBLE, 0, dup);
  MPI_Scatterv(a, cnt, disp, MPI_DOUBLE, b, 2, MPI_DOUBLE, 1 % size, dup);
  MPI_Allgatherv(a, 2, MPI_DOUBLE, b, cnt, disp, MPI_DOUBLE, dup);
  MPI_Reduce_scatter(a, b, cnt, MPI_DOUBLE, MPI_SUM, dup);
  MPI_Exscan(a, b, 2, MPI_DOUBLE, MPI_SUM, dup);
  MPI_Request ia; MPI_Ialltoall(a, 2, MPI_DOUBLE, b, 2, MPI_DOUBLE, dup, &ia); MPI_Wait(&ia, MPI_STATUS_IGNORE);
  MPI_Win win; MPI_Win_create(b, 64 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_fence(0, win); MPI_Put(a, 4, MPI_DOUBLE, peer, 0, 4, MPI_DOUBLE, win); MPI_Win_fence(0, win);
  MPI_Get(a, 4, MPI_DOUBLE, peer, 8, 4, MPI_DOUBLE, win); MPI_Win_fence(0, win);
  MPI_Win_free(&win);
  MPI_Comm_free(&dup);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("ok\n");
  MPI_Finalize();
  return 0;
}
