/* 3 Pthreads, 4 rounds each: a mutex-protected and a spinlock-protected update,
   then a barrier of the 3 threads; created and joined by the main thread. */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_spinlock_t spin;
static pthread_barrier_t barrier;
static long counter, spun;

static void *work(void *arg)
{
    (void)arg;
    for (int i = 0; i < 4; i++) {
        pthread_mutex_lock(&lock);
        counter++;
        pthread_mutex_unlock(&lock);
        pthread_spin_lock(&spin);
        spun++;
        pthread_spin_unlock(&spin);
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[3];
    pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
    pthread_barrier_init(&barrier, NULL, 3);
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("counter=%ld spun=%ld\n", counter, spun);
    return 0;
}
