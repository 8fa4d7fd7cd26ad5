// prism data prepare on Parquet and JSONL corpora (issue 33): the shards are
// byte for byte those of llm.c's fineweb.py logic (test/reference/llmc_fineweb.py)
// on the same documents; a kill -9 at any moment, then the same command, gives an
// uninterrupted run's shards; --max-tokens takes a prefix; bad input is an error
// naming the file and the line or row, keeps the shards already written, and
// --skip-bad lists what it skipped in prepare.json.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <filesystem>
#include <map>

#include <sys/wait.h>
#include <unistd.h>

#include "data_support.h"
#include "prism/data/decompress.h"
#include "prism/data/input_error.h"
#include "prism/data/parquet_reader.h"
#include "prism/data/prepare.h"
#include "prism/data/prepare_state.h"
#include "prism/data/shard.h"
#include "prism/data/tokenizer.h"
#include "prism/error.h"

using namespace prism;
using namespace prism::test;
namespace fs = std::filesystem;

namespace {

// The fixture of llmc_fineweb.py: parquet/000_00000.parquet, 001_00000.parquet and
// docs.jsonl(.gz, .zst), 409 documents of the Austen chapters and edge cases.
struct Fixture {
  TempDir dir{"prism-formats"};
  Fixture() {
    austen_text_dir();
    auto r = run_reference("llmc_fineweb.py", fmt::format("fixture '{}' --text-dir '{}'", dir.path(), austen_text_dir()));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }
  std::string parquet() const { return dir.file("parquet"); }
  std::string file(const std::string& name) const { return dir.file(name); }
};

// Every file name -> bytes of the *.bin shards in `dir`.
std::map<std::string, std::string> shard_files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".bin") out[e.path().filename().string()] = read_file(e.path().string());
  return out;
}

std::vector<uint16_t> all_tokens(const std::vector<std::string>& shards) {
  std::vector<uint16_t> out;
  for (const auto& s : shards) {
    TokenShard t(s);
    out.insert(out.end(), t.tokens(), t.tokens() + t.size());
  }
  return out;
}

// llm.c's settings at a small scale: the validation shard as large as the others.
PrepareOptions llmc_options(const std::vector<std::string>& inputs, const std::string& out, int64_t shard = 5000) {
  PrepareOptions o;
  o.inputs = inputs;
  o.output = out;
  o.name = "fineweb";
  o.vocab = vocab_path();
  o.val_tokens = shard;
  o.shard_tokens = shard;
  o.threads = 3;
  o.batch_bytes = 4096;  // many batches: the order across threads is exercised
  return o;
}

bool have_parquet() {
  if (parquet_supported()) return true;
  WARN("SKIPPED: this prism was built without Arrow C++ (cmake/PrismFindArrow.cmake)");
  return false;
}

}  // namespace

TEST_CASE("prepare: Parquet and JSONL (plain, gzip, zstd) give llm.c's fineweb.py shards byte for byte",
          "[data][formats][parquet]") {
  Fixture fx;
  const std::string ref = fx.file("llmc");
  auto r = run_reference("llmc_fineweb.py",
                         fmt::format("shards '{}' '{}' '{}/000_00000.parquet' '{}/001_00000.parquet' --shard-size 5000 "
                                     "--procs 2",
                                     vocab_path(), ref, fx.parquet(), fx.parquet()));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto want = shard_files(ref);
  REQUIRE(want.size() >= 6);  // val, then training shards; documents run across the boundaries
  std::vector<std::string> inputs = {"docs.jsonl", "docs.jsonl.gz"};
  if (zstd_supported())
    inputs.push_back("docs.jsonl.zst");
  else
    WARN("SKIPPED (zstd part): this prism was built without libzstd");
  if (have_parquet()) inputs.push_back("parquet");
  for (const auto& in : inputs) {
    INFO(in);
    const std::string out = fx.file("out-" + in);
    const auto s = prepare_corpus(llmc_options({fx.file(in)}, out));
    CHECK(s.documents == 409);
    CHECK(shard_files(out) == want);
  }
}

