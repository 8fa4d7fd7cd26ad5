#!/usr/bin/env python3
"""Reads a TensorBoard log directory back with tensorboard's own event reader
(EventAccumulator, as TensorBoard's backend loads runs) and prints one JSON object:

  {RUN: {"scalars": {TAG: [[step, value, wall_time], ...]},
         "texts": {TAG: [[step, text], ...]},
         "hparams": {NAME: VALUE} (a session's start info),
         "hparams_config": {"hparams": [NAMES], "metrics": [TAGS]}}}

RUN is the directory relative to LOGDIR ("." for LOGDIR itself). The export tests
(test/export/test_tensorboard_export.cpp) compare it with run.h5.
  tensorboard_read.py LOGDIR
"""
import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.plugins.hparams import plugin_data_pb2
from tensorboard.util import tensor_util


def hparam_value(v):
    kind = v.WhichOneof("kind")
    return getattr(v, kind) if kind else None


def read_run(path):
    acc = event_accumulator.EventAccumulator(path, size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    out = {"scalars": {}, "texts": {}}
    for tag in acc.Tags()["tensors"]:
        events = acc.Tensors(tag)
        plugin = acc.SummaryMetadata(tag).plugin_data.plugin_name
        if plugin == "scalars":
            out["scalars"][tag] = [[e.step, float(tensor_util.make_ndarray(e.tensor_proto)), e.wall_time] for e in events]
        elif plugin == "text":
            out["texts"][tag] = [[e.step, tensor_util.make_ndarray(e.tensor_proto).item().decode()] for e in events]
        elif plugin == hparams_metadata.PLUGIN_NAME:
            data = plugin_data_pb2.HParamsPluginData.FromString(acc.SummaryMetadata(tag).plugin_data.content)
            if data.HasField("session_start_info"):
                out["hparams"] = {k: hparam_value(v) for k, v in data.session_start_info.hparams.items()}
            elif data.HasField("experiment"):
                out["hparams_config"] = {"hparams": [h.name for h in data.experiment.hparam_infos],
                                         "metrics": [m.name.tag for m in data.experiment.metric_infos]}
    return out


def main():
    logdir = sys.argv[1]
    runs = {}
    for root, _, files in os.walk(logdir):
        if any(f.startswith("events.out.tfevents") for f in files):
            runs[os.path.relpath(root, logdir)] = read_run(root)
    print(json.dumps(runs, sort_keys=True))


if __name__ == "__main__":
    main()
