"""A writer process for the experience-pool tests: append items one batch at a time, print each acknowledgement."""

import sys

from planact.experience import ExperienceStore

if __name__ == "__main__":
    path, writer, count, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    store = ExperienceStore(path)
    pad = "x" * 2000  # big enough that a kill lands mid-write now and then
    for start in range(0, count, batch):
        ids = [f"{writer}/{i}" for i in range(start, min(count, start + batch))]
        store.append([{"id": i, "run": writer, "round": start // batch, "role": "actor", "data": pad} for i in ids])
        print(" ".join(ids), flush=True)  # printed only after append returned: an acknowledgement