TEST_CASE("prepare: a kill -9 at any moment, then the same command, writes an uninterrupted run's shards",
          "[data][formats][resume]") {
  Fixture fx;
  const std::string input = parquet_supported() ? fx.parquet() : fx.file("docs.jsonl.gz");
  const auto whole = prepare_corpus(llmc_options({input}, fx.file("whole"), 3000));
  const auto want = shard_files(fx.file("whole"));
  REQUIRE(want.size() >= 10);

  // A child runs the preparation and kills itself (SIGKILL: no cleanup of any kind) at its
  // n-th progress report, that is after some batch: mid-shard or just after one.
  for (int n : {1, 4, 9, 17}) {
    INFO("killed at report " << n);
    const std::string out = fx.file(fmt::format("killed-{}", n));
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto o = llmc_options({input}, out, 3000);
      int reports = 0;
      o.progress = [&](const PrepareProgress&) {
        if (++reports == n) ::raise(SIGKILL);
      };
      try {
        prepare_corpus(o);
      } catch (...) {
      }
      ::_exit(3);  // not killed: too few reports
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    auto o = llmc_options({input}, out, 3000);
    o.threads = 2;  // another thread count: the shards do not depend on it
    std::vector<std::string> notices;
    o.notice = [&](const std::string& line) { notices.push_back(line); };
    const auto again = prepare_corpus(o);
    CHECK(shard_files(out) == want);
    CHECK(again.documents == whole.documents);
    CHECK(again.unigram_val_loss == Approx(whole.unigram_val_loss).epsilon(1e-12));
    if (n >= 9) {
      CHECK(again.resumed_shards > 0);
      REQUIRE(notices.size() == 1);
      CHECK_THAT(notices[0], Catch::Contains("resuming"));
    }
    CHECK(!fs::exists(fx.file(fmt::format(".killed-{}.prepare", n))));  // the staging directory is gone
  }

  // Killed between a shard's rename and the state that names it, or while writing one: the
  // shard the state does not name is made again, a temporary file is dropped.
  const std::string out = fx.file("torn");
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto o = llmc_options({input}, out, 3000);
    o.progress = [&](const PrepareProgress& p) {
      if (p.shards >= 3) ::raise(SIGKILL);
    };
    try {
      prepare_corpus(o);
    } catch (...) {
    }
    ::_exit(3);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSIGNALED(status));
  const std::string stage = fx.file(".torn.prepare");
  REQUIRE(fs::exists(stage + "/resume.json"));
  write_file(stage + "/fineweb_train_000009.bin", "not a shard: written, renamed, never recorded");
  write_file(stage + "/fineweb_train_000010.bin.tmp.12345", "half a shard");
  const auto again = prepare_corpus(llmc_options({input}, out, 3000));
  CHECK(again.resumed_shards >= 3);
  CHECK(shard_files(out) == want);
}

TEST_CASE("prepare: --max-tokens takes a prefix of the token stream", "[data][formats]") {
  Fixture fx;
  const auto whole = prepare_corpus(llmc_options({fx.file("docs.jsonl")}, fx.file("whole"), 4000));
  auto o = llmc_options({fx.file("docs.jsonl")}, fx.file("prefix"), 4000);
  o.max_tokens = 12345;
  const auto part = prepare_corpus(o);
  CHECK(part.tokens == 12345);
  REQUIRE(part.shards.size() == 4);  // 4000 + 4000 + 4000 + 345
  CHECK(shard_token_count(part.shards[3]) == 345);
  auto all = all_tokens(whole.shards);
  all.resize(12345);
  CHECK(all_tokens(part.shards) == all);
  CHECK(nlohmann::json::parse(read_file(fx.file("prefix/prepare.json")))["max_tokens"] == 12345);
}

TEST_CASE("prepare: JSONL lines: CRLF, no final newline, blank lines, other keys, an empty text is a document",
          "[data][formats][jsonl]") {
  TempDir dir("prism-jsonl");
  Gpt2Tokenizer tok(vocab_path());
  write_file(dir.file("a.jsonl"),
             "{\"id\": 1, \"content\": \"First doc.\"}\r\n"
             "\n   \t\n"
             "{\"content\": \"\", \"x\": [1, {\"y\": null}]}\n"
             "{\"content\": \"caf\\u00e9 \\ud83c\\udf89 \\\"quoted\\\"\\nnew line\"}");
  PrepareOptions o;
  o.inputs = {dir.file("a.jsonl")};
  o.output = dir.file("out");
  o.vocab = vocab_path();
  o.text_key = "content";
  o.val_tokens = 2;
  o.threads = 2;
  const auto s = prepare_corpus(o);
  CHECK(s.documents == 3);
  std::vector<uint16_t> want;
  for (const std::string d : {"First doc.", "", "café 🎉 \"quoted\"\nnew line"}) {
    want.push_back(static_cast<uint16_t>(tok.eot()));
    for (auto t : tok.encode(d)) want.push_back(static_cast<uint16_t>(t));
  }
  CHECK(all_tokens(s.shards) == want);
}

