#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "progress.h"
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static long iters = 200000;
static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iters; i++) {
        pthread_mutex_lock(&lock);
        counter++;
        for (volatile int k = 0; k < 50; k++) {}
        pthread_mutex_unlock(&lock);
        for (volatile int k = 0; k < 50; k++) {}
        progress_tick(i);
    }
    return NULL;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    pthread_t t[64];
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    printf("%ld\n", counter);
    return 0;
}
