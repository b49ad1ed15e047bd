/* C programs that reuse mutex memory: an error-checking mutex assigned
 * over a normal one, a heap chunk freed by one mutex and taken by another
 * of a different kind, pthread_mutex_init of a recursive mutex over a
 * normal one without destroy, and zeroed memory used as a mutex. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long counter;

static void *bump(void *arg) {
    pthread_mutex_t *m = arg;
    for (long i = 0; i < 20000; i++) {
        pthread_mutex_lock(m);
        counter++;
        pthread_mutex_unlock(m);
        if ((i & 0x3fff) == 0) (void)!write(2, ".", 1);
    }
    return NULL;
}

static long hammer(pthread_mutex_t *m) {
    pthread_t a, b;
    counter = 0;
    pthread_create(&a, NULL, bump, m);
    pthread_create(&b, NULL, bump, m);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return counter;
}

static void recursive_check(const char *what, pthread_mutex_t *m) {
    int a = pthread_mutex_lock(m), b = pthread_mutex_lock(m);
    int c = pthread_mutex_unlock(m), d = pthread_mutex_unlock(m);
    printf("%s: recursive %d %d %d %d, counted %ld\n", what, a, b, c, d, hammer(m));
}

static pthread_mutex_t normal_init = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t errorcheck_init = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t recursive_init = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

int main(void) {
    for (int round = 0; round < 3; round++) {
        pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        long n = hammer(&m);
        pthread_mutex_lock(&m); /* left locked, then overwritten */
        m = errorcheck_init;
        int a = pthread_mutex_lock(&m);
        int b = pthread_mutex_lock(&m) == EDEADLK;
        int c = pthread_mutex_unlock(&m);
        int d = pthread_mutex_unlock(&m) == EPERM;
        printf("errorcheck over normal %d: %ld; %d, EDEADLK %d, %d, EPERM %d\n", round, n, a, b, c, d);
        m = normal_init;
        printf("normal again %d: %ld\n", round, hammer(&m));
    }
    for (int round = 0; round < 3; round++) {
        pthread_mutex_t *m = malloc(sizeof *m);
        *m = normal_init;
        printf("heap normal %d: %ld\n", round, hammer(m));
        free(m);
        pthread_mutex_t *r = malloc(sizeof *r); /* likely the same chunk */
        *r = recursive_init;
        recursive_check("heap recursive", r);
        free(r);
    }
    pthread_mutex_t m;
    pthread_mutex_init(&m, NULL);
    printf("initialized normal: %ld\n", hammer(&m));
    pthread_mutexattr_t at;
    pthread_mutexattr_init(&at);
    pthread_mutexattr_settype(&at, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&m, &at); /* no destroy in between */
    recursive_check("initialized recursive over normal", &m);
    pthread_mutex_destroy(&m);
    pthread_mutex_init(&m, NULL);
    printf("initialized normal after destroy: %ld\n", hammer(&m));
    pthread_mutex_destroy(&m);

    pthread_mutex_t *z = calloc(1, sizeof *z);
    printf("zeroed memory: %ld\n", hammer(z));
    pthread_mutex_lock(z);
    printf("destroy of a held mutex is EBUSY: %d\n", pthread_mutex_destroy(z) == EBUSY);
    pthread_mutex_unlock(z);
    printf("destroy of a free mutex: %d\n", pthread_mutex_destroy(z));
    free(z);
    memset(&m, 0, sizeof m);
    printf("memset to zero: %ld\n", hammer(&m));
    return 0;
}
