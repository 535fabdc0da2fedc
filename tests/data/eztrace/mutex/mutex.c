/* 2 Pthreads incrementing a counter under a mutex (20 times each), created
   and joined by the main thread. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter = 0;

static void *work(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++) {
        pthread_mutex_lock(&lock);
        counter++;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("counter=%ld\n", counter);
    return 0;
}
