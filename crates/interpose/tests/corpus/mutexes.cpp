// C++ mutex idioms: std::mutex (lock_guard, unique_lock), recursive_mutex,
// std::call_once, shared_mutex. Output is the same on every run.
#include <atomic>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>
#include <unistd.h>

static void tick(long i) {
    if ((i & 0x3fff) == 0) (void)!write(2, ".", 1);
}

int main() {
    std::mutex m;
    long count = 0;
    std::vector<std::thread> ts;
    for (int t = 0; t < 2; t++)
        ts.emplace_back([&] {
            for (long i = 0; i < 50000; i++) {
                if (i & 1) {
                    std::lock_guard<std::mutex> g(m);
                    count++;
                } else {
                    std::unique_lock<std::mutex> g(m);
                    count++;
                }
                tick(i);
            }
        });
    for (auto &t : ts) t.join();
    ts.clear();
    std::printf("mutex: %ld\n", count);

    std::recursive_mutex rm;
    long deep = 0;
    for (int t = 0; t < 2; t++)
        ts.emplace_back([&] {
            for (long i = 0; i < 20000; i++) {
                std::lock_guard<std::recursive_mutex> a(rm);
                std::lock_guard<std::recursive_mutex> b(rm);
                deep++;
                tick(i);
            }
        });
    for (auto &t : ts) t.join();
    ts.clear();
    std::printf("recursive_mutex: %ld, try_lock while held by self: %d\n", deep,
                [&] { std::lock_guard<std::recursive_mutex> g(rm); bool ok = rm.try_lock(); if (ok) rm.unlock(); return ok; }());

    std::once_flag once;
    std::atomic<int> ran{0};
    for (int t = 0; t < 4; t++)
        ts.emplace_back([&] { std::call_once(once, [&] { ran++; }); });
    for (auto &t : ts) t.join();
    ts.clear();
    std::printf("call_once ran: %d\n", ran.load());

    std::shared_mutex sm;
    long shared = 0, reads = 0;
    std::atomic<long> seen{0};
    for (int t = 0; t < 2; t++)
        ts.emplace_back([&, t] {
            for (long i = 0; i < 20000; i++) {
                if (t == 0) {
                    std::unique_lock<std::shared_mutex> g(sm);
                    shared++;
                } else {
                    std::shared_lock<std::shared_mutex> g(sm);
                    seen += shared >= 0;
                    reads++;
                }
                tick(i);
            }
        });
    for (auto &t : ts) t.join();
    std::printf("shared_mutex: %ld writes, %ld reads\n", shared, reads);
    return 0;
}
