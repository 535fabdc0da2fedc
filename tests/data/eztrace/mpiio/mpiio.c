/* 2 ranks: MPI-IO and POSIX I/O. Each rank writes its block of a shared file
 * with MPI_File_write_at_all (collective) and MPI_File_write_at, sets a strided
 * view with a vector datatype, reads it back with MPI_File_read_all, closes it;
 * then rank 0 writes a small text file with fopen/fwrite/fclose and broadcasts
 * its size; MPI_Allgatherv of the block sums. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#define B 256
int main(int argc, char **argv) {
    int rank, size, i, it;
    double buf[B], back[B], sums[2];
    MPI_File fh;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Datatype strided;
    MPI_Type_vector(B / 8, 8, 8 * size, MPI_DOUBLE, &strided);
    MPI_Type_commit(&strided);
    for (it = 0; it < 3; it++) {
        for (i = 0; i < B; i++) buf[i] = rank * 1000 + i + it;
        MPI_File_open(MPI_COMM_WORLD, "mpiio.dat", MPI_MODE_CREATE | MPI_MODE_RDWR,
                      MPI_INFO_NULL, &fh);
        MPI_File_write_at_all(fh, (MPI_Offset)rank * B * sizeof(double), buf, B, MPI_DOUBLE,
                              MPI_STATUS_IGNORE);
        MPI_File_write_at(fh, (MPI_Offset)(size + rank) * B * sizeof(double), buf, B,
                          MPI_DOUBLE, MPI_STATUS_IGNORE);
        MPI_File_sync(fh);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_File_set_view(fh, (MPI_Offset)rank * 8 * sizeof(double), MPI_DOUBLE, strided,
                          "native", MPI_INFO_NULL);
        MPI_File_read_all(fh, back, B, MPI_DOUBLE, MPI_STATUS_IGNORE);
        MPI_File_close(&fh);
        double s = 0;
        for (i = 0; i < B; i++) s += back[i];
        long len = 0;
        if (rank == 0) {
            FILE *f = fopen("posix.txt", "w");
            for (i = 0; i < 16; i++) fprintf(f, "%d %g\n", i, s);
            fclose(f);
            f = fopen("posix.txt", "r");
            char line[64];
            while (fgets(line, sizeof line, f)) len++;
            fclose(f);
        }
        MPI_Bcast(&len, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        int rc[2] = {1, 1}, rd[2] = {0, 1};
        MPI_Allgatherv(&s, 1, MPI_DOUBLE, sums, rc, rd, MPI_DOUBLE, MPI_COMM_WORLD);
    }
    MPI_Type_free(&strided);
    MPI_Finalize();
    if (rank == 0) printf("ok %g %g\n", sums[0], sums[1]);
    return 0;
}
