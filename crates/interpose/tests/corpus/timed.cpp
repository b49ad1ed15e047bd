// std::timed_mutex and recursive_timed_mutex: try_lock_for and
// try_lock_until (steady and system clocks) on a free mutex, on a mutex
// another thread holds (times out), and with contention (succeeds).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unistd.h>

using namespace std::chrono;

int main() {
    std::timed_mutex tm;
    std::printf("free try_lock_for: %d\n", (int)tm.try_lock_for(milliseconds(10)));
    tm.unlock();
    std::printf("free try_lock_until steady: %d\n",
                (int)tm.try_lock_until(steady_clock::now() + milliseconds(10)));
    tm.unlock();
    std::printf("free try_lock_until system: %d\n",
                (int)tm.try_lock_until(system_clock::now() + milliseconds(10)));
    tm.unlock();

    // Held by another thread until told: every timed try times out.
    std::atomic<int> stage{0};
    std::thread holder([&] {
        tm.lock();
        stage = 1;
        while (stage != 2) std::this_thread::sleep_for(microseconds(100));
        tm.unlock();
    });
    while (stage != 1) std::this_thread::sleep_for(microseconds(100));
    int timeouts = 0;
    for (int i = 0; i < 5; i++) {
        timeouts += !tm.try_lock_for(milliseconds(2));
        timeouts += !tm.try_lock_until(steady_clock::now() + milliseconds(2));
        timeouts += !tm.try_lock_until(system_clock::now() + milliseconds(2));
    }
    std::printf("held: %d of 15 timed tries timed out\n", timeouts);
    stage = 2;
    std::printf("after release try_lock_for(10 s): %d\n", (int)tm.try_lock_for(seconds(10)));
    tm.unlock();
    holder.join();

    // Contended: two threads, every try with a long timeout succeeds.
    long count = 0;
    auto work = [&] {
        for (long i = 0; i < 20000; i++) {
            if (!tm.try_lock_for(seconds(30))) return;
            count++;
            tm.unlock();
            if ((i & 0x3fff) == 0) (void)!write(2, ".", 1);
        }
    };
    std::thread a(work), b(work);
    a.join();
    b.join();
    std::printf("contended try_lock_for: %ld\n", count);

    std::recursive_timed_mutex rt;
    int nested = rt.try_lock_for(milliseconds(1)) + rt.try_lock_for(milliseconds(1));
    rt.unlock();
    rt.unlock();
    std::printf("recursive_timed_mutex nested: %d\n", nested);
    return 0;
}
