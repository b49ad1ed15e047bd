/* Reader-writer and spin locks under contention: one writer and N readers
 * (argv[1], default 2) on one pthread_rwlock_t, every thread also on one
 * pthread_spinlock_t, each lock held for a few microseconds of arithmetic
 * so that waits happen even on a loaded 2-core machine; then the try and
 * timed forms, failing and succeeding. Prints counters and results that
 * are the same on every run, with and without the library. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "progress.h"

#define WRITES 30000
#define READS 30000

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t spin;
/* Written together under the write lock: a reader sees them equal. */
static long first, second;
static long spun;
static long torn;

static void work(int n) {
    for (volatile int k = 0; k < n; k++) {}
}

static void spin_step(long i) {
    /* Every 64th step tries first, as a polling caller would. */
    if ((i & 63) != 0 || pthread_spin_trylock(&spin) != 0) pthread_spin_lock(&spin);
    spun++;
    work(1000);
    pthread_spin_unlock(&spin);
}

static void *writer(void *arg) {
    (void)arg;
    for (long i = 0; i < WRITES; i++) {
        if ((i & 63) != 0 || pthread_rwlock_trywrlock(&rw) != 0) pthread_rwlock_wrlock(&rw);
        first++;
        work(3000);
        second++;
        pthread_rwlock_unlock(&rw);
        spin_step(i);
        work(3000);
        progress_tick(i);
    }
    return NULL;
}

static void *reader(void *arg) {
    long *seen = arg;
    for (long i = 0; i < READS; i++) {
        if ((i & 63) != 0 || pthread_rwlock_tryrdlock(&rw) != 0) pthread_rwlock_rdlock(&rw);
        long a = first;
        work(1500);
        if (second != a) __atomic_fetch_add(&torn, 1, __ATOMIC_RELAXED);
        *seen += 1;
        pthread_rwlock_unlock(&rw);
        spin_step(i);
        work(3000);
        progress_tick(i);
    }
    return NULL;
}

static struct timespec after_ms(long ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms * 1000 * 1000;
    ts.tv_sec += ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    return ts;
}

/* What a helper holds for 20 ms while the main thread waits for it. */
enum hold { READ, WRITE, SPIN };
static int taken;
static void *holder(void *arg) {
    enum hold what = *(enum hold *)arg;
    if (what == READ) pthread_rwlock_rdlock(&rw);
    if (what == WRITE) pthread_rwlock_wrlock(&rw);
    if (what == SPIN) pthread_spin_lock(&spin);
    __atomic_store_n(&taken, 1, __ATOMIC_RELEASE);
    struct timespec d = {0, 20 * 1000 * 1000};
    nanosleep(&d, NULL);
    if (what == SPIN) pthread_spin_unlock(&spin); else pthread_rwlock_unlock(&rw);
    return NULL;
}

/* Starts a helper holding `*what` and returns once it holds it. */
static void hold_in_helper(pthread_t *t, enum hold *what) {
    __atomic_store_n(&taken, 0, __ATOMIC_RELAXED);
    pthread_create(t, NULL, holder, what);
    while (!__atomic_load_n(&taken, __ATOMIC_ACQUIRE)) sched_yield();
}

static void *try_while_held(void *arg) {
    (void)arg;
    /* The main thread holds the write lock. */
    struct timespec ts = after_ms(10);
    printf("tryrdlock of a written rwlock is EBUSY: %d\n", pthread_rwlock_tryrdlock(&rw) == EBUSY);
    printf("timedrdlock of a written rwlock is ETIMEDOUT: %d\n",
           pthread_rwlock_timedrdlock(&rw, &ts) == ETIMEDOUT);
    printf("spin trylock of a held spinlock is EBUSY: %d\n", pthread_spin_trylock(&spin) == EBUSY);
    return NULL;
}

static void *try_while_read(void *arg) {
    (void)arg;
    /* The main thread holds a read lock. */
    struct timespec ts = after_ms(10);
    printf("trywrlock of a read rwlock is EBUSY: %d\n", pthread_rwlock_trywrlock(&rw) == EBUSY);
    printf("timedwrlock of a read rwlock is ETIMEDOUT: %d\n",
           pthread_rwlock_timedwrlock(&rw, &ts) == ETIMEDOUT);
    int r = pthread_rwlock_tryrdlock(&rw);
    printf("tryrdlock of a read rwlock: %d\n", r);
    if (r == 0) pthread_rwlock_unlock(&rw);
    return NULL;
}

int main(int argc, char **argv) {
    int readers = argc > 1 ? atoi(argv[1]) : 2;
    if (readers < 1 || readers > 63) readers = 2;
    pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
    pthread_t t[64];
    long seen[64] = {0};
    pthread_create(&t[0], NULL, writer, NULL);
    for (int i = 1; i <= readers; i++) pthread_create(&t[i], NULL, reader, &seen[i]);
    long reads = 0;
    for (int i = 0; i <= readers; i++) {
        pthread_join(t[i], NULL);
        reads += seen[i];
    }
    printf("writes: %ld %ld\n", first, second);
    printf("reads: %ld torn: %ld\n", reads, torn);
    printf("spin steps: %ld\n", spun);

    pthread_t h;
    pthread_rwlock_wrlock(&rw);
    pthread_spin_lock(&spin);
    pthread_create(&h, NULL, try_while_held, NULL);
    pthread_join(h, NULL);
    pthread_spin_unlock(&spin);
    pthread_rwlock_unlock(&rw);

    pthread_rwlock_rdlock(&rw);
    pthread_create(&h, NULL, try_while_read, NULL);
    pthread_join(h, NULL);
    pthread_rwlock_unlock(&rw);

    /* Each form waits for a helper's 20 ms hold and then acquires: a
     * contended acquisition in every run, however the loops above ran. */
    static enum hold read = READ, write = WRITE, spinning = SPIN;
    struct timespec ts = after_ms(10000);
    hold_in_helper(&h, &write);
    int r = pthread_rwlock_timedrdlock(&rw, &ts);
    printf("timedrdlock after the writer lets go: %d\n", r);
    if (r == 0) pthread_rwlock_unlock(&rw);
    pthread_join(h, NULL);
    hold_in_helper(&h, &read);
    r = pthread_rwlock_timedwrlock(&rw, &ts);
    printf("timedwrlock after the reader lets go: %d\n", r);
    if (r == 0) pthread_rwlock_unlock(&rw);
    pthread_join(h, NULL);
    hold_in_helper(&h, &write);
    r = pthread_rwlock_rdlock(&rw);
    printf("rdlock after the writer lets go: %d\n", r);
    pthread_rwlock_unlock(&rw);
    pthread_join(h, NULL);
    hold_in_helper(&h, &read);
    r = pthread_rwlock_wrlock(&rw);
    printf("wrlock after the reader lets go: %d\n", r);
    pthread_rwlock_unlock(&rw);
    pthread_join(h, NULL);
    hold_in_helper(&h, &spinning);
    r = pthread_spin_lock(&spin);
    printf("spin lock after the holder lets go: %d\n", r);
    pthread_spin_unlock(&spin);
    pthread_join(h, NULL);

    pthread_spin_destroy(&spin);
    pthread_rwlock_destroy(&rw);
    return 0;
}
