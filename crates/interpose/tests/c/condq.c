/* A bounded queue (4 slots) between one producer and one consumer,
 * guarded by one mutex and two condition variables: a lost wake-up hangs
 * it, a broken mutex corrupts the sum. Prints the count and the sum. */
#include <pthread.h>
#include <stdio.h>
#include "progress.h"

#define SLOTS 4
#define ITEMS 100000L

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static long ring[SLOTS];
static int head, len;

static void *producer(void *arg) {
    (void)arg;
    for (long i = 1; i <= ITEMS; i++) {
        pthread_mutex_lock(&m);
        while (len == SLOTS) pthread_cond_wait(&not_full, &m);
        ring[(head + len) % SLOTS] = i;
        len++;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&m);
        progress_tick(i);
    }
    return NULL;
}

int main(void) {
    pthread_t p;
    pthread_create(&p, NULL, producer, NULL);
    long sum = 0, n = 0;
    while (n < ITEMS) {
        pthread_mutex_lock(&m);
        while (len == 0) pthread_cond_wait(&not_empty, &m);
        sum += ring[head];
        head = (head + 1) % SLOTS;
        len--;
        n++;
        pthread_cond_broadcast(&not_full);
        pthread_mutex_unlock(&m);
    }
    pthread_join(p, NULL);
    printf("%ld %ld\n", n, sum);
    return 0;
}
