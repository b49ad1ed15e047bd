/* A shared object whose constructor starts two threads that contend on a
 * mutex at once, for safety.c's `early` case: preloaded beside the
 * library, its threads call pthread_mutex_lock while the dynamic loader
 * may not have run the library's own constructor yet. */
#include <pthread.h>
#include "progress.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long count;
static pthread_t t[2];
static int started;

static void *bump(void *arg) {
  (void)arg;
  for (long i = 0; i < 100000; i++) {
    pthread_mutex_lock(&m);
    count++;
    pthread_mutex_unlock(&m);
    progress_tick(i);
  }
  return 0;
}

__attribute__((constructor)) static void start(void) {
  for (int i = 0; i < 2; i++) started += pthread_create(&t[i], 0, bump, 0) == 0;
}

/* Joins the threads; returns their total (200000 when all went well). */
long early_wait(void) {
  for (int i = 0; i < started; i++) pthread_join(t[i], 0);
  return started == 2 ? count : -1;
}
