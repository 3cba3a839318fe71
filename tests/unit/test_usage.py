"""Token and cost accounting of remote engines: counts survive many threads answering at once."""

import sys
import threading

from planact.engines.remote import Usage


def test_concurrent_requests_are_all_counted():
    usage = Usage(input_per_mtok=2.0, output_per_mtok=10.0)
    threads_n, per_thread = 8, 5000

    def answer():
        for _ in range(per_thread):
            usage.add(2, 18)
            usage.add_retry()

    threads = [threading.Thread(target=answer) for _ in range(threads_n)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, as a busy engine does, so a lost update shows
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    n = threads_n * per_thread
    assert usage.as_dict() == {
        "requests": n,
        "retries": n,
        "prompt_tokens": 2 * n,
        "completion_tokens": 18 * n,
        "cost_usd": (2 * n * 2.0 + 18 * n * 10.0) / 1e6,
    }
