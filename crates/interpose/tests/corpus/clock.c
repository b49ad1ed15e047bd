/* pthread_mutex_clocklock and pthread_cond_clockwait (glibc 2.30) on
 * both clocks, and pthread_mutex_timedlock and pthread_cond_timedwait:
 * timing out while another thread holds the mutex, succeeding after. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static volatile int stage;

static struct timespec in(clockid_t clock, long ms) {
    struct timespec t;
    clock_gettime(clock, &t);
    t.tv_nsec += ms * 1000000L;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

static void *holder(void *arg) {
    (void)arg;
    pthread_mutex_lock(&m);
    __atomic_store_n(&stage, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&stage, __ATOMIC_SEQ_CST) != 2) usleep(100);
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, holder, NULL);
    while (__atomic_load_n(&stage, __ATOMIC_SEQ_CST) != 1) usleep(100);
    struct timespec r = in(CLOCK_REALTIME, 2), mo = in(CLOCK_MONOTONIC, 2);
    printf("clocklock realtime while held is ETIMEDOUT: %d\n",
           pthread_mutex_clocklock(&m, CLOCK_REALTIME, &r) == ETIMEDOUT);
    printf("clocklock monotonic while held is ETIMEDOUT: %d\n",
           pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &mo) == ETIMEDOUT);
    r = in(CLOCK_REALTIME, 2);
    printf("timedlock while held is ETIMEDOUT: %d\n", pthread_mutex_timedlock(&m, &r) == ETIMEDOUT);
    printf("clocklock with a bad clock is EINVAL: %d\n",
           pthread_mutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, &r) == EINVAL);
    __atomic_store_n(&stage, 2, __ATOMIC_SEQ_CST);
    mo = in(CLOCK_MONOTONIC, 30000);
    printf("clocklock after release: %d\n", pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &mo));
    pthread_join(t, NULL);
    int timeouts = 0;
    for (int i = 0; i < 5; i++) {
        struct timespec a = in(CLOCK_MONOTONIC, 1), b = in(CLOCK_REALTIME, 1);
        timeouts += pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &a) == ETIMEDOUT;
        timeouts += pthread_cond_clockwait(&c, &m, CLOCK_REALTIME, &b) == ETIMEDOUT;
        b = in(CLOCK_REALTIME, 1);
        timeouts += pthread_cond_timedwait(&c, &m, &b) == ETIMEDOUT;
    }
    printf("cond waits that timed out: %d of 15\n", timeouts);
    printf("unlock after the waits: %d\n", pthread_mutex_unlock(&m));
    return 0;
}