TEST_CASE("prepare: bad input names the file and the line or row, keeps the shards written, --skip-bad lists it",
          "[data][formats][bad-input]") {
  TempDir dir("prism-bad-input");
  // 120 good lines, then bad ones, then more good ones.
  std::string good, text;
  for (int i = 0; i < 120; ++i) good += fmt::format("{{\"text\": \"Line {} of the corpus, with some words in it.\"}}\n", i);
  const std::string bad_lines = "{\"text\": \"unterminated\n"            // line 121: not JSON
                                "{\"body\": \"no text key\"}\n"          // line 122
                                "{\"text\": 42}\n"                       // line 123: not a string
                                "{\"text\": \"bad \xff byte\"}\n"        // line 124: not UTF-8
                                "[\"an array\"]\n";                      // line 125
  write_file(dir.file("corpus.jsonl"), good + bad_lines + good);
  write_file(dir.file("clean.jsonl"), good + good);
  auto options = [&](const std::string& in, const std::string& out) {
    PrepareOptions o;
    o.inputs = {dir.file(in)};
    o.output = dir.file(out);
    o.name = "corpus";
    o.vocab = vocab_path();
    o.val_tokens = 500;
    o.shard_tokens = 500;
    o.threads = 2;
    o.batch_bytes = 512;
    return o;
  };
  // A corpus prepared before, then a redo over it that meets the bad line.
  auto o = options("clean.jsonl", "out");
  prepare_corpus(o);
  const auto before = shard_files(dir.file("out"));
  o = options("corpus.jsonl", "out");
  o.force = true;
  try {
    prepare_corpus(o);
    FAIL("no error for a line that is not JSON");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("corpus.jsonl") && Catch::Contains("line 121: not valid JSON") &&
                                          Catch::Contains("--skip-bad") && Catch::Contains("complete shards are kept"));
  }
  CHECK(shard_files(dir.file("out")) == before);  // the previous corpus is untouched
  CHECK(fs::exists(dir.file(".out.prepare/resume.json")));  // the new complete shards wait for the rerun

  // Each kind of bad line alone, named by its line.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"body\": \"no text key\"}", "line 3: no key \"text\" (the object has: body)"},
      {"{\"text\": 42}", "line 3: \"text\" is a JSON number, not a string"},
      {"{\"text\": \"bad \xff byte\"}", "line 3: not valid UTF-8 at byte 14 of the line"},
      {"[\"an array\"]", "line 3: a JSON array, not an object"},
  };
  for (const auto& c : cases) {
    INFO(c.second);
    write_file(dir.file("one.jsonl"), "{\"text\": \"a\"}\n{\"text\": \"b\"}\n" + c.first + "\n{\"text\": \"c\"}\n");
    auto one = options("one.jsonl", "one");
    one.val_tokens = 2;
    CHECK_THROWS_WITH(prepare_corpus(one), Catch::Contains("one.jsonl") && Catch::Contains(c.second));
  }

  // The same command with --skip-bad continues from the kept shards and lists the five lines.
  o.skip_bad = true;
  std::vector<std::string> notices;
  o.notice = [&](const std::string& line) { notices.push_back(line); };
  const auto s = prepare_corpus(o);
  CHECK(s.resumed_shards > 0);
  CHECK(s.skipped == 5);
  const auto manifest = nlohmann::json::parse(read_file(dir.file("out/prepare.json")));
  CHECK(manifest["skip_bad"] == true);
  CHECK(manifest["skipped"] == 5);
  REQUIRE(manifest["skipped_records"].size() == 5);
  CHECK(manifest["skipped_records"][0]["file"] == dir.file("corpus.jsonl"));
  CHECK_THAT(manifest["skipped_records"][0]["problem"].get<std::string>(), Catch::StartsWith("line 121: not valid JSON"));
  CHECK_THAT(manifest["skipped_records"][4]["problem"].get<std::string>(), Catch::StartsWith("line 125:"));
  // What it wrote is what a run on the good lines alone writes.
  const auto clean = prepare_corpus(options("clean.jsonl", "clean"));
  CHECK(shard_files(dir.file("out")) == shard_files(dir.file("clean")));
  CHECK(s.documents == clean.documents);

  // A run that skipped is not continued by one that does not skip.
  write_file(dir.file("late.jsonl"), good + good + "not json\n" + good);
  auto late = options("late.jsonl", "late");
  late.skip_bad = true;
  late.progress = [&](const PrepareProgress& p) {  // stopped once a shard after the skipped line is saved
    if (p.skipped > 0 && p.shards >= 8) throw Error("stop here", "test", "");
  };
  CHECK_THROWS_WITH(prepare_corpus(late), Catch::Contains("stop here"));
  late = options("late.jsonl", "late");
  notices.clear();
  late.notice = [&](const std::string& line) { notices.push_back(line); };
  CHECK_THROWS_WITH(prepare_corpus(late), Catch::Contains("line 241: not valid JSON"));
  REQUIRE(notices.size() == 1);
  CHECK_THAT(notices[0], Catch::Contains("starting over") && Catch::Contains("skipped 1 bad records"));

  // A damaged gzip stream: an error naming the file; with --skip-bad the rest of the file is skipped.
  auto gzip = run(fmt::format("gzip -c '{}' > '{}'", dir.file("clean.jsonl"), dir.file("cut.jsonl.gz")));
  REQUIRE(gzip.exit_code == 0);
  const std::string gz = read_file(dir.file("cut.jsonl.gz"));
  write_file(dir.file("cut.jsonl.gz"), gz.substr(0, gz.size() * 2 / 3));
  auto cut = options("cut.jsonl.gz", "cut");
  cut.val_tokens = 100;
  CHECK_THROWS_WITH(prepare_corpus(cut), Catch::Contains("cut.jsonl.gz") && Catch::Contains("gzip stream damaged") &&
                                             Catch::Contains("truncated"));
  cut.skip_bad = true;
  const auto c = prepare_corpus(cut);
  CHECK(c.skipped == 1);
  CHECK(c.documents > 20);  // the lines before the damage
  CHECK(c.documents < 240);
}

