/* Progress for the tests' watchdog, which kills a program only when it
 * has written nothing for a while (not after a fixed wall-clock time, so
 * a busy machine slows a test down without failing it): one byte on
 * stderr every 16384 steps of a loop. write(2) takes no lock. */
#ifndef PROGRESS_H
#define PROGRESS_H
#include <unistd.h>
static inline void progress_tick(long step) {
    if ((step & 0x3fff) == 0) {
        ssize_t r = write(2, ".", 1);
        (void)r;
    }
}
#endif
