/* 2 ranks: all MPI communication from one Pthread per rank (a "communication
 * thread"; MPI_THREAD_SERIALIZED), the main thread only initialises, creates and
 * joins it: MPI_Allreduce, MPI_Bcast, MPI_Barrier on the thread's location. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
static int rank;
static void *comm_thread(void *arg) {
    double x = rank, s = 0;
    (void)arg;
    for (int r = 0; r < 5; r++) {
        MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Bcast(&s, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return NULL;
}
int main(int argc, char **argv) {
    int provided;
    pthread_t th;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    pthread_create(&th, NULL, comm_thread, NULL);
    pthread_join(th, NULL);
    MPI_Finalize();
    if (rank == 0) printf("ok\n");
    return 0;
}
