"""Threads: each session keeps its own thread count; Python threads share one session (the GIL
is released while it runs) and get the outputs a serial run gives."""
import tempfile
import threading
import time
import unittest

import numpy as np

import helpers
import mminfer


def timed_runs(sess, feed, runs):
    """(wall seconds, process CPU seconds) of `runs` runs."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(runs):
        sess.run(None, feed)
    return time.perf_counter() - wall, time.process_time() - cpu


class Heavy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = helpers.save(helpers.heavy(n=512, layers=4), cls.tmp.name, "heavy.onnx")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def feed(self, batch, seed):
        return {"x": np.random.default_rng(seed).standard_normal((batch, 512)).astype(np.float32)}


class ThreadsPerSessionTest(Heavy):
    def test_two_sessions_keep_their_counts(self):
        one = mminfer.InferenceSession(self.path, threads=1)
        two = mminfer.InferenceSession(self.path, threads=2)
        self.assertEqual((one.threads, two.threads), (1, 2))
        feed = self.feed(1024, 0)  # runs long enough that OpenMP workers' brief spinning weighs little
        for s in (one, two):
            s.run(None, feed)  # warm-up
        figures = {}
        for label, sess in (("threads=1", one), ("threads=2", two), ("threads=1 after threads=2", one)):
            wall, cpu = timed_runs(sess, feed, 5)
            figures[label] = (wall, cpu)
            print(f"\n  {label}: 5 runs wall {wall * 1000:.1f} ms, CPU {cpu * 1000:.1f} ms, CPU/wall {cpu / wall:.2f}",
                  end="")
        print()
        self.assertEqual((one.threads, two.threads), (1, 2))
        # One thread cannot use much more than one core's time (OpenMP workers left from the
        # other session may spin briefly, hence the margin).
        wall, cpu = figures["threads=1 after threads=2"]
        self.assertLess(cpu / wall, 1.5, "the 1-thread session used more than one core after the 2-thread one ran")
        np.testing.assert_allclose(one.run(None, feed)[0], two.run(None, feed)[0], rtol=1e-5, atol=1e-6)


class ConcurrentRunsTest(Heavy):
    def check_concurrent(self, sess, threads=4, runs=3):
        feeds = [self.feed(16 + 8 * i, 10 + i) for i in range(threads)]
        serial = [sess.run(None, f)[0] for f in feeds]
        results = [[] for _ in range(threads)]
        errors = []
        barrier = threading.Barrier(threads)

        def work(i):
            try:
                barrier.wait()
                for _ in range(runs):
                    results[i].append(sess.run(None, feeds[i])[0])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        self.assertEqual(errors, [])
        for i in range(threads):
            self.assertEqual(len(results[i]), runs)
            for r in results[i]:
                np.testing.assert_array_equal(r, serial[i])

    def test_four_threads_one_session(self):
        self.check_concurrent(mminfer.InferenceSession(self.path, threads=1))

    def test_four_threads_two_concurrent_runs(self):
        sess = mminfer.InferenceSession(self.path, threads=1, max_concurrent_runs=2)
        self.assertEqual(sess.max_concurrent_runs, 2)
        self.check_concurrent(sess)

    def test_gil_released_during_run(self):
        sess = mminfer.InferenceSession(self.path, threads=1)
        # A pure-Python ticker counts while one run is in flight: with the GIL held through the
        # run it cannot tick at all (C++ code holding the GIL never yields it). The run must last
        # at least 0.1 s for the count to mean something; on a loaded machine any batch does.
        for batch in (2048, 8192, 32768):
            feed = self.feed(batch, 1)
            ticks = [0]
            stop = threading.Event()

            def ticker():
                while not stop.is_set():
                    ticks[0] += 1
                    time.sleep(0.001)

            t = threading.Thread(target=ticker)
            t.start()
            try:
                time.sleep(0.05)
                before = ticks[0]
                start = time.perf_counter()
                sess.run(None, feed)  # one call
                wall = time.perf_counter() - start
                during = ticks[0] - before
            finally:
                stop.set()
                t.join()
            if wall >= 0.1:
                break
        print(f"\n  one run of batch {batch}: {wall * 1000:.0f} ms, ticker advanced {during} times")
        self.assertGreaterEqual(wall, 0.1, "no batch ran long enough to tell")
        # Released: about one tick per ms, fewer under load; held: none, or one at the edges.
        self.assertGreaterEqual(during, 5)


if __name__ == "__main__":
    unittest.main()
