/* Waves of short-lived threads, each contending on every one of 12
 * mutexes: in profile mode a thread waits on more mutexes than it keeps
 * histogram shards for, and each wave's threads take over the shards the
 * last wave's threads gave back at exit. Prints the total. */
#include <pthread.h>
#include "progress.h"
#include <stdio.h>

#define MUTEXES 12
#define WAVES 20
#define PER_WAVE 8
#define ROUNDS 2000L

static pthread_mutex_t m[MUTEXES];
static long count[MUTEXES];

static void *work(void *arg) {
  long id = (long)arg;
  for (long r = 0; r < ROUNDS; r++) {
    int k = (int)((id + r) % MUTEXES);
    pthread_mutex_lock(&m[k]);
    count[k]++;
    pthread_mutex_unlock(&m[k]);
    progress_tick(r);
  }
  return NULL;
}

int main(void) {
  for (int k = 0; k < MUTEXES; k++) pthread_mutex_init(&m[k], NULL);
  for (int w = 0; w < WAVES; w++) {
    pthread_t t[PER_WAVE];
    for (long i = 0; i < PER_WAVE; i++) pthread_create(&t[i], NULL, work, (void *)(w * PER_WAVE + i));
    for (int i = 0; i < PER_WAVE; i++) pthread_join(t[i], NULL);
  }
  long total = 0;
  for (int k = 0; k < MUTEXES; k++) total += count[k];
  printf("%ld\n", total);
  return 0;
}
