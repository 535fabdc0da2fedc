/* 2 ranks: MPI from two threads of each process, one after the other
 * (MPI_THREAD_SERIALIZED): the main thread calls MPI_Barrier, then a Pthread
 * calls MPI_Allreduce and MPI_Bcast. A rank's MPI records lie on two locations. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
static int rank;
static void *comm_thread(void *arg) {
    double x = rank, s = 0;
    (void)arg;
    for (int r = 0; r < 3; r++) {
        MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Bcast(&s, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    }
    return NULL;
}
int main(int argc, char **argv) {
    int provided;
    pthread_t th;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    pthread_create(&th, NULL, comm_thread, NULL);
    pthread_join(th, NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
