/* 2 ranks: every MPI call from one Pthread per rank (a communication thread;
 * MPI_THREAD_SERIALIZED), the main thread only initialises, creates and joins
 * it: blocking MPI_Send/MPI_Recv, MPI_Isend/MPI_Irecv completed by MPI_Waitall,
 * MPI_Allreduce, a little work between. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
static int rank, size;
static volatile double sink;
static void work(int n) { for (int i = 0; i < n; i++) sink += i * 0.5; }
static void *comm_thread(void *arg) {
    double out = rank, in = 0, s = 0;
    int peer = (rank + 1) % size;
    MPI_Request req[2];
    MPI_Status st[2];
    (void)arg;
    for (int r = 0; r < 4; r++) {
        work(20000 * (rank + 1));
        if (rank == 0) {
            MPI_Send(&out, 1, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(&in, 1, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&in, 1, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&out, 1, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD);
        }
        MPI_Irecv(&in, 1, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(&out, 1, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD, &req[1]);
        work(10000);
        MPI_Waitall(2, req, st);
        MPI_Allreduce(&in, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    return NULL;
}
int main(int argc, char **argv) {
    int provided;
    pthread_t th;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    pthread_create(&th, NULL, comm_thread, NULL);
    pthread_join(th, NULL);
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
