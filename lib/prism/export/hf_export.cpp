#include "prism/export/hf_export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "prism/atomic_file.h"
#include "prism/data/dataset.h"
#include "prism/error.h"
#include "prism/export/hf_remote_code.h"
#include "prism/store/safetensors.h"

namespace fs = std::filesystem;

namespace prism {

namespace {

using ordered_json = nlohmann::ordered_json;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// GPT-2 keeps its projections as Conv1D, (in, out): the transpose of nn.Linear's (out, in).
bool is_conv1d_weight(const std::string& name) {
  return ends_with(name, "attn.c_attn.weight") || ends_with(name, "attn.c_proj.weight") ||
         ends_with(name, "mlp.c_fc.weight") || ends_with(name, "mlp.c_proj.weight");
}

// Prism's tensors under transformers' names: "transformer." + Prism's own name;
// for GPT-2, Conv1D weights transposed and the biases GPT-2 always has (zeros
// when the model was trained without: the same function).
NamedTensors hf_tensors(const LoadedModel& lm, HfFormat format) {
  NamedTensors out;
  for (const auto& p : lm.model->named_parameters()) {
    torch::Tensor t = p.value().detach().to(torch::kCPU, torch::kFloat32);
    if (format == HfFormat::Gpt2 && is_conv1d_weight(p.key())) t = t.t();
    out.emplace_back("transformer." + p.key(), t.contiguous());
    if (format == HfFormat::Gpt2 && !lm.config.model.bias && ends_with(p.key(), ".weight") &&
        p.key() != "wte.weight" && p.key() != "wpe.weight") {
      const int64_t n = is_conv1d_weight(p.key()) ? t.size(1) : t.size(0);
      out.emplace_back("transformer." + p.key().substr(0, p.key().size() - 6) + "bias", torch::zeros({n}));
    }
  }
  return out;
}

ordered_json provenance(const LoadedModel& lm, const std::string& vocab) {
  return {{"source", lm.path},
          {"step", lm.step},
          {"heads", lm.config.schedule.heads()},
          {"schedule", lm.config.schedule.compact()},
          {"vocabulary", fs::path(vocab).filename().string()},
          {"prism_version", PRISM_VERSION}};
}

ordered_json hf_config(const LoadedModel& lm, HfFormat format, int eot, const std::string& vocab) {
  const ModelConfig& m = lm.config.model;
  const auto& heads = lm.config.schedule.heads();
  ordered_json c;
  if (format == HfFormat::Prism) {
    c = {{"architectures", {"PrismForCausalLM"}},
         {"model_type", "prism"},
         {"auto_map",
          {{"AutoConfig", "configuration_prism.PrismConfig"},
           {"AutoModel", "modeling_prism.PrismModel"},
           {"AutoModelForCausalLM", "modeling_prism.PrismForCausalLM"}}},
         {"vocab_size", m.vocab_size},
         {"n_positions", m.block_size},
         {"n_embd", m.d_model},
         {"n_layer", m.n_layer},
         {"n_head", m.n_head},
         {"heads", heads},
         {"bias", m.bias},
         {"dropout", m.dropout},
         {"position_embedding", positions_name(m.position)},
         {"rope_theta", m.rope_theta}};
  } else {
    c = {{"architectures", {"GPT2LMHeadModel"}},
         {"model_type", "gpt2"},
         {"vocab_size", m.vocab_size},
         {"n_positions", m.block_size},
         {"n_ctx", m.block_size},
         {"n_embd", m.d_model},
         {"n_layer", m.n_layer},
         {"n_head", heads.at(0)},
         {"n_inner", nullptr},
         {"activation_function", "gelu_new"},  // GPT-2's tanh approximation, as Prism's MLP
         {"resid_pdrop", m.dropout},
         {"embd_pdrop", m.dropout},
         {"attn_pdrop", m.dropout},
         {"scale_attn_weights", true},
         {"scale_attn_by_inverse_layer_idx", false},
         {"reorder_and_upcast_attn", false}};
  }
  c["layer_norm_epsilon"] = 1e-5;
  c["initializer_range"] = 0.02;
  c["bos_token_id"] = eot;
  c["eos_token_id"] = eot;
  c["tie_word_embeddings"] = true;
  c["use_cache"] = true;
  c["dtype"] = "float32";
  c["prism"] = provenance(lm, vocab);
  return c;
}

std::string model_card(const LoadedModel& lm, HfFormat format, const HfTokenizer& tok, const std::string& vocab,
                       int64_t parameters, const std::string& dir) {
  const ModelConfig& m = lm.config.model;
  const bool prism = format == HfFormat::Prism;
  const std::string remote = prism ? ", trust_remote_code=True" : "";
  return fmt::format(
      "---\nlibrary_name: transformers\ntags: [prism, {}, causal-lm]\n---\n\n"
      "# Prism GPT, heads [{}]\n\n"
      "A GPT-2-style model trained with Prism (one attention head count per layer), exported by\n"
      "`prism export --hf` from `{}` (step {}).\n\n"
      "| layers | width | heads per layer | context | vocabulary | parameters |\n"
      "| --- | --- | --- | --- | --- | --- |\n"
      "| {} | {} | {} | {} | {} ids (`{}`, end-of-text {}) | {} |\n\n"
      "{}\n\n"
      "```python\n"
      "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
      "tok = AutoTokenizer.from_pretrained(\"{}\"{})\n"
      "model = AutoModelForCausalLM.from_pretrained(\"{}\"{})\n"
      "ids = tok(\"It is a truth universally acknowledged\", return_tensors=\"pt\").input_ids\n"
      "print(tok.decode(model.generate(ids, max_new_tokens=40, do_sample=False)[0]))\n"
      "```\n\n"
      "Zero-shot tasks with lm-evaluation-harness:\n\n"
      "```bash\n"
      "lm_eval --model hf --model_args pretrained={}{},dtype=float32 --tasks hellaswag\n"
      "```\n",
      prism ? "prism-heads" : "gpt2", fmt::join(lm.config.schedule.heads(), ","), lm.path, lm.step, m.n_layer,
      m.d_model, lm.config.schedule.compact(), m.block_size, tok.vocab_size(), fs::path(vocab).filename().string(),
      tok.ranks, parameters,
      prism ? std::string("`PrismForCausalLM` (modeling_prism.py, loaded with `trust_remote_code=True`): each layer has "
                          "its own head count; `output_attentions=True` gives per layer (batch, heads, query, key) "
                          "probabilities.") +
                  (m.position == Positions::Rope
                       ? fmt::format(" Positions are rotary (Llama's rotate_half, base {}), each layer at its own head "
                                     "width; the context above is the one it was trained at.",
                                     m.rope_theta)
                       : std::string())
            : "A uniform model, so it is a stock `GPT2LMHeadModel`: no remote code.",
      dir, remote, dir, remote, dir, prism ? ",trust_remote_code=True" : "");
}

void check_destination(const fs::path& dir, bool force) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  if (!fs::is_directory(dir, ec))
    throw Error("exists and is not a directory", dir.string(), "choose another --hf directory");
  if (!fs::is_empty(dir, ec) && !force)
    throw Error("the directory exists and is not empty", dir.string(), "pass --force to replace it, or choose another --hf DIR");
}

// Moves `staged` to `dir`, replacing an existing `dir` only once the new one is complete.
void move_into_place(const fs::path& staged, const fs::path& dir) {
  std::error_code ec;
  fs::path old;
  if (fs::exists(dir, ec)) {
    old = dir.string() + fmt::format(".replaced-{}", ::getpid());
    fs::rename(dir, old, ec);
    if (ec) throw Error(fmt::format("cannot move the old export aside: {}", ec.message()), dir.string(), "check permissions");
  }
  fs::rename(staged, dir, ec);
  if (ec) {
    if (!old.empty()) fs::rename(old, dir, ec);
    throw Error(fmt::format("cannot rename the finished export into place: {}", ec.message()), dir.string(),
                "check permissions of the parent directory");
  }
  if (!old.empty()) fs::remove_all(old, ec);
}

}  // namespace

