/* 2 ranks x 2 Pthreads, MPI_THREAD_MULTIPLE: each thread exchanges messages with
 * its twin on the other rank (tag = thread number), both threads of a rank send
 * to the other rank with one shared tag (which thread's message a receive takes
 * is then decided at run time), and each thread calls MPI_Allreduce on its own
 * MPI_Comm_dup of MPI_COMM_WORLD. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#define T 2
#define ROUNDS 5
static int rank;
static MPI_Comm comms[T];
static void *body(void *arg) {
    int t = (int)(long)arg, peer = 1 - rank, x = rank, y, s;
    for (int r = 0; r < ROUNDS; r++) {
        if (rank == 0) {
            MPI_Send(&x, 1, MPI_INT, peer, t, MPI_COMM_WORLD);
            MPI_Recv(&y, 1, MPI_INT, peer, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&y, 1, MPI_INT, peer, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&x, 1, MPI_INT, peer, t, MPI_COMM_WORLD);
        }
        if (rank == 0) MPI_Send(&x, 1, MPI_INT, peer, 99, MPI_COMM_WORLD);
        else MPI_Recv(&y, 1, MPI_INT, peer, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_SUM, comms[t]);
    }
    return NULL;
}
int main(int argc, char **argv) {
    int provided;
    pthread_t th[T];
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) { printf("no MPI_THREAD_MULTIPLE\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int t = 0; t < T; t++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    for (int t = 0; t < T; t++) pthread_create(&th[t], NULL, body, (void *)(long)t);
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < T; t++) MPI_Comm_free(&comms[t]);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
