/* 2 Pthreads, 3 rounds each: a pthread_mutex_trylock-protected update (EZTrace
   records its return value), a spinlock-protected update, a barrier of the 2. */
#include <pthread.h>
#include <stdio.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_spinlock_t s;
static pthread_barrier_t b;
static long c;
static void *w(void *a){ for(int i=0;i<3;i++){ if(pthread_mutex_trylock(&m)==0){c++;pthread_mutex_unlock(&m);} pthread_spin_lock(&s); c++; pthread_spin_unlock(&s); pthread_barrier_wait(&b);} return a;}
int main(void){ pthread_t t[2]; pthread_spin_init(&s,0); pthread_barrier_init(&b,NULL,2);
for(long i=0;i<2;i++) pthread_create(&t[i],NULL,w,(void*)i); for(int i=0;i<2;i++) pthread_join(t[i],NULL); printf("%ld\n",c); return 0;}