HfFormat parse_hf_format(const std::string& name) {
  if (name == "prism") return HfFormat::Prism;
  if (name == "gpt2") return HfFormat::Gpt2;
  throw Error(fmt::format("unknown Hugging Face format '{}'", name), "--hf-format",
              "use prism (any schedule, trust_remote_code) or gpt2 (stock GPT2LMHeadModel: uniform schedules, learned positions)");
}

std::string hf_format_name(HfFormat f) { return f == HfFormat::Prism ? "prism" : "gpt2"; }

std::optional<std::string> run_vocabulary(const LoadedModel& lm) {
  // data.vocab as the run resolved it when it trained (from its corpus's prepare.json).
  if (!lm.config.data.vocab.empty()) return lm.config.data.vocab;
  if (lm.config.data.dir.empty()) return std::nullopt;
  try {
    const DataDescription d = describe_data(lm.config.data.dir);
    if (!d.vocab.empty()) return d.vocab;
  } catch (const Error&) {
    // a damaged or absent manifest names nothing; the caller falls back to --vocab or GPT-2's
  }
  return std::nullopt;
}

HfExportSummary export_hf(const LoadedModel& lm, const std::string& dir_name, const HfExportOptions& o) {
  const fs::path dir = fs::absolute(dir_name).lexically_normal();
  check_destination(dir, o.force);
  const auto& heads = lm.config.schedule.heads();
  // Llama's format would take the rotation but not the rest (LayerNorm with biases, GELU MLP, fused qkv).
  if (o.format == HfFormat::Gpt2 && lm.config.model.position != Positions::Learned)
    throw Error("GPT2LMHeadModel has learned positions; this model's are rotary (model.position: rope)", lm.path,
                "export it with --hf-format prism (loaded with trust_remote_code=True)");
  if (o.format == HfFormat::Gpt2 && !lm.config.schedule.is_uniform())
    throw Error(fmt::format("GPT2LMHeadModel has one head count for every layer; this model's schedule is [{}]",
                            fmt::join(heads, ",")),
                lm.path, "export it with --hf-format prism (loaded with trust_remote_code=True)");
  if (o.vocab.empty()) throw Error("no vocabulary given", "prism export --hf", "pass --vocab FILE (a tiktoken ranks file)");
  HfTokenizer tok = hf_tokenizer_files(o.vocab, lm.config.model.block_size);
  if (tok.vocab_size() > lm.config.model.vocab_size)
    throw Error(fmt::format("the vocabulary has {} ids (with end-of-text) but the model only {}", tok.vocab_size(),
                            lm.config.model.vocab_size),
                o.vocab, "pass the vocabulary the run was trained with (--vocab FILE)");

  HfExportSummary s;
  s.dir = dir.string();
  s.format = o.format;
  s.vocab = o.vocab;
  s.tokenizer_ids = tok.vocab_size();
  s.merges = tok.merges;
  s.unmerged = tok.unmerged;
  const NamedTensors tensors = hf_tensors(lm, o.format);
  s.tensors = static_cast<int64_t>(tensors.size());
  s.parameters = lm.model->num_params();

  std::vector<std::pair<std::string, std::string>> texts = {
      {"config.json", hf_config(lm, o.format, tok.ranks, o.vocab).dump(2) + "\n"},
      {"generation_config.json",
       ordered_json({{"bos_token_id", tok.ranks}, {"eos_token_id", tok.ranks}, {"pad_token_id", tok.ranks}}).dump(2) + "\n"}};
  if (o.format == HfFormat::Prism)
    for (const auto& f : hf_remote_code_files()) texts.emplace_back(f.name, std::string(f.text));
  for (auto& f : tok.files) texts.push_back(std::move(f));
  texts.emplace_back("README.md", model_card(lm, o.format, tok, o.vocab, s.parameters, s.dir));

  const fs::path staged = dir.string() + fmt::format(".partial-{}", ::getpid());
  std::error_code ec;
  fs::remove_all(staged, ec);
  fs::create_directories(staged, ec);
  if (ec) throw Error(fmt::format("cannot create directory: {}", ec.message()), staged.string(), "check permissions and free space");
  try {
    save_safetensors((staged / "model.safetensors").string(), tensors,
                     {{"format", "pt"}, {"prism_source", lm.path}, {"prism_step", std::to_string(lm.step)},
                      {"prism_heads", fmt::format("{}", fmt::join(heads, ","))}});
    s.files.push_back("model.safetensors");
    for (const auto& [name, text] : texts) {
      write_file_atomic((staged / name).string(), text);
      s.files.push_back(name);
    }
    move_into_place(staged, dir);
  } catch (...) {
    fs::remove_all(staged, ec);
    throw;
  }
  return s;
}

}  // namespace prism