TEST_CASE("prepare: bad Parquet files name the file and the row or column", "[data][formats][parquet][bad-input]") {
  if (!have_parquet()) return;
  TempDir dir("prism-bad-parquet");
  auto r = run_reference("llmc_fineweb.py", fmt::format("bad '{}'", dir.path()));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  write_file(dir.file("junk.parquet"), "PAR1 this is not Parquet at all PAR1");
  auto attempt = [&](const std::string& file, const std::string& column = "text") {
    PrepareOptions o;
    o.inputs = {dir.file(file)};
    o.output = dir.file("out-" + file);
    o.vocab = vocab_path();
    o.text_column = column;
    o.val_tokens = 1;
    return o;
  };
  CHECK_THROWS_WITH(prepare_corpus(attempt("bad_utf8.parquet")),
                    Catch::Contains("bad_utf8.parquet") && Catch::Contains("row 3: the text is not valid UTF-8 at byte 4"));
  CHECK_THROWS_WITH(prepare_corpus(attempt("null.parquet")),
                    Catch::Contains("null.parquet") && Catch::Contains("row 2: the text is null"));
  CHECK_THROWS_WITH(prepare_corpus(attempt("numbers.parquet")),
                    Catch::Contains("numbers.parquet") && Catch::Contains("holds int64, not strings"));
  CHECK_THROWS_WITH(prepare_corpus(attempt("junk.parquet")),
                    Catch::Contains("junk.parquet") && Catch::Contains("not a readable Parquet file"));
  CHECK_THROWS_WITH(prepare_corpus(attempt("bad_utf8.parquet", "body")),
                    Catch::Contains("no column 'body' (the file has: text, id)") && Catch::Contains("--text-column"));
  // With --skip-bad: the bad rows, and the files that cannot be read, are skipped and listed.
  PrepareOptions o;
  o.inputs = {dir.file("bad_utf8.parquet"), dir.file("junk.parquet"), dir.file("null.parquet")};
  o.output = dir.file("skipping");
  o.vocab = vocab_path();
  o.val_tokens = 3;
  o.skip_bad = true;
  const auto s = prepare_corpus(o);
  CHECK(s.documents == 4 + 3);
  CHECK(s.skipped == 3);
  const auto m = nlohmann::json::parse(read_file(dir.file("skipping/prepare.json")));
  REQUIRE(m["skipped_records"].size() == 3);
  CHECK_THAT(m["skipped_records"][1]["problem"].get<std::string>(), Catch::Contains("not a readable Parquet file"));
  CHECK_THAT(m["skipped_records"][2]["problem"].get<std::string>(), Catch::Contains("row 2: the text is null"));
}

