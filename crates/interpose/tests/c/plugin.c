/* A shared object with a statically initialised mutex, for the dlclose
 * test of safety.c: each load starts from a fresh copy of its data. */
#include <pthread.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long count;

static void *bump(void *arg) {
  long n = (long)arg;
  for (long i = 0; i < n; i++) {
    pthread_mutex_lock(&m);
    count++;
    pthread_mutex_unlock(&m);
  }
  return 0;
}

/* `threads` threads add 1 `n` times each; returns the total. */
long plugin_count(int threads, long n) {
  pthread_t t[8];
  for (int i = 0; i < threads; i++) pthread_create(&t[i], 0, bump, (void *)n);
  for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
  return count;
}
