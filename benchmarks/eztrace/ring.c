/* Blocking MPI token ring: ITERS rounds of MPI_Send/MPI_Recv around all
 * ranks, WORK floating-point steps before each send (the loop: ringloop.h).
 * Usage: ring [ITERS=2000] [WORK=40000] */
#include <mpi.h>
#include "ringloop.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    ez_ring("ring", ez_arg(argc, argv, 1, 2000), ez_arg(argc, argv, 2, 40000));
    MPI_Finalize();
    return 0;
}
