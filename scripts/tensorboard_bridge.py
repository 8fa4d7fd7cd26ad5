#!/usr/bin/env python3
"""The writing half of `prism export RUN|SWEEP --tensorboard DIR` (lib/prism/export/tensorboard.h).

prism reads the runs (store/ alone reads run.h5) and sends what TensorBoard should
show as JSON lines on stdin; this script writes them with the tensorboard
package's own event-file writer and summary protos (no TensorFlow needed), one
run directory under DIR per line's "run" ("" is DIR itself):

  {"op": "scalar", "run": R, "tag": T, "step": S, "value": V, "wall_time": W}
  {"op": "text",   "run": R, "tag": T, "step": S, "text": MARKDOWN, "wall_time": W}
  {"op": "hparams", "run": R, "hparams": {NAME: VALUE}, "trial_id": ID, "start_time": W}
  {"op": "hparams_config", "run": R, "hparams": {NAME: [VALUES]}, "metrics": [[TAG, DISPLAY NAME], ...]}
  {"op": "flush"}

At the end of its input it closes every file and prints one JSON line: the
number of events written per run, and the tensorboard version.
"""
import json
import os
import sys

import tensorboard
from tensorboard.compat.proto import event_pb2
from tensorboard.plugins.hparams import summary_v2 as hparams_summary
from tensorboard.plugins.scalar import summary_v2 as scalar_summary
from tensorboard.plugins.text import summary_v2 as text_summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter


class Writers:
    def __init__(self, logdir):
        self.logdir = logdir
        self.writers = {}
        self.counts = {}

    def add(self, run, summary, step=0, wall_time=None):
        if run not in self.writers:
            # flush_secs: a --follow mirror shows up in TensorBoard without waiting for a flush op.
            self.writers[run] = EventFileWriter(os.path.join(self.logdir, run) if run else self.logdir, flush_secs=5)
            self.counts[run] = 0
        event = event_pb2.Event(step=int(step), summary=summary)
        if wall_time is not None:
            event.wall_time = float(wall_time)
        self.writers[run].add_event(event)
        self.counts[run] += 1

    def flush(self):
        for w in self.writers.values():
            w.flush()

    def close(self):
        for w in self.writers.values():
            w.close()


def hparams_config(message):
    # No values: a --follow mirror whose trials are still to come; TensorBoard then takes them from the rows.
    hparams = [hparams_summary.HParam(name, hparams_summary.Discrete(values) if values else None)
               for name, values in message["hparams"].items()]
    metrics = [hparams_summary.Metric(tag, display_name=name) for tag, name in message["metrics"]]
    return hparams_summary.hparams_config_pb(hparams=hparams, metrics=metrics)


def write(message, writers):
    op, run = message["op"], message.get("run", "")
    if op == "scalar":
        writers.add(run, scalar_summary.scalar_pb(message["tag"], float(message["value"])), message["step"], message.get("wall_time"))
    elif op == "text":
        writers.add(run, text_summary.text_pb(message["tag"], message["text"]), message["step"], message.get("wall_time"))
    elif op == "hparams":
        pb = hparams_summary.hparams_pb(message["hparams"], trial_id=message.get("trial_id"), start_time_secs=message.get("start_time"))
        writers.add(run, pb, 0, message.get("start_time"))
    elif op == "hparams_config":
        writers.add(run, hparams_config(message))
    elif op == "flush":
        writers.flush()
    else:
        raise ValueError(f"unknown op {op!r}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tensorboard_bridge.py LOGDIR  (JSON lines on stdin; see the docstring)")
    writers = Writers(sys.argv[1])
    try:
        for n, line in enumerate(sys.stdin, 1):
            if line.strip():
                try:
                    write(json.loads(line), writers)
                except (ValueError, KeyError, TypeError) as e:
                    sys.exit(f"tensorboard_bridge.py: line {n} of prism's input: {e}: {line[:200]}")
    finally:
        writers.close()
    print(json.dumps({"events": writers.counts, "tensorboard": tensorboard.__version__}), flush=True)


if __name__ == "__main__":
    main()
