#include "prism/data/token_pipeline.h"

#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "prism/data/input_error.h"
#include "prism/data/tokenizer.h"

namespace prism {

namespace {

// Records read, not yet tokenised: their bytes back to back in `arena`.
struct RawRecord {
  SourceRecord source;
  size_t offset = 0, size = 0;
  uint64_t input_bytes = 0;
  std::string problem, fix;  // found by the reader (a file it could not go on with)
};

struct RawBatch {
  uint64_t seq = 0;
  std::string arena;
  std::vector<RawRecord> records;
  std::optional<Error> error;
};

}  // namespace

std::string tokenize_record(const Gpt2Tokenizer& tok, InputFormat format, const Record& record, std::string_view bytes,
                            const std::string& text_key, std::vector<uint32_t>& ids, uint64_t& text_bytes,
                            std::string& fix) {
  ids.clear();
  text_bytes = 0;
  thread_local std::string storage;
  std::string problem;
  const std::string_view text = document_text(format, record, bytes, text_key, storage, problem, fix);
  if (!problem.empty()) return problem;
  text_bytes = text.size();
  ids.push_back(tok.eot());
  tok.encode(text, ids);
  return problem;
}

struct TokenPipeline::Impl {
  DocumentSource& source;
  const Gpt2Tokenizer& tok;
  PipelineOptions opt;
  std::mutex mu;
  std::condition_variable cv_reader, cv_worker, cv_consumer;
  std::deque<std::unique_ptr<RawBatch>> todo;
  std::map<uint64_t, std::unique_ptr<TokenBatch>> done;
  uint64_t read_seq = 0, next_seq = 0;
  int in_flight = 0;
  bool reader_done = false, stop = false;
  std::thread reader;
  std::vector<std::thread> workers;

  Impl(DocumentSource& s, const Gpt2Tokenizer& t, const PipelineOptions& o) : source(s), tok(t), opt(o) {
    if (opt.threads < 1) opt.threads = 1;
    if (opt.batches_in_flight <= 0) opt.batches_in_flight = 2 * opt.threads + 2;
  }

  // Reads one batch; true when the source ended (or failed) with it.
  bool fill(RawBatch& b) {
    SourceRecord r;
    std::string_view bytes;
    try {
      while (b.arena.size() < opt.batch_bytes) {
        RawRecord raw;
        try {
          if (!source.next(r, bytes)) return true;
        } catch (const InputError& e) {
          if (!opt.skip_bad_files) throw;
          raw.source.position = source.position();
          raw.source.file = raw.source.position.file;
          raw.source.record = {Record::Kind::bad, raw.source.position.index, raw.source.position.index};
          raw.problem = "the rest of the file is skipped: " + e.what_part();
          raw.fix = e.fix();
          raw.input_bytes = source.bytes_read();
          source.skip_file();
          b.records.push_back(std::move(raw));
          continue;
        }
        raw.source = r;
        raw.offset = b.arena.size();
        raw.size = bytes.size();
        raw.input_bytes = source.bytes_read();
        b.arena.append(bytes.data(), bytes.size());
        b.records.push_back(std::move(raw));
      }
      return false;
    } catch (const Error& e) {
      b.error = e;
    } catch (const std::exception& e) {
      b.error = Error(std::string("reading the inputs failed: ") + e.what(), "prism data prepare", "check the inputs and free memory");
    }
    return true;
  }

  void read_loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv_reader.wait(lock, [&] { return stop || in_flight < opt.batches_in_flight; });
        if (stop) return;
      }
      auto b = std::make_unique<RawBatch>();
      const bool end = fill(*b);
      {
        std::lock_guard<std::mutex> lock(mu);
        b->seq = read_seq++;
        ++in_flight;
        todo.push_back(std::move(b));
        reader_done = end;
      }
      if (end) {
        cv_worker.notify_all();
        cv_consumer.notify_all();
        return;
      }
      cv_worker.notify_one();
    }
  }

  std::unique_ptr<TokenBatch> tokenize(const RawBatch& b) {
    auto out = std::make_unique<TokenBatch>();
    out->error = b.error;
    thread_local std::vector<uint32_t> ids;
    try {
      out->tokens.reserve(b.arena.size() / 3 + b.records.size());
      for (const RawRecord& raw : b.records) {
        TokenizedRecord t;
        t.file = raw.source.file;
        t.locator = raw.source.record.locator;
        t.position = raw.source.position;
        t.input_bytes = raw.input_bytes;
        if (!raw.problem.empty()) {
          t.problem = raw.problem;
          t.fix = raw.fix;
        } else {
          const std::string_view bytes(b.arena.data() + raw.offset, raw.size);
          const InputFormat format = source.files()[raw.source.file].format;
          t.problem = tokenize_record(tok, format, raw.source.record, bytes, source.options().text_key, ids,
                                      t.text_bytes, t.fix);
          t.tokens = static_cast<uint32_t>(ids.size());
          out->tokens.insert(out->tokens.end(), ids.begin(), ids.end());
        }
        out->records.push_back(std::move(t));
      }
    } catch (const Error& e) {
      out->error = e;
    } catch (const std::exception& e) {
      out->error = Error(std::string("tokenising failed: ") + e.what(), "prism data prepare", "check free memory");
    }
    return out;
  }

  void work_loop() {
    for (;;) {
      std::unique_ptr<RawBatch> b;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv_worker.wait(lock, [&] { return stop || !todo.empty() || reader_done; });
        if (stop || (todo.empty() && reader_done)) return;
        b = std::move(todo.front());
        todo.pop_front();
      }
      auto t = tokenize(*b);
      {
        std::lock_guard<std::mutex> lock(mu);
        done[b->seq] = std::move(t);
      }
      cv_consumer.notify_all();
    }
  }
};

TokenPipeline::TokenPipeline(DocumentSource& source, const Gpt2Tokenizer& tokenizer, const PipelineOptions& options)
    : impl_(std::make_unique<Impl>(source, tokenizer, options)) {
  Impl& m = *impl_;
  m.reader = std::thread([&m] { m.read_loop(); });
  for (int t = 0; t < m.opt.threads; ++t) m.workers.emplace_back([&m] { m.work_loop(); });
}

TokenPipeline::~TokenPipeline() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.stop = true;
  }
  m.cv_reader.notify_all();
  m.cv_worker.notify_all();
  m.reader.join();
  for (auto& w : m.workers) w.join();
}

bool TokenPipeline::next(TokenBatch& batch) {
  Impl& m = *impl_;
  std::unique_ptr<TokenBatch> b;
  {
    std::unique_lock<std::mutex> lock(m.mu);
    m.cv_consumer.wait(lock, [&] { return m.done.count(m.next_seq) || (m.reader_done && m.next_seq == m.read_seq); });
    auto it = m.done.find(m.next_seq);
    if (it == m.done.end()) return false;
    b = std::move(it->second);
    m.done.erase(it);
    ++m.next_seq;
    --m.in_flight;
  }
  m.cv_reader.notify_one();
  batch = std::move(*b);
  return true;
}

}  // namespace prism