TEST_CASE("prepare: the CLI reads JSONL by --text-key, shows tokens/s and reports what --skip-bad skipped",
          "[data][formats][cli]") {
  TempDir dir("prism-formats-cli");
  std::string lines;
  for (int i = 0; i < 40; ++i) lines += fmt::format("{{\"body\": \"Document number {} of a small corpus.\"}}\n", i);
  write_file(dir.file("c.jsonl"), lines + "{broken\n");
  const std::string common = fmt::format("data prepare '{}' -o '{}' --vocab '{}' --val-tokens 50 --text-key body",
                                         dir.file("c.jsonl"), dir.file("out"), vocab_path());
  auto r = run_prism(common);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("c.jsonl") && Catch::Contains("line 41: not valid JSON"));
  r = run_prism(common + " --skip-bad");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("tokens/s") && Catch::Contains("MB/s") && Catch::Contains("ETA") &&
                           Catch::Contains("40 documents") && Catch::Contains("skipped 1 bad records"));
}

TEST_CASE("prepare: the FineWeb recipes carry llm.c's settings", "[data][formats]") {
  for (const auto& [recipe, name] : {std::pair<std::string, std::string>{"fineweb10B", "fineweb"}, {"fineweb-edu10B", "edu_fineweb"}}) {
    INFO(recipe);
    const PrepareOptions o = load_recipe(source_path("data/recipes/" + recipe + ".yaml"));
    CHECK(o.name == name);  // fineweb.py's file names: <name>_val_000000.bin, <name>_train_000001.bin, ...
    CHECK(o.val_tokens == 100000000);
    CHECK(o.shard_tokens == 100000000);
    CHECK(o.format == "parquet");
    CHECK(o.text_column == "text");
    CHECK(!o.shuffle_seed);
    CHECK(o.vocab.empty());  // GPT-2's
    CHECK(o.train_vocab == 0);
    CHECK_THAT(o.fetch_hint, Catch::Contains("huggingface-cli download HuggingFaceFW/"));
  }
}

TEST_CASE("prepare: a second preparation of the same output stops while the first holds it", "[data][formats][resume]") {
  TempDir dir("prism-stage-lock");
  const std::string out = dir.file("corpus");
  {
    PrepareStage first(out);
    CHECK(first.dir() == dir.file(".corpus.prepare"));
    CHECK_THROWS_WITH(PrepareStage(out), Catch::Contains("another `prism data prepare` is writing this output") &&
                                             Catch::Contains(".corpus.prepare"));
    write_file(first.file("stale.bin"), "left by a run of other settings");
    first.clear();
    CHECK(!fs::exists(first.file("stale.bin")));
  }
  PrepareStage again(out);  // released with the first
  CHECK(fs::is_directory(again.dir()));
}

TEST_CASE("bench prepare runs llm.c's pipeline and prism on the same documents and checks their shards agree",
          "[data][formats][bench][cli]") {
  if (!have_parquet()) return;
  Fixture fx;
  auto r = run(fmt::format("cd '{}' && '{}' bench prepare '{}' -j 1 --rounds 1 --shard-tokens 5000 --vocab '{}' "
                           "--python '{}'",
                           source_path(""), PRISM_BINARY, fx.parquet(), vocab_path(), PRISM_PYTHON));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("409") && Catch::Contains("shards byte for byte identical: yes") &&
                           Catch::Contains("llm.c fineweb.py logic, Pool(1) (baseline)") &&
                           Catch::Contains("M tokens/s/core") && Catch::Contains("x llm.c's pipeline"));
}
