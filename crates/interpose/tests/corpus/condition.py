# threading.Condition.wait(timeout): timing out, and notified in a
# producer/consumer, under CPython's GIL (pthread mutex and condition).
import sys
import threading

cond = threading.Condition()
items = []
done = False


def consumer(out):
    total = 0
    with cond:
        while True:
            while not items and not done:
                cond.wait(timeout=30)
            if not items:
                break
            total += items.pop(0)
            cond.notify_all()
    out.append(total)


out = []
t = threading.Thread(target=consumer, args=(out,))
t.start()
for i in range(1, 3001):
    with cond:
        while len(items) >= 4:
            cond.wait(timeout=30)
        items.append(i)
        cond.notify()
    if i % 500 == 0:
        sys.stderr.write(".")
        sys.stderr.flush()
with cond:
    done = True
    cond.notify_all()
t.join()
print("queue:", out[0])
with cond:
    timed_out = sum(1 for _ in range(20) if not cond.wait(timeout=0.001))
print("timed out:", timed_out, "of 20")
