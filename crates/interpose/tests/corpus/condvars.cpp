// std::condition_variable wait / wait_for / wait_until (steady and system
// clocks), notified and timing out, and condition_variable_any.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <unistd.h>

using namespace std::chrono;

int main() {
    std::mutex m;
    std::condition_variable cv;
    std::deque<long> q;
    bool done = false;
    long sum = 0;
    // Producer/consumer: wait (predicate) on one side, wait_for on the
    // other, so both are woken by notifications.
    std::thread consumer([&] {
        std::unique_lock<std::mutex> g(m);
        for (;;) {
            cv.wait(g, [&] { return !q.empty() || done; });
            if (q.empty()) break;
            sum += q.front();
            q.pop_front();
            cv.notify_all();
        }
    });
    for (long i = 1; i <= 20000; i++) {
        std::unique_lock<std::mutex> g(m);
        while (q.size() >= 4) cv.wait_for(g, seconds(30));
        q.push_back(i);
        cv.notify_one();
        if ((i & 0x3fff) == 0) (void)!write(2, ".", 1);
    }
    {
        std::lock_guard<std::mutex> g(m);
        done = true;
    }
    cv.notify_all();
    consumer.join();
    std::printf("wait / wait_for queue: %ld\n", sum);

    // Nobody notifies: each timed wait ends by its timeout.
    std::unique_lock<std::mutex> g(m);
    int timed_out = 0;
    for (int i = 0; i < 5; i++) {
        timed_out += !cv.wait_for(g, milliseconds(1), [] { return false; });
        timed_out += !cv.wait_until(g, steady_clock::now() + milliseconds(1), [] { return false; });
        timed_out += !cv.wait_until(g, system_clock::now() + milliseconds(1), [] { return false; });
    }
    g.unlock();
    std::printf("timed waits that timed out: %d of 15\n", timed_out);

    // Ping-pong with wait_until on each clock: every wait is notified.
    int turn = 0, rounds = 0;
    std::thread other([&] {
        std::unique_lock<std::mutex> l(m);
        for (int i = 0; i < 500; i++) {
            while (turn != 1) cv.wait_until(l, system_clock::now() + seconds(30));
            turn = 0;
            rounds++;
            cv.notify_all();
        }
    });
    {
        std::unique_lock<std::mutex> l(m);
        for (int i = 0; i < 500; i++) {
            turn = 1;
            cv.notify_all();
            while (turn != 0) cv.wait_until(l, steady_clock::now() + seconds(30));
        }
    }
    other.join();
    std::printf("ping-pong rounds: %d\n", rounds);

    // condition_variable_any over a std::mutex and a recursive_mutex.
    std::condition_variable_any cva;
    std::recursive_mutex rm;
    int flag = 0;
    std::thread setter([&] {
        {
            std::lock_guard<std::mutex> l(m);
            flag = 1;
        }
        cva.notify_all();
        std::unique_lock<std::recursive_mutex> r(rm);
        cva.wait(r, [&] { return flag == 2; });
        flag = 3;
        cva.notify_all();
    });
    {
        std::unique_lock<std::mutex> l(m);
        cva.wait(l, [&] { return flag == 1; });
        std::printf("condition_variable_any timed out: %d\n",
                    (int)!cva.wait_for(l, milliseconds(1), [] { return false; }));
    }
    {
        std::unique_lock<std::recursive_mutex> r(rm);
        flag = 2;
        cva.notify_all();
        cva.wait(r, [&] { return flag == 3; });
    }
    setter.join();
    std::printf("condition_variable_any: %d\n", flag);
    return 0;
}
