#pragma once
// Facts measured on this machine, kept between processes so that a choice made by
// measuring is the same in every run here (and a resumed run makes the one it made
// before): `train.dtype: auto` (cpu-dtype.json) and the fused attention kernel's
// code path for bf16 inputs (cpu-attention.json). One JSON object per file, an entry
// per key (the CPU model and what else the measurement depends on). Deleting a file
// measures again.
#include <nlohmann/json.hpp>

#include <string>

namespace prism {

// `name` in $PRISM_CACHE_DIR, else $XDG_CACHE_HOME/prism, else $HOME/.cache/prism,
// else a per-user temporary directory.
std::string machine_cache_file(const std::string& name);

// The file's object; an empty one when it is missing or not a JSON object.
nlohmann::json read_machine_cache(const std::string& path);

// Sets `key` to `value` (with "measured": the UTC time) in the file. Another process
// may write it at the same time: each writes its own temporary file and renames it
// into place, so the file is always whole (one of two entries may be lost, and is
// measured again next time). Throws std::exception when it cannot write.
void write_machine_cache_entry(const std::string& path, const std::string& key, nlohmann::json value);

// "model name" of /proc/cpuinfo ("Model" on Arm), or "unknown CPU".
std::string cpu_model_name();

}  // namespace prism
