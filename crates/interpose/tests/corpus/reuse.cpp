// Mutex memory reused without pthread_mutex_destroy or _init, as
// libstdc++ does: a recursive_mutex placed where a std::mutex lived, and a
// heap chunk freed by one mutex and taken by another.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <thread>
#include <unistd.h>

template <class M> static long hammer(M &m) {
    long n = 0;
    auto w = [&] {
        for (long i = 0; i < 20000; i++) {
            std::lock_guard<M> g(m);
            n++;
            if ((i & 0x3fff) == 0) (void)!write(2, ".", 1);
        }
    };
    std::thread a(w), b(w);
    a.join();
    b.join();
    return n;
}

alignas(std::max_align_t) static unsigned char buf[64];

int main() {
    for (int round = 0; round < 3; round++) {
        auto *m = new (buf) std::mutex;
        long a = hammer(*m);
        m->lock(); // left locked: the next object is built over it
        auto *r = new (buf) std::recursive_mutex;
        r->lock();
        r->lock();
        r->unlock();
        r->unlock();
        long b = hammer(*r);
        std::printf("placement round %d: mutex %ld, recursive %ld\n", round, a, b);
    }
    for (int round = 0; round < 3; round++) {
        auto *m = new std::mutex;
        long a = hammer(*m);
        void *old = m;
        delete m;
        auto *r = new std::recursive_mutex; // likely the same chunk
        r->lock();
        r->lock();
        r->unlock();
        r->unlock();
        long b = hammer(*r);
        std::printf("heap round %d: mutex %ld, recursive %ld\n", round, a, b);
        (void)old;
        delete r;
    }
    return 0;
}
