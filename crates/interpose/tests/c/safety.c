/* Programs behave the same under the interposition library as without it,
 * in situations the library does not control: fork (the child keeps
 * working locks), mutexes in memory shared between processes
 * (PTHREAD_PROCESS_SHARED), signal handlers that take a mutex while the
 * interrupted thread is inside another one's lock or unlock, and a shared
 * object whose static mutexes are unloaded (dlclose) and loaded again.
 * Usage: safety fork|pshared|signal|early|dlclose [PLUGIN.so] (early:
 * with early.c's object preloaded). Prints only
 * deterministic lines. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "progress.h"

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static long counter;
/* Handlers run on any thread, two at once on two threads: the count of
 * runs is atomic, the count taken under mutex `b` is plain, so a lost
 * increment of `handler_locked` means `b` failed to exclude. */
static long handler_count;
static long handler_locked;

static void *bump(void *arg) {
  long n = (long)arg;
  for (long i = 0; i < n; i++) {
    pthread_mutex_lock(&a);
    counter++;
    pthread_mutex_unlock(&a);
    progress_tick(i);
  }
  return NULL;
}

/* `threads` threads add 1 `n` times each under mutex `a`. */
static long contend(int threads, long n) {
  pthread_t t[8];
  counter = 0;
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, bump, (void *)n);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  return counter;
}

static int do_fork(void) {
  printf("parent before fork: %ld\n", contend(2, 100000));
  fflush(stdout);
  for (int round = 0; round < 3; round++) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      long c = contend(2, 100000);
      pthread_mutex_lock(&b);
      pthread_mutex_unlock(&b);
      _exit(c == 200000 ? 0 : 1);
    }
    /* The parent waits for the child before contending itself: four
     * threads on two cores would crawl under a FIFO spin lock whose next
     * waiter is preempted, which is the multiprogramming problem, not a
     * fork one. The child still forks from a process whose locks have all
     * been used, and the parent's locks still work after the fork. */
    int st = 0;
    waitpid(pid, &st, 0);
    long c = contend(2, 50000);
    printf("round %d: parent %ld, child exit %d\n", round, c,
           WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  return 0;
}

struct shared {
  pthread_mutex_t m;
  long count;
};

static int do_pshared(void) {
  struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) return 1;
  pthread_mutexattr_t at;
  pthread_mutexattr_init(&at);
  pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
  pthread_mutex_init(&s->m, &at);
  s->count = 0;
  pid_t pid = fork();
  if (pid < 0) return 1;
  for (long i = 0; i < 200000; i++) {
    pthread_mutex_lock(&s->m);
    s->count++;
    pthread_mutex_unlock(&s->m);
    progress_tick(i);
  }
  if (pid == 0) _exit(0);
  int st = 0;
  waitpid(pid, &st, 0);
  printf("two processes on one shared mutex: %ld, child exit %d\n", s->count,
         WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return 0;
}

static void on_alarm(int sig) {
  (void)sig;
  pthread_mutex_lock(&b);
  handler_locked++;
  pthread_mutex_unlock(&b);
  __atomic_fetch_add(&handler_count, 1, __ATOMIC_RELAXED);
}

static int do_signal(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {{0, 200}, {0, 200}};
  setitimer(ITIMER_REAL, &it, NULL);
  long c = 0;
  /* Until the handler has run often, so it lands inside lock and unlock. */
  for (int round = 0; round < 50; round++) {
    if (__atomic_load_n(&handler_count, __ATOMIC_RELAXED) >= 200) break;
    c += contend(2, 100000);
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  sigset_t alarm;
  sigemptyset(&alarm);
  sigaddset(&alarm, SIGALRM);
  sigprocmask(SIG_BLOCK, &alarm, NULL); /* no handler between the reads */
  printf("counter right: %d\n", c % 200000 == 0 && c > 0);
  printf("handler ran and took its mutex each time: %d\n",
         handler_count > 0 && handler_locked == handler_count);
  return 0;
}

static int do_dlclose(const char *plugin) {
  long total = 0;
  for (int i = 0; i < 40; i++) {
    void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "dlopen: %s\n", dlerror());
      return 1;
    }
    long (*count)(int, long) = (long (*)(int, long))dlsym(h, "plugin_count");
    if (!count) return 1;
    total += count(2, 5000);
    dlclose(h);
  }
  printf("40 loads of a plugin with a static mutex: %ld\n", total);
  return 0;
}

/* Threads that a preloaded early.so started from its constructor. */
static int do_early(void) {
  long (*wait)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "early_wait");
  if (!wait) {
    fprintf(stderr, "early.so is not preloaded\n");
    return 1;
  }
  printf("threads started before main: %ld\n", wait());
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  if (!strcmp(argv[1], "fork")) return do_fork();
  if (!strcmp(argv[1], "pshared")) return do_pshared();
  if (!strcmp(argv[1], "signal")) return do_signal();
  if (!strcmp(argv[1], "dlclose") && argc > 2) return do_dlclose(argv[2]);
  if (!strcmp(argv[1], "early")) return do_early();
  return 2;
}
