#pragma once
// SIGINT / SIGTERM ask a run to stop: the trainer finishes the current step,
// writes a checkpoint and exits cleanly. A second signal exits at once.
namespace prism {

void install_stop_handlers();
bool stop_requested();
int stop_signal();          // the signal received, 0 if none

}  // namespace prism
