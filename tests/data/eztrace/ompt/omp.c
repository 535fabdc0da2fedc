/* OpenMP: 2 threads, 3 parallel regions (a worksharing loop with its implicit
   barrier, a critical section, an explicit barrier). */
#include <omp.h>
#include <stdio.h>

int main(void)
{
    double sum = 0;
    int hits = 0;
    for (int rep = 0; rep < 3; rep++) {
#pragma omp parallel num_threads(2)
        {
#pragma omp for reduction(+:sum)
            for (int i = 0; i < 1000; i++)
                sum += i * 0.5;
#pragma omp critical
            hits++;
#pragma omp barrier
        }
    }
    printf("sum=%g hits=%d\n", sum, hits);
    return 0;
}
