/* Mutex kinds whose semantics the interposition must keep: recursive,
 * error-checking, timed, try-lock, and a re-initialized mutex. Prints one
 * line per check; the output must be the same with and without the
 * library. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t robust;
static pthread_mutex_t go = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int ready;

static void *holder(void *arg) {
    (void)arg;
    pthread_mutex_lock(&held);
    pthread_mutex_lock(&go);
    ready = 1;
    pthread_cond_signal(&cond);
    while (ready != 2) pthread_cond_wait(&cond, &go);
    pthread_mutex_unlock(&go);
    pthread_mutex_unlock(&held);
    return NULL;
}

static void *die_holding(void *arg) {
    (void)arg;
    pthread_mutex_lock(&robust);
    return NULL; /* exits holding it */
}

int main(void) {
    pthread_mutexattr_t a;
    pthread_mutex_t rec, chk;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&rec, &a);
    printf("recursive lock: %d\n", pthread_mutex_lock(&rec));
    printf("recursive relock: %d\n", pthread_mutex_lock(&rec));
    int u1 = pthread_mutex_unlock(&rec);
    int u2 = pthread_mutex_unlock(&rec);
    printf("recursive unlock: %d %d\n", u1, u2);
    pthread_mutex_destroy(&rec);

    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&chk, &a);
    printf("errorcheck lock: %d\n", pthread_mutex_lock(&chk));
    printf("errorcheck relock is EDEADLK: %d\n", pthread_mutex_lock(&chk) == EDEADLK);
    printf("errorcheck unlock: %d\n", pthread_mutex_unlock(&chk));
    printf("errorcheck unlock again is EPERM: %d\n", pthread_mutex_unlock(&chk) == EPERM);
    pthread_mutex_destroy(&chk);
    /* The same storage, initialized again as a normal mutex. */
    pthread_mutex_init(&chk, NULL);
    /* (Sequenced: C leaves the order of a call's arguments open.) */
    int l1 = pthread_mutex_lock(&chk);
    int l2 = pthread_mutex_unlock(&chk);
    printf("reinitialized lock: %d %d\n", l1, l2);
    pthread_mutex_destroy(&chk);

    /* A robust mutex whose owner died: lock acquires it and says so. */
    pthread_mutexattr_t ra;
    pthread_mutexattr_init(&ra);
    pthread_mutexattr_setrobust(&ra, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&robust, &ra);
    pthread_t d;
    pthread_create(&d, NULL, die_holding, NULL);
    pthread_join(d, NULL);
    int rr = pthread_mutex_lock(&robust);
    printf("robust lock after its owner died is EOWNERDEAD: %d\n", rr == EOWNERDEAD);
    pthread_mutex_consistent(&robust);
    pthread_mutex_unlock(&robust);

    pthread_t t;
    pthread_create(&t, NULL, holder, NULL);
    pthread_mutex_lock(&go);
    while (!ready) pthread_cond_wait(&cond, &go);
    pthread_mutex_unlock(&go);
    printf("trylock of a held mutex is EBUSY: %d\n", pthread_mutex_trylock(&held) == EBUSY);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 20 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
    printf("timedlock of a held mutex is ETIMEDOUT: %d\n", pthread_mutex_timedlock(&held, &ts) == ETIMEDOUT);
    pthread_mutex_lock(&go);
    ready = 2;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&go);
    /* Blocks until the holder lets go: a contended acquisition. */
    printf("lock after release: %d\n", pthread_mutex_lock(&held));
    pthread_mutex_unlock(&held);
    pthread_join(t, NULL);
    return 0;
}
