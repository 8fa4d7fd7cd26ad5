#pragma once
// The unigram baseline of a run (the loss of a model that ignores context, nats
// per token): its run.h5 attribute `unigram_val_loss`, else, for runs written
// before that attribute existed (or with it unknown), the prepare.json of the
// data directory its config names (data.dir, relative to the working directory
// as when it trained). NaN when neither knows (llm.c's shards, a moved corpus).
#include "prism/store/run_store.h"

namespace prism {

double run_unigram_val_loss(const RunAttributes& attrs);

}  // namespace prism
