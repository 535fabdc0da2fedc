/* 2 Pthreads, 4 rounds each of malloc, calloc, realloc and free of a buffer
 * and a mutex-protected sum, create/join: EZTrace's memory and pthread modules. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static double sum;

static void *run(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < 4; i++) {
        char *buf = malloc(1024 + (size_t)i);
        memset(buf, (int)id, 1024);
        double *d = calloc(16, sizeof(double));
        d[3] = (double)(i + id);
        buf = realloc(buf, 4096);
        pthread_mutex_lock(&lock);
        sum += d[3] + buf[5];
        pthread_mutex_unlock(&lock);
        free(d);
        free(buf);
    }
    return NULL;
}

int main(void)
{
    pthread_t th[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, run, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    printf("sum %g\n", sum);
    return 0;
}
